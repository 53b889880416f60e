"""Scheduling scenarios against the real kube-scheduler with Troupe as its extender.

The cluster is the one scripts/cluster-up.sh starts (stock kube-scheduler v1.36 as
"troupe-scheduler", Troupe standalone with build/e2e/cluster.yaml, filter + prioritize
(+ preempt when TROUPE_PREEMPT_VERB=preempt, as scripts/e2e.sh sets it), nodeCacheCapable,
no managedResources: every pod of the profile reaches Troupe, ignorable: false). There is no kubelet: a pod is placed when
spec.nodeName is set.

Every test runs in its own namespace (deleted afterwards) and, before that, checks that no node
has more nvidia.com/gpu requested by bound pods than it has allocatable.

Pods labelled troupe.dev/e2e-corpus=<key> are the ones tests/e2e/update_corpus.py copies into
tests/corpus/ (the first recorded body per verb and key).
"""
import re
import ssl
import time
import urllib.request

import pytest

from kubehelpers import gpu_overcommit, gpu_pod, pod_gpu_request, recorded_requests

pytestmark = pytest.mark.usefixtures("gpu_invariant")

PRODUCT = "nvidia.com/gpu.product"
MEMORY = "nvidia.com/gpu.memory"
INTERCONNECT = "troupe.dev/gpu-interconnect"
CORPUS = "troupe.dev/e2e-corpus"
ABSENT_MODEL = "NVIDIA-H200"  # not in tests/e2e/nodes.yaml


# ---- helpers ----------------------------------------------------------------------------
def free_gpus(kube):
    """node -> allocatable nvidia.com/gpu minus what bound pods request (kube's accounting)."""
    free = {n["metadata"]["name"]: int(n["status"]["allocatable"].get("nvidia.com/gpu", "0"))
            for n in kube.get("nodes")["items"]}
    for p in kube.get("pods", all_namespaces=True)["items"]:
        node = p["spec"].get("nodeName")
        if node in free and p.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            free[node] -= pod_gpu_request(p)
    return free


def hostname_affinity(names):
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(names)}]}]}}}


def uid_of(kube, name, namespace):
    return kube.get("pod", name, namespace)["metadata"]["uid"]


def requests_for(uid, since, verb=None):
    return [r for r in recorded_requests(since=since) if r.pod_uid == uid and (verb is None or r.verb == verb)]


def wait_recorded(uid, since, verb, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        found = requests_for(uid, since, verb)
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.25)


def scheduler_healthy(e2e_state):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # kube-scheduler's self-signed serving cert
    url = f"https://127.0.0.1:{e2e_state['SCHEDULER_PORT']}/healthz"
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
            return r.status == 200
    except OSError:
        return False


def preempt_verb(scheduler_config):
    return any(e.get("preemptVerb") for e in scheduler_config.get("extenders") or [])


def pick(nodes, free, pred, count):
    """Up to `count` fleet nodes (from cluster.yaml) with pred(node) and all their GPUs free."""
    return [n["name"] for n in nodes if pred(n) and free.get(n["name"]) == int(n["gpus"])][:count]


@pytest.fixture
def started():
    """time.time() at the start of the test, with a margin for file-time granularity."""
    return time.time() - 2


@pytest.fixture
def priority_class(kube, namespace):
    name = f"{namespace}-high"[:63]
    kube.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                 "metadata": {"name": name, "labels": {"troupe.dev/e2e": "true"}},
                 "value": 1000, "preemptionPolicy": "PreemptLowerPriority",
                 "description": "tests/e2e/test_scheduling.py"})
    yield name
    kube.delete("priorityclass", name)


# ---- 1. a GPU pod binds to a node that can host it ----------------------------------------
def test_gpu_pods_bind_to_nodes_that_can_host_them(kube, namespace, scheduler_name, cluster_nodes,
                                                   troupe_recording, started):
    fleet = {n["name"]: n for n in cluster_nodes}
    products = {n["labels"][PRODUCT] for n in cluster_nodes}
    assert {"NVIDIA-L40S", "NVIDIA-A100-SXM4-80GB", "NVIDIA-A10"} <= products, products
    pods = {
        # name: (annotations, GPUs, check on the chosen node's facts, what the check means)
        # A10 is allowed too, but A10 nodes have only 4 GPUs: only the A100 nodes can host 8.
        "a100-or-a10-8gpu": ({"troupe.dev/gpu-model": "NVIDIA-A100-SXM4-80GB,nvidia-a10"}, 8,
                             lambda n: n["labels"][PRODUCT] == "NVIDIA-A100-SXM4-80GB", "an A100 node"),
        "any-1gpu": ({}, 1, lambda n: True, "any GPU node"),
        "mem-70gi-2gpu": ({"troupe.dev/gpu-memory": "70Gi"}, 2,
                          lambda n: int(n["labels"][MEMORY]) >= 70 * 1024, "GPU memory >= 70Gi"),
        "l40s-4gpu": ({"troupe.dev/gpu-model": "NVIDIA-L40S"}, 4,
                      lambda n: n["labels"][PRODUCT] == "NVIDIA-L40S", "an L40S node"),
    }
    # The 8-GPU pod first, so the small ones cannot take both A100 nodes before it.
    for name, (annotations, gpus, _, _) in pods.items():
        labels = {CORPUS: "gpu-memory"} if name == "mem-70gi-2gpu" else None
        kube.create(gpu_pod(name, gpus=gpus, scheduler=scheduler_name, annotations=annotations,
                            labels=labels), namespace)
        if gpus == 8:
            kube.wait_pod_bound(name, namespace, timeout=30)
    for name, (_, gpus, ok, meaning) in pods.items():
        node = kube.wait_pod_bound(name, namespace, timeout=30)
        assert node in fleet, f"{name} bound to {node}, which is not a fleet node"
        assert int(fleet[node]["gpus"]) >= gpus, f"{name} ({gpus} GPUs) bound to {node} with {fleet[node]['gpus']}"
        assert ok(fleet[node]), f"{name} bound to {node} ({fleet[node]['labels'][PRODUCT]}); expected {meaning}"
        # Troupe was asked about this very pod: it was in the loop, not bypassed.
        uid = uid_of(kube, name, namespace)
        filters = requests_for(uid, started, "filter")
        assert filters, f"no filter request for {name} (uid {uid}) recorded in {troupe_recording}"
        assert node in filters[-1].body["NodeNames"], f"{node} was not among the candidates Troupe saw"
    assert not gpu_overcommit(kube)


# ---- 2. 8 GPUs with gpu-topology: nvlink land only on NVSwitch nodes ----------------------
def test_nvlink_8gpu_pods_land_only_on_nvswitch_nodes(kube, namespace, scheduler_name, cluster_nodes,
                                                      troupe_recording, started):
    free = free_gpus(kube)
    nvswitch = pick(cluster_nodes, free, lambda n: n["labels"].get(INTERCONNECT) == "nvswitch"
                    and int(n["gpus"]) == 8, 3)
    pcie8 = pick(cluster_nodes, free, lambda n: n["labels"].get(INTERCONNECT) == "pcie"
                 and int(n["gpus"]) >= 8, 2)
    if not nvswitch or not pcie8:
        pytest.fail(f"needs a free 8-GPU NVSwitch node and a free 8-GPU PCIe node; found {nvswitch}, {pcie8} "
                    "(is something else using the e2e cluster?)")
    # Every pod may go to these nodes only, so the test does not depend on the fleet's size:
    # len(nvswitch) NVSwitch nodes and len(pcie8) PCIe nodes, all with 8 free GPUs.
    allowed = nvswitch + pcie8
    nvlink = {"troupe.dev/gpu-topology": "nvlink"}
    names = [f"nvlink-8gpu-{i}" for i in range(len(nvswitch))]
    for i, name in enumerate(names):
        kube.create(gpu_pod(name, gpus=8, scheduler=scheduler_name, annotations=nvlink,
                            labels={CORPUS: "nvlink"} if i == 0 else None,
                            affinity=hostname_affinity(allowed)), namespace)
    placed = {name: kube.wait_pod_bound(name, namespace, timeout=30) for name in names}
    assert sorted(placed.values()) == sorted(nvswitch), \
        f"nvlink pods must fill the NVSwitch nodes {nvswitch} one each, got {placed}"

    # The NVSwitch nodes are full now; the PCIe nodes have 8 free GPUs but no NVLink domain.
    kube.create(gpu_pod("nvlink-8gpu-extra", gpus=8, scheduler=scheduler_name, annotations=nvlink,
                        affinity=hostname_affinity(allowed)), namespace)
    msg = kube.wait_event(namespace, "nvlink-8gpu-extra", "FailedScheduling",
                          "troupe: no NVLink domain of 8 GPUs on this node (troupe.dev/gpu-topology=nvlink)")
    assert f"{len(pcie8)} troupe: no NVLink domain of 8 GPUs" in msg, msg
    assert f"{len(nvswitch)} Insufficient nvidia.com/gpu" in msg, msg
    time.sleep(2)
    assert kube.pod_node("nvlink-8gpu-extra", namespace) is None

    # Control: the same pod without the nvlink requirement fits on those PCIe nodes, so it
    # is Troupe's topology filter, not a lack of GPUs, that kept the nvlink pod off them.
    kube.create(gpu_pod("pcie-ok-8gpu", gpus=8, scheduler=scheduler_name,
                        annotations={"troupe.dev/gpu-topology": "preferred"},
                        affinity=hostname_affinity(allowed)), namespace)
    assert kube.wait_pod_bound("pcie-ok-8gpu", namespace, timeout=30) in pcie8
    assert kube.pod_node("nvlink-8gpu-extra", namespace) is None
    assert not gpu_overcommit(kube)


# ---- 3. a model mismatch: Pending, with Troupe's reason in the event -----------------------
def test_model_mismatch_stays_pending_with_troupes_reason(kube, namespace, scheduler_name, cluster_nodes):
    products = sorted({n["labels"][PRODUCT] for n in cluster_nodes})
    assert ABSENT_MODEL not in products
    kube.create(gpu_pod("wants-h200", gpus=1, scheduler=scheduler_name,
                        annotations={"troupe.dev/gpu-model": ABSENT_MODEL},
                        labels={CORPUS: "model-mismatch"}), namespace)
    msg = kube.wait_event(namespace, "wants-h200", "FailedScheduling",
                          f"is not in troupe.dev/gpu-model ({ABSENT_MODEL})")
    free = free_gpus(kube)
    for p in products:
        if any(n["labels"][PRODUCT] == p and free[n["name"]] >= 1 for n in cluster_nodes):
            assert f"troupe: GPU model {p} is not in troupe.dev/gpu-model ({ABSENT_MODEL})" in msg, msg
    # Troupe puts these nodes in FailedAndUnresolvableNodes, so preemption does not even try them.
    rejected = sum(int(c) for c in re.findall(r"(\d+) troupe: GPU model", msg))
    m = re.search(r"(\d+) Preemption is not helpful for scheduling", msg)
    assert m and int(m.group(1)) == rejected, f"{rejected} nodes rejected by Troupe; preemption said: {msg}"
    cond = kube.pod_condition("wants-h200", namespace)
    assert cond and cond["status"] == "False" and cond["reason"] == "Unschedulable", cond
    assert f"is not in troupe.dev/gpu-model ({ABSENT_MODEL})" in cond["message"]
    time.sleep(2)
    assert kube.pod_node("wants-h200", namespace) is None


# ---- 4. a pod without GPUs reaches Troupe (no managedResources) and passes at once ---------
def test_pod_without_gpus_reaches_troupe_and_passes(kube, namespace, scheduler_name, troupe_recording, started):
    """No managedResources (so claim-only DRA pods reach Troupe, README.md DRA): a CPU-only pod
    of the profile is filtered by Troupe too, which passes it everywhere."""
    kube.create([gpu_pod("cpu-only", gpus=0, scheduler=scheduler_name),
                 gpu_pod("gpu-control", gpus=1, scheduler=scheduler_name)], namespace)
    assert kube.wait_pod_bound("cpu-only", namespace, timeout=30)
    assert kube.wait_pod_bound("gpu-control", namespace, timeout=30)
    cpu_uid, gpu_uid = uid_of(kube, "cpu-only", namespace), uid_of(kube, "gpu-control", namespace)
    assert requests_for(gpu_uid, started, "filter"), f"no filter request for gpu-control in {troupe_recording}"
    assert requests_for(cpu_uid, started, "filter"), f"the CPU-only pod did not reach Troupe: {troupe_recording}"


# ---- 5. Troupe stopped: GPU pods wait, nothing crashes; back: they schedule ----------------
def test_troupe_down_gpu_pods_wait_then_schedule_when_it_is_back(kube, namespace, scheduler_name, troupe,
                                                                 e2e_state):
    troupe.stop()
    try:
        assert not troupe.is_running()
        kube.create([gpu_pod("while-down-gpu", gpus=1, scheduler=scheduler_name),
                     gpu_pod("while-down-cpu", gpus=0, scheduler=scheduler_name)], namespace)
        # Every pod of the profile reaches Troupe (no managedResources, ignorable: false): a
        # CPU-only one waits for it too.
        url = f"127.0.0.1:{troupe.port}/filter"
        msg = kube.wait_event(namespace, "while-down-gpu", "FailedScheduling", url)
        assert "connection refused" in msg, msg
        cond = kube.wait_for(lambda: (c := kube.pod_condition("while-down-gpu", namespace))
                             and c.get("reason") == "SchedulerError" and c, 15, desc="SchedulerError condition")
        assert cond["status"] == "False" and url in cond["message"], cond
        time.sleep(3)  # a few retries with backoff: still waiting, scheduler still alive
        assert kube.pod_node("while-down-gpu", namespace) is None
        assert kube.pod_node("while-down-cpu", namespace) is None
        assert scheduler_healthy(e2e_state), "kube-scheduler is not healthy while Troupe is down"
    finally:
        troupe.start()
    assert troupe.is_running()
    t0 = time.monotonic()
    node = kube.wait_pod_bound("while-down-gpu", namespace, timeout=60)
    print(f"\nwhile-down-gpu bound to {node} {time.monotonic() - t0:.1f} s after Troupe came back")
    assert kube.wait_pod_bound("while-down-cpu", namespace, timeout=60)
    assert scheduler_healthy(e2e_state)


# ---- 6. preemption: the real scheduler asks Troupe, Troupe agrees, the victim goes ----------
def test_preemption_evicts_a_lower_priority_pod(kube, namespace, scheduler_name, cluster_nodes,
                                                scheduler_config, priority_class, troupe_recording, started):
    target = pick(cluster_nodes, free_gpus(kube), lambda n: int(n["gpus"]) == 8
                  and n["labels"].get(INTERCONNECT) == "nvswitch", 1)
    assert target, "needs a free 8-GPU NVSwitch node"
    target = target[0]
    pin = {"kubernetes.io/hostname": target}
    kube.create(gpu_pod("low-8gpu", gpus=8, scheduler=scheduler_name, node_selector=pin), namespace)
    assert kube.wait_pod_bound("low-8gpu", namespace) == target
    low_uid = uid_of(kube, "low-8gpu", namespace)
    kube.create(gpu_pod("high-4gpu", gpus=4, scheduler=scheduler_name, node_selector=pin,
                        labels={CORPUS: "preemptor"}, priorityClassName=priority_class), namespace)
    assert kube.wait_pod_bound("high-4gpu", namespace, timeout=60) == target
    low = kube.get("pod", "low-8gpu", namespace, missing_ok=True)
    assert low is None or low["metadata"].get("deletionTimestamp"), "the victim was not evicted"
    kube.wait_event(namespace, "low-8gpu", "Preempted", "Preempted by pod")
    if not preempt_verb(scheduler_config):
        print("\nkube-scheduler has no preemptVerb for Troupe (TROUPE_PREEMPT_VERB unset): "
              "preemption checked without Troupe's part")
        return
    high_uid = uid_of(kube, "high-4gpu", namespace)
    preempts = wait_recorded(high_uid, started, "preempt")
    assert preempts, f"no preempt request for high-4gpu recorded in {troupe_recording}"
    body = preempts[0].body
    assert body["NodeNameToVictims"] is None  # nodeCacheCapable: UIDs only
    victims = body["NodeNameToMetaVictims"]
    assert [p["UID"] for p in victims[target]["Pods"]] == [low_uid], victims


# ---- 7. preemption that cannot help: Troupe vetoes it, the victim stays ---------------------
def test_troupe_vetoes_preemption_for_a_pod_the_node_cannot_host(kube, namespace, scheduler_name, cluster_nodes,
                                                                 scheduler_config, priority_class,
                                                                 troupe_recording, started):
    if not preempt_verb(scheduler_config):
        pytest.skip("kube-scheduler has no preemptVerb for Troupe (run with TROUPE_PREEMPT_VERB=preempt, "
                    "as scripts/e2e.sh does)")
    target = pick(cluster_nodes, free_gpus(kube), lambda n: int(n["gpus"]) == 8
                  and n["labels"].get(INTERCONNECT) == "nvswitch", 1)
    assert target, "needs a free 8-GPU NVSwitch node"
    target = target[0]
    pin = {"kubernetes.io/hostname": target}
    kube.create(gpu_pod("victim-8gpu", gpus=8, scheduler=scheduler_name, node_selector=pin), namespace)
    assert kube.wait_pod_bound("victim-8gpu", namespace) == target
    victim_uid = uid_of(kube, "victim-8gpu", namespace)
    # Evicting the victim would free the GPUs, but they are the wrong model for this pod.
    kube.create(gpu_pod("high-wrong-model", gpus=4, scheduler=scheduler_name, node_selector=pin,
                        annotations={"troupe.dev/gpu-model": ABSENT_MODEL}, labels={CORPUS: "veto"},
                        priorityClassName=priority_class), namespace)
    high_uid = uid_of(kube, "high-wrong-model", namespace)
    preempts = wait_recorded(high_uid, started, "preempt", timeout=30)
    assert preempts, f"no preempt request for high-wrong-model recorded in {troupe_recording}"
    assert [p["UID"] for p in preempts[0].body["NodeNameToMetaVictims"][target]["Pods"]] == [victim_uid]
    msg = kube.wait_event(namespace, "high-wrong-model", "FailedScheduling", "preemption:")
    assert "no candidate node for preemption" in msg, msg
    time.sleep(2)
    victim = kube.get("pod", "victim-8gpu", namespace)
    assert not victim["metadata"].get("deletionTimestamp"), "Troupe's veto was ignored: the victim is being deleted"
    assert victim["spec"]["nodeName"] == target
    assert kube.pod_node("high-wrong-model", namespace) is None
    assert not [e for e in kube.events(namespace, "victim-8gpu") if e.get("reason") == "Preempted"]
