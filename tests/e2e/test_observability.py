"""The Grafana dashboard's PromQL against a real Prometheus scraping the e2e cluster's Troupe.

Starts Debian's Prometheus server (build/tools/prometheus-root, unpacked by
scripts/check-metrics.sh --install-only; or /usr/bin/prometheus) on loopback with a 1 s scrape
of Troupe's metrics port (TROUPE_METRICS_PORT from build/e2e/state.env, `troupe serve
--metrics-listen`; TROUPE_PORT for a cluster started without one), creates a few GPU pods through the
troupe-scheduler (bound, rejected, a gang), waits for several scrapes, then runs every target
of every panel of charts/troupe/dashboards/troupe.json through /api/v1/query and asserts it
parses and returns data. Skipped when the cluster is not up or Prometheus cannot be had.
"""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from kubehelpers import gpu_pod

# Also against the chart's pod (TROUPE_DEPLOY=chart): Prometheus scrapes its metrics port.
pytestmark = pytest.mark.chart

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DASHBOARD = os.path.join(ROOT, "charts", "troupe", "dashboards", "troupe.json")
RATE_WINDOW = "30s"  # stands in for Grafana's $__rate_interval; 30 samples at a 1 s scrape
# Troupe records placements only when it binds (extender bindVerb); without it these panels
# may legitimately be empty, though their queries must still parse.
BIND_ONLY_METRICS = ("troupe_pods_placed_total", "troupe_placement_topology_quality_ratio")
# Troupe watches the API only with TROUPE_MODE=kube; standalone it has no caches to report on.
KUBE_ONLY_METRICS = ("troupe_kube_",)
# Series per queue exist only while queues are defined (this workload defines none); their
# values are checked by test_queues.py and tests/unit/adapters/metrics/queue_metrics_test.cc.
QUEUE_METRICS = ("troupe_queue_",)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _prometheus_binary():
    for path in (os.environ.get("PROMETHEUS_BIN", ""),
                 os.path.join(ROOT, "build", "tools", "prometheus-root", "usr", "bin", "prometheus"),
                 shutil.which("prometheus") or ""):
        if path and os.access(path, os.X_OK):
            return path
    try:
        out = subprocess.run([os.path.join(ROOT, "scripts", "check-metrics.sh"), "--install-only"],
                             capture_output=True, text=True, timeout=120, check=True).stdout.strip()
        return os.path.join(out.splitlines()[-1], "prometheus")
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"no Prometheus server binary ({e}); apt-get download prometheus failed")


def _get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


class Prometheus:
    def __init__(self, base):
        self.base = base

    def query(self, expr):
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        try:
            return _get(url)
        except urllib.error.HTTPError as e:  # 400 on a parse error, with the reason in the body
            return json.loads(e.read() or b"{}") or {"status": "error", "error": str(e)}


@pytest.fixture(scope="module")
def prometheus(e2e_state):
    troupe_port = e2e_state.get("TROUPE_METRICS_PORT") or e2e_state.get("TROUPE_PORT")
    if not troupe_port:
        pytest.skip("no TROUPE_PORT in build/e2e/state.env")
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{troupe_port}/healthz", timeout=5).read()
    except OSError as e:
        pytest.skip(f"Troupe of the e2e cluster does not answer on {troupe_port}: {e}")
    binary = _prometheus_binary()
    work = tempfile.mkdtemp(prefix="troupe-prom-")
    port = _free_port()
    with open(os.path.join(work, "prometheus.yml"), "w", encoding="utf-8") as f:
        f.write("global: {scrape_interval: 1s, scrape_timeout: 1s, evaluation_interval: 1s}\n"
                "scrape_configs:\n"
                "  - job_name: troupe\n"
                f"    static_configs: [{{targets: ['127.0.0.1:{troupe_port}']}}]\n")
    log = open(os.path.join(work, "prometheus.log"), "w", encoding="utf-8")
    proc = subprocess.Popen([binary, f"--config.file={work}/prometheus.yml", f"--storage.tsdb.path={work}/data",
                             f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"],
                            stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(f"{base}/-/ready", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.time() > deadline:
                    log.flush()
                    pytest.fail("Prometheus did not start:\n" + open(log.name, encoding="utf-8").read()[-2000:])
                time.sleep(0.2)
        yield Prometheus(base)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def _dashboard_targets():
    with open(DASHBOARD, encoding="utf-8") as f:
        dash = json.load(f)
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((p["title"], t["refId"], t["expr"]))
    return out


def _concrete(expr):
    return expr.replace("$__rate_interval", RATE_WINDOW).replace("$job", "troupe")


def test_dashboard_queries_return_data(prometheus, e2e_state, kube, namespace, scheduler_name, scheduler_config):
    # Workload: two small GPU pods that bind, one that every node rejects, a two-member gang.
    for i in range(2):
        kube.create(gpu_pod(f"obs-{i}", gpus=1, scheduler=scheduler_name), namespace)
    kube.create(gpu_pod("obs-nomodel", gpus=1, scheduler=scheduler_name,
                        annotations={"troupe.dev/gpu-model": "NO-SUCH-GPU"}), namespace)
    for i in range(2):
        kube.create(gpu_pod(f"obs-gang-{i}", gpus=1, scheduler=scheduler_name,
                            annotations={"troupe.dev/gang": "obs", "troupe.dev/gang-size": "2"}), namespace)
    for i in range(2):
        kube.wait_pod_bound(f"obs-{i}", namespace, timeout=60)

    # Enough scrapes after the workload that rate() over RATE_WINDOW has >= 2 samples and the
    # counters moved inside the window.
    started = time.time()
    deadline = started + 60
    while True:
        r = prometheus.query(f'count_over_time(troupe_build_info{{job="troupe"}}[{RATE_WINDOW}])')
        n = float(r["data"]["result"][0]["value"][1]) if r.get("status") == "success" and r["data"]["result"] else 0
        rej = prometheus.query('sum(troupe_filter_rejections_total{job="troupe"})')
        if n >= 5 and time.time() - started >= 3 and rej.get("data", {}).get("result"):
            break
        assert time.time() < deadline, f"Prometheus has not scraped Troupe enough ({n} samples, rejections {rej})"
        time.sleep(0.5)

    has_bind = bool(scheduler_config["extenders"][0].get("bindVerb"))
    kube_mode = e2e_state.get("TROUPE_MODE") == "kube"
    targets = _dashboard_targets()
    assert len(targets) >= 15
    errors, empty = [], []
    for title, ref, expr in targets:
        q = _concrete(expr)
        assert "$" not in q, f"{title} {ref}: unresolved variable in {q}"
        r = prometheus.query(q)
        if r.get("status") != "success":
            errors.append(f"{title} [{ref}] {q}: {r.get('errorType')}: {r.get('error')}")
        elif not r["data"]["result"]:
            if not has_bind and any(m in q for m in BIND_ONLY_METRICS):
                continue
            if not kube_mode and any(m in q for m in KUBE_ONLY_METRICS):
                continue
            if any(m in q for m in QUEUE_METRICS):
                continue
            empty.append(f"{title} [{ref}] {q}")
    assert not errors, "queries Prometheus rejects:\n" + "\n".join(errors)
    assert not empty, "queries without data:\n" + "\n".join(empty)


def test_metrics_port_serves_no_verbs(e2e_state):
    """The metrics port answers probes and /metrics; the extender verbs are only on TROUPE_PORT."""
    port = e2e_state.get("TROUPE_METRICS_PORT")
    if not port:
        pytest.skip("cluster started without TROUPE_METRICS_PORT (scripts/cluster-up.sh sets it)")
    base = f"http://127.0.0.1:{port}"
    for path in ("/healthz", "/readyz", "/metrics"):
        with urllib.request.urlopen(base + path, timeout=5) as r:
            assert r.status == 200, path
    for verb in ("filter", "prioritize", "bind", "preempt"):
        req = urllib.request.Request(f"{base}/{verb}", data=b"{}", method="POST",
                                     headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(req, timeout=5)
        assert err.value.code == 404, verb
        assert "--metrics-listen" in err.value.read().decode()
