"""Smoke test of the local control plane (scripts/cluster-up.sh)."""
import json

import pytest

from kubehelpers import gpu_pod

pytestmark = pytest.mark.chart  # the control plane under the chart's pod too


def test_server_version_matches_build(kube, e2e_state):
    version = json.loads(kube.kubectl("get", "--raw", "/version").stdout)
    assert version["gitVersion"] == e2e_state["K8S_VERSION"]


def test_fake_gpu_nodes_registered(kube, cluster_nodes):
    nodes = {n["metadata"]["name"]: n for n in kube.get("nodes")["items"]}
    expected = {n["name"]: n for n in cluster_nodes}
    assert len(expected) >= 16
    assert set(nodes) == set(expected)
    for name, want in expected.items():
        node = nodes[name]
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == str(want["gpus"]), name
        assert node["status"]["allocatable"]["pods"], name
        for key in ("nvidia.com/gpu.product", "troupe.dev/rack", "topology.kubernetes.io/zone"):
            assert node["metadata"]["labels"][key] == want["labels"][key], (name, key)
        ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True", name
        assert not node["spec"].get("taints"), f"{name} has taints {node['spec'].get('taints')}"


def test_cpu_pod_bound_by_troupe_scheduler(kube, namespace, scheduler_name, cluster_nodes):
    kube.create(gpu_pod("smoke-cpu", gpus=0, scheduler=scheduler_name), namespace)
    node = kube.wait_pod_bound("smoke-cpu", namespace, timeout=30)
    assert node in {n["name"] for n in cluster_nodes}
    kube.delete("pod", "smoke-cpu", namespace, force=True)
    kube.wait_gone("pod", "smoke-cpu", namespace, timeout=15)
