"""DRA on the real control plane: GPUs a DRA driver serves (docs/dra.md).

Kubernetes mode only. The module creates a DeviceClass gpu.nvidia.com with
extendedResourceName nvidia.com/gpu, two fake nodes without device-plugin GPUs whose
ResourceSlices publish 4 GPUs each, and one device-plugin node with 8 GPUs; all three are tainted
so no other test's pods land there. kube-scheduler's DynamicResources plugin allocates the claims
(no kubelet is needed for that: allocation is written in PreBind); Troupe must count the devices,
never overcommit, and bind claim-only pods. Everything is deleted afterwards.
"""
import datetime
import json
import os
import time
import uuid

import pytest

from gang_fleet import kubectl, troupe_series
from kubehelpers import KUBECONFIG, gpu_pod
from make_nodes import HERE, load_spec, node_object

DRIVER = "gpu.nvidia.com"
TAINT = "troupe.dev/e2e-dra"
PART = "troupe.dev/e2e-dra-part"
DEVICES = 4


@pytest.fixture(scope="module", autouse=True)
def kube_mode(e2e_state):
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("the e2e cluster runs Troupe standalone; start it with TROUPE_MODE=kube scripts/cluster-up.sh")
    return e2e_state


def node_gpus(url):
    """{node: (total, allocated)} from Troupe's troupe_node_gpus series."""
    out = {}
    for (name, labels), value in troupe_series(url).items():
        if name != "troupe_node_gpus":
            continue
        labels = dict(labels)
        total, allocated = out.get(labels["node"], (0, 0))
        if labels["state"] == "total":
            total = int(value)
        elif labels["state"] == "allocated":
            allocated = int(value)
        out[labels["node"]] = (total, allocated)
    return out


def wait_for(fn, timeout=30, desc="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {desc}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def fleet(e2e_state, troupe_url):
    run = uuid.uuid4().hex[:6]
    spec = load_spec(os.path.join(HERE, "nodes.yaml"))
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    dra_nodes = [f"dra-{run}-{i}" for i in range(2)]
    plugin_node = f"dra-{run}-plugin"
    nodes = []
    for name in dra_nodes + [plugin_node]:
        dra = name != plugin_node
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", PART: "dra" if dra else "plugin"}
        node = node_object(name, spec["types"]["h100"], labels, e2e_state["K8S_VERSION"], now)
        if dra:  # no device plugin: DRA serves nvidia.com/gpu there
            for key in ("capacity", "allocatable"):
                node["status"][key].pop("nvidia.com/gpu")
        else:
            labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
        node["spec"]["taints"] = [{"key": TAINT, "value": run, "effect": "NoSchedule"}]
        nodes.append(node)
    device_class = {
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": DRIVER},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}],
                 "extendedResourceName": "nvidia.com/gpu"}}
    slices = [{
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice", "metadata": {"name": f"{n}-gpus"},
        "spec": {"driver": DRIVER, "nodeName": n, "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                 "devices": [{"name": f"gpu-{i}",
                              "attributes": {"productName": {"string": "NVIDIA H200"}, "index": {"int": i}},
                              "capacity": {"memory": {"value": "141Gi"}}} for i in range(DEVICES)]}}
        for n in dra_nodes]
    items = nodes + [device_class] + slices
    kubectl(e2e_state, KUBECONFIG, "create", "-f", "-", "-o", "name",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    try:
        # Troupe knows the DRA nodes with their slices' GPUs, and the device-plugin node.
        wait_for(lambda: all(node_gpus(troupe_url).get(n, (0, 0))[0] == DEVICES for n in dra_nodes)
                 and node_gpus(troupe_url).get(plugin_node, (0, 0))[0] == 8, desc="Troupe to know the DRA nodes")
        yield {"run": run, "dra": dra_nodes, "plugin": plugin_node}
    finally:
        kubectl(e2e_state, KUBECONFIG, "delete", "resourceslices", *[f"{n}-gpus" for n in dra_nodes],
                "--wait=false", check=False)
        kubectl(e2e_state, KUBECONFIG, "delete", "deviceclass", DRIVER, "--wait=false", check=False)
        kubectl(e2e_state, KUBECONFIG, "delete", "nodes", *[n["metadata"]["name"] for n in nodes], "--wait=false",
                check=False)


@pytest.fixture
def ns(e2e_state, namespace):
    """The test's namespace; afterwards its pods and claims are deleted at once, without waiting
    for kube-controller-manager's claim controller: pods first, then the claims, whose
    delete-protection finalizer is dropped, so the devices are free for kube-scheduler too."""
    yield namespace
    kubectl(e2e_state, KUBECONFIG, "delete", "pods", "--all", "-n", namespace, "--force", "--grace-period=0",
            check=False)
    for c in claims_in(e2e_state, namespace):
        name = c["metadata"]["name"]
        kubectl(e2e_state, KUBECONFIG, "patch", "resourceclaim", name, "-n", namespace, "--type=merge",
                "-p", '{"metadata":{"finalizers":null}}', check=False)
        kubectl(e2e_state, KUBECONFIG, "delete", "resourceclaim", name, "-n", namespace, "--wait=false", check=False)


def pod(name, fleet, part, gpus=0, scheduler="troupe-scheduler", **extra):
    p = gpu_pod(name, gpus, scheduler=scheduler, node_selector={PART: part}, **extra)
    p["spec"]["tolerations"] = [{"key": TAINT, "operator": "Exists", "effect": "NoSchedule"}]
    return p


def claims_in(e2e_state, namespace):
    out = kubectl(e2e_state, KUBECONFIG, "get", "resourceclaims", "-n", namespace, "-o", "json").stdout
    return json.loads(out)["items"]


def allocated_devices(claims):
    """{node (pool): allocated device count} over the claims."""
    out = {}
    for c in claims:
        for r in ((c.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results", []):
            out[r["pool"]] = out.get(r["pool"], 0) + 1
    return out


def bound(api, namespace, names):
    pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
    return {n: pods[n] for n in names if n in pods and pods[n]["spec"].get("nodeName")}


def test_claim_only_pod_reaches_troupe_and_is_placed(api, kube, ns, e2e_state, troupe_url, scheduler_name, fleet):
    namespace = ns
    claim = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
             "metadata": {"name": "one-gpu", "namespace": namespace},
             "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}]}}}
    kubectl(e2e_state, KUBECONFIG, "create", "-f", "-", input=json.dumps(claim))
    p = pod("claim-only", fleet, "dra", scheduler=scheduler_name)
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "one-gpu"}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    api.create_pod(namespace, p)
    got = wait_for(lambda: bound(api, namespace, ["claim-only"]), desc="the claim-only pod to be bound")
    node = got["claim-only"]["spec"]["nodeName"]
    assert node in fleet["dra"]
    # Troupe bound it (its event) and did not choose the device.
    kube.wait_event(namespace, "claim-only", "GPUsAssigned", contains="DRA chooses the devices")
    assert "troupe.dev/gpus" not in (got["claim-only"]["metadata"].get("annotations") or {})
    claims = claims_in(e2e_state, namespace)
    assert allocated_devices(claims) == {node: 1}
    wait_for(lambda: node_gpus(troupe_url)[node][1] == 1, desc="Troupe to count the claim's device")
    # Only DRA nodes can serve a claim: asked to go to the device-plugin node, it is refused there.
    claim2 = dict(claim, metadata={"name": "one-more", "namespace": namespace})
    kubectl(e2e_state, KUBECONFIG, "create", "-f", "-", input=json.dumps(claim2))
    q = pod("claim-on-plugin", fleet, "plugin", scheduler=scheduler_name)
    q["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "one-more"}]
    q["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    api.create_pod(namespace, q)
    time.sleep(3)
    assert not bound(api, namespace, ["claim-on-plugin"])


def test_gpu_pods_fill_dra_nodes_without_overcommit(api, kube, ns, e2e_state, troupe_url, scheduler_name, fleet):
    minor = int((e2e_state.get("K8S_VERSION") or "v1.37.0").split(".")[1])
    if minor < 36:
        pytest.skip("kube-scheduler before 1.36 counts no nvidia.com/gpu on DRA nodes: DRAExtendedResource is "
                    "alpha and off there (on by default from 1.36); claims are placed (the other DRA tests)")
    namespace = ns
    # What the previous test held is free again (its pods and claims are gone).
    wait_for(lambda: all(node_gpus(troupe_url)[n][1] == 0 for n in fleet["dra"]), desc="the DRA nodes to be free")
    start = node_gpus(troupe_url)
    free = sum(DEVICES - start[n][1] for n in fleet["dra"])
    names = [f"two-{i}" for i in range(free // 2 + 2)]
    for n in names:
        api.create_pod(namespace, pod(n, fleet, "dra", gpus=2, scheduler=scheduler_name))
    fits = sum((DEVICES - start[n][1]) // 2 for n in fleet["dra"])
    wait_for(lambda: len(bound(api, namespace, names)) >= fits, timeout=60, desc=f"{fits} pods to be bound")
    time.sleep(3)  # the rest must stay pending
    got = bound(api, namespace, names)
    assert len(got) == fits
    for p in got.values():
        assert p["spec"]["nodeName"] in fleet["dra"]
        assert "troupe.dev/gpus" not in (p["metadata"].get("annotations") or {})
        assert (p.get("status") or {}).get("extendedResourceClaimStatus", {}).get("resourceClaimName")
    # kube-scheduler allocated a claim per bound pod; Troupe counts exactly those devices.
    devices = allocated_devices(claims_in(e2e_state, namespace))
    assert sum(devices.values()) == 2 * fits

    def agrees():
        now = node_gpus(troupe_url)
        return all(now[n][1] == start[n][1] + devices.get(n, 0) and now[n][1] <= DEVICES for n in fleet["dra"])
    wait_for(agrees, desc="Troupe's count to equal the allocated devices")
    pending = [n for n in names if n not in got]
    kube.wait_event(namespace, pending[0], "FailedScheduling", timeout=30)


def test_mixed_fleet_keeps_both_correct(api, kube, ns, e2e_state, troupe_url, scheduler_name, fleet):
    namespace = ns
    names = ["plugin-a", "plugin-b", "plugin-c"]
    for n in names:
        api.create_pod(namespace, pod(n, fleet, "plugin", gpus=4, scheduler=scheduler_name))
    wait_for(lambda: len(bound(api, namespace, names)) == 2, timeout=60, desc="two 4-GPU pods on the plugin node")
    time.sleep(2)
    got = bound(api, namespace, names)
    assert len(got) == 2
    sets = [set(p["metadata"]["annotations"]["troupe.dev/gpus"].split(",")) for p in got.values()]
    assert len(sets[0]) == len(sets[1]) == 4 and not sets[0] & sets[1]
    assert not claims_in(e2e_state, namespace)  # device-plugin GPUs need no claim
    wait_for(lambda: node_gpus(troupe_url)[fleet["plugin"]] == (8, 8), desc="Troupe to count the plugin node full")
    for n in fleet["dra"]:
        total, allocated = node_gpus(troupe_url)[n]
        assert total == DEVICES and allocated <= DEVICES


def test_a_claim_made_from_a_template_is_collected_with_its_pod_and_troupe_frees_the_device(
        api, kube, ns, e2e_state, troupe_url, scheduler_name, fleet):
    """kube-controller-manager's resourceclaim controller makes a pod's claim from its
    ResourceClaimTemplate and deletes it once the pod is gone; Troupe counts the device while the
    claim holds it and frees it when the claim goes (no finalizer taken off by hand here)."""
    namespace = ns
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                "metadata": {"name": "one-gpu", "namespace": namespace},
                "spec": {"spec": {"devices": {"requests": [
                    {"name": "gpu", "exactly": {"deviceClassName": DRIVER, "count": 1}}]}}}}
    kubectl(e2e_state, KUBECONFIG, "create", "-f", "-", input=json.dumps(template))
    wait_for(lambda: all(node_gpus(troupe_url)[n][1] == 0 for n in fleet["dra"]), desc="the DRA nodes to be free")
    p = pod("from-template", fleet, "dra", scheduler=scheduler_name)
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    p["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    api.create_pod(namespace, p)
    got = wait_for(lambda: bound(api, namespace, ["from-template"]), timeout=60,
                   desc="the pod whose claim the controller makes from its template to be bound")
    node = got["from-template"]["spec"]["nodeName"]
    claims = claims_in(e2e_state, namespace)
    assert len(claims) == 1, [c["metadata"]["name"] for c in claims]
    owners = [o["kind"] for o in claims[0]["metadata"].get("ownerReferences") or []]
    assert owners == ["Pod"], owners
    assert allocated_devices(claims) == {node: 1}
    wait_for(lambda: node_gpus(troupe_url)[node][1] == 1, desc="Troupe to count the claim's device")

    api.delete_pod(namespace, "from-template")
    wait_for(lambda: not claims_in(e2e_state, namespace), timeout=60,
             desc="kube-controller-manager to delete the pod's claim")
    wait_for(lambda: node_gpus(troupe_url)[node][1] == 0, desc="Troupe to free the claim's device")
