"""Kubernetes' own gangs (scheduling.k8s.io PodGroups: v1alpha2 on Kubernetes 1.36, v1beta1 on
1.37, whichever the server serves; pods with spec.schedulingGroup) through kube-scheduler's
PodGroup cycle and Troupe (docs/gangs-native.md, docs/kubernetes-versions.md).

Needs TROUPE_MODE=kube and a control plane that serves the API: start it with
`TROUPE_MODE=kube K8S_FEATURES=workload scripts/cluster-up.sh` (skipped otherwise, with the
reason). kube-scheduler runs with the Workload API's gates (1.36: GenericWorkload and
GangScheduling; 1.37: GenericWorkload, which took GangScheduling in), so its gang plugin holds members until minCount exist and its PodGroup cycle filters every member (Troupe's
filter, per pod) before sending them all to bind at once.

The module brings its own fake nodes (tests/e2e/gang_fleet.py): part "a" (4 x 8 GPUs) for the
gang that binds, "b" (2 x 8) for the one too big to fit, "c" (4 x 8) for two competing gangs,
"d" (2 x 8) for re-submission, "e" (2 x 8) for a cycle that fails on another plugin, "f" (2 x 8)
for a gang whose last member comes late, "g" and "h" (2 x 8 each) for gangs whose minCount is
lowered while they wait (elastic gangs, v1beta1+). Every test
checks that no GPU is given twice (gpu_invariant) and that Troupe holds nothing afterwards.
"""
import time

import pytest

from gang_fleet import NOWHERE, bound, gang_holds, module_fleet, pod, troupe_metrics, wait_no_gang_holds
from gpu_invariant import check_gpu_invariant
from kubeapi import APIError
from kubehelpers import KUBECONFIG
from test_gangs import assert_all_or_nothing, watch

PARTS = {"a": 4, "b": 2, "c": 4, "d": 2, "e": 2, "f": 2, "g": 2, "h": 2}
# Set by the native_api fixture: the served version's path, and the condition type a scheduled
# PodGroup carries there (renamed PodGroupInitiallyScheduled in v1beta1).
GROUPS = None
SCHEDULED = None
VERSIONS = ("v1", "v1beta1", "v1alpha2")  # newest first, as Troupe's discovery


def served_podgroup_version(api):
    """The scheduling.k8s.io version whose resources include podgroups (v1 is served everywhere,
    for PriorityClasses), or None."""
    for v in VERSIONS:
        try:
            doc = api.request("GET", f"/apis/scheduling.k8s.io/{v}")
        except APIError as e:
            if e.status == 404:
                continue
            raise
        if any(r.get("name") == "podgroups" for r in doc.get("resources") or []):
            return v
    return None


@pytest.fixture(scope="module", autouse=True)
def native_api(e2e_state, api):
    global GROUPS, SCHEDULED
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("native gangs need Troupe's bind barrier and its PodGroup reader, which need the "
                    "Kubernetes API: start the cluster with TROUPE_MODE=kube K8S_FEATURES=workload")
    version = served_podgroup_version(api)
    if version is None:
        pytest.skip("the API server serves no PodGroups (scheduling.k8s.io v1, v1beta1 or v1alpha2): start the "
                    "cluster with K8S_FEATURES=workload (scripts/cluster-up.sh) on Kubernetes 1.36 or later")
    GROUPS = f"/apis/scheduling.k8s.io/{version}"
    SCHEDULED = "PodGroupScheduled" if version == "v1alpha2" else "PodGroupInitiallyScheduled"
    print(f"\n[measure] PodGroups served as scheduling.k8s.io/{version} (condition {SCHEDULED}) on "
          f"Kubernetes {e2e_state.get('K8S_VERSION')}")
    return e2e_state


@pytest.fixture(scope="module")
def fleet(native_api, troupe_url):
    yield from module_fleet(native_api, KUBECONFIG, troupe_url, PARTS)


def create_group(api, namespace, name, min_count):
    api.request("POST", f"{GROUPS}/namespaces/{namespace}/podgroups", {
        "apiVersion": GROUPS.removeprefix("/apis/"), "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}},
    })


def delete_group(api, namespace, name):
    path = f"{GROUPS}/namespaces/{namespace}/podgroups/{name}"
    api.request("DELETE", path)
    # Its protection finalizer goes once kube-controller-manager's podgroup-protection controller
    # sees no pod in the group; the pods are gone by now, so the test takes it off without waiting
    # (the controller, now part of the control plane, may have taken it off first: then it is gone).
    try:
        api.request("PATCH", path, {"metadata": {"finalizers": None}}, content_type="application/merge-patch+json")
    except APIError as e:
        if e.status != 404:
            raise
    deadline = time.monotonic() + 30
    while True:
        try:
            api.request("GET", f"{GROUPS}/namespaces/{namespace}/podgroups/{name}")
        except APIError as e:
            if e.status == 404:
                return
            raise
        assert time.monotonic() < deadline, f"PodGroup {name} not gone after 30s"
        time.sleep(0.2)


def scheduled_condition(api, namespace, name):
    g = api.request("GET", f"{GROUPS}/namespaces/{namespace}/podgroups/{name}")
    for c in (g.get("status") or {}).get("conditions") or []:
        if c.get("type") == SCHEDULED:
            return c
    return None


def wait_condition(api, namespace, name, ok, timeout, what):
    deadline = time.monotonic() + timeout
    seen = []
    while True:
        c = scheduled_condition(api, namespace, name)
        if c and (not seen or seen[-1] != c):
            seen.append(c)
        if c and ok(c):
            return c
        assert time.monotonic() < deadline, f"PodGroup {name}: no {SCHEDULED} {what} after {timeout}s; seen {seen}"
        time.sleep(0.25)


def members(group, count, gpus, fleet, part, scheduler, timeout=None, node_selector=None):
    out = []
    for i in range(count):
        m = pod(f"{group}-{i}", gpus, fleet, part, scheduler,
                annotations={"troupe.dev/gang-timeout": timeout} if timeout else None, node_selector=node_selector)
        m["spec"]["schedulingGroup"] = {"podGroupName": group}
        out.append(m)
    return out


def create_all(api, namespace, manifests):
    for m in manifests:
        api.create_pod(namespace, m)


def delete_pods(api, namespace, names):
    for n in names:
        api.delete_pod(namespace, n)
    deadline = time.monotonic() + 30
    while {p["metadata"]["name"] for p in api.list_pods(namespace)} & set(names):
        assert time.monotonic() < deadline, "pods not gone after 30s"
        time.sleep(0.1)


def invariant(api):
    check_gpu_invariant(api.list_pods(), api.list_nodes(), require_annotation_for="troupe-scheduler")


def nodes_of_part(api, fleet, part):
    return {n["metadata"]["name"] for n in api.list_nodes()
            if n["metadata"].get("labels", {}).get("troupe.dev/e2e-gang-fleet") == fleet
            and n["metadata"]["labels"].get("troupe.dev/e2e-gang-part") == part}


def test_podgroup_gang_binds_all_or_nothing_and_is_marked_scheduled(api, namespace, scheduler_name, fleet,
                                                                   troupe_url, gpu_invariant):
    # 6 members of 4 GPUs on 4 x 8: 24 of 32 GPUs, two members per node on 3 nodes.
    create_group(api, namespace, "train", 6)
    ms = members("train", 6, 4, fleet, "a", scheduler_name)
    names = [m["metadata"]["name"] for m in ms]
    t0 = time.monotonic()
    create_all(api, namespace, ms)
    history = watch(api, namespace, {"train": names}, lambda c: c["train"] == 6, timeout=90)
    assert_all_or_nothing(history, "train", 6)
    print(f"\n[measure] native 6x4-GPU PodGroup gang bound whole {history[-1][0] - t0:.2f}s after creation")
    where = bound(api, namespace, set(names))
    assert set(where.values()) <= nodes_of_part(api, fleet, "a"), where
    assert len(set(where.values())) == 3, f"two members per 8-GPU node: {where}"
    pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
    for n in names:
        gpus = (pods[n]["metadata"].get("annotations") or {}).get("troupe.dev/gpus", "")
        assert len(gpus.split(",")) == 4, f"{n}: troupe.dev/gpus={gpus!r}"
    invariant(api)
    c = wait_condition(api, namespace, "train", lambda c: "admitted by Troupe" in (c.get("message") or ""), 20,
                       "True from Troupe")
    assert c["status"] == "True" and c["reason"] == "Scheduled", c
    for node in set(where.values()):
        assert node in c["message"], c
    delete_pods(api, namespace, names)
    wait_no_gang_holds(troupe_url, api)


def test_podgroup_gang_larger_than_free_capacity_binds_and_holds_nothing(api, namespace, scheduler_name, fleet,
                                                                        troupe_url, gpu_invariant):
    # 5 x 4 GPUs on 2 x 8: it can never fit. Nothing may be bound, nothing held; the PodGroup
    # is marked unschedulable (by kube-scheduler) and the members' events say why in Troupe's words.
    create_group(api, namespace, "big", 5)
    ms = members("big", 5, 4, fleet, "b", scheduler_name, timeout="20s")
    names = {m["metadata"]["name"] for m in ms}
    create_all(api, namespace, ms)
    c = wait_condition(api, namespace, "big", lambda c: c["status"] == "False", 40, "False")
    assert c["reason"] == "Unschedulable", c
    deadline = time.monotonic() + 30
    while True:
        why = [e.get("message") or "" for e in api.events(namespace)
               if e.get("reason") == "FailedScheduling" and e.get("involvedObject", {}).get("name") in names
               and "troupe: gang" in (e.get("message") or "")]
        if why:
            break
        assert time.monotonic() < deadline, "no FailedScheduling event with Troupe's reason on the members"
        time.sleep(0.5)
    print(f"\n[measure] PodGroup big: {c['message'][:120]}; a member's event: {why[0][:300]}")
    deadline = time.monotonic() + 25  # past the 20s gang timeout
    while time.monotonic() < deadline:
        assert not bound(api, namespace, names), "a member of a gang that cannot fit was bound"
        assert gang_holds(troupe_url)["troupe_gang_reserved_gpus"] == 0, gang_holds(troupe_url)
        time.sleep(0.5)
    invariant(api)
    delete_pods(api, namespace, list(names))
    wait_no_gang_holds(troupe_url, api)


def test_podgroup_cycle_failing_elsewhere_releases_troupes_plan_after_the_timeout(api, namespace, scheduler_name,
                                                                                   fleet, troupe_url, gpu_invariant):
    # 4 members of 4 GPUs; one has a nodeSelector no node matches, so kube-scheduler's PodGroup
    # cycle fails after Troupe planned the other three: no bind ever comes. Troupe must give the
    # GPUs back after the gang's 15s timeout instead of keeping them for the cycle's retries.
    create_group(api, namespace, "stuck", 4)
    ms = members("stuck", 3, 4, fleet, "e", scheduler_name, timeout="15s")
    ms += members("stuck", 4, 4, fleet, "e", scheduler_name, timeout="15s", node_selector=NOWHERE)[3:]
    names = {m["metadata"]["name"] for m in ms}
    create_all(api, namespace, ms)
    reserved, t0 = [], time.monotonic()
    while time.monotonic() < t0 + 60:
        reserved.append(gang_holds(troupe_url)["troupe_gang_reserved_gpus"])
        assert not bound(api, namespace, names), "a member of a gang whose cycle fails was bound"
        if 16 in reserved and reserved[-1] == 0:
            break
        time.sleep(0.25)
    assert 16 in reserved, f"Troupe never planned the gang (reserved GPUs seen: {sorted(set(reserved))})"
    assert reserved[-1] == 0, f"the plan was not released within 60s: {reserved[-10:]}"
    print(f"\n[measure] plan of a failing PodGroup cycle released {time.monotonic() - t0:.1f}s after creation")
    invariant(api)
    delete_pods(api, namespace, list(names))
    wait_no_gang_holds(troupe_url, api)


def test_two_competing_podgroups_one_whole_then_the_other(api, namespace, scheduler_name, fleet, troupe_url,
                                                        gpu_invariant):
    # Part c: 4 x 8 = 32 GPUs; each gang 6 x 4 = 24: one at a time.
    groups = {}
    for g in ("ga", "gb"):
        create_group(api, namespace, g, 6)
        groups[g] = members(g, 6, 4, fleet, "c", scheduler_name, timeout="60s")
    for a, b in zip(groups["ga"], groups["gb"]):  # interleaved: both reach Troupe together
        create_all(api, namespace, [a, b])
    names = {g: [m["metadata"]["name"] for m in ms] for g, ms in groups.items()}
    history = watch(api, namespace, names, lambda c: 6 in c.values() or (c["ga"] and c["gb"]), timeout=90)
    first = "ga" if history[-1][1]["ga"] == 6 else "gb"
    other = "gb" if first == "ga" else "ga"
    assert history[-1][1][other] == 0, f"both gangs have members bound: {history[-1][1]}"
    # The other stays wholly pending while the first runs.
    hold_until = time.monotonic() + 8
    while time.monotonic() < hold_until:
        assert not bound(api, namespace, set(names[other])), f"gang {other} got members bound while {first} ran"
        time.sleep(0.25)
    assert_all_or_nothing(history, first, 6)
    invariant(api)
    delete_pods(api, namespace, names[first])
    later = watch(api, namespace, names, lambda c: c[other] == 6, timeout=120)
    assert_all_or_nothing(later, other, 6)
    invariant(api)
    delete_pods(api, namespace, names[other])
    wait_no_gang_holds(troupe_url, api)


def test_resubmitted_gang_under_the_same_podgroup_name_binds_again(api, namespace, scheduler_name, fleet,
                                                                  troupe_url, gpu_invariant):
    # Part d: 2 x 8. Round 1: PodGroup and pods. Round 2: the pods again under the kept object.
    # Round 3: the PodGroup deleted and made again (another minCount), with new pods.
    rounds = [("again", 2, 8, False), ("again", 2, 8, False), ("again", 4, 4, True)]
    for i, (group, count, gpus, recreate) in enumerate(rounds):
        if i == 0 or recreate:
            if recreate:
                delete_group(api, namespace, group)
            create_group(api, namespace, group, count)
        ms = members(group, count, gpus, fleet, "d", scheduler_name)
        names = [m["metadata"]["name"] for m in ms]
        create_all(api, namespace, ms)
        history = watch(api, namespace, {group: names}, lambda c: c[group] == count, timeout=90)
        assert_all_or_nothing(history, group, count)
        invariant(api)
        wait_condition(api, namespace, group, lambda c: c["status"] == "True", 20, f"True (round {i + 1})")
        delete_pods(api, namespace, names)
        wait_no_gang_holds(troupe_url, api)


def test_podgroup_holds_members_until_the_last_arrives_then_binds_all(api, namespace, scheduler_name, fleet,
                                                                    troupe_url, gpu_invariant):
    # minCount 4, members of 4 GPUs on part f (2 x 8): 3 members wait, none bound; the 4th
    # releases all 4, each with its troupe.dev/gpus.
    create_group(api, namespace, "late", 4)
    ms = members("late", 4, 4, fleet, "f", scheduler_name, timeout="120s")
    names = [m["metadata"]["name"] for m in ms]
    create_all(api, namespace, ms[:3])
    hold_until = time.monotonic() + 8
    while time.monotonic() < hold_until:
        assert not bound(api, namespace, set(names)), "a member was bound before minCount members existed"
        time.sleep(0.25)
    t0 = time.monotonic()
    create_all(api, namespace, ms[3:])
    history = watch(api, namespace, {"late": names}, lambda c: c["late"] == 4, timeout=90)
    assert_all_or_nothing(history, "late", 4)
    print(f"\n[measure] PodGroup late (minCount 4, 3 held): all 4 bound {history[-1][0] - t0:.2f}s after the 4th")
    pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
    for n in names:
        gpus = (pods[n]["metadata"].get("annotations") or {}).get("troupe.dev/gpus", "")
        assert len(gpus.split(",")) == 4, f"{n}: troupe.dev/gpus={gpus!r}"
    assert set(bound(api, namespace, set(names)).values()) == nodes_of_part(api, fleet, "f")
    invariant(api)
    delete_pods(api, namespace, names)
    wait_no_gang_holds(troupe_url, api)


def lower_min_count(api, namespace, name, min_count):
    api.request("PATCH", f"{GROUPS}/namespaces/{namespace}/podgroups/{name}",
                {"spec": {"schedulingPolicy": {"gang": {"minCount": min_count}}}},
                content_type="application/merge-patch+json")


def elastic_api():
    if GROUPS.endswith("/v1alpha2"):
        pytest.skip("minCount is immutable in scheduling.k8s.io/v1alpha2 (Kubernetes 1.36); elastic gangs are v1beta1+")


def assert_lowered_gang_binds(api, namespace, fleet, part, group, names, t0):
    history = watch(api, namespace, {group: names}, lambda c: c[group] == 3, timeout=30)
    assert_all_or_nothing(history, group, 3)
    took = history[-1][0] - t0
    pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
    for n in names:
        gpus = (pods[n]["metadata"].get("annotations") or {}).get("troupe.dev/gpus", "")
        assert len(gpus.split(",")) == 4, f"{n}: troupe.dev/gpus={gpus!r}"
    assert set(bound(api, namespace, set(names)).values()) <= nodes_of_part(api, fleet, part)
    return took


def test_lowered_min_count_binds_the_waiting_members_at_once(api, namespace, scheduler_name, fleet, troupe_url,
                                                              gpu_invariant):
    # Elastic gangs (docs/kubernetes-mode.md#waking-pending-pods): minCount 4, 3 members of 4 GPUs
    # on part g (2 x 8) wait; lowering minCount to 3 binds the 3 within 30 s, each with its
    # troupe.dev/gpus, long before kube-scheduler's 5-minute flush.
    elastic_api()
    create_group(api, namespace, "elastic", 4)
    ms = members("elastic", 3, 4, fleet, "g", scheduler_name, timeout="120s")
    names = [m["metadata"]["name"] for m in ms]
    create_all(api, namespace, ms)
    hold_until = time.monotonic() + 8
    while time.monotonic() < hold_until:
        assert not bound(api, namespace, set(names)), "a member was bound before minCount members existed"
        time.sleep(0.25)
    t0 = time.monotonic()
    lower_min_count(api, namespace, "elastic", 3)
    took = assert_lowered_gang_binds(api, namespace, fleet, "g", "elastic", names, t0)
    print(f"\n[measure] PodGroup elastic: minCount 4 -> 3, the 3 waiting members bound {took:.2f}s after the change")
    invariant(api)
    delete_pods(api, namespace, names)
    wait_no_gang_holds(troupe_url, api)


def test_lowered_min_count_releases_a_gang_troupe_planned(api, namespace, scheduler_name, fleet, troupe_url,
                                                          gpu_invariant):
    # Here Troupe has planned the gang for minCount 4: a 4th member fits no node (kube-scheduler's
    # own filters reject it), so kube-scheduler's PodGroup cycles bring the 3 others through
    # Troupe's filter, which holds 4 x 4 GPUs on part h (2 x 8) and steers them onto 3 slots. Lowered
    # to 3, Troupe's PodGroup watch gives the core the new minimum at once: the 3 bind (within 30 s),
    # and the 4th slot's GPUs are given back.
    elastic_api()
    create_group(api, namespace, "elastic-planned", 4)
    ms = members("elastic-planned", 3, 4, fleet, "h", scheduler_name, timeout="120s")
    ms += members("elastic-planned", 4, 4, fleet, "h", scheduler_name, timeout="120s", node_selector=NOWHERE)[3:]
    names = [m["metadata"]["name"] for m in ms]
    create_all(api, namespace, ms)
    deadline = time.monotonic() + 40
    while gang_holds(troupe_url)["troupe_gang_reserved_gpus"] < 16:
        assert not bound(api, namespace, set(names)), "a member was bound with 3 of minCount 4"
        assert time.monotonic() < deadline, f"Troupe never planned the gang: {gang_holds(troupe_url)}"
        time.sleep(0.25)
    assert not bound(api, namespace, set(names))
    t0 = time.monotonic()
    lower_min_count(api, namespace, "elastic-planned", 3)
    took = assert_lowered_gang_binds(api, namespace, fleet, "h", "elastic-planned", names[:3], t0)
    print(f"\n[measure] PodGroup elastic-planned (planned by Troupe for 4): minCount 4 -> 3, 3 bound {took:.2f}s "
          f"after the change")
    assert names[3] not in bound(api, namespace, set(names))
    invariant(api)
    delete_pods(api, namespace, names)
    wait_no_gang_holds(troupe_url, api)
