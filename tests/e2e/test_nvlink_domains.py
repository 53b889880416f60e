"""Multi-node NVLink domains on the real control plane: the NVL72 example (examples/k8s/nvl72/).

Needs TROUPE_MODE=kube (skipped otherwise): Troupe learns the example's fake nodes from its node
watch and binds gangs itself. The module applies the 36 fake GB200 nodes of
examples/k8s/nvl72/nodes.yaml (two NVL72 racks, one nvidia.com/gpu.clique each), restarts Troupe
with the example's config (topology.preset: nvidia-nvl72), and at the end deletes the nodes and
restarts Troupe with its former arguments. The last test labels the nodes as NVIDIA Topograph
would and restarts Troupe with topology.preset: nvidia-topograph.
"""
import os

import pytest
import yaml

from kubehelpers import E2E_DIR, ROOT, gpu_pod, job_pod_names

pytestmark = pytest.mark.usefixtures("gpu_invariant")

EXAMPLE = os.path.join(ROOT, "examples", "k8s", "nvl72")
NODE_SELECTOR = "troupe.dev/example=nvl72"
CLIQUE = "nvidia.com/gpu.clique"
GB200 = {"troupe.dev/gpu-model": "NVIDIA-GB200"}


def example_nodes():
    with open(os.path.join(EXAMPLE, "nodes.yaml"), encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def delete_example_nodes(kube):
    kube.kubectl("delete", "nodes", "-l", NODE_SELECTOR, "--ignore-not-found", "--wait=true", check=False)


def restart_with_config(troupe, args, text):
    path = os.path.join(E2E_DIR, "nvlink-test-config.yaml")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    troupe.restart(env={"TROUPE_ARGS": f"{args} --config {path}".strip()})


@pytest.fixture(scope="module")
def nvl72(e2e_state, kube, troupe):
    """name -> labels of the example's nodes, applied and known to a Troupe run with the preset."""
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("NVLink-domain gangs need Troupe to watch the example's nodes and to bind gangs: "
                    "start the cluster with TROUPE_MODE=kube")
    args = os.environ.get("TROUPE_ARGS", "")
    delete_example_nodes(kube)  # a previous run that died half way
    docs = example_nodes()
    kube.apply(yaml.safe_dump_all(docs))
    with open(os.path.join(EXAMPLE, "troupe-config.yaml"), encoding="utf-8") as f:
        restart_with_config(troupe, args, f.read())
    try:
        yield {d["metadata"]["name"]: d["metadata"]["labels"] for d in docs}
    finally:
        delete_example_nodes(kube)
        troupe.restart(env={"TROUPE_ARGS": args})


def test_nodes_apply_cleanly_and_keep_their_gpus(kube, nvl72):
    got = {n["metadata"]["name"]: n for n in kube.get("nodes", selector=NODE_SELECTOR)["items"]}
    assert sorted(got) == sorted(nvl72)
    cliques = {}
    for name, node in got.items():
        assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4", name
        cliques.setdefault(node["metadata"]["labels"][CLIQUE], []).append(name)
    assert sorted(len(v) for v in cliques.values()) == [18, 18]


def test_example_gang_lands_inside_one_nvlink_domain(kube, namespace, nvl72):
    # Three trays of rack r0 are taken: r0 has 15 whole trays left, r1 all 18. The 16 members
    # fit only in r1's clique, although r0 still has 60 free GPUs of its own.
    for i in range(3):
        node = f"nvl72-r0-n{i:02d}"
        kube.create(gpu_pod(f"filler-{i}", gpus=4, annotations=GB200,
                            node_selector={"kubernetes.io/hostname": node}), namespace)
        assert kube.wait_pod_bound(f"filler-{i}", namespace, timeout=30) == node
    with open(os.path.join(EXAMPLE, "gang-16-nvlink-domain.yaml"), encoding="utf-8") as f:
        job = yaml.safe_load(f)
    kube.apply(yaml.safe_dump(job), namespace)  # kube-controller-manager's Job controller makes the pods
    names = job_pod_names(kube, namespace, job["metadata"]["name"], job["spec"]["parallelism"])
    placed = {name: kube.wait_pod_bound(name, namespace, timeout=90) for name in names}
    cliques = {nvl72[n][CLIQUE] for n in placed.values()}
    racks = {nvl72[n]["troupe.dev/rack"] for n in placed.values()}
    assert racks == {"nvl72-r1"} and len(cliques) == 1, f"members landed on {placed}"
    assert len(set(placed.values())) == 16, "one member per 4-GPU tray"
    for name in placed:
        gpus = kube.get("pod", name, namespace)["metadata"]["annotations"]["troupe.dev/gpus"]
        assert sorted(gpus.split(",")) == ["0", "1", "2", "3"], (name, gpus)


def test_gang_bigger_than_any_nvlink_domain_stays_pending_with_the_reason(kube, namespace, nvl72):
    gang = {"troupe.dev/gang": "too-big", "troupe.dev/gang-size": "19",
            "troupe.dev/topology-required": "nvlink-domain", **GB200}
    kube.create(gpu_pod("too-big-0", gpus=4, annotations=gang), namespace)
    msg = kube.wait_event(namespace, "too-big-0", "FailedScheduling", "in one nvlink-domain", timeout=30)
    assert "needs 19 pods of 4 GPUs in one nvlink-domain (troupe.dev/topology-required=nvlink-domain)" in msg, msg
    assert "the largest nvlink-domain can hold only 18 even when empty" in msg, msg
    assert ": 72 matching GPUs)" in msg, msg
    assert kube.pod_node("too-big-0", namespace) is None


def test_topograph_preset_places_by_the_accelerator_and_leaf_labels(kube, namespace, troupe, nvl72):
    """Topograph's labels on the same racks (accelerator = the rack's NVLink domain, a leaf switch
    per 9 trays, one spine and core), and Troupe run with topology.preset: nvidia-topograph."""
    for name, labels in nvl72.items():
        rack, tray = name.rsplit("-n", 1)
        leaf = f"{rack}-leaf{int(tray) // 9}"
        kube.kubectl("label", "node", name, "--overwrite",
                     f"network.topology.nvidia.com/accelerator={labels[CLIQUE]}",
                     f"network.topology.nvidia.com/leaf={leaf}",
                     "network.topology.nvidia.com/spine=spine-0", "network.topology.nvidia.com/core=core-0")
    args = os.environ.get("TROUPE_ARGS", "")
    restart_with_config(troupe, args, "topology:\n  preset: nvidia-topograph\n")
    # No leaf holds 10 trays: refused, naming the leaf level.
    leaf = {"troupe.dev/gang": "leaf-10", "troupe.dev/gang-size": "10",
            "troupe.dev/topology-required": "leaf", **GB200}
    kube.create(gpu_pod("leaf-10-0", gpus=4, annotations=leaf), namespace)
    msg = kube.wait_event(namespace, "leaf-10-0", "FailedScheduling", "in one leaf", timeout=30)
    assert "the largest leaf can hold only 9 even when empty" in msg, msg
    kube.delete("pod", "leaf-10-0", namespace, force=True, wait=True)
    # The NVLink domain by its alias, now Topograph's accelerator label: 12 members, one rack.
    gang = {"troupe.dev/gang": "acc-12", "troupe.dev/gang-size": "12",
            "troupe.dev/topology-required": "nvlink-domain", **GB200}
    kube.create([gpu_pod(f"acc-12-{i}", gpus=4, annotations=gang) for i in range(12)], namespace)
    placed = [kube.wait_pod_bound(f"acc-12-{i}", namespace, timeout=90) for i in range(12)]
    assert len({nvl72[n][CLIQUE] for n in placed}) == 1, placed
