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


def test_examples_land_where_the_readme_says(kube, namespace, scheduler_name, cluster_nodes, troupe_recording):
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
    assert kube.wait_pod_bound("inference-half-gpu", namespace) in fleet
    kube.wait_event(namespace, "wants-h200", "FailedScheduling",
                    "troupe: GPU model NVIDIA-H100-80GB-HBM3 is not in troupe.dev/gpu-model (NVIDIA-H200)")
    assert kube.pod_node("wants-h200", namespace) is None

    # The documented limitation: the shared-GPU pod requests no nvidia.com/gpu and never reaches Troupe.
    uid = kube.get("pod", "inference-half-gpu", namespace)["metadata"]["uid"].encode()
    assert not [r.path for r in recorded_requests(since=started) if uid in r.raw]
