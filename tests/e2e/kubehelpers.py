"""Helpers for e2e tests: a kubectl wrapper, pod manifests, Troupe control.

Used through the fixtures in conftest.py; tests import pod builders directly:
    from kubehelpers import gpu_pod
"""
import json
import os
import subprocess
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
E2E_DIR = os.environ.get("TROUPE_E2E_DIR") or os.path.join(ROOT, "build", "e2e")  # as scripts/lib-e2e.sh
STATE_FILE = os.path.join(E2E_DIR, "state.env")
KUBECONFIG = os.path.join(E2E_DIR, "kubeconfig")
SCRIPTS = os.path.join(ROOT, "scripts")
KUBECACHEDIR = os.path.join(E2E_DIR, "kube-cache")  # same as scripts/lib-e2e.sh


def read_state(path=STATE_FILE):
    state = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line and not line.startswith("#") and "=" in line:
                k, v = line.split("=", 1)
                state[k] = v
    return state


class KubeError(RuntimeError):
    pass


def gpu_pod(name, gpus=0, scheduler="troupe-scheduler", cpu="100m", memory="128Mi",
            labels=None, annotations=None, node_selector=None, containers=1, **spec_extra):
    """Pod manifest for the fake cluster (no SA token, pause image, never runs).

    gpus > 0 puts nvidia.com/gpu in requests and limits of the first container
    (extended resources need requests == limits), which makes the scheduler
    call Troupe.
    """
    ctrs = []
    for i in range(containers):
        res = {"requests": {"cpu": cpu, "memory": memory}, "limits": {}}
        if gpus and i == 0:
            res["requests"]["nvidia.com/gpu"] = str(gpus)
            res["limits"]["nvidia.com/gpu"] = str(gpus)
        ctrs.append({"name": f"c{i}", "image": "registry.k8s.io/pause:3.10", "resources": res})
    spec = {
        "schedulerName": scheduler,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 0,
        "containers": ctrs,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    spec.update(spec_extra)
    meta = {"name": name}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


class Kube:
    """Thin wrapper around the built kubectl (JSON in, JSON out)."""

    def __init__(self, kubectl, kubeconfig=KUBECONFIG):
        self.kubectl_path = kubectl
        self.kubeconfig = kubeconfig

    # -- raw ----------------------------------------------------------------
    def kubectl(self, *args, input=None, check=True, timeout=120):
        cmd = [self.kubectl_path, "--kubeconfig", self.kubeconfig, *args]
        env = dict(os.environ, KUBECACHEDIR=KUBECACHEDIR)
        p = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout, env=env)
        if check and p.returncode != 0:
            raise KubeError(f"{' '.join(args)} failed (rc={p.returncode}): {p.stderr.strip()}")
        return p

    @staticmethod
    def _doc(manifest):
        if isinstance(manifest, str):
            return manifest
        if isinstance(manifest, (list, tuple)):
            manifest = {"apiVersion": "v1", "kind": "List", "items": list(manifest)}
        return json.dumps(manifest)

    @staticmethod
    def _ns(namespace):
        return ["-n", namespace] if namespace else []

    # -- CRUD ---------------------------------------------------------------
    def apply(self, manifest, namespace=None, server_side=False):
        """Apply a dict, a list of dicts or YAML/JSON text; returns the object names."""
        args = ["apply", "-f", "-", "-o", "name"] + self._ns(namespace)
        if server_side:
            args.append("--server-side")
        return self.kubectl(*args, input=self._doc(manifest)).stdout.split()

    def create(self, manifest, namespace=None):
        args = ["create", "-f", "-", "-o", "name"] + self._ns(namespace)
        return self.kubectl(*args, input=self._doc(manifest)).stdout.split()

    def get(self, kind, name=None, namespace=None, selector=None, all_namespaces=False,
            missing_ok=False):
        """Parsed JSON of one object (or a List when name is None); None if missing_ok and absent."""
        args = ["get", kind] + ([name] if name else []) + self._ns(namespace) + ["-o", "json"]
        if selector:
            args += ["-l", selector]
        if all_namespaces:
            args.append("-A")
        p = self.kubectl(*args, check=False)
        if p.returncode != 0:
            if missing_ok and "NotFound" in p.stderr:
                return None
            raise KubeError(f"get {kind} {name or ''} failed: {p.stderr.strip()}")
        return json.loads(p.stdout)

    def delete(self, kind, name=None, namespace=None, selector=None, force=False, wait=False):
        args = ["delete", kind] + ([name] if name else []) + self._ns(namespace)
        args += ["--ignore-not-found", f"--wait={'true' if wait else 'false'}"]
        if selector:
            args += ["-l", selector]
        elif not name:
            args.append("--all")
        if force:  # needed for bound pods: no kubelet will ever confirm a graceful delete
            args += ["--force", "--grace-period=0"]
        self.kubectl(*args)

    def patch(self, kind, name, patch, namespace=None, patch_type="merge", subresource=None):
        args = ["patch", kind, name, "--type", patch_type, "-p", json.dumps(patch)] + self._ns(namespace)
        if subresource:
            args += ["--subresource", subresource]
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    # -- waiting --------------------------------------------------------------
    @staticmethod
    def wait_for(fn, timeout=30.0, interval=0.25, desc="condition"):
        """Call fn() until it returns a truthy value; return it, or raise TimeoutError."""
        deadline = time.monotonic() + timeout
        last_exc = None
        while True:
            try:
                value = fn()
                if value:
                    return value
            except KubeError as e:  # transient apiserver hiccups
                last_exc = e
            if time.monotonic() >= deadline:
                raise TimeoutError(f"timed out after {timeout}s waiting for {desc}"
                                   + (f" (last error: {last_exc})" if last_exc else ""))
            time.sleep(interval)

    def pod_node(self, name, namespace):
        pod = self.get("pod", name, namespace, missing_ok=True)
        return (pod or {}).get("spec", {}).get("nodeName") or None

    def wait_pod_bound(self, name, namespace, timeout=30.0):
        """Wait until spec.nodeName is set; returns the node name."""
        try:
            return self.wait_for(lambda: self.pod_node(name, namespace), timeout,
                                 desc=f"pod {namespace}/{name} to be bound")
        except TimeoutError as e:
            raise TimeoutError(f"{e}\nevents:\n{self.describe_events(namespace, name)}") from None

    def wait_gone(self, kind, name, namespace=None, timeout=30.0):
        self.wait_for(lambda: self.get(kind, name, namespace, missing_ok=True) is None,
                      timeout, desc=f"{kind} {name} to be deleted")

    def events(self, namespace, name=None):
        sel = [f"--field-selector=involvedObject.name={name}"] if name else []
        items = json.loads(self.kubectl("get", "events", "-n", namespace, "-o", "json", *sel).stdout)["items"]
        return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")

    def wait_event(self, namespace, name, reason, contains="", timeout=30.0):
        """Wait for an event on object `name` with this reason whose message contains the
        text; returns the message."""
        def find():
            for e in reversed(self.events(namespace, name)):
                if e.get("reason") == reason and contains in (e.get("message") or ""):
                    return e["message"]
            return None
        try:
            return self.wait_for(find, timeout, interval=0.5,
                                 desc=f"a {reason} event on {namespace}/{name} containing {contains!r}")
        except TimeoutError as e:
            raise TimeoutError(f"{e}\nevents:\n{self.describe_events(namespace, name)}") from None

    def pod_condition(self, name, namespace, ctype="PodScheduled"):
        pod = self.get("pod", name, namespace)
        for c in pod.get("status", {}).get("conditions") or []:
            if c.get("type") == ctype:
                return c
        return None

    def describe_events(self, namespace, name=None):
        try:
            return "\n".join(f"  {e.get('reason')}: {e.get('message')}" for e in self.events(namespace, name)) or "  (none)"
        except Exception as e:  # diagnostics only
            return f"  (could not list events: {e})"

    # -- fake kubelet ---------------------------------------------------------
    def set_pod_phase(self, name, namespace, phase):
        """Fake what a kubelet would report (e.g. Running, Succeeded, Failed)."""
        return self.patch("pod", name, {"status": {"phase": phase}}, namespace, subresource="status")

    # -- namespaces -------------------------------------------------------------
    def create_namespace(self, name, labels=None):
        meta = {"name": name, "labels": {"troupe.dev/e2e": "true", **(labels or {})}}
        self.create({"apiVersion": "v1", "kind": "Namespace", "metadata": meta})
        return name

    def delete_namespace(self, name):
        """Delete its Jobs (orphaning their pods, so none is made again), force-delete its pods and
        take the Job controller's tracking finalizer off them, then delete and finalize the
        namespace.

        No kubelet confirms a pod's deletion, so kube-controller-manager's namespace controller
        would never finish; finalizing here is quicker. A finalizer left on a pod would keep it,
        bound, after its namespace is gone: the Job controller cannot update it there.
        """
        self.kubectl("delete", "jobs", "--all", "-n", name, "--cascade=orphan", "--wait=false", "--ignore-not-found")
        self.delete("pods", namespace=name, force=True)
        for pod in self.get("pods", namespace=name)["items"]:
            if pod["metadata"].get("finalizers"):
                self.kubectl("patch", "pod", pod["metadata"]["name"], "-n", name, "--type", "merge",
                             "-p", '{"metadata":{"finalizers":null}}', check=False)
        self.delete("namespace", name)
        ns = self.get("namespace", name, missing_ok=True)
        if ns is None:
            return
        ns.setdefault("spec", {})["finalizers"] = []
        self.kubectl("replace", "--raw", f"/api/v1/namespaces/{name}/finalize", "-f", "-",
                     input=json.dumps(ns))
        self.wait_gone("namespace", name, timeout=15)


def job_pod_names(kube, namespace, job, count, timeout=30):
    """The names of the pods the Job controller made for `job`, once there are `count`."""
    deadline = time.monotonic() + timeout
    while True:
        names = [p["metadata"]["name"] for p in
                 kube.get("pods", namespace=namespace, selector=f"batch.kubernetes.io/job-name={job}")["items"]]
        if len(names) >= count:
            return names
        assert time.monotonic() < deadline, f"the Job controller made {len(names)} of {count} pods of Job {job}"
        time.sleep(0.2)


class TroupeControl:
    """Stop/start only Troupe (scripts/troupe-restart.sh); the port stays the same."""

    def __init__(self, state):
        self.port = int(state["TROUPE_PORT"])
        self.url = f"http://127.0.0.1:{self.port}"

    def _run(self, action, check=True, env=None):
        p = subprocess.run([os.path.join(SCRIPTS, "troupe-restart.sh"), action],
                           capture_output=True, text=True, timeout=120, env=dict(os.environ, **(env or {})))
        if check and p.returncode != 0:
            raise RuntimeError(f"troupe-restart.sh {action} failed:\n{p.stdout}{p.stderr}")
        return p

    def stop(self):
        self._run("stop")

    def start(self, env=None):
        self._run("start", env=env)

    def restart(self, env=None):
        self._run("restart", env=env)

    def is_running(self):
        return self._run("status", check=False).returncode == 0


# ---- GPU accounting, as kube-scheduler counts it -----------------------------------
GPU = "nvidia.com/gpu"


def _qty_int(value):
    """An integer quantity such as "8" (nvidia.com/gpu is a whole-number extended resource)."""
    return int(str(value)) if value not in (None, "") else 0


def pod_gpu_request(pod):
    """nvidia.com/gpu the pod requests: max(sum of app containers + sidecars, each init container
    + the sidecars started before it), the rule kube-scheduler's NodeResourcesFit uses."""
    spec = pod.get("spec", {})

    def req(c):
        res = c.get("resources") or {}
        return _qty_int((res.get("requests") or {}).get(GPU, (res.get("limits") or {}).get(GPU)))

    total = sum(req(c) for c in spec.get("containers") or [])
    sidecars = init_peak = 0
    for c in spec.get("initContainers") or []:
        if c.get("restartPolicy") == "Always":
            sidecars += req(c)
            init_peak = max(init_peak, sidecars)
        else:
            init_peak = max(init_peak, sidecars + req(c))
    return max(total + sidecars, init_peak)


def gpu_overcommit(kube):
    """[(node, requested, allocatable)] for every node where the GPUs requested by the pods
    bound to it (not finished) exceed its allocatable nvidia.com/gpu. Empty when all is well."""
    nodes = {n["metadata"]["name"]: _qty_int(n["status"].get("allocatable", {}).get(GPU))
             for n in kube.get("nodes")["items"]}
    used = {}
    for p in kube.get("pods", all_namespaces=True)["items"]:
        node = p["spec"].get("nodeName")
        if node and p.get("status", {}).get("phase") not in ("Succeeded", "Failed"):
            used[node] = used.get(node, 0) + pod_gpu_request(p)
    return [(n, used[n], nodes.get(n, 0)) for n in sorted(used) if used[n] > nodes.get(n, 0)]


# ---- what Troupe recorded (troupe serve --record-dir) ---------------------------------
def troupe_record_dir(pid_file=os.path.join(E2E_DIR, "pids", "troupe.pid")):
    """The --record-dir of the running Troupe (read from its command line), or None."""
    try:
        with open(pid_file, encoding="utf-8") as f:
            pid = f.read().split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().decode().split("\0")
    except (OSError, IndexError):
        return None
    for i, a in enumerate(argv):
        if a == "--record-dir" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--record-dir="):
            return a.split("=", 1)[1]
    return None


class Recorded:
    """One request body Troupe recorded: verb (filter/prioritize/bind/preempt), path, JSON."""

    def __init__(self, path):
        self.path = path
        self.verb = os.path.basename(path).split("-", 1)[0]
        with open(path, "rb") as f:
            self.raw = f.read()
        self.body = json.loads(self.raw)

    @property
    def pod(self):
        return self.body.get("Pod") or {}

    @property
    def pod_uid(self):
        if self.verb == "bind":
            return self.body.get("PodUID")
        return self.pod.get("metadata", {}).get("uid")

    def __repr__(self):
        return f"Recorded({self.verb}, {self.path})"


def recorded_requests(root=os.path.join(E2E_DIR, "record"), since=0.0):
    """Every body under root (all Troupe starts) written at or after `since` (time.time())."""
    out = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            path = os.path.join(dirpath, name)
            if name.endswith(".json") and os.path.getmtime(path) >= since:
                out.append(Recorded(path))
    return sorted(out, key=lambda r: (os.path.getmtime(r.path), r.path))
