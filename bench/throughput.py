#!/usr/bin/env python3
"""Scheduling throughput on the real control plane: kube-scheduler alone, with Troupe as a
filter-only extender, and with Troupe as the Helm chart runs it (Kubernetes mode, Troupe binds),
on the same nodes and pods, in one invocation; and the bind time of one large gang.

For each node count (--nodes 1000,5000) it starts a control plane (scripts/cluster-up.sh,
etcd + kube-apiserver + N fake GPU nodes of tests/e2e/nodes.yaml's mix, in
build/e2e-throughput), stops the kube-scheduler and Troupe that cluster-up started, and then,
per mode:

  1. starts Troupe for the mode (none: no Troupe), waits until it is ready;
  2. creates --pods pods of 1, 2 and 4 GPUs (5:3:2) while no kube-scheduler runs;
  3. starts kube-scheduler with the mode's configuration and watches the pods (a watch with
     fieldSelector spec.nodeName!=""); the rate is the pods bound between the 5% and the 95%
     mark divided by the time between them;
  4. reads every process's CPU time (/proc/<pid>/stat) at the two marks: CPU seconds per
     wall second in the window says which process saturates;
  5. stops kube-scheduler and Troupe and deletes the pods (grace period 0).

Modes (the kube-scheduler configuration is the same in all but the extender; client QPS and
burst --qps/--burst, parallelism 16, percentageOfNodesToScore 100, as the chart):
  none        kube-scheduler alone; it binds.
  standalone  Troupe on the node list (--cluster), filter + prioritize (names only), narrowTo
              best; kube-scheduler binds.
  kube        the chart's configuration: Troupe watches the API (its own ServiceAccount,
              deploy/rbac.yaml) and binds (bindVerb), narrowTo best.

Gang (--gang 1024, kube mode, on the same cluster afterwards): kube-scheduler and Troupe
running, --gang pods of --gang-gpus GPUs with troupe.dev/gang and gang-size created as fast as
the client can; the time from the last member's creation to all members bound.

Prints a table per node count and writes build/throughput.json. Not part of CI: at 5,000
nodes one invocation takes ~10-15 minutes on 2 cores.

Usage: bench/throughput.py [--nodes 1000,5000] [--pods 3000] [--modes none,standalone,kube]
                           [--gang 1024] [--qps 200 --burst 400] [--keep]
Needs build/troupe and the control plane binaries (build/k8s, scripts/build-k8s.sh).
"""
import argparse
import http.client
import json
import math
import os
import platform
import queue
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
E2E_DIR = os.path.join(ROOT, "build", "e2e-throughput")
os.environ["TROUPE_E2E_DIR"] = E2E_DIR  # read by scripts/lib-e2e.sh and kubehelpers at import
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from kubeapi import KubeAPI  # noqa: E402
from kubehelpers import read_state  # noqa: E402

NAMESPACE = "throughput"
SCHEDULER_NAME = "troupe-scheduler"
CLK_TCK = os.sysconf("SC_CLK_TCK")
MODES = ("none", "standalone", "kube")


def log(msg):
    print(f"[throughput] {msg}", flush=True)


# ---- API access: keep-alive connections (urllib opens one TLS connection per request) -----------
class Conn:
    """One keep-alive HTTPS connection to the API server, reopened after an error."""

    def __init__(self, api):
        u = urllib.parse.urlparse(api.server)
        self.host, self.port, self.ctx, self.token = u.hostname, u.port, api.ctx, api.token
        self.c = None

    def request(self, method, path, body=None, timeout=60):
        data = json.dumps(body).encode() if body is not None else None
        headers = {"Accept": "application/json", "Authorization": f"Bearer {self.token}"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        for attempt in range(5):
            try:
                if self.c is None:
                    self.c = http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)
                self.c.request(method, path, body=data, headers=headers)
                r = self.c.getresponse()
                text = r.read()
                if r.status in (429, 500, 502, 503, 504) and attempt < 4:
                    time.sleep(0.2)
                    continue
                return r.status, text
            except (OSError, http.client.HTTPException):
                if self.c is not None:
                    self.c.close()
                self.c = None
                if attempt == 4:
                    raise
                time.sleep(0.2)
        raise RuntimeError("unreachable")


def parallel(api, items, fn, threads=4):
    """fn(conn, item) for every item on `threads` keep-alive connections; returns failures."""
    q = queue.Queue()
    for it in items:
        q.put(it)
    failures = []

    def work():
        conn = Conn(api)
        while True:
            try:
                it = q.get_nowait()
            except queue.Empty:
                return
            err = fn(conn, it)
            if err:
                failures.append(err)

    ts = [threading.Thread(target=work) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return failures


def create_pods(api, pods, threads=4):
    def create(conn, p):
        status, text = conn.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", p)
        if status not in (201, 409):
            return f"create {p['metadata']['name']}: HTTP {status} {text[:200]!r}"
        return None

    failures = parallel(api, pods, create, threads)
    if failures:
        raise RuntimeError(f"{len(failures)} pods not created, e.g. {failures[0]}")


def delete_all_pods(api):
    names = [p["metadata"]["name"] for p in api.list_pods(NAMESPACE)]

    def delete(conn, name):
        status, text = conn.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods/{name}",
                                    {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
        return None if status in (200, 202, 404) else f"delete {name}: HTTP {status} {text[:200]!r}"

    failures = parallel(api, names, delete)
    if failures:
        raise RuntimeError(f"{len(failures)} pods not deleted, e.g. {failures[0]}")
    deadline = time.monotonic() + 120
    while api.list_pods(NAMESPACE):
        if time.monotonic() > deadline:
            raise TimeoutError("pods still present 120 s after deleting them")
        time.sleep(0.5)


def gpu_pod(name, gpus, annotations=None):
    meta = {"name": name, "labels": {"app": "throughput"}}
    if annotations:
        meta["annotations"] = dict(annotations)
    res = {"requests": {"cpu": "10m", "memory": "16Mi", "nvidia.com/gpu": str(gpus)},
           "limits": {"nvidia.com/gpu": str(gpus)}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": SCHEDULER_NAME, "automountServiceAccountToken": False,
                     "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": res}]}}


def single_pods(count):
    """1, 2 and 4 GPUs in the ratio 5:3:2 (1.9 GPUs a pod on average), interleaved."""
    sizes = (1, 1, 1, 1, 1, 2, 2, 2, 4, 4)
    return [gpu_pod(f"tp-{i:05d}", sizes[(i * 7) % 10]) for i in range(count)]


# ---- processes -------------------------------------------------------------------------------
def cpu_seconds(pid):
    """utime + stime of a process, in seconds (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK
    except (OSError, IndexError, ValueError):
        return None


def pidfile(name):
    try:
        with open(os.path.join(E2E_DIR, "pids", f"{name}.pid"), encoding="utf-8") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Proc:
    def __init__(self, name, argv, env=None):
        self.name = name
        os.makedirs(os.path.join(E2E_DIR, "logs"), exist_ok=True)
        self.log_path = os.path.join(E2E_DIR, "logs", f"bench-{name}.log")
        self.log = open(self.log_path, "a", encoding="utf-8")
        self.log.write(f"===== {time.strftime('%FT%TZ', time.gmtime())} start: {' '.join(argv)}\n")
        self.log.flush()
        self.p = subprocess.Popen(argv, stdout=self.log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  env=dict(os.environ, **(env or {})), start_new_session=True)

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.alive():
            self.p.terminate()
            try:
                self.p.wait(15)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.log.close()


def wait_http(url, proc, timeout, ctx=None):
    import urllib.request
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2, context=ctx):
                return
        except OSError:
            pass
        if not proc.alive():
            raise RuntimeError(f"{proc.name} exited; see {proc.log_path}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{proc.name} not healthy at {url} after {timeout} s; see {proc.log_path}")
        time.sleep(0.2)


# ---- configurations ---------------------------------------------------------------------------
def troupe_config(path, bind_workers=None):
    """Troupe's --config as the Helm chart renders it with its default values (bind_workers:
    binder.workers, when given)."""
    cfg = {
        "maxBodyBytes": 67108864, "logLevel": "info",
        "policy": {"name": "troupe", "weights": {"pack": 0.5, "topology": 0.3, "domains": 0.2}},
        "filter": {"narrowTo": "best"},
        "topology": {"levels": ["topology.kubernetes.io/zone", "troupe.dev/block", "troupe.dev/rack"]},
        "gang": {"timeout": "300s", "maxTimeout": "300s"},
        "schedulerNames": [SCHEDULER_NAME],
        "limits": {"maxHeaderBytes": 65536, "maxBodyBytesInFlight": 134217728, "maxConnections": 1024,
                   "headerTimeoutSeconds": 10, "readTimeoutSeconds": 60, "idleTimeoutSeconds": 120,
                   "writeTimeoutSeconds": 60},
    }
    if bind_workers:
        cfg["binder"] = {"workers": bind_workers}
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)


def scheduler_config(path, mode, kubeconfig, troupe_port, qps, burst):
    """kube-scheduler's configuration: the chart's, with the e2e kubeconfig and no leader election;
    identical in every mode but the extender."""
    cfg = {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": kubeconfig, "qps": qps, "burst": burst},
        "leaderElection": {"leaderElect": False},
        "parallelism": 16,
        "percentageOfNodesToScore": 100,
        "profiles": [{"schedulerName": SCHEDULER_NAME}],
    }
    if mode != "none":
        ext = {"urlPrefix": f"http://127.0.0.1:{troupe_port}", "filterVerb": "filter",
               "prioritizeVerb": "prioritize", "preemptVerb": "preempt"}
        if mode == "kube":
            ext["bindVerb"] = "bind"
        ext.update({"weight": 5, "nodeCacheCapable": True, "httpTimeout": "330s", "ignorable": False,
                    "managedResources": [{"name": "nvidia.com/gpu", "ignoredByScheduler": False},
                                         {"name": "troupe.dev/gpu-milli", "ignoredByScheduler": True}]})
        cfg["extenders"] = [ext]
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump(cfg, f, sort_keys=False)


def mode_kind(mode):
    """none, standalone or kube: what a mode runs (kube-compare and kube:wN are kube)."""
    return "kube" if mode == "kube-compare" or mode.startswith("kube:") else mode


class Bench:
    def __init__(self, args):
        self.args = args
        self.state = read_state(os.path.join(E2E_DIR, "state.env"))
        self.kubeconfig = os.path.join(E2E_DIR, "kubeconfig")
        self.api = KubeAPI.from_kubeconfig(self.kubeconfig)
        self.k8s_bin = self.state["K8S_BIN"]
        self.troupe = None
        self.scheduler = None

    # processes
    def start_troupe(self, mode):
        if mode == "none":
            return
        binary = self.args.compare_troupe if mode == "kube-compare" else self.args.troupe
        # "kube:w32": binder.workers 32 (an older build, kube-compare, may not know the key)
        workers = int(mode.split(":w")[1]) if mode.startswith("kube:w") else None
        mode = mode_kind(mode)
        cfg = os.path.join(E2E_DIR, "bench-troupe-config.yaml")
        troupe_config(cfg, workers)
        port, mport = self.state["TROUPE_PORT"], self.state["TROUPE_METRICS_PORT"]
        argv = [binary, "serve", "--listen", f"127.0.0.1:{port}", "--metrics-listen",
                f"127.0.0.1:{mport}", "--config", cfg]
        if mode == "kube":
            argv += ["--kubeconfig", os.path.join(E2E_DIR, "troupe-kubeconfig")]
        else:
            argv += ["--cluster", os.path.join(E2E_DIR, "cluster.yaml")]
        self.troupe = Proc(f"troupe-{mode}", argv, env={"MALLOC_ARENA_MAX": "2"})
        wait_http(f"http://127.0.0.1:{mport}/readyz", self.troupe, 180)

    def start_scheduler(self, mode):
        mode = mode_kind(mode)
        cfg = os.path.join(E2E_DIR, f"bench-scheduler-{mode}.yaml")
        scheduler_config(cfg, mode, self.kubeconfig, self.state["TROUPE_PORT"], self.args.qps, self.args.burst)
        port = self.state["SCHEDULER_PORT"]
        self.scheduler = Proc(f"kube-scheduler-{mode}", [
            os.path.join(self.k8s_bin, "kube-scheduler"), f"--config={cfg}", "--bind-address=127.0.0.1",
            f"--secure-port={port}", f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}", "--v=2"])

    def stop_all(self):
        for p in (self.scheduler, self.troupe):
            if p is not None:
                p.stop()
        self.scheduler = self.troupe = None

    def pids(self):
        out = {"etcd": pidfile("etcd"), "kube-apiserver": pidfile("kube-apiserver")}
        if self.scheduler:
            out["kube-scheduler"] = self.scheduler.pid
        if self.troupe:
            out["troupe"] = self.troupe.pid
        out["bench (this client)"] = os.getpid()
        return {k: v for k, v in out.items() if v}

    def cpu(self):
        return {name: cpu_seconds(pid) for name, pid in self.pids().items()}, time.monotonic()

    def troupe_metrics(self, pods):
        """Troupe's mean answer time per verb (ms) and its API calls per pod, by verb."""
        import re
        import urllib.request
        url = f"http://127.0.0.1:{self.state['TROUPE_METRICS_PORT']}/metrics"
        with urllib.request.urlopen(url, timeout=10) as r:
            text = r.read().decode()
        sums, counts, api = {}, {}, {}
        for line in text.splitlines():
            m = re.match(r'^(troupe_extender_request_duration_seconds_(sum|count)|troupe_kube_api_requests_total)'
                         r'\{([^}]*)\}\s+(\S+)$', line)
            if not m:
                continue
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(3)))
            v = float(m.group(4))
            if m.group(1).endswith("_sum"):
                sums[labels.get("verb")] = sums.get(labels.get("verb"), 0) + v
            elif m.group(1).endswith("_count"):
                counts[labels.get("verb")] = counts.get(labels.get("verb"), 0) + v
            else:
                k = labels.get("verb", "?")
                api[k] = api.get(k, 0) + v
        return {"mean_ms": {k: round(1000 * sums[k] / counts[k], 2) for k in sums if counts.get(k)},
                "calls": {k: int(v) for k, v in counts.items()},
                "api_calls_per_pod": {k: round(v / pods, 2) for k, v in api.items()}}

    def ensure_namespace(self):
        status, _ = Conn(self.api).request("POST", "/api/v1/namespaces", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        if status not in (201, 409):
            raise RuntimeError(f"cannot create namespace {NAMESPACE}: HTTP {status}")

    # measurement
    def watch_bound(self, total, marks, on_mark, deadline_s, opened, stall_s=90.0):
        """Follows pods with spec.nodeName set until `total` are; sets `opened` (a
        threading.Event) once the watch is open; calls on_mark(i, t) when the i-th (1-based)
        bound pod is in `marks`. Returns {name: monotonic time first seen bound}. A watch the API
        server ends (it closes watchers that fall behind) is opened again from the last
        resourceVersion seen, as informers do."""
        status, text = Conn(self.api).request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1")
        rv = json.loads(text)["metadata"]["resourceVersion"]
        u = urllib.parse.urlparse(self.api.server)
        sel = urllib.parse.quote("spec.nodeName!=")
        seen = {}
        deadline = time.monotonic() + deadline_s
        last_progress = time.monotonic()
        reopened = 0
        while len(seen) < total:
            if time.monotonic() > deadline or time.monotonic() - last_progress > stall_s:
                raise TimeoutError(f"{len(seen)} of {total} pods bound, then none for "
                                   f"{time.monotonic() - last_progress:.0f} s")
            c = http.client.HTTPSConnection(u.hostname, u.port, context=self.api.ctx, timeout=stall_s)
            try:
                c.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&resourceVersion={rv}"
                          f"&allowWatchBookmarks=true&fieldSelector={sel}&timeoutSeconds={int(deadline_s)}",
                          headers={"Authorization": f"Bearer {self.api.token}", "Accept": "application/json"})
                r = c.getresponse()
                if r.status != 200:
                    raise RuntimeError(f"watch: HTTP {r.status} {r.read()[:200]!r}")
                opened.set()
                while len(seen) < total:
                    line = r.readline()
                    if not line:
                        reopened += 1
                        break
                    ev = json.loads(line)
                    if ev.get("type") == "ERROR":
                        raise RuntimeError(f"watch: {ev.get('object')}")
                    obj = ev["object"]
                    rv = obj["metadata"].get("resourceVersion", rv)
                    if ev.get("type") not in ("ADDED", "MODIFIED"):
                        continue
                    name = obj["metadata"]["name"]
                    if obj["spec"].get("nodeName") and name not in seen:
                        t = time.monotonic()
                        last_progress = t
                        seen[name] = t
                        if len(seen) in marks:
                            on_mark(len(seen), t)
            except (TimeoutError, OSError, http.client.HTTPException):
                reopened += 1  # nothing for stall_s, or the connection broke: checked above
            finally:
                c.close()
        if reopened:
            log(f"the API server ended the benchmark's watch {reopened} time(s) (a watcher that falls behind is "
                f"closed; the machine is busy); reopened from the last resourceVersion each time")
        return seen

    def run_mode(self, mode, pods):
        a = self.args
        log(f"mode {mode}: starting Troupe" if mode != "none" else "mode none: no Troupe")
        self.start_troupe(mode)
        t = time.monotonic()
        create_pods(self.api, pods)
        log(f"mode {mode}: {len(pods)} pods created in {time.monotonic() - t:.1f} s; starting kube-scheduler")
        time.sleep(2.0)  # Troupe's watch takes the creations in
        total = len(pods)
        lo, hi = max(1, math.ceil(0.05 * total)), max(1, math.floor(0.95 * total))
        snaps = {}
        result = {}

        def mark(i, t):
            snaps[i] = self.cpu()

        def run_watch():
            try:
                result["seen"] = self.watch_bound(total, {lo, hi}, mark, a.timeout, opened)
            except Exception as e:  # noqa: BLE001 - reported below
                result["error"] = e
            opened.set()

        opened = threading.Event()
        w = threading.Thread(target=run_watch)
        w.start()
        opened.wait(60)  # the watch is open before anything binds
        t_start = time.monotonic()
        self.start_scheduler(mode)
        w.join()
        if "error" in result:
            raise RuntimeError(f"mode {mode}: {result['error']}")
        seen = result["seen"]
        times = sorted(seen.values())
        (c_lo, t_lo), (c_hi, t_hi) = snaps[lo], snaps[hi]
        window = t_hi - t_lo
        rate = (hi - lo) / window if window > 0 else float("inf")
        cpu = {k: (c_hi[k] - c_lo[k]) / window for k in c_hi if c_hi.get(k) is not None and c_lo.get(k) is not None}
        res = {"mode": mode, "pods": total, "pods_per_s": rate, "window_s": window,
               "first_bound_s": times[0] - t_start, "all_bound_s": times[-1] - t_start,
               "cpu_cores_in_window": cpu,
               # CPU per pod bound: what each process spends, whatever share of a busy machine it got
               "cpu_ms_per_pod": {k: 1000 * v / rate for k, v in cpu.items()}}
        if self.troupe:
            res["troupe"] = self.troupe_metrics(total)
            log(f"mode {mode}: Troupe: {res['troupe']}")
        log(f"mode {mode}: {rate:.0f} pods/s (5%..95% in {window:.2f} s; all bound {res['all_bound_s']:.1f} s "
            f"after kube-scheduler started); CPU cores in the window: "
            + ", ".join(f"{k} {v:.2f}" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])))
        self.stop_all()
        t = time.monotonic()
        delete_all_pods(self.api)
        log(f"mode {mode}: pods deleted in {time.monotonic() - t:.1f} s")
        return res

    def run_gang(self, size, gpus):
        log(f"gang: {size} pods of {gpus} GPUs, kube mode")
        self.start_troupe("kube")
        self.start_scheduler("kube")
        wait_http(f"https://127.0.0.1:{self.state['SCHEDULER_PORT']}/healthz", self.scheduler, 60,
                  ctx=ssl._create_unverified_context())
        ann = {"troupe.dev/gang": "big", "troupe.dev/gang-size": str(size), "troupe.dev/gang-timeout": "300s"}
        pods = [gpu_pod(f"gang-{i:05d}", gpus, ann) for i in range(size)]
        result = {}

        def run_watch():
            try:
                result["seen"] = self.watch_bound(size, set(), lambda i, t: None, self.args.timeout, opened,
                                                  stall_s=330)
            except Exception as e:  # noqa: BLE001
                result["error"] = e
            opened.set()

        opened = threading.Event()
        w = threading.Thread(target=run_watch)
        w.start()
        opened.wait(60)
        c0, t_first = self.cpu()
        create_pods(self.api, pods)
        c1, t_last = self.cpu()
        w.join()
        c2, _ = self.cpu()
        if "error" in result:
            raise RuntimeError(f"gang: {result['error']}")
        times = sorted(result["seen"].values())
        res = {"size": size, "gpus": gpus, "create_s": t_last - t_first,
               "last_created_to_all_bound_s": times[-1] - t_last,
               "first_bound_after_last_created_s": times[0] - t_last,
               "cpu_seconds_after_last_created": {k: c2[k] - c1[k] for k in c2 if c1.get(k) is not None}}
        log(f"gang: created in {res['create_s']:.1f} s; last created -> all bound "
            f"{res['last_created_to_all_bound_s']:.2f} s (first bound +{res['first_bound_after_last_created_s']:.2f} s)")
        self.stop_all()
        delete_all_pods(self.api)
        return res


def cluster_up(nodes):
    env = dict(os.environ, TROUPE_MODE="kube", TROUPE_RECORD="0", NODES=str(nodes),
               NODE_CREATE_PARALLEL=os.environ.get("NODE_CREATE_PARALLEL", "4"), TROUPE_WAIT_S="180")
    subprocess.run([os.path.join(ROOT, "scripts", "cluster-up.sh")], check=True, env=env, cwd=ROOT)
    # The benchmark runs its own kube-scheduler and Troupe on the same ports.
    subprocess.run([os.path.join(ROOT, "scripts", "scheduler-pair.sh"), "stop", "0"], check=True, env=env, cwd=ROOT)


def cluster_gpus():
    with open(os.path.join(E2E_DIR, "cluster.yaml"), encoding="utf-8") as f:
        return sum(int(n["gpus"]) for n in yaml.safe_load(f)["nodes"])


def cluster_down():
    subprocess.run([os.path.join(ROOT, "scripts", "cluster-down.sh")], check=False, cwd=ROOT)


def load_avg():
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="1000,5000", help="node counts, comma-separated")
    ap.add_argument("--pods", type=int, default=3000)
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--gang", type=int, default=1024, help="gang size (0: no gang run)")
    ap.add_argument("--gang-gpus", type=int, default=4)
    ap.add_argument("--qps", type=float, default=200, help="kube-scheduler clientConnection.qps")
    ap.add_argument("--burst", type=int, default=400, help="kube-scheduler clientConnection.burst")
    ap.add_argument("--timeout", type=float, default=900, help="per run, seconds")
    ap.add_argument("--troupe", default=os.path.join(ROOT, "build", "troupe"))
    ap.add_argument("--bind-workers", default="",
                    help="Troupe's binder.workers in Kubernetes mode (default: Troupe's own, 8); "
                         "several, comma-separated, run Kubernetes mode once per value")
    ap.add_argument("--compare-troupe", metavar="PATH",
                    help="also run Kubernetes mode with this Troupe binary (e.g. an older build), "
                         "as mode kube-compare")
    ap.add_argument("--out", default=os.path.join(ROOT, "build", "throughput.json"))
    ap.add_argument("--keep", action="store_true", help="leave the last cluster running")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            ap.error(f"--modes: unknown mode {m!r} (known: {', '.join(MODES)})")
    workers = [int(w) for w in args.bind_workers.split(",") if w]
    if workers and "kube" in modes:
        i = modes.index("kube")
        modes[i:i + 1] = [f"kube:w{w}" for w in workers]
    if args.compare_troupe:
        if not os.access(args.compare_troupe, os.X_OK):
            ap.error(f"--compare-troupe {args.compare_troupe} is not an executable")
        modes.append("kube-compare")
    if "none" in modes:  # the ratio's denominator first
        modes = ["none"] + [m for m in modes if m != "none"]
    sizes = [int(n) for n in args.nodes.split(",") if n]
    if not os.access(args.troupe, os.X_OK):
        ap.error(f"--troupe {args.troupe} is not an executable: build it (cmake --build build --target troupe)")

    commit = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}"
    report = {"machine": machine, "compare_troupe": args.compare_troupe, "commit": commit + ("+dirty" if dirty else ""), "qps": args.qps,
              "burst": args.burst, "pods": args.pods, "sizes": []}
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # SIGTERM: stop what it started, too
    try:
        for n in sizes:
            cluster_down()
            t = time.monotonic()
            cluster_up(n)
            log(f"{n} nodes up in {time.monotonic() - t:.0f} s (load average {load_avg()})")
            gpus = cluster_gpus()
            wanted = max(sum(int(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
                             for p in single_pods(args.pods)), args.gang * args.gang_gpus)
            if wanted > 0.9 * gpus:
                cluster_down()
                raise SystemExit(f"throughput: {n} nodes have {gpus} GPUs; --pods {args.pods} (or the gang) needs "
                                 f"{wanted}, over 90% of them: use fewer pods or more nodes")
            bench = Bench(args)
            bench.ensure_namespace()
            delete_all_pods(bench.api)
            entry = {"nodes": n, "load_before": load_avg(), "runs": []}
            try:
                pods = single_pods(args.pods)
                for mode in modes:
                    entry["runs"].append(bench.run_mode(mode, pods))
                if args.gang > 0:
                    entry["gang"] = bench.run_gang(args.gang, args.gang_gpus)
            finally:
                bench.stop_all()
            entry["load_after"] = load_avg()
            report["sizes"].append(entry)
            with open(args.out, "w", encoding="utf-8") as f:
                json.dump(report, f, indent=2)
    finally:
        if not args.keep:
            cluster_down()

    print(f"\nThroughput, {args.pods} pods of 1/2/4 GPUs, kube-scheduler qps {args.qps:g} burst {args.burst} "
          f"({machine}, commit {report['commit']}):")
    print("| nodes | kube-scheduler with | pods/s | ratio | CPU ms per pod: kube-scheduler / all | "
          "busiest processes (CPU cores in the 5-95% window) |")
    print("|---:|---|---:|---:|---:|---|")
    names = {"none": "no extender", "standalone": "Troupe standalone (filter only)",
             "kube": "Troupe, Kubernetes mode (chart: Troupe binds)",
             "kube-compare": f"same, {args.compare_troupe}"}
    for entry in report["sizes"]:
        base = next((r["pods_per_s"] for r in entry["runs"] if r["mode"] == "none"), None)
        for r in entry["runs"]:
            ratio = f"{r['pods_per_s'] / base:.2f}" if base else "-"
            r["ratio"] = r["pods_per_s"] / base if base else None
            busy = ", ".join(f"{k} {v:.2f}" for k, v in sorted(r["cpu_cores_in_window"].items(),
                                                              key=lambda kv: -kv[1])[:4])
            name = names.get(r["mode"]) or f"{names['kube']}, binder.workers {r['mode'].split(':w')[1]}"
            per_pod = r.get("cpu_ms_per_pod", {})
            ks = per_pod.get("kube-scheduler", 0)
            everything = sum(v for k, v in per_pod.items() if not k.startswith("bench"))
            print(f"| {entry['nodes']:,} | {name} | {r['pods_per_s']:.0f} | {ratio} | {ks:.1f} / {everything:.1f} | "
                  f"{busy} |")
    for entry in report["sizes"]:
        g = entry.get("gang")
        if g:
            print(f"Gang of {g['size']} x {g['gpus']} GPUs on {entry['nodes']:,} nodes: last member created -> all "
                  f"bound {g['last_created_to_all_bound_s']:.2f} s (creating the members took {g['create_s']:.1f} s)")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=2)
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
