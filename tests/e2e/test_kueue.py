"""Kueue interop on the real control plane, without Kueue: the test plays Kueue's part.

Kueue holds a workload's pods behind scheduling gates until it admits the workload
(kueue.x-k8s.io/admission; kueue.x-k8s.io/topology with topology-aware scheduling, TAS). With
TAS it then pins each pod with a nodeSelector, labels it kueue.x-k8s.io/tas: "true", and lifts
the gate. Troupe must not count gated pods as demand, and must place TAS pods where Kueue put
them, choosing only their GPUs (src/sched/request/kueue_pods.cc).

Needs TROUPE_MODE=kube (skipped otherwise): Troupe learns pending pods and Queues from its
watches and binds the pods itself.
"""
import uuid

import pytest

from gang_fleet import series_value, troupe_series
from kubehelpers import gpu_pod
from queue_helpers import delete_queues, gpus, install_crd, queue, queue_status

pytestmark = pytest.mark.usefixtures("gpu_invariant")

KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
KUEUE_GROUP = "kueue.x-k8s.io/pod-group-name"
KUEUE_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_TAS = "kueue.x-k8s.io/tas"


@pytest.fixture(scope="module", autouse=True)
def kube_mode(e2e_state):
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("Kueue interop needs Troupe to watch pending pods and Queues and to bind: start the "
                    "cluster with TROUPE_MODE=kube")


@pytest.fixture
def kueue_queue(kube):
    """A Troupe Queue named like the LocalQueue the pods name (unique per run); deleted after."""
    install_crd(kube)
    name = f"kueue-lq-{uuid.uuid4().hex[:5]}"
    kube.apply([queue(name)])
    yield name
    delete_queues(kube, [name])


def kueue_pod(name, queue_name, group, total, gates, scheduler, tas=False, gpus=1, annotations=None):
    labels = {KUEUE_QUEUE: queue_name, KUEUE_GROUP: group}
    if tas:
        labels[KUEUE_TAS] = "true"
    return gpu_pod(name, gpus=gpus, scheduler=scheduler, labels=labels,
                   annotations={KUEUE_TOTAL: str(total), **(annotations or {})},
                   schedulingGates=[{"name": g} for g in gates])


def test_gated_kueue_pods_are_not_pending_demand(kube, api, namespace, scheduler_name, troupe_url, kueue_queue):
    # Four pods Kueue has not admitted yet, and one admitted pod that cannot fit (no H200 here):
    # only the latter is pending demand.
    gated = [kueue_pod(f"held-{i}", kueue_queue, "held", 4, ["kueue.x-k8s.io/admission"], scheduler_name)
             for i in range(4)]
    kube.create(gated, namespace)
    waiting = gpu_pod("no-h200", gpus=2, scheduler=scheduler_name, labels={KUEUE_QUEUE: kueue_queue},
                      annotations={"troupe.dev/gpu-model": "NVIDIA-H200"})
    kube.create(waiting, namespace)
    kube.wait_event(namespace, "no-h200", "FailedScheduling", "NVIDIA-H200", timeout=30)

    def pending():
        s = queue_status(kube).get(kueue_queue, {}).get("pending", {})
        return s if s.get("pods") == 1 else None

    status = kube.wait_for(pending, timeout=30, interval=0.5, desc=f"queue {kueue_queue}: 1 pending pod")
    assert gpus(status.get("gpus")) == 2, status
    series = troupe_series(troupe_url)
    assert series_value(series, "troupe_queue_pending_pods", queue=kueue_queue) == 1
    assert series_value(series, "troupe_queue_pending_gpus", queue=kueue_queue) == 2

    # Kueue admits the workload and lifts the gates: the four are scheduled as a gang as usual.
    for p in gated:
        api.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}",
                    {"spec": {"schedulingGates": None}}, "application/merge-patch+json")
    for p in gated:
        kube.wait_pod_bound(p["metadata"]["name"], namespace, timeout=60)


def test_kueue_tas_gang_binds_to_kueues_nodes_with_gpus_chosen_by_troupe(kube, api, namespace, scheduler_name,
                                                                          cluster_nodes, kueue_queue):
    # Four nodes in four different racks: Troupe's own plan for a gang that requires one rack
    # would never choose them, Kueue's assignment did.
    by_rack = {}
    for n in cluster_nodes:
        if int(n.get("gpus") or 0) >= 2 and n["labels"].get("troupe.dev/rack"):
            by_rack.setdefault(n["labels"]["troupe.dev/rack"], n["name"])
    if len(by_rack) < 4:
        pytest.skip(f"the fleet has GPU nodes in {len(by_rack)} racks; this test needs 4")
    nodes = [by_rack[r] for r in sorted(by_rack)[:4]]
    pods = [kueue_pod(f"tas-{i}", kueue_queue, "tas", 4, ["kueue.x-k8s.io/topology"], scheduler_name, tas=True,
                      gpus=2, annotations={"troupe.dev/topology-required": "rack"})
            for i in range(4)]
    kube.create(pods, namespace)
    for p, node in zip(pods, nodes):
        path = f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}"
        # What Kueue's TAS does: the node selector (allowed while the pod is gated), then the gate goes.
        api.request("PATCH", path, {"spec": {"nodeSelector": {"kubernetes.io/hostname": node}}},
                    "application/merge-patch+json")
        api.request("PATCH", path, {"spec": {"schedulingGates": None}}, "application/merge-patch+json")
    for p, node in zip(pods, nodes):
        name = p["metadata"]["name"]
        assert kube.wait_pod_bound(name, namespace, timeout=60) == node
        given = kube.get("pod", name, namespace)["metadata"]["annotations"].get("troupe.dev/gpus", "")
        assert len(given.split(",")) == 2 and all(g.isdigit() for g in given.split(",")), (name, given)
