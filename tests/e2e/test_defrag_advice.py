"""Live defragmentation advice on the real control plane (docs/defrag.md, Live advice).

Needs TROUPE_MODE=kube (skipped otherwise). The module adds two fake 8-GPU nodes of a GPU
product no other node has, so only its pods use them, and restarts Troupe with a short
defrag.interval and minPending 0s. A 1-GPU pod is pinned (nodeSelector) onto the first node and a
4-GPU pod onto the second: an 8-GPU pod of that product then fits nowhere, but would after moving
the 1-GPU pod to the second node.

  1. advice only (defrag.evict off): a DefragAdvice event on the 8-GPU pod names the pod to move,
     its node and the target, the troupe_defrag_advice_* gauges say so, and nothing is evicted;
  2. Troupe restarted with defrag.evict: true evicts the 1-GPU pod (Defragmented event), the
     8-GPU pod binds on the freed node, and the test re-creates the evicted pod as its controller
     would (without the pin that made the cluster fragmented): it binds on the second node.

At the end the nodes go and Troupe restarts with its former arguments.
"""
import os
import time
import urllib.request

import pytest
import yaml

from kubehelpers import E2E_DIR, gpu_pod

pytestmark = pytest.mark.usefixtures("gpu_invariant")

PRODUCT = "NVIDIA-DEFRAG-E2E"
NODES = ("defrag-e2e-a", "defrag-e2e-b")
SELECTOR = "troupe.dev/e2e-defrag=true"
MODEL = {"troupe.dev/gpu-model": PRODUCT}
CONFIG = """defrag:
  enabled: true
  interval: 1s
  minGpus: 4
  minPending: 0s
  maxMoves: 4
  evict: {evict}
"""


def node(name):
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name,
                         "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                    "troupe.dev/e2e-defrag": "true", "nvidia.com/gpu.present": "true",
                                    "nvidia.com/gpu.product": PRODUCT, "nvidia.com/gpu.count": "8",
                                    "troupe.dev/topology-profile": "hgx-h100-8"}},
            "status": {"capacity": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "fake node of test_defrag_advice"}]}}


def restart_with(troupe, args, evict):
    path = os.path.join(E2E_DIR, "defrag-test-config.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(CONFIG.format(evict="true" if evict else "false"))
    troupe.restart(env={"TROUPE_ARGS": f"{args} --config {path}".strip()})


def delete_nodes(kube):
    kube.kubectl("delete", "nodes", "-l", SELECTOR, "--ignore-not-found", "--wait=true", check=False)


def metrics(e2e_state):
    port = e2e_state.get("TROUPE_METRICS_PORT") or e2e_state.get("TROUPE_PORT")
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith("troupe_defrag_"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


@pytest.fixture(scope="module")
def defrag_nodes(e2e_state, kube, troupe):
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("defragmentation advice needs Troupe to watch the cluster: start it with TROUPE_MODE=kube")
    args = os.environ.get("TROUPE_ARGS", "")
    delete_nodes(kube)  # a previous run that died half way
    kube.apply(yaml.safe_dump_all([node(n) for n in NODES]))
    restart_with(troupe, args, evict=False)
    try:
        yield args
    finally:
        delete_nodes(kube)
        troupe.restart(env={"TROUPE_ARGS": args})


def fragment(kube, namespace):
    """The 1-GPU pod on node a, the 4-GPU pod on node b; the 8-GPU pod then fits nowhere."""
    kube.create(gpu_pod("small", 1, annotations=MODEL, node_selector={"kubernetes.io/hostname": NODES[0]}),
                namespace)
    kube.create(gpu_pod("half", 4, annotations=MODEL, node_selector={"kubernetes.io/hostname": NODES[1]}),
                namespace)
    assert kube.wait_pod_bound("small", namespace) == NODES[0]
    assert kube.wait_pod_bound("half", namespace) == NODES[1]
    kube.create(gpu_pod("big", 8, annotations=dict(MODEL, **{"troupe.dev/gpu-topology": "nvlink"})), namespace)


def test_advice_names_the_pod_and_node_and_evicts_nothing(e2e_state, kube, namespace, defrag_nodes):
    fragment(kube, namespace)
    message = kube.wait_event(namespace, "big", "DefragAdvice", contains=f"{namespace}/small", timeout=60)
    print(f"\nDefragAdvice: {message}")
    assert f"from node {NODES[0]} to node {NODES[1]}" in message
    assert f"would free 8 connected GPUs on {NODES[0]}" in message
    assert "did not move them (defrag.evict is off)" in message
    # The gauges of the round that found it (1 pending pod, 8 GPUs, 1 move).
    got = kube.wait_for(lambda: (lambda m: m if m.get("troupe_defrag_advice_pending_pods", 0) >= 1 else None)(
        metrics(e2e_state)), timeout=30, desc="troupe_defrag_advice_pending_pods >= 1")
    assert got["troupe_defrag_advice_gpus"] >= 8
    assert got["troupe_defrag_advice_moves"] >= 1
    assert got["troupe_defrag_evictions_total"] == 0
    # Nothing moved: a few more rounds later the pods are where they were and big still waits.
    time.sleep(3)
    assert kube.pod_node("small", namespace) == NODES[0]
    assert kube.pod_node("half", namespace) == NODES[1]
    assert kube.pod_node("big", namespace) is None
    assert not [e for e in kube.events(namespace) if e.get("reason") == "Defragmented"]
    # Told once while the advice stays the same.
    told = [e for e in kube.events(namespace, "big") if e.get("reason") == "DefragAdvice"]
    assert len(told) == 1 and (told[0].get("count") or 1) == 1, told


def test_with_evict_on_the_planned_pod_is_evicted_and_the_big_pod_binds(e2e_state, kube, namespace, troupe,
                                                                         defrag_nodes):
    fragment(kube, namespace)
    restart_with(troupe, defrag_nodes, evict=True)
    try:
        msg = kube.wait_event(namespace, "small", "Defragmented", contains=NODES[0], timeout=60)
        print(f"\nDefragmented: {msg}")
        kube.wait_gone("pod", "small", namespace, timeout=30)
        assert kube.wait_pod_bound("big", namespace, timeout=90) == NODES[0]
        assert kube.pod_node("half", namespace) == NODES[1]  # only the planned pod was evicted
        # As its controller would: the pod again, without the pin that fragmented the cluster.
        kube.create(gpu_pod("small", 1, annotations=MODEL), namespace)
        assert kube.wait_pod_bound("small", namespace) == NODES[1]
        assert metrics(e2e_state)["troupe_defrag_evictions_total"] >= 1
    finally:
        restart_with(troupe, defrag_nodes, evict=False)
