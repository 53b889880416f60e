"""Gangs on the real control plane: all-or-nothing binding through kube-scheduler's bind verb.

Needs TROUPE_MODE=kube (skipped otherwise, with the reason): the bind barrier is Troupe's
answer to bind, and only a Troupe that creates the Binding itself (bindVerb) can hold it;
standalone, kube-scheduler binds every member the moment it passes filter. The tests also
bring their own nodes, which only a Troupe that watches the API learns.

The module creates its own fleet of fake 8-GPU nodes (tests/e2e/gang_fleet.py), tainted so
no other test's pods land there, split into parts so one test's leftovers never touch the
next one's nodes; the nodes are deleted at the end.

What "all or nothing" means on the API: Kubernetes binds pods one Binding at a time, so when
the barrier releases a gang, its members' Bindings are written within a short burst. The tests
assert that no member is bound before every minimum member reached the barrier (the count is
0 until the burst), that every burst ends with all members bound, and, for gangs that must
not run, that not one member is ever bound.
"""
import json
import os
import signal
import time

import pytest

from gang_fleet import FLEET_LABEL, NOWHERE, PART_LABEL, bound, kubectl, member, module_fleet, pod, troupe_metrics
from gpu_invariant import check_gpu_invariant
from kubehelpers import E2E_DIR, KUBECONFIG

PARTS = {"a": 64, "b": 8, "c": 4, "d": 4, "e": 2, "f": 2, "g": 2}
BURST_S = 10.0  # longest time the Bindings of one released gang may take to appear


@pytest.fixture(scope="module", autouse=True)
def kube_mode(e2e_state):
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("gangs need Troupe's bind barrier, which needs the Kubernetes API: standalone, "
                    "kube-scheduler binds every member itself; start the cluster with TROUPE_MODE=kube")
    return e2e_state


@pytest.fixture(scope="module")
def fleet(kube_mode, troupe_url):
    yield from module_fleet(kube_mode, KUBECONFIG, troupe_url, PARTS)


def create_all(api, namespace, manifests):
    for m in manifests:
        api.create_pod(namespace, m)


def watch(api, namespace, groups, until, timeout, interval=0.2):
    """Polls the bound members of each group ({label: [names]}) until until(counts) is true;
    returns the history [(t, {label: bound count})]. Raises on timeout with the history."""
    history = []
    deadline = time.monotonic() + timeout
    names = {n for members in groups.values() for n in members}
    while True:
        b = bound(api, namespace, names)
        counts = {g: sum(1 for n in members if n in b) for g, members in groups.items()}
        history.append((time.monotonic(), counts))
        if until(counts):
            return history
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s; last counts {counts}")
        time.sleep(interval)


def assert_all_or_nothing(history, label, size):
    """Zero bound until the release burst; the burst ends with all bound within BURST_S."""
    partial = [(t, c[label]) for t, c in history if 0 < c[label] < size]
    if partial:
        done = [t for t, c in history if c[label] == size]
        assert done, f"gang {label} stayed partly bound: {partial[-1][1]} of {size}"
        assert done[0] - partial[0][0] <= BURST_S, \
            f"gang {label} was partly bound for {done[0] - partial[0][0]:.1f}s (more than a release burst)"
    after = [c[label] for t, c in history if t >= (partial[0][0] if partial else float("inf"))]
    assert all(v > 0 for v in after), f"gang {label} lost bound members: {after}"


def reasons(api, namespace, name):
    return [(e.get("reason"), e.get("message") or "") for e in api.events(namespace)
            if e.get("involvedObject", {}).get("name") == name]


def wait_event(api, namespace, names, reason, timeout):
    deadline = time.monotonic() + timeout
    while True:
        for e in api.events(namespace):
            if e.get("reason") == reason and e.get("involvedObject", {}).get("name") in names:
                return e
        if time.monotonic() > deadline:
            raise AssertionError(f"no {reason} event on {sorted(names)[:4]}... after {timeout}s; events: "
                                 f"{[(e.get('reason'), e.get('message')) for e in api.events(namespace)][-10:]}")
        time.sleep(0.25)


def troupe_pid():
    with open(os.path.join(E2E_DIR, "pids", "troupe.pid"), encoding="utf-8") as f:
        return int(f.read().split()[0])


def check_invariant(api):
    check_gpu_invariant(api.list_pods(), api.list_nodes())


# ---- (a) a big gang binds whole ----------------------------------------------------------
def test_32_member_gang_of_4gpu_pods_on_64_nodes_binds_all_or_nothing(api, namespace, scheduler_name, fleet,
                                                                       troupe_url):
    names = [f"w-{i:02d}" for i in range(32)]
    admitted_before = troupe_metrics(troupe_url).get("troupe_gang_time_to_admit_seconds_count", 0)
    t0 = time.monotonic()
    create_all(api, namespace, [member(n, "big", 32, 4, fleet, "a", scheduler_name) for n in names])
    created = time.monotonic()
    history = watch(api, namespace, {"big": names}, lambda c: c["big"] == 32, timeout=120)
    assert_all_or_nothing(history, "big", 32)
    first = next(t for t, c in history if c["big"] > 0)
    print(f"\n[measure] 32x4-GPU gang: pods created in {created - t0:.2f}s; first member bound "
          f"{first - created:.2f}s after the last was created, all 32 by {history[-1][0] - created:.2f}s")

    nodes = bound(api, namespace, set(names))
    assert len(set(nodes.values())) == 16, f"planned on fewest nodes (2 per 8-GPU node): {sorted(set(nodes.values()))}"
    pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
    for n in names:
        gpus = (pods[n]["metadata"].get("annotations") or {}).get("troupe.dev/gpus", "")
        assert len(gpus.split(",")) == 4, f"{n}: troupe.dev/gpus={gpus!r}"
    check_invariant(api)
    assert troupe_metrics(troupe_url).get("troupe_gang_time_to_admit_seconds_count", 0) == admitted_before + 1
    # Events on the members: planned whole (with the nodes) and waiting at the barrier.
    planned = wait_event(api, namespace, set(names), "GangPlanned", timeout=15)
    assert "32 members on 16 nodes" in planned["message"], planned["message"]
    waiting = wait_event(api, namespace, set(names), "GangWaiting", timeout=15)
    assert "more of 32 members" in waiting["message"], waiting["message"]


# ---- (b) two gangs of 60% each: one whole, the other nothing ------------------------------------
def test_two_gangs_of_60_percent_one_binds_whole_the_other_waits_with_nothing(api, namespace, scheduler_name,
                                                                              fleet):
    # Part b: 8 nodes x 8 GPUs = 64; each gang wants 10 x 4 = 40 GPUs (62.5%).
    groups = {g: [f"{g}-{i:02d}" for i in range(10)] for g in ("x", "y")}
    manifests = []
    for i in range(10):  # interleaved, so both gangs reach Troupe at once
        for g in ("x", "y"):
            manifests.append(member(groups[g][i], g, 10, 4, fleet, "b", scheduler_name))
    create_all(api, namespace, manifests)
    history = watch(api, namespace, groups, lambda c: 10 in c.values(), timeout=90)
    winner = "x" if history[-1][1]["x"] == 10 else "y"
    loser = "y" if winner == "x" else "x"
    # The loser holds nothing and stays at zero while the winner runs.
    hold_until = time.monotonic() + 8
    history += watch(api, namespace, groups, lambda c: time.monotonic() >= hold_until, timeout=20)
    assert all(c[loser] == 0 for t, c in history), f"gang {loser} got members bound: {history[-1]}"
    assert_all_or_nothing(history, winner, 10)
    assert history[-1][1][winner] == 10
    msgs = [m for n in groups[loser] for r, m in reasons(api, namespace, n) if r == "FailedScheduling"]
    assert any("troupe: gang" in m for m in msgs), f"no Troupe reason on the waiting gang: {msgs[:3]}"

    for n in groups[winner]:
        api.delete_pod(namespace, n)
    later = watch(api, namespace, {loser: groups[loser]}, lambda c: c[loser] == 10, timeout=120)
    assert_all_or_nothing(later, loser, 10)
    check_invariant(api)


# ---- (c) a gang whose barrier times out: nothing bound, GPUs given back ----------------------------
def test_gang_timeout_binds_nothing_and_frees_its_gpus(api, namespace, scheduler_name, fleet, troupe_url):
    # 4 members of 4 GPUs; the fourth can never be scheduled (its nodeSelector matches nothing),
    # so three wait at the barrier until troupe.dev/gang-timeout (15s) fails them all.
    names = [f"t-{i}" for i in range(4)]
    before = troupe_metrics(troupe_url)
    timeouts_before = before.get("troupe_gang_timeouts_total", 0)
    held_before = before.get("troupe_gang_reserved_gpus", 0)
    manifests = [member(n, "late", 4, 4, fleet, "c", scheduler_name, timeout="15s") for n in names[:3]]
    manifests.append(member(names[3], "late", 4, 4, fleet, "c", scheduler_name, timeout="15s",
                            node_selector=NOWHERE))
    create_all(api, namespace, manifests)
    waiting = wait_event(api, namespace, set(names), "GangWaiting", timeout=30)
    assert "of 4 members" in waiting["message"], waiting["message"]
    reserved = []  # (t, reserved GPUs) while waiting and after the timeout
    history = []
    deadline = time.monotonic() + 45
    timed_out_at = None
    while time.monotonic() < deadline:
        m = troupe_metrics(troupe_url)
        reserved.append(m.get("troupe_gang_reserved_gpus", 0))
        history.append(len(bound(api, namespace, set(names))))
        if timed_out_at is None and m.get("troupe_gang_timeouts_total", 0) > timeouts_before:
            timed_out_at = time.monotonic()
        if timed_out_at and time.monotonic() > timed_out_at + 3:
            break
        time.sleep(0.1)
    assert timed_out_at, "the gang's barrier did not time out within 45s"
    assert max(history) == 0, f"members were bound: {history}"
    assert held_before + 16 in reserved, f"the gang's 16 GPUs were never reserved: {sorted(set(reserved))}"
    first = reserved.index(held_before + 16)
    assert held_before in reserved[first:], f"the reservation was not released after the timeout: {reserved[-20:]}"
    e = wait_event(api, namespace, set(names[:3]), "GangTimedOut", timeout=15)
    assert e["type"] == "Warning"
    assert "only 3 of 4 members reached bind within 15s" in e["message"], e["message"]
    assert not bound(api, namespace, set(names))


# ---- (d) pods on their own schedule around a holding and a waiting gang -------------------------
def test_non_gang_pods_schedule_around_holding_and_waiting_gangs(api, namespace, scheduler_name, fleet):
    # Part d: 4 nodes x 8 GPUs. Gang "hold": 3 x 8 GPUs planned, its third member unschedulable:
    # it holds 3 whole nodes at the barrier. Gang "wait": 2 x 8 GPUs, does not fit: holds nothing.
    hold = ["hold-0", "hold-1", "hold-2"]
    create_all(api, namespace, [member(hold[0], "hold", 3, 8, fleet, "d", scheduler_name, timeout="90s"),
                                member(hold[1], "hold", 3, 8, fleet, "d", scheduler_name, timeout="90s"),
                                member(hold[2], "hold", 3, 8, fleet, "d", scheduler_name, timeout="90s",
                                       node_selector=NOWHERE)])
    wait_event(api, namespace, set(hold), "GangWaiting", timeout=30)
    wait = ["wait-0", "wait-1"]
    create_all(api, namespace, [member(n, "wait", 2, 8, fleet, "d", scheduler_name) for n in wait])
    singles = [f"solo-{i}" for i in range(4)]
    create_all(api, namespace, [pod(n, 2, fleet, "d", scheduler_name) for n in singles])
    history = watch(api, namespace, {"solo": singles, "hold": hold, "wait": wait},
                    lambda c: c["solo"] == 4, timeout=60)
    assert all(c["hold"] == 0 and c["wait"] == 0 for t, c in history), history[-1]
    placed = bound(api, namespace, set(singles))
    assert len(set(placed.values())) == 1, f"singles must share the one node no gang holds: {placed}"
    msgs = [m for n in wait for r, m in reasons(api, namespace, n) if r == "FailedScheduling"]
    assert any("waits for capacity" in m or "waits its turn" in m for m in msgs), msgs[:3]
    check_invariant(api)


# ---- PodGroup (scheduler-plugins) -------------------------------------------------------------
PODGROUP_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
    "spec": {
        "group": "scheduling.x-k8s.io",
        "scope": "Namespaced",
        "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup", "shortNames": ["pg"]},
        "versions": [{
            "name": "v1alpha1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {
                    "spec": {"type": "object", "properties": {
                        "minMember": {"type": "integer", "format": "int32", "minimum": 1},
                        "scheduleTimeoutSeconds": {"type": "integer", "format": "int32"},
                    }},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            }},
        }],
    },
}


def test_podgroup_label_takes_min_member_from_the_podgroup_object(api, namespace, scheduler_name, fleet,
                                                                   kube_mode):
    kubectl(kube_mode, KUBECONFIG, "apply", "-f", "-", input=json.dumps(PODGROUP_CRD))
    kubectl(kube_mode, KUBECONFIG, "wait", "--for=condition=Established", "--timeout=30s",
            "crd/podgroups.scheduling.x-k8s.io")
    pg = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
          "metadata": {"name": "pg-train", "namespace": namespace}, "spec": {"minMember": 4}}
    kubectl(kube_mode, KUBECONFIG, "create", "-f", "-", input=json.dumps(pg))
    names = [f"pg-{i}" for i in range(4)]
    label = {"scheduling.x-k8s.io/pod-group": "pg-train"}
    # Only the label: no troupe.dev/gang, no gang-size. Three of four wait with nothing bound.
    create_all(api, namespace, [member(n, None, 0, 4, fleet, "e", scheduler_name, labels=label) for n in names[:3]])
    waiting = wait_event(api, namespace, set(names), "GangWaiting", timeout=40)
    assert "of 4 members" in waiting["message"], waiting["message"]
    assert f"gang {namespace}/pg-train" in waiting["message"]
    time.sleep(2)
    assert not bound(api, namespace, set(names))
    create_all(api, namespace, [member(names[3], None, 0, 4, fleet, "e", scheduler_name, labels=label)])
    history = watch(api, namespace, {"pg": names}, lambda c: c["pg"] == 4, timeout=60)
    assert_all_or_nothing(history, "pg", 4)


def test_podgroup_label_without_podgroup_or_size_says_why(api, namespace, scheduler_name, fleet):
    create_all(api, namespace, [member("orphan-0", None, 0, 1, fleet, "e", scheduler_name,
                                       labels={"scheduling.x-k8s.io/pod-group": "no-such-group"})])
    deadline = time.monotonic() + 30
    while True:
        msgs = [m for r, m in reasons(api, namespace, "orphan-0") if r == "FailedScheduling"]
        if any("troupe.dev/gang-size" in m for m in msgs):
            break
        assert time.monotonic() < deadline, f"no reason naming the PodGroup and gang-size: {msgs}"
        time.sleep(0.5)
    m = next(m for m in msgs if "troupe.dev/gang-size" in m)
    assert "no-such-group does not exist" in m or "not installed" in m, m


# ---- restart ----------------------------------------------------------------------------------
def test_troupe_killed_while_a_gang_waits_at_the_barrier_gang_ends_whole(api, namespace, scheduler_name, fleet,
                                                                        troupe, troupe_url):
    names = [f"r-{i}" for i in range(4)]
    create_all(api, namespace, [member(n, "restart", 4, 4, fleet, "f", scheduler_name, timeout="90s")
                                for n in names[:3]])
    wait_event(api, namespace, set(names), "GangWaiting", timeout=30)
    assert not bound(api, namespace, set(names))
    os.kill(troupe_pid(), signal.SIGKILL)
    time.sleep(0.5)
    troupe.start()  # back once /readyz says it has listed nodes and pods
    create_all(api, namespace, [member(names[3], "restart", 4, 4, fleet, "f", scheduler_name, timeout="90s")])
    history = watch(api, namespace, {"r": names}, lambda c: c["r"] == 4, timeout=120)
    assert_all_or_nothing(history, "r", 4)
    check_invariant(api)


def test_after_a_restart_bound_members_count_and_only_the_rest_are_planned(api, namespace, scheduler_name, fleet,
                                                                          troupe, troupe_url):
    # As if Troupe had died halfway through releasing a gang: two of four members are bound
    # (with their GPUs annotated), two are not. The restarted Troupe must plan only two.
    nodes = sorted(n["metadata"]["name"] for n in api.list_nodes()
                   if n["metadata"]["labels"].get(FLEET_LABEL) == fleet
                   and n["metadata"]["labels"].get(PART_LABEL) == "g")
    names = [f"h-{i}" for i in range(4)]
    for i, gpus in ((0, "0,1,2,3"), (1, "4,5,6,7")):
        m = member(names[i], "half", 4, 4, fleet, "g", scheduler_name, timeout="20s",
                   annotations={"troupe.dev/gpus": gpus})
        m["spec"]["nodeName"] = nodes[0]
        api.create_pod(namespace, m)
    troupe.restart()
    create_all(api, namespace, [member(n, "half", 4, 4, fleet, "g", scheduler_name, timeout="20s")
                                for n in names[2:]])
    history = watch(api, namespace, {"h": names}, lambda c: c["h"] == 4, timeout=60)
    assert history[-1][1]["h"] == 4
    placed = bound(api, namespace, set(names))
    assert placed[names[2]] == placed[names[3]] == nodes[1], placed
    planned = wait_event(api, namespace, set(names[2:]), "GangPlanned", timeout=15)
    assert "2 members on 1 node" in planned["message"], planned["message"]
    check_invariant(api)
