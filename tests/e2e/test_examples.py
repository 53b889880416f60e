"""The newcomer manifests in examples/k8s/ do what examples/k8s/README.md says they do."""
import glob
import os
import time

import pytest
import yaml

from kubehelpers import ROOT, recorded_requests

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
    kube.apply(yaml.safe_dump(job), namespace)  # the API server validates the Job
    # No Job controller here: create the pods it would, from its template, with its index annotation.
    template = job["spec"]["template"]
    size = job["spec"]["parallelism"]
    names = []
    for i in range(size):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f'{job["metadata"]["name"]}-{i}',
                            "labels": {"batch.kubernetes.io/job-name": job["metadata"]["name"]},
                            "annotations": dict(template["metadata"]["annotations"],
                                                **{"batch.kubernetes.io/job-completion-index": str(i)})},
               "spec": template["spec"]}
        kube.create(yaml.safe_dump(pod), namespace)
        names.append(pod["metadata"]["name"])
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
