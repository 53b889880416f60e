#!/usr/bin/env python3
"""A kubelet for one Deployment's pod on the e2e control plane (TROUPE_DEPLOY=chart).

The local control plane has no kubelet, no container runtime behind it and no
kube-controller-manager, so `helm install` there creates objects that nothing runs.
scripts/chart-pod.sh starts this program after `helm install`; it does for the chart's Deployment
what a cluster would do, from the objects in the API server, and no more:

  - the Deployment and ReplicaSet controllers: one pod per pod template; a changed template
    (`helm upgrade`) replaces the pod, a deleted Deployment (`helm uninstall`) stops it. The
    containers use the host's network, so two pods of one template cannot run at once: the old
    pod stops before the new one starts (the Recreate strategy; the chart's RollingUpdate would
    start the new one first, its kube-scheduler a standby until the Lease is free).
  - the kubelet: each container runs under podman (runc, host network) with the template's
    image and pull policy, command and args, env, the pod's and container's securityContext
    (user and group, runAsNonRoot, fsGroup, read-only root, no privilege escalation, dropped
    capabilities, seccomp), memory and CPU limits, and its volumes as files: configMap, secret,
    projected (a TokenRequest token of the pod's ServiceAccount, renewed at 80 % of its life;
    configMaps; the namespace) and emptyDir, with their modes, items and subPath mounts.
    In-cluster clients find the API server through KUBERNETES_SERVICE_HOST/PORT (127.0.0.1 and
    the API server's port: there is no Service network) and its CA in the projected ca.crt.
    Startup, liveness and readiness probes (httpGet, tcpSocket, exec) run on their schedule with
    their thresholds; a failed liveness or startup probe, or an exited container, restarts the
    container (restartPolicy Always, with a back-off).
  - where no kube-controller-manager runs (no fresh Lease, no kube-system/kube-root-ca.crt): the
    token controller (a kubernetes.io/service-account-token Secret gets a token of its ServiceAccount, bound to the
    Secret, with ca.crt and namespace) and the root CA publisher (the kube-root-ca.crt ConfigMap
    of the Deployment's namespace), as the chart expects of a cluster.

What it does not do: Pod objects in the API (tests watch the pod through --status instead),
ConfigMap updates of mounted volumes, Services and Endpoints (Prometheus scrapes the pod's
port on the host), more than one replica.

Status: a JSON file (--status) rewritten after every change: the pod, each container's state,
restarts and probe results, and the recent events. Logs of each container instance:
<logs>/chart-pod/<container>-<instance>.log, and <logs>/chart-<container>.log points at the newest.

Usage: chart_pod.py --kubeconfig K --namespace NS --deployment NAME --apiserver-port P
                    --ca-file CA --work-dir DIR --logs DIR --status FILE [--label L]
"""
import argparse
import base64
import calendar
import hashlib
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kubeapi import APIError, KubeAPI  # noqa: E402

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
MAX_BACKOFF_S = 60  # kubelet's CrashLoopBackOff tops out at 300 s; tests do not wait that long
TOKEN_SECRET_SECONDS = 365 * 24 * 3600


class PodError(Exception):
    """What a kubelet reports and retries: a missing Secret key, a refused image, a bad spec."""

    def __init__(self, reason, message):
        super().__init__(f"{reason}: {message}")
        self.reason = reason


def log(msg):
    print(f"[chart-pod {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def quantity_bytes(q):
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
    q = str(q)
    for suffix, mult in units.items():
        if q.endswith(suffix):
            return int(float(q[:-len(suffix)]) * mult)
    return int(float(q))


def quantity_millicpu(q):
    q = str(q)
    return int(q[:-1]) if q.endswith("m") else int(float(q) * 1000)


def write_file(path, data, mode, gid=None):
    """Atomically, as kubelet's atomic writer does (a reader never sees half a token)."""
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())
    if gid is not None:  # fsGroup: the group owns the file and may read it
        os.chown(tmp, 0, gid)
        mode |= 0o440
    os.chmod(tmp, mode)
    os.replace(tmp, path)


class Podman:
    def __init__(self, runc):
        self.base = ["podman", "--runtime", runc]

    def __call__(self, *args, check=True, timeout=120):
        p = subprocess.run(self.base + list(args), capture_output=True, text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise PodError("PodmanError", f"podman {' '.join(args[:2])}: {p.stderr.strip()[-400:]}")
        return p


class Volumes:
    """The pod's volumes as host directories under DIR/<volume>."""

    def __init__(self, api, namespace, spec, root, ca_pem):
        self.api, self.ns, self.spec, self.root, self.ca_pem = api, namespace, spec, root, ca_pem
        self.fs_group = (spec.get("securityContext") or {}).get("fsGroup")
        self.tokens = []  # (path, service account, expirationSeconds, audience, issued at)
        self.paths = {}

    def _get(self, kind, name):
        path = f"/api/v1/namespaces/{self.ns}/{kind}/{name}"
        try:
            return self.api.request("GET", path)
        except APIError as e:
            if e.status == 404:
                return None
            raise

    def _items(self, data, items, default_mode, what, optional):
        """[(path, bytes, mode)] of a configMap's or secret's keys (all, or the listed items)."""
        if items:
            out = []
            for it in items:
                if it["key"] not in data:
                    if optional:
                        continue
                    raise PodError("ContainerCreating", f"{what} has no key {it['key']}")
                out.append((it["path"], data[it["key"]], it.get("mode", default_mode)))
            return out
        return [(k, v, default_mode) for k, v in data.items()]

    def _object_files(self, kind, name, src, default_mode):
        """The files of a configMap or secret volume (or projected source) named NAME."""
        obj = self._get(f"{kind}s", name)
        if obj is None:
            if src.get("optional"):
                return []
            raise PodError("ContainerCreating", f"{kind} {self.ns}/{name} not found")
        if kind == "configmap":
            data = {k: v.encode() for k, v in (obj.get("data") or {}).items()}
            data.update({k: base64.b64decode(v) for k, v in (obj.get("binaryData") or {}).items()})
        else:
            data = {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
        return self._items(data, src.get("items"), default_mode, f"{kind} {name}", src.get("optional"))

    def _configmap_files(self, src, default_mode):
        return self._object_files("configmap", src["name"], src, default_mode)

    def _secret_files(self, src, default_mode):
        return self._object_files("secret", src["secretName"], src, default_mode)

    def _token(self, src):
        sa = self.spec.get("serviceAccountName") or "default"
        seconds = int(src.get("expirationSeconds", 3607))
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "spec": {"expirationSeconds": seconds}}
        if src.get("audience"):
            body["spec"]["audiences"] = [src["audience"]]
        try:
            r = self.api.request("POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts/{sa}/token", body)
        except APIError as e:
            raise PodError("ContainerCreating", f"token of serviceaccount {self.ns}/{sa}: {e}") from None
        return r["status"]["token"], sa, seconds

    def _projected_files(self, vol):
        files, tokens = [], []
        default_mode = vol.get("defaultMode", 0o644)
        for src in vol["sources"]:
            if "serviceAccountToken" in src:
                t = src["serviceAccountToken"]
                token, sa, seconds = self._token(t)
                files.append((t["path"], token.encode(), default_mode))
                tokens.append((t, sa, seconds))
            elif "configMap" in src:
                files += self._configmap_files(src["configMap"], default_mode)
            elif "secret" in src:
                files += self._secret_files({**src["secret"], "secretName": src["secret"]["name"]}, default_mode)
            elif "downwardAPI" in src:
                for it in src["downwardAPI"]["items"]:
                    field = it.get("fieldRef", {}).get("fieldPath")
                    if field != "metadata.namespace":
                        raise PodError("CreateContainerConfigError", f"downwardAPI {field} is not supported here")
                    files.append((it["path"], self.ns.encode(), it.get("mode", default_mode)))
            else:
                raise PodError("CreateContainerConfigError", f"projected source {sorted(src)} is not supported here")
        return files, tokens

    def materialize(self):
        for vol in self.spec.get("volumes") or []:
            d = os.path.join(self.root, vol["name"])
            os.makedirs(d, exist_ok=True)
            tokens = []
            if "configMap" in vol:
                files = self._configmap_files(vol["configMap"], vol["configMap"].get("defaultMode", 0o644))
            elif "secret" in vol:
                files = self._secret_files(vol["secret"], vol["secret"].get("defaultMode", 0o644))
            elif "projected" in vol:
                files, tokens = self._projected_files(vol["projected"])
            elif "emptyDir" in vol:
                os.chmod(d, 0o777)  # as kubelet makes it: every user of the pod may write
                files = []
            else:
                raise PodError("CreateContainerConfigError", f"volume {vol['name']}: type {sorted(vol)} is not supported here")
            os.chmod(d, 0o777 if "emptyDir" in vol else 0o755)
            for rel, data, mode in files:
                path = os.path.join(d, rel)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                write_file(path, data, mode, self.fs_group)
            for t, sa, seconds in tokens:
                self.tokens.append({"path": os.path.join(d, t["path"]), "src": t, "sa": sa, "seconds": seconds,
                                    "issued": time.time(), "mode": vol["projected"].get("defaultMode", 0o644)})
            self.paths[vol["name"]] = d

    def refresh_tokens(self):
        """kubelet renews a projected token after 80 % of its life."""
        for t in self.tokens:
            if time.time() - t["issued"] > 0.8 * t["seconds"]:
                token, _, _ = self._token(t["src"])
                write_file(t["path"], token.encode(), t["mode"], self.fs_group)
                t["issued"] = time.time()
                log(f"renewed the token of {t['sa']} in {t['path']}")


class Probe:
    def __init__(self, kind, spec, container_spec, exec_fn):
        self.kind, self.spec, self.exec_fn = kind, spec, exec_fn
        self.ports = {p["name"]: p["containerPort"] for p in container_spec.get("ports", []) if p.get("name")}
        self.period = spec.get("periodSeconds", 10)
        self.timeout = spec.get("timeoutSeconds", 1)
        self.success_threshold = spec.get("successThreshold", 1)
        self.failure_threshold = spec.get("failureThreshold", 3)
        self.next_at = time.monotonic() + spec.get("initialDelaySeconds", 0)
        self.ok_in_row = self.failed_in_row = self.ok = self.failed = 0
        self.last = ""

    def due(self, now):
        return now >= self.next_at

    def _port(self, port):
        if isinstance(port, int) or str(port).isdigit():
            return int(port)
        if port not in self.ports:
            raise ValueError(f"no container port named {port}")
        return self.ports[port]

    def _check(self):
        if "httpGet" in self.spec:
            g = self.spec["httpGet"]
            host, port = g.get("host") or "127.0.0.1", self._port(g["port"])
            if g.get("scheme", "HTTP") == "HTTPS":  # kubelet does not verify the certificate
                conn = http.client.HTTPSConnection(host, port, timeout=self.timeout,
                                                   context=ssl._create_unverified_context())
            else:
                conn = http.client.HTTPConnection(host, port, timeout=self.timeout)
            try:
                conn.request("GET", g.get("path", "/"),
                             headers={h["name"]: h["value"] for h in g.get("httpHeaders", [])} | {"User-Agent": "kube-probe/chart-pod"})
                status = conn.getresponse().status
            finally:
                conn.close()
            return 200 <= status < 400, f"HTTP {status} {g.get('scheme', 'HTTP')} :{port}{g.get('path', '/')}"
        if "tcpSocket" in self.spec:
            port = self._port(self.spec["tcpSocket"]["port"])
            with socket.create_connection((self.spec["tcpSocket"].get("host") or "127.0.0.1", port), self.timeout):
                return True, f"TCP :{port} open"
        if "exec" in self.spec:
            rc = self.exec_fn(self.spec["exec"]["command"], self.timeout)
            return rc == 0, f"exec exit {rc}"
        raise ValueError(f"probe handler {sorted(self.spec)} not supported")

    def run(self, now):
        """Probe once; returns 'success', 'failure' (threshold crossed) or None (no change)."""
        self.next_at = now + self.period
        try:
            good, self.last = self._check()
        except (OSError, ValueError, http.client.HTTPException, subprocess.SubprocessError) as e:
            good, self.last = False, f"{type(e).__name__}: {e}"
        if good:
            self.ok += 1
            self.ok_in_row += 1
            self.failed_in_row = 0
            return "success" if self.ok_in_row >= self.success_threshold else None
        self.failed += 1
        self.failed_in_row += 1
        self.ok_in_row = 0
        return "failure" if self.failed_in_row >= self.failure_threshold else None

    def status(self):
        return {"ok": self.ok, "failed": self.failed, "failedInRow": self.failed_in_row, "last": self.last}


class Container:
    def __init__(self, pod, spec):
        self.pod, self.spec, self.name = pod, spec, spec["name"]
        self.instance = 0
        self.restarts = 0
        self.podman_name = None
        self.pid = None
        self.state, self.reason = "waiting", "ContainerCreating"
        self.ready = self.started = False
        self.restart_at = None
        self.last_exit = None
        self.probes = {}

    # -- podman run arguments from the spec ---------------------------------------------------------
    def run_args(self):
        pod, c = self.pod, self.spec
        psc = pod.spec.get("securityContext") or {}
        sc = {**{k: psc[k] for k in ("runAsUser", "runAsGroup", "runAsNonRoot", "seccompProfile") if k in psc},
              **(c.get("securityContext") or {})}
        image = c["image"]
        policy = c.get("imagePullPolicy") or ("Always" if image.endswith(":latest") or ":" not in image else "IfNotPresent")
        pull = {"Never": "never", "IfNotPresent": "missing", "Always": "always"}[policy]
        if pull != "always" and pod.podman("image", "exists", image, check=False).returncode != 0:
            if pull == "never":
                raise PodError("ErrImageNeverPull", f"{image} is not present and imagePullPolicy is Never")
        args = ["run", "-d", "--name", self.podman_name, "--network", "host", "--pull", pull,
                "--log-driver", "k8s-file", "--log-opt", f"path={self.log_path()}",
                *pod.runner.ulimits]
        for k, v in pod.labels.items():
            args += ["--label", f"{k}={v}"]
        uid, gid = sc.get("runAsUser"), sc.get("runAsGroup")
        if uid is None:
            user = pod.podman("image", "inspect", "--format", "{{.User}}", image).stdout.strip()
            uid = int(user.split(":")[0]) if user.split(":")[0].isdigit() else (0 if user in ("", "root") else None)
        if sc.get("runAsNonRoot") and uid in (0, None):
            raise PodError("CreateContainerConfigError",
                           f"container {self.name} has runAsNonRoot and image {image} will run as root (or a user name)")
        if uid is not None:
            args += ["--user", f"{uid}:{gid}" if gid is not None else str(uid)]
        for g in ([psc["fsGroup"]] if "fsGroup" in psc else []) + list(psc.get("supplementalGroups") or []):
            args += ["--group-add", str(g)]
        if sc.get("privileged"):
            raise PodError("CreateContainerConfigError", "privileged containers are not run here")
        if sc.get("readOnlyRootFilesystem"):
            args += ["--read-only", "--read-only-tmpfs=false"]
        if sc.get("allowPrivilegeEscalation") is False:
            args += ["--security-opt", "no-new-privileges"]
        caps = sc.get("capabilities") or {}
        for cap in caps.get("drop") or []:
            args += ["--cap-drop", cap]
        for cap in caps.get("add") or []:
            args += ["--cap-add", cap]
        seccomp = (sc.get("seccompProfile") or {}).get("type")
        if seccomp == "Unconfined":
            args += ["--security-opt", "seccomp=unconfined"]
        elif seccomp not in (None, "RuntimeDefault"):
            raise PodError("CreateContainerConfigError", f"seccompProfile {seccomp} is not supported here")
        res = c.get("resources") or {}
        limits, requests = res.get("limits") or {}, res.get("requests") or {}
        if "memory" in limits:
            args += ["--memory", str(quantity_bytes(limits["memory"]))]
        if "cpu" in limits:
            args += ["--cpus", f"{quantity_millicpu(limits['cpu']) / 1000:.3f}"]
        if "cpu" in requests:
            args += ["--cpu-shares", str(max(2, quantity_millicpu(requests["cpu"]) * 1024 // 1000))]
        # kubelet's service environment first; the container's own env wins over it.
        env = dict(pod.runner.service_env)
        for e in c.get("env") or []:
            if "valueFrom" in e:
                field = e["valueFrom"].get("fieldRef", {}).get("fieldPath")
                values = {"metadata.namespace": pod.namespace, "metadata.name": pod.name, "status.podIP": "127.0.0.1",
                          "status.hostIP": "127.0.0.1", "spec.nodeName": socket.gethostname(),
                          "spec.serviceAccountName": pod.spec.get("serviceAccountName", "default")}
                if field not in values:
                    raise PodError("CreateContainerConfigError", f"env {e['name']}: valueFrom {e['valueFrom']} not supported here")
                env[e["name"]] = values[field]
            else:
                env[e["name"]] = e.get("value", "")
        for k, v in env.items():
            args += ["--env", f"{k}={v}"]
        for m in c.get("volumeMounts") or []:
            if m["name"] not in pod.volumes.paths:
                raise PodError("CreateContainerConfigError", f"volumeMount {m['name']}: no such volume")
            host = pod.volumes.paths[m["name"]]
            if m.get("subPath"):
                host = os.path.join(host, m["subPath"])
                if not os.path.exists(host):
                    raise PodError("CreateContainerConfigError", f"subPath {m['subPath']} of volume {m['name']} does not exist")
            args += ["-v", f"{host}:{m['mountPath']}" + (":ro" if m.get("readOnly") else "")]
        if c.get("workingDir"):
            args += ["--workdir", c["workingDir"]]
        # command replaces the image's ENTRYPOINT (and drops its CMD), args replace CMD.
        if c.get("command"):
            args += ["--entrypoint", json.dumps(c["command"])]
        args.append(image)
        args += c.get("args") or []
        return args

    def log_path(self):
        return os.path.join(self.pod.runner.logs, "chart-pod", f"{self.name}-{self.pod.seq}.{self.instance}.log")

    def exec_in(self, command, timeout):
        p = self.pod.podman("exec", self.podman_name, *command, check=False, timeout=timeout + 5)
        return p.returncode

    # -- lifecycle ------------------------------------------------------------------------------------
    def start(self):
        self.instance += 1
        self.podman_name = f"{self.pod.prefix}-{self.pod.seq}-{self.name}-{self.instance}"
        os.makedirs(os.path.dirname(self.log_path()), exist_ok=True)
        self.pod.podman("rm", "-f", self.podman_name, check=False)
        self.pod.podman(*self.run_args())
        self.pid = int(self.pod.podman("inspect", "--format", "{{.State.Pid}}", self.podman_name).stdout.strip() or 0)
        link = os.path.join(self.pod.runner.logs, f"chart-{self.name}.log")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.relpath(self.log_path(), self.pod.runner.logs), link)
        self.state, self.reason = "running", ""
        self.ready = self.started = False
        self.probes = {k: Probe(k, self.spec[f"{k}Probe"], self.spec, self.exec_in)
                       for k in ("startup", "liveness", "readiness") if self.spec.get(f"{k}Probe")}
        if "startup" not in self.probes:
            self.started = True
        if "readiness" not in self.probes:
            self.ready = True
        self.pod.event(f"started container {self.name} ({self.podman_name}, pid {self.pid})")

    def alive(self):
        if not self.pid:
            return False
        try:
            with open(f"/proc/{self.pid}/stat", encoding="utf-8") as f:
                return f.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False

    def kill(self, why, grace=2):
        self.pod.podman("stop", "-t", str(grace), self.podman_name, check=False, timeout=grace + 30)
        out = self.pod.podman("inspect", "--format", "{{.State.ExitCode}}", self.podman_name, check=False).stdout.strip()
        self.last_exit = {"exitCode": int(out) if out.lstrip("-").isdigit() else None, "reason": why}
        self.pod.podman("rm", "-f", self.podman_name, check=False)
        self.pid = None
        self.state, self.ready = "waiting", False

    def schedule_restart(self, why):
        self.kill(why)
        self.restarts += 1
        backoff = min(MAX_BACKOFF_S, 10 * 2 ** (self.restarts - 1))
        self.restart_at = time.monotonic() + backoff
        self.reason = f"CrashLoopBackOff ({why}; restart {self.restarts} in {backoff} s)"
        self.pod.event(f"container {self.name}: {why}; restarting in {backoff} s")

    def tick(self, now):
        if self.state == "waiting":
            if self.restart_at is not None and now >= self.restart_at:
                self.restart_at = None
                self.start()
            return
        if not self.alive():
            out = self.pod.podman("inspect", "--format", "{{.State.ExitCode}}", self.podman_name, check=False).stdout.strip()
            self.schedule_restart(f"exited with code {out or '?'}")
            return
        if not self.started:
            p = self.probes["startup"]
            if p.due(now):
                r = p.run(now)
                if r == "success":
                    self.started = True
                    self.pod.event(f"container {self.name}: startup probe passed ({p.last})")
                elif r == "failure":
                    self.schedule_restart(f"startup probe failed {p.failure_threshold} times: {p.last}")
            return
        live = self.probes.get("liveness")
        if live and live.due(now) and live.run(now) == "failure":
            self.schedule_restart(f"liveness probe failed {live.failure_threshold} times: {live.last}")
            return
        ready = self.probes.get("readiness")
        if ready and ready.due(now):
            r = ready.run(now)
            if r == "success" and not self.ready:
                self.ready = True
                self.pod.event(f"container {self.name}: ready ({ready.last})")
            elif r == "failure" and self.ready:
                self.ready = False
                self.pod.event(f"container {self.name}: not ready ({ready.last})")

    def status(self):
        return {"podmanName": self.podman_name, "image": self.spec["image"], "state": self.state,
                "reason": self.reason, "pid": self.pid, "started": self.started, "ready": self.ready,
                "restarts": self.restarts, "lastExit": self.last_exit,
                "log": self.log_path() if self.podman_name else None,
                "probes": {k: p.status() for k, p in self.probes.items()}}


class Pod:
    def __init__(self, runner, deployment, template_hash, seq):
        self.runner, self.seq, self.hash = runner, seq, template_hash
        self.namespace = deployment["metadata"]["namespace"]
        self.spec = deployment["spec"]["template"]["spec"]
        self.name = f"{deployment['metadata']['name']}-{template_hash[:10]}"
        self.prefix = runner.prefix
        self.podman = runner.podman
        self.labels = {"troupe.e2e.dir": runner.args.work_dir, "troupe.e2e.pod": self.name}
        self.containers = [Container(self, c) for c in self.spec["containers"]]
        self.volumes = None
        self.phase, self.reason = "Pending", "ContainerCreating"
        self.created = time.time()
        self.ready_at = None

    def event(self, msg):
        self.runner.event(f"pod {self.name}: {msg}")

    def try_start(self):
        """Volumes, then the containers in order; a PodError leaves the pod Pending (retried)."""
        if self.spec.get("initContainers"):
            raise PodError("CreateContainerConfigError", "initContainers are not run here")
        root = os.path.join(self.runner.args.work_dir, "pods", self.name, "volumes")
        self.volumes = Volumes(self.runner.api, self.namespace, self.spec, root, self.runner.ca_pem)
        self.volumes.materialize()
        try:
            for c in self.containers:
                c.start()
        except PodError:
            for c in self.containers:  # none stays behind from a start that failed half-way
                if c.pid:
                    c.kill("the pod's start failed")
            raise
        self.phase, self.reason = "Running", ""

    def tick(self):
        now = time.monotonic()
        for c in self.containers:
            c.tick(now)
        ready = all(c.ready and c.state == "running" for c in self.containers)
        if ready and self.ready_at is None:
            self.ready_at = time.time()
            self.event(f"ready {self.ready_at - self.created:.1f} s after it was created")
        elif not ready and self.ready_at is not None:
            self.ready_at = None
            self.event("not ready")
        self.volumes.refresh_tokens()

    def stop(self, grace):
        names = [c.podman_name for c in self.containers if c.podman_name]
        if names:  # SIGTERM to every container at once, SIGKILL after the grace period
            self.podman("stop", "-t", str(grace), *names, check=False, timeout=grace + 30)
            self.podman("rm", "-f", *names, check=False)
        for c in self.containers:
            c.state, c.ready, c.pid = "terminated", False, None
        self.phase = "Terminated"
        self.event("stopped")

    def ready(self):
        return self.ready_at is not None

    def status(self):
        return {"name": self.name, "namespace": self.namespace, "templateHash": self.hash, "phase": self.phase,
                "reason": self.reason, "ready": self.ready(), "created": self.created, "readyAt": self.ready_at,
                "serviceAccountName": self.spec.get("serviceAccountName"),
                "containers": {c.name: c.status() for c in self.containers}}


class Runner:
    def __init__(self, args):
        self.args = args
        self.api = KubeAPI.from_kubeconfig(args.kubeconfig)
        with open(args.ca_file, encoding="utf-8") as f:
            self.ca_pem = f.read()
        self.prefix = "troupe-e2e-" + hashlib.sha256(args.work_dir.encode()).hexdigest()[:6]
        self.podman = Podman(args.runc)
        self.ulimits = ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096"]
        self.logs = args.logs
        self.service_env = {"KUBERNETES_SERVICE_HOST": "127.0.0.1", "KUBERNETES_SERVICE_PORT": str(args.apiserver_port),
                            "KUBERNETES_SERVICE_PORT_HTTPS": str(args.apiserver_port),
                            "KUBERNETES_PORT": f"tcp://127.0.0.1:{args.apiserver_port}"}
        self.pod = None
        self.seq = 0
        self.rollouts = 0
        self.events = []
        self.stopping = False
        self.deployment_seen = False
        self.last_error = None
        self.fills = {"tokenSecrets": 0, "rootCA": 0}
        self.kcm = None

    def event(self, msg):
        log(msg)
        self.events = (self.events + [f"{time.strftime('%H:%M:%S')} {msg}"])[-40:]

    def deployment(self):
        try:
            return self.api.request("GET", f"/apis/apps/v1/namespaces/{self.args.namespace}/deployments/{self.args.deployment}")
        except APIError as e:
            if e.status == 404:
                return None
            raise

    # -- the controllers a cluster would run, where kube-controller-manager does not ------------------
    def controller_manager_runs(self):
        try:
            lease = self.api.request("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-controller-manager")
        except APIError:
            # Leader election off (scripts/cluster-up.sh's): no Lease, but its root CA publisher
            # fills kube-system, where this stand-in never writes.
            try:
                self.api.request("GET", "/api/v1/namespaces/kube-system/configmaps/kube-root-ca.crt")
                return True
            except APIError:
                return False
        renew = (lease.get("spec") or {}).get("renewTime")
        if not renew:
            return False
        t = calendar.timegm(time.strptime(renew[:19], "%Y-%m-%dT%H:%M:%S"))
        return time.time() - t < 60

    def stand_in_controllers(self):
        self.kcm = self.controller_manager_runs()
        if self.kcm:
            return
        ns = self.args.namespace
        try:
            self.api.request("GET", f"/api/v1/namespaces/{ns}/configmaps/kube-root-ca.crt")
        except APIError as e:
            if e.status != 404:
                raise
            try:
                self.api.request("POST", f"/api/v1/namespaces/{ns}/configmaps",
                                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kube-root-ca.crt"},
                                  "data": {"ca.crt": self.ca_pem}})
                self.fills["rootCA"] += 1
                self.event(f"published configmap {ns}/kube-root-ca.crt (the root CA publisher's work)")
            except APIError as e2:
                if e2.status not in (404, 409):  # namespace not there yet, or raced
                    raise
        try:
            secrets = self.api.request("GET", f"/api/v1/namespaces/{ns}/secrets?fieldSelector=type%3Dkubernetes.io%2Fservice-account-token")["items"]
        except APIError as e:
            if e.status == 404:
                return
            raise
        for s in secrets:
            if (s.get("data") or {}).get("token"):
                continue
            name = s["metadata"]["name"]
            sa = (s["metadata"].get("annotations") or {}).get("kubernetes.io/service-account.name")
            if not sa:
                continue
            body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                    "spec": {"expirationSeconds": TOKEN_SECRET_SECONDS,
                             "boundObjectRef": {"apiVersion": "v1", "kind": "Secret", "name": name,
                                                "uid": s["metadata"]["uid"]}}}
            try:
                token = self.api.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/{sa}/token", body)["status"]["token"]
            except APIError as e:
                self.event(f"secret {ns}/{name}: no token for serviceaccount {sa} yet ({e})")
                continue
            data = {"token": token, "ca.crt": self.ca_pem, "namespace": ns}
            self.api.request("PATCH", f"/api/v1/namespaces/{ns}/secrets/{name}",
                             {"data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}},
                             content_type="application/merge-patch+json")
            self.fills["tokenSecrets"] += 1
            self.event(f"filled secret {ns}/{name} with a token of serviceaccount {sa} (the token controller's work)")

    # -- the Deployment -------------------------------------------------------------------------------
    def reconcile(self):
        dep = self.deployment()
        if dep is None or int(dep["spec"].get("replicas", 1)) == 0:
            if self.pod is not None:
                self.event(f"deployment {self.args.namespace}/{self.args.deployment} is gone or scaled to 0: stopping the pod")
                self.pod.stop(self.grace())
                self.pod = None
            return
        self.deployment_seen = True
        if int(dep["spec"].get("replicas", 1)) > 1 and self.rollouts == 0:
            self.event(f"replicas {dep['spec']['replicas']}: one pod runs here (host network)")
        h = hashlib.sha256(json.dumps(dep["spec"]["template"], sort_keys=True).encode()).hexdigest()
        if self.pod is None or self.pod.hash != h:
            if self.pod is not None:
                self.event(f"pod template changed (generation {dep['metadata'].get('generation')}): replacing pod {self.pod.name}")
                self.pod.stop(self.grace())
            self.seq += 1
            self.rollouts += 1
            self.pod = Pod(self, dep, h, self.seq)
            self.event(f"created pod {self.pod.name} (generation {dep['metadata'].get('generation')})")
        if self.pod.phase == "Pending":
            try:
                self.pod.try_start()
            except PodError as e:
                if self.pod.reason != str(e):
                    self.pod.event(f"pending: {e}")
                self.pod.reason = str(e)
                return
        self.pod.tick()

    def grace(self):
        spec = self.pod.spec if self.pod else {}
        return min(int(spec.get("terminationGracePeriodSeconds", 30)), self.args.max_grace)

    def write_status(self):
        status = {"deployment": f"{self.args.namespace}/{self.args.deployment}", "deploymentSeen": self.deployment_seen,
                  "rollouts": self.rollouts, "pod": self.pod.status() if self.pod else None,
                  "controllerManager": self.kcm, "standIns": self.fills, "lastError": self.last_error,
                  "events": self.events, "updated": time.time(), "runnerPid": os.getpid()}
        write_file(self.args.status, json.dumps(status, indent=1), 0o644)

    def run(self):
        signal.signal(signal.SIGTERM, lambda *_: setattr(self, "stopping", True))
        signal.signal(signal.SIGINT, lambda *_: setattr(self, "stopping", True))
        self.event(f"watching deployment {self.args.namespace}/{self.args.deployment}")
        while not self.stopping:
            try:
                self.stand_in_controllers()
                self.reconcile()
                self.last_error = None
            except (APIError, OSError, PodError, subprocess.SubprocessError) as e:
                if str(e) != self.last_error:
                    self.event(f"error (retrying): {e}")
                self.last_error = str(e)
            self.write_status()
            time.sleep(self.args.interval)
        if self.pod is not None:
            self.pod.stop(min(self.grace(), 5))
            self.pod = None
        self.write_status()
        log("stopped")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--deployment", required=True)
    ap.add_argument("--apiserver-port", type=int, required=True)
    ap.add_argument("--ca-file", required=True, help="the API server's CA (the pods' ca.crt)")
    ap.add_argument("--work-dir", required=True, help="volumes of the pods (under pods/)")
    ap.add_argument("--logs", required=True)
    ap.add_argument("--status", required=True)
    ap.add_argument("--runc", default="/usr/sbin/runc")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--max-grace", type=int, default=10, help="cap on terminationGracePeriodSeconds")
    args = ap.parse_args()
    args.work_dir = os.path.abspath(args.work_dir)
    Runner(args).run()


if __name__ == "__main__":
    main()
