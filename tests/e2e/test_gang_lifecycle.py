"""A gang's whole lifetime on the real control plane, not just its happy path (issue 12):
re-submission under the same name, deletion at the bind barrier, deletion of part of a bound
gang. After each, what Troupe keeps for gangs (troupe_gang_reserved_gpus, troupe_gangs{state=
"waiting"|"planned"}, troupe_gang_draining_nodes) must be back to zero once no gang pod exists,
the next gang must bind whole, and no GPU may be given twice (tests/e2e/gpu_invariant.py).

Kubernetes mode only (the bind barrier needs Troupe to bind), on the module's own fake nodes
(tests/e2e/gang_fleet.py): part "r" (5 x 8 GPUs) for the competing gangs, "w" (4 x 8) for the
barrier, "h" (4 x 8) for the half-deleted gang.

Gang timeouts are 4m: long enough that nothing in these tests is released by a timeout (a
hold that only a timeout frees shows as a failure here), and below the e2e extender
httpTimeout of 330s (tests/e2e/scheduler-config.tmpl.yaml), which a bind waiting at the
barrier must not outlast.
"""
import time

import pytest

from gang_fleet import bound, gang_holds, member, module_fleet, troupe_metrics, wait_no_gang_holds
from gpu_invariant import check_gpu_invariant
from kubehelpers import KUBECONFIG
from test_gangs import assert_all_or_nothing, create_all, wait_event, watch

PARTS = {"r": 5, "w": 4, "h": 4}
TIMEOUT = "4m"
PROMPT_S = 45  # "binds promptly": well under any gang timeout or kube-scheduler's 5 min requeue


@pytest.fixture(scope="module", autouse=True)
def kube_mode(e2e_state):
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("gangs need Troupe's bind barrier, which needs the Kubernetes API: start the cluster "
                    "with TROUPE_MODE=kube")
    return e2e_state


@pytest.fixture(scope="module")
def fleet(kube_mode, troupe_url):
    yield from module_fleet(kube_mode, KUBECONFIG, troupe_url, PARTS)


def settled(api, troupe_url):
    """Nothing is held for gangs before a test starts (else a failure here is an earlier one's)."""
    try:
        wait_no_gang_holds(troupe_url, api)
    except AssertionError as e:
        raise AssertionError(f"before this test started: {e}") from None


def invariant(api):
    check_gpu_invariant(api.list_pods(), api.list_nodes(), require_annotation_for="troupe-scheduler")


def delete_all(api, namespace):
    for p in api.list_pods(namespace):
        api.delete_pod(namespace, p["metadata"]["name"])
    deadline = time.monotonic() + 30
    while api.list_pods(namespace):
        assert time.monotonic() < deadline, f"pods of {namespace} not gone after 30s"
        time.sleep(0.1)


# ---- 1. the same two competing gangs, three rounds, same names, same namespace ---------------------
def test_two_competing_gangs_three_rounds_under_the_same_names(api, namespace, scheduler_name, fleet,
                                                               troupe_url):
    # Part r: 5 nodes x 8 GPUs = 40; each gang 12 x 2 GPUs = 24 (60%): one fits, never both.
    settled(api, troupe_url)
    size = 12
    groups = {g: [f"{g}-{i:02d}" for i in range(size)] for g in ("ga", "gb")}
    for rnd in (1, 2, 3):
        manifests = []
        for i in range(size):  # interleaved, so both gangs reach Troupe at once
            for g in ("ga", "gb"):
                manifests.append(member(groups[g][i], g, size, 2, fleet, "r", scheduler_name, timeout=TIMEOUT))
        create_all(api, namespace, manifests)
        # Until one gang is whole, or both have members bound (which is already wrong).
        try:
            history = watch(api, namespace, groups, lambda c: size in c.values() or (c["ga"] and c["gb"]),
                            timeout=90)
        except AssertionError as e:
            raise AssertionError(f"round {rnd}: neither gang bound whole: {e}") from None
        winner = "ga" if history[-1][1]["ga"] >= history[-1][1]["gb"] else "gb"
        loser = "gb" if winner == "ga" else "ga"
        hold_until = time.monotonic() + 6
        history += watch(api, namespace, groups, lambda c: time.monotonic() >= hold_until, timeout=20)
        partial = [c for t, c in history if c[loser]]
        assert not partial, f"round {rnd}: gang {loser} got members bound beside {winner}: " \
                            f"{partial[-1][loser]} of {size} bound ({winner}: {partial[-1][winner]} of {size})"
        assert_all_or_nothing(history, winner, size)
        assert history[-1][1][winner] == size, f"round {rnd}: {winner} lost members: {history[-1][1]}"
        invariant(api)

        for n in groups[winner]:
            api.delete_pod(namespace, n)
        try:
            later = watch(api, namespace, {loser: groups[loser]}, lambda c: c[loser] == size, timeout=PROMPT_S * 2)
        except AssertionError as e:
            raise AssertionError(f"round {rnd}: {loser} did not bind once {winner} was deleted: {e}; "
                                 f"holds {gang_holds(troupe_url)}") from None
        assert_all_or_nothing(later, loser, size)
        invariant(api)

        delete_all(api, namespace)
        try:
            took = wait_no_gang_holds(troupe_url, api)
        except AssertionError as e:
            raise AssertionError(f"after round {rnd}: {e}") from None
        print(f"\n[measure] round {rnd}: {winner} first, then {loser}; holds back to 0 in {took:.1f}s")


# ---- 2. a gang deleted while its members wait at the bind barrier -------------------------------------
def test_gang_deleted_at_the_barrier_frees_everything_and_the_next_gang_binds(api, namespace, scheduler_name,
                                                                               fleet, troupe_url):
    # Part w: 4 nodes x 8 GPUs. Gang "park": 4 x 8 GPUs, three members created: planned on all
    # four nodes, three binds parked at the barrier, 32 GPUs held.
    settled(api, troupe_url)
    park = [f"park-{i}" for i in range(4)]
    held_before = troupe_metrics(troupe_url).get("troupe_gang_reserved_gpus", 0)
    create_all(api, namespace, [member(n, "park", 4, 8, fleet, "w", scheduler_name, timeout=TIMEOUT)
                                for n in park[:3]])
    waiting = wait_event(api, namespace, set(park), "GangWaiting", timeout=30)
    assert "of 4 members" in waiting["message"], waiting["message"]
    deadline = time.monotonic() + 10
    while troupe_metrics(troupe_url).get("troupe_gang_reserved_gpus", 0) < held_before + 32:
        assert time.monotonic() < deadline, f"the plan never held 32 GPUs: {gang_holds(troupe_url)}"
        time.sleep(0.1)
    assert not bound(api, namespace, set(park))

    delete_all(api, namespace)
    problems = []  # both halves are checked, so a failure says all that is wrong
    try:
        took = wait_no_gang_holds(troupe_url, api)
        print(f"\n[measure] holds back to 0 {took:.1f}s after the parked gang was deleted")
    except AssertionError as e:
        problems.append(f"after deleting the parked gang: {e}")

    # A new gang that needs exactly those GPUs.
    nxt = [f"next-{i}" for i in range(4)]
    create_all(api, namespace, [member(n, "next", 4, 8, fleet, "w", scheduler_name, timeout=TIMEOUT) for n in nxt])
    t0 = time.monotonic()
    try:
        history = watch(api, namespace, {"next": nxt}, lambda c: c["next"] == 4, timeout=PROMPT_S)
        assert_all_or_nothing(history, "next", 4)
        print(f"[measure] the next gang bound whole {time.monotonic() - t0:.1f}s after it was created")
    except AssertionError as e:
        problems.append(f"a new gang needing the freed GPUs did not bind within {PROMPT_S}s: {e}; "
                        f"holds {gang_holds(troupe_url)}")
    invariant(api)
    assert not problems, "\n".join(problems)
    delete_all(api, namespace)
    wait_no_gang_holds(troupe_url, api)


# ---- 3. half of a bound gang deleted ----------------------------------------------------------------
def test_half_of_a_bound_gang_deleted_the_rest_stays_and_the_next_gang_binds(api, namespace, scheduler_name,
                                                                            fleet, troupe_url):
    # Part h: 4 nodes x 8 GPUs. Gang "whole": 4 x 8 GPUs, bound whole on all four nodes.
    settled(api, troupe_url)
    names = [f"h-{i}" for i in range(4)]
    create_all(api, namespace, [member(n, "whole", 4, 8, fleet, "h", scheduler_name, timeout=TIMEOUT)
                                for n in names])
    history = watch(api, namespace, {"whole": names}, lambda c: c["whole"] == 4, timeout=60)
    assert_all_or_nothing(history, "whole", 4)
    pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
    placed = {n: (pods[n]["spec"]["nodeName"], pods[n]["metadata"]["annotations"].get("troupe.dev/gpus"))
              for n in names}

    for n in names[:2]:
        api.delete_pod(namespace, n)
    # The other half stays exactly as it was: same node, same GPUs.
    time.sleep(3)
    pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
    assert sorted(pods) == names[2:], f"pods left: {sorted(pods)}"
    for n in names[2:]:
        now = (pods[n]["spec"].get("nodeName"), (pods[n]["metadata"].get("annotations") or {}).get("troupe.dev/gpus"))
        assert now == placed[n], f"{n} changed from {placed[n]} to {now}"
    # Nothing waits or is held, although two members of the gang still run.
    wait_no_gang_holds(troupe_url)

    # The next gang needs exactly the two nodes the deleted half freed.
    freed = {placed[n][0] for n in names[:2]}
    nxt = [f"next-{i}" for i in range(2)]
    create_all(api, namespace, [member(n, "next", 2, 8, fleet, "h", scheduler_name, timeout=TIMEOUT) for n in nxt])
    history = watch(api, namespace, {"next": nxt}, lambda c: c["next"] == 2, timeout=PROMPT_S)
    assert_all_or_nothing(history, "next", 2)
    assert set(bound(api, namespace, set(nxt)).values()) == freed
    for n in names[2:]:
        p = api.get_pod(namespace, n)
        assert (p["spec"].get("nodeName"), p["metadata"]["annotations"].get("troupe.dev/gpus")) == placed[n]
    invariant(api)
    wait_no_gang_holds(troupe_url)
    delete_all(api, namespace)
    wait_no_gang_holds(troupe_url, api)
