"""The newcomer manifests in examples/k8s/ do what examples/k8s/README.md says they do."""
import glob
import os
import time

import pytest
import yaml

from kubehelpers import ROOT, job_pod_names, recorded_requests
from queue_helpers import delete_queues, gpus, install_crd, queue_status

EXAMPLES = os.path.join(ROOT, "examples", "k8s")

pytestmark = pytest.mark.usefixtures("gpu_invariant")


def load_examples():
    docs = []
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            docs += [d for d in yaml.safe_load_all(f) if d]
    return docs


def test_examples_land_where_the_readme_says(kube, namespace, scheduler_name, cluster_nodes, troupe_recording,
                                            e2e_state):
    started = time.time() - 2
    docs = load_examples()
    names = {d["metadata"]["name"] for d in docs}
    assert names == {"train-nvlink-8gpu", "finetune-a100-4gpu", "inference-half-gpu", "wants-h200"}
    for d in docs:
        assert d["kind"] == "Pod" and "namespace" not in d["metadata"], d["metadata"]["name"]
        assert d["spec"]["schedulerName"] == scheduler_name
        assert d["spec"]["automountServiceAccountToken"] is False
    with open(os.path.join(EXAMPLES, "nvlink-8gpu.yaml"), encoding="utf-8") as f:
        kube.apply(f.read(), namespace)  # one at a time: the 8-GPU pod first
    for path in sorted(glob.glob(os.path.join(EXAMPLES, "*.yaml"))):
        with open(path, encoding="utf-8") as f:
            kube.apply(f.read(), namespace)

    fleet = {n["name"]: n["labels"] for n in cluster_nodes}
    node = kube.wait_pod_bound("train-nvlink-8gpu", namespace)
    assert fleet[node]["troupe.dev/gpu-interconnect"] == "nvswitch", node
    node = kube.wait_pod_bound("finetune-a100-4gpu", namespace)
    assert fleet[node]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB", node
    shared_node = kube.wait_pod_bound("inference-half-gpu", namespace)
    assert int(fleet_gpus(cluster_nodes)[shared_node]) > 0, shared_node
    kube.wait_event(namespace, "wants-h200", "FailedScheduling",
                    "troupe: GPU model NVIDIA-H100-80GB-HBM3 is not in troupe.dev/gpu-model (NVIDIA-H200)")
    assert kube.pod_node("wants-h200", namespace) is None

    # The shared-GPU pod asks troupe.dev/gpu-milli as a resource, a managed resource: it reached Troupe.
    uid = kube.get("pod", "inference-half-gpu", namespace)["metadata"]["uid"].encode()
    assert [r.path for r in recorded_requests(since=started) if uid in r.raw]
    if e2e_state.get("TROUPE_MODE") == "kube":
        gpus = kube.get("pod", "inference-half-gpu", namespace)["metadata"]["annotations"]["troupe.dev/gpus"]
        assert len(gpus.split(",")) == 1, gpus


def fleet_gpus(cluster_nodes):
    return {n["name"]: n["gpus"] for n in cluster_nodes}


def test_gang_example_binds_all_sixteen_together(kube, namespace, e2e_state, cluster_nodes):
    """examples/k8s/gang/gang-16.yaml: the Job is valid, and its 16 pods bind together on 4 NVLink nodes."""
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("gangs need Troupe's bind barrier (TROUPE_MODE=kube); standalone kube-scheduler binds each pod")
    with open(os.path.join(EXAMPLES, "gang", "gang-16.yaml"), encoding="utf-8") as f:
        job = yaml.safe_load(f)
    kube.apply(yaml.safe_dump(job), namespace)
    # kube-controller-manager's Job controller makes the 16 pods.
    names = job_pod_names(kube, namespace, job["metadata"]["name"], job["spec"]["parallelism"])
    nodes = {name: kube.wait_pod_bound(name, namespace, timeout=90) for name in names}
    fleet = {n["name"]: n["labels"] for n in cluster_nodes}
    per_node = {}
    for name, node in nodes.items():
        gpus = kube.get("pod", name, namespace)["metadata"]["annotations"]["troupe.dev/gpus"].split(",")
        assert len(gpus) == 2, (name, gpus)
        assert fleet[node].get("troupe.dev/gpu-interconnect") in ("nvswitch", "nvlink"), (name, node)
        per_node[node] = per_node.get(node, 0) + 2
    # Packed whole: 32 GPUs on four 8-GPU nodes, not spread.
    assert sorted(per_node.values()) == [8, 8, 8, 8], per_node



QUEUE_EXAMPLES = os.path.join(EXAMPLES, "queues")


def test_queue_examples_apply_and_their_pods_join_the_queues_they_name(kube, namespace, e2e_state):
    """examples/k8s/queues/: the API server accepts the Queues (CRD validation and defaults), the
    Namespace, the pods and the gang's Job; in Kubernetes mode Troupe counts each pod in the queue
    it names (the Job controller's 4 gang members included), and the parent holds what its
    children hold."""
    install_crd(kube)
    with open(os.path.join(QUEUE_EXAMPLES, "queues.yaml"), encoding="utf-8") as f:
        queues = [d for d in yaml.safe_load_all(f) if d]
    names = sorted(q["metadata"]["name"] for q in queues)
    assert names == ["research", "research-nlp", "research-vision"]
    assert {q["spec"].get("parent") for q in queues} == {None, "research"}
    try:
        kube.apply(yaml.safe_dump_all(queues))
        got = {q["metadata"]["name"]: q for q in kube.get("queues")["items"]}
        # The CRD's defaults where the example leaves them out: preemptible true, weight 1.
        assert got["research"]["spec"]["preemptible"] is True
        assert got["research-nlp"]["spec"]["preemptible"] is False
        assert got["research-vision"]["spec"]["limit"]["products"] == {"NVIDIA-H100-80GB-HBM3": "4.5"}
        # The Namespace example's annotation, on this test's own namespace.
        with open(os.path.join(QUEUE_EXAMPLES, "namespace.yaml"), encoding="utf-8") as f:
            ns_doc = yaml.safe_load(f)
        default_queue = ns_doc["metadata"]["annotations"]["troupe.dev/default-queue"]
        assert default_queue == "research-nlp"
        kube.kubectl("annotate", "namespace", namespace, "--overwrite", f"troupe.dev/default-queue={default_queue}")
        time.sleep(2)  # Troupe's Namespace watch sees the annotation before the pods arrive
        with open(os.path.join(QUEUE_EXAMPLES, "pods.yaml"), encoding="utf-8") as f:
            pods = [d for d in yaml.safe_load_all(f) if d]
        assert sorted(p["metadata"]["name"] for p in pods) == ["nlp-train", "vision-eval", "vision-kueue"]
        kube.apply(yaml.safe_dump_all(pods), namespace)
        with open(os.path.join(QUEUE_EXAMPLES, "gang.yaml"), encoding="utf-8") as f:
            gang = yaml.safe_load(f)
        kube.apply(yaml.safe_dump(gang), namespace)
        if e2e_state.get("TROUPE_MODE") != "kube":
            return  # standalone Troupe does not watch Queues: that they apply is all there is to check
        # The Job controller's 4 pods of 2 GPUs join research-vision as one gang.
        members = job_pod_names(kube, namespace, gang["metadata"]["name"], gang["spec"]["parallelism"])
        for name in ["nlp-train", "vision-eval", "vision-kueue", *members]:
            kube.wait_pod_bound(name, namespace, timeout=60)
        want = {"research": 15.0, "research-nlp": 4.0, "research-vision": 11.0}

        def allocated():
            status = queue_status(kube)
            return {n: gpus(status.get(n, {}).get("allocated", {}).get("gpus")) for n in want}

        try:
            kube.wait_for(lambda: allocated() == want, timeout=30, desc="Queue status allocated.gpus")
        except TimeoutError:
            raise AssertionError(f"Queue status allocated.gpus is {allocated()}, want {want}") from None
    finally:
        kube.delete("pods", namespace=namespace, force=True)
        delete_queues(kube, names)
