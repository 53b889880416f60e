"""Troupe watching the real API server and binding pods itself (TROUPE_MODE=kube).

Start the cluster in that mode first:
    TROUPE_MODE=kube scripts/cluster-up.sh     # Troupe --kubeconfig build/e2e/troupe-kubeconfig, bindVerb: bind
    python3 -m pytest tests/e2e/test_kube_integration.py -v -s
The module is skipped (with a message) on a cluster started in the default standalone mode.

After every scenario the GPU index invariant (tests/e2e/gpu_invariant.py) is checked on all
pods in the cluster, and Troupe's own model (its /metrics) must agree with what the API
server says: no allocation lost, none counted twice.

Measurements (bind latency, time to ready after a restart) are printed and written to
build/e2e/kube-integration.json.
"""
import json
import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import pytest

from gpu_invariant import check_gpu_invariant, gpus_held, holds_gpus
from kubeapi import kubeconfig_ca_pem, temp_dir
from kubehelpers import E2E_DIR, KUBECONFIG, ROOT, SCRIPTS, gpu_pod

RESULTS = os.path.join(E2E_DIR, "kube-integration.json")
ASSIGNED = "troupe.dev/gpus"


# ---- fixtures ---------------------------------------------------------------------------
@pytest.fixture(scope="module", autouse=True)
def kube_mode(e2e_state):
    if e2e_state.get("TROUPE_MODE") != "kube":
        pytest.skip("the e2e cluster runs Troupe standalone; start it with TROUPE_MODE=kube scripts/cluster-up.sh")
    return e2e_state


@pytest.fixture(scope="module")
def results():
    data = {}
    yield data
    old = {}
    if os.path.exists(RESULTS):
        try:
            with open(RESULTS, encoding="utf-8") as f:
                old = json.load(f)
        except ValueError:
            old = {}
    old.update(data)
    with open(RESULTS, "w", encoding="utf-8") as f:
        json.dump(old, f, indent=2, sort_keys=True)


@pytest.fixture(autouse=True)
def invariant_after(api, troupe_url, troupe, scheduler_name):
    yield
    if not troupe.is_running():
        troupe.start()
    wait_ready(troupe_url, 60)
    summary = check_gpu_invariant(api.list_pods(), api.list_nodes(), require_annotation_for=scheduler_name)
    wait_model_matches_api(api, troupe_url)
    print(f"\n[invariant] {summary['pods']} GPU pods bound, {summary['annotated']} with {ASSIGNED}")


# ---- helpers ----------------------------------------------------------------------------
def http_get(url, timeout=3):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
    except (urllib.error.URLError, ConnectionError, OSError):
        return 0, ""


def http_post(url, body, timeout=30, context=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=context) as r:
            return r.status, json.loads(r.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_ready(url, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if http_get(url + "/readyz")[0] == 200:
            return
        time.sleep(0.05)
    raise TimeoutError(f"Troupe at {url} not ready after {timeout}s")


def metrics(url):
    status, text = http_get(url + "/metrics")
    assert status == 200, f"/metrics answered {status}"
    out = {"free": 0, "pods": None, "nodes": 0, "bind_sum": 0.0, "bind_count": 0}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r'^(\w+)(\{[^}]*\})?\s+(\S+)$', line)
        if not m:
            continue
        name, labels, value = m.group(1), m.group(2) or "", float(m.group(3))
        if name == "troupe_gpus" and 'state="free"' in labels:
            out["free"] += int(value)
        elif name == "troupe_gpu_pods":
            out["pods"] = int(value)
        elif name == "troupe_nodes":
            out["nodes"] += int(value)
        elif name == "troupe_extender_request_duration_seconds_sum" and 'verb="bind"' in labels:
            out["bind_sum"] += value
        elif name == "troupe_extender_request_duration_seconds_count" and 'verb="bind"' in labels:
            out["bind_count"] += int(value)
    return out


def truth(api):
    """What Troupe's model must show, from the API: GPU pods bound, and whole GPUs free."""
    nodes = {n["metadata"]["name"]: int((n["status"].get("allocatable") or {}).get("nvidia.com/gpu", "0"))
             for n in api.list_nodes()}
    used = {n: set() for n in nodes}
    unknown = {n: 0 for n in nodes}
    pods = 0
    for p in api.list_pods():
        if not holds_gpus(p):
            continue
        pods += 1
        node = p["spec"]["nodeName"]
        text = (p["metadata"].get("annotations") or {}).get(ASSIGNED)
        if text:
            used[node].update(int(x) for x in text.split(","))
        else:
            unknown[node] += gpus_held(p)
    free = sum(max(0, nodes[n] - len(used[n]) - unknown[n]) for n in nodes if nodes[n] > 0)
    return {"pods": pods, "free": free}


def wait_model_matches_api(api, url, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        want, got = truth(api), metrics(url)
        if got["pods"] == want["pods"] and got["free"] == want["free"]:
            return want
        if time.monotonic() > deadline:
            raise AssertionError(f"Troupe's model differs from the API server: Troupe {got}, API {want}")
        time.sleep(0.2)


def pods_spec(prefix, sizes, scheduler, **kw):
    return [gpu_pod(f"{prefix}-{i:03d}", gpus=g, scheduler=scheduler, **kw) for i, g in enumerate(sizes)]


def stream(api, namespace, manifests, interval, at=None):
    """Creates the pods one by one from a thread (retrying while the API server is down);
    at = {index: callable} runs a disruption after that many pods were created."""
    errors = []

    def run():
        try:
            for i, m in enumerate(manifests):
                if at and i in at:
                    at[i]()
                api.create_pod(namespace, m)
                time.sleep(interval)
        except Exception as e:  # reported by the test
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, errors


def wait_all_bound(api, namespace, names, timeout):
    deadline = time.monotonic() + timeout
    while True:
        pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
        missing = [n for n in names if n not in pods or not pods[n]["spec"].get("nodeName")]
        if not missing:
            return pods
        if time.monotonic() > deadline:
            raise AssertionError(f"{len(missing)} of {len(names)} pods not bound after {timeout}s: {missing[:10]}")
        time.sleep(0.25)


def check_assignments(pods):
    for name, p in pods.items():
        text = (p["metadata"].get("annotations") or {}).get(ASSIGNED)
        assert text, f"{name} bound to {p['spec']['nodeName']} without {ASSIGNED}"
        assert len(text.split(",")) == gpus_held(p), f"{name}: {ASSIGNED}={text} for {gpus_held(p)} GPUs"


def troupe_pid():
    with open(os.path.join(E2E_DIR, "pids", "troupe.pid"), encoding="utf-8") as f:
        return int(f.read().split()[0])


def troupe_exe():
    with open(os.path.join(E2E_DIR, "pids", "troupe.pid"), encoding="utf-8") as f:
        return f.read().split()[1]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class SideTroupe:
    """A second Troupe (not kube-scheduler's) on its own port, for readiness and RBAC checks."""

    def __init__(self, args, env=None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = os.path.join(E2E_DIR, "logs", f"troupe-side-{self.port}.log")
        self.log = open(self.log_path, "w", encoding="utf-8")
        self.proc = subprocess.Popen([troupe_exe(), "serve", "--listen", f"127.0.0.1:{self.port}", *args],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ, **(env or {})))
        deadline = time.monotonic() + 15
        while http_get(self.url + "/healthz")[0] != 200:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"side Troupe did not start: {open(self.log_path).read()[-2000:]}")
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def logs(self):
        with open(self.log_path, encoding="utf-8") as f:
            return f.read()


def bind_through(side, api, namespace, name, nodes):
    """What kube-scheduler does, by hand: filter, prioritize, bind to the best node."""
    pod = api.get_pod(namespace, name)
    status, res = http_post(side.url + "/filter", {"Pod": pod, "Nodes": None, "NodeNames": nodes})
    assert status == 200 and not res["Error"], res
    assert res["NodeNames"], res
    status, scores = http_post(side.url + "/prioritize", {"Pod": pod, "Nodes": None, "NodeNames": res["NodeNames"]})
    assert status == 200, scores
    best = max(scores, key=lambda s: s["Score"])["Host"]
    status, res = http_post(side.url + "/bind", {"PodName": name, "PodNamespace": namespace,
                                                 "PodUID": pod["metadata"]["uid"], "Node": best})
    assert status == 200 and res["Error"] == "", res
    return best


# ---- scenarios --------------------------------------------------------------------------
def test_readyz_only_after_first_sync(api, results):
    # An API server that cannot be reached: alive, never ready, and every verb says why.
    bad = os.path.join(temp_dir("troupe-kc-"), "kubeconfig")
    with open(KUBECONFIG, encoding="utf-8") as f:
        text = f.read()
    with open(bad, "w", encoding="utf-8") as f:
        f.write(re.sub(r"server: https://127\.0\.0\.1:\d+", f"server: https://127.0.0.1:{free_port()}", text))
    side = SideTroupe(["--kubeconfig", bad])
    try:
        assert http_get(side.url + "/readyz")[0] == 503
        time.sleep(1.0)
        assert http_get(side.url + "/readyz")[0] == 503
        status, res = http_post(side.url + "/filter",
                                {"Pod": gpu_pod("x", gpus=1), "Nodes": None, "NodeNames": ["h100-0"]})
        assert status == 200 and "not ready" in res["Error"], res
        status, res = http_post(side.url + "/bind", {"PodName": "x", "PodNamespace": "default",
                                                     "PodUID": "u", "Node": "h100-0"})
        assert status == 200 and "not ready" in res["Error"], res
    finally:
        side.stop()
    assert "cannot reach the API server" in side.logs()

    # The real one: ready once nodes and pods are listed.
    t0 = time.monotonic()
    side = SideTroupe(["--kubeconfig", KUBECONFIG])
    try:
        wait_ready(side.url, 30)
        ready_s = time.monotonic() - t0
        m = metrics(side.url)
        assert m["nodes"] == len(api.list_nodes())
        assert m["pods"] == truth(api)["pods"]
    finally:
        side.stop()
    results["cold_start_to_ready_s"] = round(ready_s, 3)
    print(f"\n[measure] a fresh Troupe is ready {ready_s:.2f} s after start (process start included)")


def test_stream_of_gpu_pods_all_bound_with_valid_indices(api, namespace, scheduler_name, troupe_url, results):
    before = metrics(troupe_url)
    sizes = [1, 2, 1, 4, 2, 1, 1, 4] * 5  # 40 pods, 80 GPUs of 112
    manifests = pods_spec("s", sizes, scheduler_name)
    t0 = time.monotonic()
    t, errors = stream(api, namespace, manifests, interval=0.05)
    t.join()
    assert not errors, errors
    pods = wait_all_bound(api, namespace, [m["metadata"]["name"] for m in manifests], timeout=120)
    elapsed = time.monotonic() - t0
    check_assignments(pods)
    check_gpu_invariant(api.list_pods(), api.list_nodes(), require_annotation_for=scheduler_name)
    after = metrics(troupe_url)
    binds = after["bind_count"] - before["bind_count"]
    mean_ms = 1000 * (after["bind_sum"] - before["bind_sum"]) / max(1, binds)
    results["stream_40_pods_s"] = round(elapsed, 2)
    results["bind_mean_ms"] = round(mean_ms, 2)
    print(f"\n[measure] 40 pods bound in {elapsed:.1f} s; {binds} binds, mean bind latency {mean_ms:.1f} ms "
          "(GET pod + POST binding with the annotation, server side)")
    # Users see the decision on the pod.
    deadline = time.monotonic() + 15
    while True:
        reasons = [e for e in api.events(namespace) if e.get("reason") == "GPUsAssigned"]
        if len(reasons) >= len(manifests) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert reasons, "no GPUsAssigned events"
    e = reasons[0]
    assert e["source"]["component"] == "troupe"
    assert re.search(r"GPUs? [\d,]+ on node", e["message"]), e["message"]


def test_troupe_killed_mid_stream_rebuilds_from_the_api(api, namespace, scheduler_name, troupe, troupe_url, results):
    sizes = [1, 2, 4, 1, 2, 1] * 5
    manifests = pods_spec("k", sizes, scheduler_name)
    timing = {}

    def kill_and_restart():
        os.kill(troupe_pid(), signal.SIGKILL)
        time.sleep(1.0)  # a stretch of pods arrives with Troupe down
        t0 = time.monotonic()
        troupe.start()  # returns once /readyz answers 200
        timing["restart_to_ready_s"] = time.monotonic() - t0

    t, errors = stream(api, namespace, manifests, interval=0.1, at={10: kill_and_restart})
    t.join()
    assert not errors, errors
    pods = wait_all_bound(api, namespace, [m["metadata"]["name"] for m in manifests], timeout=180)
    check_assignments(pods)
    check_gpu_invariant(api.list_pods(), api.list_nodes(), require_annotation_for=scheduler_name)
    wait_model_matches_api(api, troupe_url)
    results["troupe_restart_to_ready_s"] = round(timing["restart_to_ready_s"], 3)
    with open(os.path.join(E2E_DIR, "logs", "troupe.log"), encoding="utf-8") as f:
        last_start = f.read().rsplit("===== ", 1)[-1]
    synced = [json.loads(line) for line in last_start.splitlines() if "cluster state synced" in line]
    assert synced, "the restarted Troupe logged no first sync"
    print(f"\n[measure] Troupe restarted (kill -9) and ready again in {timing['restart_to_ready_s']:.2f} s "
          f"(troupe-restart.sh start: process start + list of nodes and pods); it rebuilt "
          f"{synced[0]['gpu_pods']} GPU pods from the API")


@pytest.mark.parametrize("how", ["term", "kill"])
def test_apiserver_restart_mid_stream(api, namespace, scheduler_name, troupe_url, how, results):
    sizes = [1, 2, 1, 4, 1, 2] * 5
    manifests = pods_spec("a" + how[0], sizes, scheduler_name)
    timing = {}

    def restart_apiserver():
        t0 = time.monotonic()
        args = [os.path.join(SCRIPTS, "apiserver-restart.sh")] + (["--kill"] if how == "kill" else [])
        p = subprocess.run(args, capture_output=True, text=True, timeout=180)
        assert p.returncode == 0, p.stdout + p.stderr
        timing["apiserver_down_s"] = time.monotonic() - t0

    t, errors = stream(api, namespace, manifests, interval=0.1, at={10: restart_apiserver})
    t.join()
    assert not errors, errors
    pods = wait_all_bound(api, namespace, [m["metadata"]["name"] for m in manifests], timeout=180)
    check_assignments(pods)
    check_gpu_invariant(api.list_pods(), api.list_nodes(), require_annotation_for=scheduler_name)
    assert http_get(troupe_url + "/readyz")[0] == 200
    wait_model_matches_api(api, troupe_url)
    # The watches are live again: deletions after the restart reach Troupe.
    for name in list(pods)[:6]:
        api.delete_pod(namespace, name)
    wait_model_matches_api(api, troupe_url)
    results[f"apiserver_restart_{how}_s"] = round(timing["apiserver_down_s"], 2)
    print(f"\n[measure] kube-apiserver restart ({how}) took {timing['apiserver_down_s']:.1f} s; "
          f"all {len(manifests)} pods bound once, Troupe's model matches the API")


def test_deleting_pods_frees_their_gpus(api, namespace, scheduler_name, troupe_url):
    node = "a10-0"  # 4 GPUs
    pin = {"kubernetes.io/hostname": node}
    api.create_pod(namespace, gpu_pod("big", gpus=4, scheduler=scheduler_name, node_selector=pin))
    big = wait_all_bound(api, namespace, ["big"], 60)["big"]
    held = set(big["metadata"]["annotations"][ASSIGNED].split(","))
    assert held == {"0", "1", "2", "3"}
    api.create_pod(namespace, gpu_pod("next", gpus=2, scheduler=scheduler_name, node_selector=pin))
    time.sleep(2)
    assert not api.get_pod(namespace, "next")["spec"].get("nodeName"), "bound although the node is full"
    api.delete_pod(namespace, "big")
    nxt = wait_all_bound(api, namespace, ["next"], 60)["next"]
    assert nxt["spec"]["nodeName"] == node
    assert set(nxt["metadata"]["annotations"][ASSIGNED].split(",")) <= held


def test_pods_bound_by_others_hold_gpus_at_unknown_indices(api, namespace, scheduler_name, troupe_url):
    node = "a10-1"  # 4 GPUs
    free0 = wait_model_matches_api(api, troupe_url)["free"]
    other = gpu_pod("theirs", gpus=3, scheduler="someone-else")
    other["spec"]["nodeName"] = node  # bound without Troupe, without an annotation
    api.create_pod(namespace, other)
    assert wait_model_matches_api(api, troupe_url)["free"] == free0 - 3
    pin = {"kubernetes.io/hostname": node}
    api.create_pod(namespace, gpu_pod("ours", gpus=1, scheduler=scheduler_name, node_selector=pin))
    ours = wait_all_bound(api, namespace, ["ours"], 60)["ours"]
    assert len(ours["metadata"]["annotations"][ASSIGNED].split(",")) == 1
    api.delete_pod(namespace, "theirs")
    assert wait_model_matches_api(api, troupe_url)["free"] == free0 - 1


def test_cpu_of_pods_bound_by_others_counts_on_their_gpu_node(api, namespace):
    """A CPU-only pod another scheduler bound to a GPU node holds its CPU in Troupe's model, also
    in a Troupe started after it (as after a restart): fragmentation and the balance term read the
    CPU actually left beside the GPUs."""
    node = "a10-2"  # 4 GPUs, 64 CPUs
    theirs = gpu_pod("their-cpu", scheduler="someone-else", cpu="56")
    theirs["spec"]["nodeName"] = node
    api.create_pod(namespace, theirs)
    side = SideTroupe(["--kubeconfig", KUBECONFIG])
    try:
        wait_ready(side.url, 30)

        def filter_with_cpu(name, cpu):
            probe = gpu_pod(name, gpus=1, cpu=cpu)
            probe["metadata"].update({"namespace": namespace, "uid": f"uid-{name}"})
            status, res = http_post(side.url + "/filter", {"Pod": probe, "Nodes": None, "NodeNames": [node]})
            assert status == 200 and not res["Error"], res
            return res

        # At most 8 CPUs are left beside the node's GPUs: a GPU pod asking 16 does not fit.
        res = filter_with_cpu("probe-big", "16")
        assert not res["NodeNames"], res
        assert "insufficient free CPU" in res["FailedNodes"][node], res
        assert filter_with_cpu("probe-small", "1")["NodeNames"] == [node]
        # Gone from the API, gone from the model.
        api.delete_pod(namespace, "their-cpu")
        deadline = time.monotonic() + 30
        while not filter_with_cpu("probe-big", "16")["NodeNames"]:
            assert time.monotonic() < deadline, "the deleted pod's CPU is still counted"
            time.sleep(0.2)
    finally:
        side.stop()


def test_bind_is_no_confused_deputy(api, namespace, scheduler_name, verbs):
    """Security review K2: whoever reaches the verb port cannot make Troupe bind a pod that is not
    its profile's, or one it did not filter onto that node. Each is refused with a named error
    and stays unbound."""
    def bind(name, node):
        uid = api.get_pod(namespace, name)["metadata"]["uid"]
        url, context = verbs
        status, res = http_post(url + "/bind", {"PodName": name, "PodNamespace": namespace, "PodUID": uid,
                                                "Node": node}, context=context)
        assert status == 200, res
        return res["Error"]

    # A default-scheduler pod (no default scheduler runs here: it stays pending), no GPUs, with a
    # nodeSelector for another node.
    api.create_pod(namespace, gpu_pod("victim", gpus=0, scheduler="default-scheduler",
                                      node_selector={"kubernetes.io/hostname": "a10-1"}))
    err = bind("victim", "h100-0")
    assert 'spec.schedulerName "default-scheduler"' in err and scheduler_name in err, err
    # Troupe's own profile, but a pod no node passes (its nodeSelector names no node): kube-scheduler
    # never sends it to Troupe's filter, so Troupe has no record of it on any node.
    api.create_pod(namespace, gpu_pod("stray", gpus=1, scheduler=scheduler_name,
                                      node_selector={"kubernetes.io/hostname": "no-such-node"}))
    time.sleep(1)
    err = bind("stray", "h100-0")
    assert "no record of pod" in err, err
    time.sleep(1)
    for name in ("victim", "stray"):
        assert not api.get_pod(namespace, name)["spec"].get("nodeName"), f"{name} was bound"


def test_rbac_is_enough_in_cluster_with_token_rotation(api, kube, namespace, e2e_state, troupe_url):
    kube.kubectl("apply", "-f", os.path.join(ROOT, "deploy", "rbac.yaml"))
    sa = "system:serviceaccount:troupe-system:troupe"
    def can(*args):
        return kube.kubectl("auth", "can-i", *args, "--as", sa, check=False).stdout.strip()

    for args in [("list", "nodes"), ("watch", "nodes"), ("get", "pods"), ("watch", "pods"),
                 ("create", "pods", "--subresource=binding"), ("create", "events"),
                 ("watch", "queues.troupe.dev"), ("patch", "queues.troupe.dev", "--subresource=status"),
                 ("watch", "namespaces"), ("create", "pods", "--subresource=eviction"),
                 ("patch", "pods", "--subresource=status"),
                 ("watch", "resourceslices.resource.k8s.io"), ("watch", "resourceclaims.resource.k8s.io"),
                 ("get", "leases.coordination.k8s.io/troupe-scheduler", "-n", "kube-system")]:
        assert can(*args) == "yes", f"{sa} may not {' '.join(args)}"
    # No pod writes but the troupe.dev/wake annotation through pods/status (patch only): the GPU
    # annotation travels on the Binding; reclaim evicts (PodDisruptionBudgets apply), it never
    # deletes. Queue specs are the admin's.
    for args in [("patch", "pods"), ("delete", "pods"), ("create", "pods"), ("update", "pods"), ("update", "nodes"),
                 ("patch", "nodes"),
                 ("get", "secrets"), ("list", "configmaps"), ("update", "pods", "--subresource=status"),
                 ("delete", "events"), ("patch", "queues.troupe.dev"), ("create", "queues.troupe.dev"),
                 ("update", "leases.coordination.k8s.io/troupe-scheduler", "-n", "kube-system"),
                 ("get", "leases.coordination.k8s.io/kube-scheduler", "-n", "kube-system"),
                 ("patch", "namespaces")]:
        assert can(*args) == "no", f"{sa} may {' '.join(args)}, more than Troupe needs"
    # A second account with the same role, whose token is revoked (account deleted) mid-way.
    kube.kubectl("create", "serviceaccount", "troupe-e2e-old", "-n", "troupe-system", check=False)
    kube.kubectl("create", "clusterrolebinding", "troupe-e2e-old", "--clusterrole=troupe",
                 "--serviceaccount=troupe-system:troupe-e2e-old", check=False)
    sa_dir = temp_dir("troupe-sa-")
    with open(os.path.join(sa_dir, "ca.crt"), "w", encoding="utf-8") as f:
        f.write(kubeconfig_ca_pem(KUBECONFIG))
    with open(os.path.join(sa_dir, "namespace"), "w", encoding="utf-8") as f:
        f.write("troupe-system")

    def write_token(token):
        tmp = os.path.join(sa_dir, "token.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(token)
        os.replace(tmp, os.path.join(sa_dir, "token"))

    write_token(api.create_token("troupe-system", "troupe-e2e-old"))
    env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": e2e_state["APISERVER_PORT"],
           "TROUPE_SERVICEACCOUNT_DIR": sa_dir}
    side = SideTroupe(["--scheduler-name", "troupe-e2e-manual"], env=env)
    try:
        wait_ready(side.url, 30)
        assert "in-cluster service account" in side.logs()
        nodes = [n["metadata"]["name"] for n in api.list_nodes()]
        api.create_pod(namespace, gpu_pod("manual-1", gpus=2, scheduler="troupe-e2e-manual"))
        node = bind_through(side, api, namespace, "manual-1", nodes)
        pod = api.get_pod(namespace, "manual-1")
        assert pod["spec"]["nodeName"] == node
        assert len(pod["metadata"]["annotations"][ASSIGNED].split(",")) == 2
        # Rotation: the kubelet writes a new token; the old one stops working.
        write_token(api.create_token("troupe-system", "troupe"))
        kube.kubectl("delete", "serviceaccount", "troupe-e2e-old", "-n", "troupe-system")
        api.create_pod(namespace, gpu_pod("manual-2", gpus=1, scheduler="troupe-e2e-manual"))
        bind_through(side, api, namespace, "manual-2", nodes)
        assert api.get_pod(namespace, "manual-2")["spec"]["nodeName"]
        deadline = time.monotonic() + 15
        while not any(e.get("reason") == "GPUsAssigned" and e["involvedObject"]["name"] == "manual-2"
                      for e in api.events(namespace)):
            assert time.monotonic() < deadline, "no GPUsAssigned event from the service-account Troupe"
            time.sleep(0.2)
        assert "Forbidden" not in side.logs(), side.logs()[-3000:]
    finally:
        side.stop()
        kube.kubectl("delete", "clusterrolebinding", "troupe-e2e-old", "--ignore-not-found", check=False)


def test_shared_gpu_pods_reach_troupe_through_the_gpu_milli_resource(api, namespace, scheduler_name, troupe_url):
    """A share asked as the resource troupe.dev/gpu-milli (no nvidia.com/gpu) is routed to Troupe
    (every pod of the profile does; kube-scheduler's fit filter ignores the resource, which no node
    advertises) and bound by it."""
    node = "a10-3"  # 4 GPUs
    pin = {"kubernetes.io/hostname": node}
    for name, milli in (("share-a", "300"), ("share-b", "500")):
        manifest = gpu_pod(name, scheduler=scheduler_name, node_selector=pin)
        manifest["spec"]["containers"][0]["resources"]["limits"]["troupe.dev/gpu-milli"] = milli
        api.create_pod(namespace, manifest)
    bound = wait_all_bound(api, namespace, ["share-a", "share-b"], 60)
    for name in ("share-a", "share-b"):
        pod = bound[name]
        assert pod["spec"]["nodeName"] == node
        # Troupe's binder wrote the one GPU it chose: the pod went through Troupe, not around it.
        gpus = pod["metadata"]["annotations"][ASSIGNED].split(",")
        assert len(gpus) == 1 and 0 <= int(gpus[0]) < 4, pod["metadata"]["annotations"]
