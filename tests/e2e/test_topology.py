"""GPU and network topology on the real control plane (issue 7).

The fleet (tests/e2e/nodes.yaml) has six DGX-1 V100 nodes (`troupe.dev/topology-profile:
dgx1-v100-8`, the hybrid cube mesh): v100-0, v100-1 in rack r7 and v100-2, v100-3 in rack r8
(block b5), v100-4 and v100-5 in rack r9 (block b6). Pods here ask for that GPU model and pin a
block or node, so what other tests left elsewhere does not matter.

Which GPUs a pod got:
  - TROUPE_MODE=kube: Troupe binds and writes them to the pod annotation troupe.dev/gpus;
  - standalone: kube-scheduler binds (no bindVerb), so after it has bound the pod the test sends
    Troupe the same /bind request kube-scheduler sends with bindVerb: bind, and reads the GPUs
    from Troupe's "bound" log line. That is Troupe's bind path choosing the set on the node
    kube-scheduler chose; it also makes Troupe's standalone model count the pod.
"""
import json
import os
import urllib.request

import pytest

from kubehelpers import E2E_DIR, gpu_pod

pytestmark = pytest.mark.usefixtures("gpu_invariant")

V100 = "Tesla-V100-SXM2-32GB"
ASSIGNED = "troupe.dev/gpus"
# DGX-1 V100 NVLink pairs: two bonded links, and one link (profile dgx1-v100-8; NVIDIA's DGX-1
# whitepaper). The two quads {0,1,2,3} and {4,5,6,7} are each fully NVLinked; no other 4 GPUs are.
NV2 = {frozenset(p) for p in [(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)]}
NV1 = {frozenset(p) for p in [(0, 1), (0, 2), (1, 3), (2, 6), (3, 7), (4, 5), (4, 6), (5, 7)]}
QUADS = [{0, 1, 2, 3}, {4, 5, 6, 7}]


def v100_pod(name, gpus, scheduler, annotations=None, node_selector=None):
    ann = {"troupe.dev/gpu-model": V100, **(annotations or {})}
    return gpu_pod(name, gpus=gpus, scheduler=scheduler, annotations=ann, node_selector=node_selector)


@pytest.fixture
def v100_nodes(cluster_nodes):
    nodes = {n["name"]: n["labels"] for n in cluster_nodes
             if n["labels"].get("troupe.dev/topology-profile") == "dgx1-v100-8"}
    want = {"v100-0": "r7", "v100-1": "r7", "v100-2": "r8", "v100-3": "r8", "v100-4": "r9", "v100-5": "r9"}
    if any(nodes.get(n, {}).get("troupe.dev/rack") != r for n, r in want.items()):
        pytest.skip(f"the fleet lacks the DGX-1 nodes of tests/e2e/nodes.yaml ({sorted(nodes)}); "
                    "a generated fleet (NODES=N) has none")
    return nodes


def troupe_log():
    with open(os.path.join(E2E_DIR, "logs", "troupe.log"), encoding="utf-8", errors="replace") as f:
        return f.read().splitlines()


def assigned_gpus(kube, e2e_state, name, namespace, node):
    """The GPU indices Troupe gave the bound pod (see the module docstring)."""
    pod = kube.get("pod", name, namespace)
    if e2e_state.get("TROUPE_MODE") == "kube":
        text = (pod["metadata"].get("annotations") or {}).get(ASSIGNED)
        assert text, f"{namespace}/{name} is bound to {node} without {ASSIGNED}"
        return sorted(int(g) for g in text.split(","))
    body = json.dumps({"PodName": name, "PodNamespace": namespace, "PodUID": pod["metadata"]["uid"],
                       "Node": node}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{e2e_state['TROUPE_PORT']}/bind", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        result = json.loads(r.read())
    assert not result.get("Error"), f"Troupe refused the bind of {namespace}/{name} on {node}: {result}"
    for line in reversed(troupe_log()):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("msg") == "bound" and entry.get("pod") == f"{namespace}/{name}":
            assert entry["node"] == node, entry
            return sorted(int(g) for g in entry["gpus"].split(","))
    raise AssertionError(f"no 'bound' line for {namespace}/{name} in {E2E_DIR}/logs/troupe.log")


def test_dgx1_nvlink_8gpu_and_best_connected_4gpu_sets(kube, namespace, scheduler_name, e2e_state, v100_nodes):
    # An 8-GPU nvlink pod: the cube mesh is one NVLink domain of 8, so it fits a DGX-1 (block b6).
    kube.create(v100_pod("nvlink-8", 8, scheduler_name, {"troupe.dev/gpu-topology": "nvlink"},
                         {"troupe.dev/block": "b6"}), namespace)
    node8 = kube.wait_pod_bound("nvlink-8", namespace, timeout=30)
    assert node8 in ("v100-4", "v100-5")
    assert assigned_gpus(kube, e2e_state, "nvlink-8", namespace, node8) == list(range(8))

    # On the other DGX-1: a 2-GPU pod, then a 4-GPU pod. The pair must be a bonded NVLink pair
    # inside one quad, so that a fully NVLinked quad stays whole for the 4-GPU pod; lowest
    # indices would give {0,1} (one link) and then {2,3,4,5} (PCIe between 2 and 4).
    other = "v100-5" if node8 == "v100-4" else "v100-4"
    pin = {"kubernetes.io/hostname": other}
    kube.create(v100_pod("pair-2", 2, scheduler_name, node_selector=pin), namespace)
    assert kube.wait_pod_bound("pair-2", namespace, timeout=30) == other
    pair = set(assigned_gpus(kube, e2e_state, "pair-2", namespace, other))
    assert frozenset(pair) in NV2, f"the 2-GPU pod got {sorted(pair)}, not a bonded NVLink pair"
    assert any(pair <= q for q in QUADS), f"the pair {sorted(pair)} breaks both quads"

    kube.create(v100_pod("quad-4", 4, scheduler_name, node_selector=pin), namespace)
    assert kube.wait_pod_bound("quad-4", namespace, timeout=30) == other
    quad = set(assigned_gpus(kube, e2e_state, "quad-4", namespace, other))
    assert quad in QUADS and not quad & pair, \
        f"the 4-GPU pod got {sorted(quad)} beside the pair {sorted(pair)}; the best set is the free quad"
    links = [frozenset((a, b)) for a in quad for b in quad if a < b]
    assert all(link in NV2 | NV1 for link in links), f"{sorted(quad)} has a pair without NVLink"


def test_gang_with_required_rack_lands_in_one_rack(kube, namespace, scheduler_name, e2e_state, v100_nodes):
    block = {"troupe.dev/block": "b5"}  # r7 = v100-0, v100-1; r8 = v100-2, v100-3
    # A gang no rack can ever hold stays Pending with Troupe's reason, holding nothing: the
    # block's four nodes could take three 8-GPU members, but no rack has more than two nodes.
    big = {"troupe.dev/gang": "too-big", "troupe.dev/gang-size": "3", "troupe.dev/topology-required": "rack"}
    kube.create(v100_pod("big-0", 8, scheduler_name, big, block), namespace)
    msg = kube.wait_event(namespace, "big-0", "FailedScheduling", "in one rack", timeout=30)
    assert "4 troupe: gang" in msg and "the largest rack can hold only 2 even when empty" in msg, msg
    assert kube.pod_node("big-0", namespace) is None
    kube.delete("pod", "big-0", namespace, force=True, wait=True)

    # Half of v100-0 is taken, so three whole nodes are free: enough GPUs for two 8-GPU members,
    # but the node order a gang would take without racks (v100-1, then v100-2) spreads it over
    # r7 and r8. Only r8 holds both.
    kube.create(v100_pod("filler-4", 4, scheduler_name, node_selector={"kubernetes.io/hostname": "v100-0"}),
                namespace)
    assert kube.wait_pod_bound("filler-4", namespace, timeout=30) == "v100-0"
    if e2e_state.get("TROUPE_MODE") != "kube":
        assigned_gpus(kube, e2e_state, "filler-4", namespace, "v100-0")  # Troupe's model counts it too

    gang = {"troupe.dev/gang": "allreduce", "troupe.dev/gang-size": "2",
            "troupe.dev/topology-required": "rack"}
    kube.create([v100_pod(f"worker-{i}", 8, scheduler_name, gang, block) for i in range(2)], namespace)
    placed = {f"worker-{i}": kube.wait_pod_bound(f"worker-{i}", namespace, timeout=60) for i in range(2)}
    racks = {v100_nodes[n]["troupe.dev/rack"] for n in placed.values()}
    assert racks == {"r8"}, f"gang members landed on {placed} (racks {sorted(racks)}); expected rack r8 only"
    assert sorted(placed.values()) == ["v100-2", "v100-3"]
