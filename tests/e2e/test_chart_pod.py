"""The Helm chart's own pod as the scheduler pair (TROUPE_DEPLOY=chart scripts/cluster-up.sh).

scripts/chart-pod.sh has run `helm install` of charts/troupe with the images built here, and
tests/e2e/chart_pod.py runs the Deployment's two containers under podman as a kubelet would:
the chart's ServiceAccounts, tokens, RBAC, ConfigMaps, args, securityContext and probes are the
ones in use, nothing runs as admin. These tests check that pod from the outside: its processes
(user, capabilities, read-only root, seccomp) and tokens as the kernel and the API server see
them, the rights of each container's account, GPU pods, a gang and a Queue limit scheduled
through it, no Forbidden in its logs, `helm upgrade` rolling it (to HTTPS between the containers
with the chart's generated certificates, and another policy), and `helm uninstall` leaving
nothing of Troupe but the CRD (and the Lease kube-scheduler wrote, docs/e2e-tests.md).
tests/e2e/test_observability.py (marked chart) then scrapes the pod's metrics port with
Prometheus and runs the dashboard's queries.

Skipped unless the cluster runs in chart mode; the tests run in file order (upgrade, then
uninstall and a fresh install last).
"""
import base64
import glob
import json
import os
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from kubehelpers import E2E_DIR, ROOT, STATE_FILE, gpu_pod, read_state
from queue_helpers import QUEUE_LABEL, delete_queues, gpus, install_crd, queue, queue_status

pytestmark = [pytest.mark.chart, pytest.mark.usefixtures("gpu_invariant")]
if os.path.exists(STATE_FILE) and read_state().get("TROUPE_DEPLOY") != "chart":
    pytest.skip("the cluster does not run the chart's pod: start it with TROUPE_DEPLOY=chart scripts/cluster-up.sh",
                allow_module_level=True)

HELM = os.path.join(ROOT, "build", "tools", "helm")
CHART = os.path.join(ROOT, "charts", "troupe")
STATUS = os.path.join(E2E_DIR, "chart-pod", "status.json")
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


class ChartPod:
    """The release and its pod, as helm and the kubelet stand-in (chart-pod/status.json) see them."""

    def __init__(self, state, kube):
        self.state, self.kube = state, kube
        self.ns = state["CHART_NAMESPACE"]
        self.release = state["CHART_RELEASE"]
        self.values = state["CHART_VALUES"]
        self.deployment = state["CHART_DEPLOYMENT"]

    def helm(self, *args, check=True):
        p = subprocess.run([HELM, "--kubeconfig", os.path.join(E2E_DIR, "kubeconfig"), *args, "--namespace", self.ns],
                           capture_output=True, text=True, timeout=120)
        if check and p.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}: {p.stderr.strip()}")
        return p.stdout

    def status(self):
        with open(STATUS, encoding="utf-8") as f:
            return json.load(f)

    def pod(self):
        return self.status()["pod"]

    def wait_ready(self, rollouts, timeout=120):
        """The pod of the rollouts-th template, ready."""
        def ready():
            s = self.status()
            return s["pod"] if s["rollouts"] >= rollouts and s["pod"] and s["pod"]["ready"] else None
        try:
            return self.kube.wait_for(ready, timeout=timeout, interval=0.5, desc="the chart's pod ready")
        except TimeoutError:
            s = self.status()
            raise AssertionError(f"the chart's pod is not ready: {json.dumps(s['pod'], indent=1)}\n"
                                 + "\n".join(s["events"][-10:])) from None

    def account(self, name):
        return f"system:serviceaccount:{self.ns}:{name}"

    def can(self, account, verb, resource, namespace=None, name=None):
        """kubectl auth can-i as ACCOUNT; RESOURCE may name a subresource (pods/binding)."""
        resource, _, sub = resource.partition("/")
        args = ["auth", "can-i", verb, f"{resource}/{name}" if name else resource, "--as", account]
        args += ["--subresource", sub] if sub else []
        args += ["-n", namespace] if namespace else ["--all-namespaces"]
        return self.kube.kubectl(*args, check=False).stdout.strip() == "yes"

    def logs(self, container):
        """Every instance's log of a container of the current pod, as text."""
        c = self.pod()["containers"][container]
        prefix = c["log"].rsplit(".", 2)[0]  # <logs>/chart-pod/<container>-<pod seq>
        text = ""
        for path in sorted(glob.glob(prefix + ".*.log")):
            with open(path, encoding="utf-8", errors="replace") as f:
                text += f.read()
        return text


@pytest.fixture(scope="module")
def chart(e2e_state, kube):
    if e2e_state.get("TROUPE_DEPLOY") != "chart":  # a cluster started after the module was collected
        pytest.skip("the cluster does not run the chart's pod: start it with TROUPE_DEPLOY=chart scripts/cluster-up.sh")
    if not os.access(HELM, os.X_OK):
        pytest.skip(f"no {HELM} (scripts/chart-build-helm.sh)")
    c = ChartPod(e2e_state, kube)
    c.wait_ready(1)
    return c


def proc_status(pid):
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        return dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def in_container(pid, path):
    """PATH inside the container whose process is PID, through /proc/PID/root, with absolute
    symlinks (Debian's /var/run -> /run) resolved against the container's root, not the host's."""
    cur = ""
    for part in path.strip("/").split("/"):
        nxt = f"{cur}/{part}"
        full = f"/proc/{pid}/root{nxt}"
        if os.path.islink(full):
            target = os.readlink(full)
            nxt = target if target.startswith("/") else os.path.normpath(f"{cur}/{target}")
        cur = nxt
    return f"/proc/{pid}/root{cur}"


def jwt_claims(token):
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def bound_gpus(pod):
    text = (pod["metadata"].get("annotations") or {}).get("troupe.dev/gpus")
    return [int(i) for i in text.split(",")] if text else []


def wait_bound(api, kube, namespace, names, timeout=60):
    def all_bound():
        pods = {p["metadata"]["name"]: p for p in api.list_pods(namespace)}
        return pods if all(pods.get(n, {}).get("spec", {}).get("nodeName") for n in names) else None
    try:
        return kube.wait_for(all_bound, timeout=timeout, interval=0.3, desc=f"{names} bound")
    except TimeoutError:
        raise AssertionError(f"not all of {names} bound; events:\n{kube.describe_events(namespace)}") from None


# ---- the pod as the kernel sees it -----------------------------------------------------------------
def test_both_containers_run_the_built_images_as_65532_read_only_without_capabilities(chart, e2e_state):
    pod = chart.wait_ready(1)
    assert set(pod["containers"]) == {"kube-scheduler", "troupe"}
    images = {n: c["image"] for n, c in pod["containers"].items()}
    assert images == {"troupe": e2e_state["TROUPE_IMAGE"],
                      "kube-scheduler": f"localhost/kube-scheduler:{e2e_state['K8S_VERSION']}"}, images
    for name, c in pod["containers"].items():
        assert c["state"] == "running" and c["ready"] and c["restarts"] == 0, (name, c)
        st = proc_status(c["pid"])
        assert st["Uid"].split() == ["65532"] * 4 and st["Gid"].split() == ["65532"] * 4, (name, st["Uid"], st["Gid"])
        assert int(st["CapEff"], 16) == 0 and int(st["CapPrm"], 16) == 0, (name, st["CapEff"])
        assert st["NoNewPrivs"].strip() == "1", name
        assert st["Seccomp"].strip() == "2", f"{name}: no seccomp filter (RuntimeDefault)"
        with open(f"/proc/{c['pid']}/mountinfo", encoding="utf-8") as f:
            root = next(line.split() for line in f if line.split()[4] == "/")
        assert "ro" in root[5].split(","), f"{name}: the root filesystem is writable ({root[5]})"
    # The troupe image has a shell: a write outside the mounts is refused.
    p = subprocess.run(["podman", "--runtime", "/usr/sbin/runc", "exec", pod["containers"]["troupe"]["podmanName"],
                        "/bin/sh", "-c", "touch /usr/local/bin/x"], capture_output=True, text=True, timeout=30)
    assert p.returncode != 0 and "Read-only file system" in p.stderr, p


def test_probes_pass_as_kubelet_polls_them(chart):
    """The chart's startup, liveness and readiness probes, polled on their schedule: kube-scheduler's
    liveness waits 15 s (initialDelaySeconds), so this waits for one round of each."""
    def polled():
        pod = chart.pod()
        counts = {(n, k): v for n, c in pod["containers"].items() for k, v in c["probes"].items()}
        return counts if all(v["ok"] >= 1 for v in counts.values()) else None
    counts = chart.kube.wait_for(polled, timeout=40, interval=1, desc="every probe answered once")
    assert set(counts) == {("troupe", "startup"), ("troupe", "liveness"), ("troupe", "readiness"),
                           ("kube-scheduler", "liveness"), ("kube-scheduler", "readiness")}, sorted(counts)
    for key, v in counts.items():
        assert v["failedInRow"] == 0, (key, v)
        assert v["last"].startswith("HTTP 200"), (key, v)
    assert counts[("kube-scheduler", "liveness")]["last"].startswith("HTTP 200 HTTPS :10259/livez")
    port = chart.state["TROUPE_METRICS_PORT"]
    assert counts[("troupe", "readiness")]["last"] == f"HTTP 200 HTTP :{port}/readyz"


def test_each_container_has_its_own_token_and_only_its_accounts_rights(chart):
    pod = chart.pod()
    subs = {}
    for name, c in pod["containers"].items():
        # What the process sees at in-cluster config's path, through its own mount namespace.
        base = in_container(c["pid"], SA_DIR)
        with open(f"{base}/token", encoding="utf-8") as f:
            subs[name] = jwt_claims(f.read())["sub"]
        with open(f"{base}/namespace", encoding="utf-8") as f:
            assert f.read() == chart.ns
        with open(f"{base}/ca.crt", encoding="utf-8") as f:
            assert "BEGIN CERTIFICATE" in f.read()
    scheduler_sa, troupe_sa = chart.account(pod["serviceAccountName"]), chart.account(f"{chart.deployment}-troupe")
    assert subs == {"kube-scheduler": scheduler_sa, "troupe": troupe_sa}, subs
    # Neither is an administrator.
    for sa in (scheduler_sa, troupe_sa):
        assert not chart.can(sa, "*", "*"), sa
        assert not chart.can(sa, "get", "secrets"), sa
        assert not chart.can(sa, "create", "clusterrolebindings"), sa
    # Troupe binds, evicts, wakes pods (pods/status) and writes Queue status; it may not change
    # a pod's spec or delete pods.
    for verb, resource, want in (("create", "pods/binding", True), ("create", "pods/eviction", True),
                                 ("patch", "pods/status", True),
                                 ("patch", "queues.troupe.dev/status", True), ("watch", "nodes", True),
                                 ("patch", "pods", False), ("delete", "pods", False), ("update", "nodes", False)):
        assert chart.can(troupe_sa, verb, resource) is want, (troupe_sa, verb, resource)
    # kube-scheduler has its upstream roles; Troupe's Queue rights are not among them.
    assert chart.can(scheduler_sa, "create", "pods/binding")
    lease = chart.state.get("CHART_LEASE", "troupe-scheduler")
    assert chart.can(scheduler_sa, "update", "leases", namespace=chart.ns, name=lease)
    assert not chart.can(scheduler_sa, "update", "leases", namespace=chart.ns, name="kube-controller-manager")
    assert not chart.can(scheduler_sa, "patch", "queues.troupe.dev/status")


# ---- scheduling through it ------------------------------------------------------------------------
def test_a_gpu_pod_binds_with_the_gpus_troupe_chose(chart, api, kube, namespace, scheduler_name):
    kube.create(gpu_pod("chart-gpu", gpus=2, scheduler=scheduler_name), namespace)
    pod = wait_bound(api, kube, namespace, ["chart-gpu"])["chart-gpu"]
    node = kube.get("nodes", pod["spec"]["nodeName"])
    idx = bound_gpus(pod)
    assert len(set(idx)) == 2, f"troupe.dev/gpus={idx}"
    assert all(0 <= i < int(node["status"]["allocatable"]["nvidia.com/gpu"]) for i in idx), idx


def test_a_gang_binds_whole(chart, api, kube, namespace, scheduler_name):
    names = [f"chart-gang-{i}" for i in range(3)]
    for n in names:
        kube.create(gpu_pod(n, gpus=2, scheduler=scheduler_name,
                            annotations={"troupe.dev/gang": "chart", "troupe.dev/gang-size": "3"}), namespace)
    pods = wait_bound(api, kube, namespace, names)
    for n in names:
        assert len(bound_gpus(pods[n])) == 2, (n, pods[n]["metadata"].get("annotations"))


def test_a_queue_limit_holds_and_troupe_writes_its_status(chart, api, kube, namespace, scheduler_name):
    install_crd(kube)  # the chart installed it (crds/); applying the same is a no-op
    name = f"chart-limited-{namespace[-6:]}"
    kube.apply([queue(name, limit=2)])
    try:
        names = [f"chart-q-{i}" for i in range(3)]
        for n in names:
            kube.create(gpu_pod(n, gpus=1, scheduler=scheduler_name, labels={QUEUE_LABEL: name}), namespace)
        time.sleep(1)
        def two_bound():
            bound = [p["metadata"]["name"] for p in api.list_pods(namespace) if p["spec"].get("nodeName")]
            return bound if len(bound) == 2 else None
        kube.wait_for(two_bound, timeout=60, interval=0.5, desc="two of three pods bound")
        def refused():
            return [e["message"] for e in api.events(namespace)
                    if e.get("reason") == "FailedScheduling" and f"queue {name}" in (e.get("message") or "")]
        kube.wait_for(refused, timeout=30, interval=0.5, desc=f"FailedScheduling naming queue {name}")
        time.sleep(2)
        assert len([p for p in api.list_pods(namespace) if p["spec"].get("nodeName")]) == 2, "bound past the limit"
        # Troupe's Queue status writes go through the chart's RBAC (queues/status).
        def written():
            s = queue_status(kube).get(name, {})
            return s if gpus(s.get("allocated", {}).get("gpus")) == 2 and s.get("pending", {}).get("pods") == 1 else None
        kube.wait_for(written, timeout=20, interval=0.5, desc=f"queue {name}'s status: 2 GPUs allocated, 1 pending")
    finally:
        kube.kubectl("delete", "pods", "--all", "-n", namespace, "--force", "--grace-period=0", check=False)
        delete_queues(kube, [name])


def test_the_pods_logs_have_no_forbidden_request(chart):
    """A right the chart's RBAC lacks shows as a Forbidden answer in kube-scheduler's informers or
    Troupe's watches and writes: none, after the workload above."""
    for container in ("kube-scheduler", "troupe"):
        bad = [line for line in chart.logs(container).splitlines() if re.search(r"forbidden", line, re.I)]
        assert not bad, f"{container}:\n" + "\n".join(bad[:10])


# ---- helm upgrade and uninstall -------------------------------------------------------------------
def test_helm_upgrade_with_changed_values_rolls_the_pod_and_it_keeps_scheduling(chart, api, kube, namespace,
                                                                                 scheduler_name, tmp_path):
    """The upgrade turns on HTTPS between the containers (troupe.tls.enabled: the chart's generated
    certificates, mounted 0440 and readable through fsGroup) and changes Troupe's policy."""
    before = chart.status()
    old = before["pod"]
    chart.helm("upgrade", chart.release, CHART, "-f", chart.values, "--set", "troupe.policy.name=binpack",
               "--set", "troupe.tls.enabled=true")
    new = chart.wait_ready(before["rollouts"] + 1)
    assert new["name"] != old["name"] and new["templateHash"] != old["templateHash"]
    ps = subprocess.run(["podman", "ps", "-a", "--format", "{{.Names}}"], capture_output=True, text=True).stdout.split()
    assert not {c["podmanName"] for c in old["containers"].values()} & set(ps), "the old pod's containers still exist"
    assert '"policy":"binpack"' in chart.logs("troupe"), "the new pod's Troupe does not run the upgraded config"
    # The verbs now need kube-scheduler's client certificate from the chart's Secret.
    secret = kube.get("secret", f"{chart.deployment}-tls", namespace=chart.ns)["data"]
    for key in ("ca.crt", "client.crt", "client.key"):
        (tmp_path / key).write_bytes(base64.b64decode(secret[key]))
    url = f"https://127.0.0.1:{chart.state['TROUPE_PORT']}/healthz"
    ctx = ssl.create_default_context(cafile=str(tmp_path / "ca.crt"))
    with pytest.raises((ssl.SSLError, ConnectionError, urllib.error.URLError)):
        urllib.request.urlopen(url, context=ctx, timeout=5).read()  # no client certificate
    ctx.load_cert_chain(str(tmp_path / "client.crt"), str(tmp_path / "client.key"))
    with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
        assert r.status == 200
    # kube-scheduler calls it over HTTPS: a GPU pod still binds.
    kube.create(gpu_pod("chart-after-upgrade", gpus=1, scheduler=scheduler_name), namespace)
    pod = wait_bound(api, kube, namespace, ["chart-after-upgrade"], timeout=90)["chart-after-upgrade"]
    assert len(bound_gpus(pod)) == 1
    for container in ("kube-scheduler", "troupe"):
        assert not re.search(r"forbidden", chart.logs(container), re.I), container


def test_helm_uninstall_leaves_only_the_crd_and_the_lease_and_a_new_install_schedules(chart, api, kube, namespace,
                                                                                      scheduler_name):
    manifest = chart.helm("get", "manifest", chart.release)
    objects = [(m.group(1), m.group(2)) for m in re.finditer(r"^kind: (\w+)\nmetadata:\n  name: ([\w.:-]+)", manifest, re.M)]
    assert len(objects) >= 10, objects
    chart.helm("uninstall", chart.release, "--wait")
    kube.wait_for(lambda: chart.status()["pod"] is None, timeout=30, interval=0.5, desc="the pod stopped")
    left = subprocess.run(["podman", "ps", "-a", "--filter", f"label=troupe.e2e.dir={os.path.dirname(STATUS)}",
                           "--format", "{{.Names}}"], capture_output=True, text=True).stdout.split()
    assert not left, f"containers left: {left}"
    # Every object of the release is gone; of Troupe's, only the CRD (helm keeps crds/) stays,
    # and the Lease kube-scheduler created for leader election (not the release's).
    selector = f"app.kubernetes.io/instance={chart.release}"
    kinds = "deployments,configmaps,secrets,serviceaccounts,services,roles,rolebindings,networkpolicies,poddisruptionbudgets"
    assert kube.get(kinds, namespace=chart.ns, selector=selector)["items"] == []
    assert kube.get("clusterroles,clusterrolebindings", selector=selector)["items"] == []
    named = {n for _, n in objects}
    names_left = set(kube.kubectl("get", "clusterroles,clusterrolebindings", "-o", "name").stdout.split())
    assert not {n for n in names_left if n.split("/", 1)[1] in named}, names_left
    # What a cluster's controllers keep in every namespace, and the Lease. (With a
    # kube-controller-manager, its garbage collector removes the ReplicaSet and Pod it made.)
    allowed = {"ConfigMap/kube-root-ca.crt", "ServiceAccount/default", "Lease/troupe-scheduler"}

    def only_allowed_left():
        left = {f'{o["kind"]}/{o["metadata"]["name"]}'
                for o in kube.get("all,configmaps,secrets,serviceaccounts,roles,rolebindings,leases",
                                  namespace=chart.ns)["items"]}
        return True if left <= allowed else None
    try:
        kube.wait_for(only_allowed_left, timeout=30, interval=0.5, desc="the release's objects gone")
    except TimeoutError:
        raise AssertionError("left in the namespace: " + kube.kubectl(
            "get", "all,configmaps,secrets,serviceaccounts,roles,rolebindings,leases", "-n", chart.ns).stdout) from None
    assert kube.get("crd", "queues.troupe.dev")["metadata"]["name"] == "queues.troupe.dev"

    # Installed again (a new token Secret, filled again), it schedules.
    rollouts = chart.status()["rollouts"]
    chart.helm("install", chart.release, CHART, "-f", chart.values)
    chart.wait_ready(rollouts + 1)
    kube.create(gpu_pod("chart-reinstalled", gpus=1, scheduler=scheduler_name), namespace)
    wait_bound(api, kube, namespace, ["chart-reinstalled"], timeout=90)


def test_the_metrics_port_answers_on_the_host_network(chart):
    """Prometheus (test_observability.py) scrapes this port: the pod's containerPort "metrics"."""
    port = chart.state["TROUPE_METRICS_PORT"]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    assert "troupe_build_info" in text
