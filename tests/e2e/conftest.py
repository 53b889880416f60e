"""Fixtures for e2e tests against the local control plane.

Start it first:  scripts/cluster-up.sh   (or: make cluster-up)
Tests are skipped, with a message saying so, when no cluster is up.

Fixtures (helpers live in kubehelpers.py):
  e2e_state       dict of build/e2e/state.env (ports, versions, ...)
  kube            Kube helper bound to build/e2e/kubeconfig and the built kubectl
  namespace       a fresh namespace per test; its pods are force-deleted and
                  the namespace finalized afterwards (there is no namespace
                  controller without kube-controller-manager)
  scheduler_name  the profile name pods must use ("troupe-scheduler")
  troupe          TroupeControl: stop/start/restart Troupe only
  troupe_url      Troupe's plain-HTTP address for probes and /metrics (http://127.0.0.1:PORT)
  api             KubeAPI: direct REST calls to the apiserver (kubeapi.py)
  cluster_nodes   the fleet from build/e2e/cluster.yaml (list of dicts)
  scheduler_config  build/e2e/scheduler-config.yaml, parsed (which extender verbs are on)
  troupe_recording  the --record-dir of the running Troupe; restarts Troupe with recording
                  on if it was started without (scripts/lib-e2e.sh records by default)
  gpu_invariant   after the test (before its namespace is deleted): no node has more
                  nvidia.com/gpu requested by bound pods than it has allocatable

There is no kubelet: pods never run. Placement is asserted through
spec.nodeName; use Kube.set_pod_phase() to fake Running/Succeeded.
"""
import os
import re
import subprocess
import uuid

import pytest
import yaml

from kubeapi import KubeAPI
from kubehelpers import (E2E_DIR, KUBECACHEDIR, KUBECONFIG, STATE_FILE, Kube, TroupeControl, gpu_overcommit,
                         read_state, troupe_record_dir)


# ---- TROUPE_DEPLOY=chart: only the tests marked chart -------------------------------
def pytest_configure(config):
    config.addinivalue_line("markers", "chart: also runs against the chart's pod (TROUPE_DEPLOY=chart), where "
                                       "the other tests, which drive host processes, are deselected")


def pytest_collection_modifyitems(config, items):
    try:
        chart_mode = read_state().get("TROUPE_DEPLOY") == "chart"
    except OSError:
        return
    if not chart_mode:
        return
    keep = [i for i in items if i.get_closest_marker("chart")]
    dropped = [i for i in items if not i.get_closest_marker("chart")]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


# ---- fixtures -------------------------------------------------------------------
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture(scope="session")
def e2e_state():
    if not os.path.exists(STATE_FILE) or not os.path.exists(KUBECONFIG):
        pytest.skip("e2e cluster is not up (no build/e2e/state.env); run scripts/cluster-up.sh")
    state = read_state()
    kubectl = os.path.join(state["K8S_BIN"], "kubectl")
    try:
        p = subprocess.run([kubectl, "--kubeconfig", KUBECONFIG, "get", "--raw", "/readyz"],
                           capture_output=True, text=True, timeout=20,
                           env=dict(os.environ, KUBECACHEDIR=KUBECACHEDIR))
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"e2e cluster is not reachable ({e}); run scripts/cluster-up.sh")
    if p.returncode != 0:
        pytest.skip(f"e2e cluster is not healthy ({p.stderr.strip()[:200]}); run scripts/cluster-up.sh")
    return state


@pytest.fixture(scope="module")
def api():
    """KubeAPI: direct REST calls to the apiserver (watch, patch, raw objects)."""
    return KubeAPI.from_kubeconfig(KUBECONFIG)


@pytest.fixture(scope="module")
def troupe_url(e2e_state):
    """Troupe's plain-HTTP address for /healthz, /readyz and /metrics: the extender port, or the
    metrics port when the verbs are on HTTPS (TROUPE_TLS=1: they need a client certificate)."""
    if e2e_state.get("TROUPE_TLS") == "1":
        return f"http://127.0.0.1:{e2e_state['TROUPE_METRICS_PORT']}"
    return f"http://127.0.0.1:{e2e_state['TROUPE_PORT']}"


@pytest.fixture(scope="session")
def verbs(e2e_state):
    """(url, ssl context or None) of Troupe's extender verbs, as kube-scheduler calls them: with
    TROUPE_TLS=1 over HTTPS with kube-scheduler's client certificate."""
    if e2e_state.get("TROUPE_TLS") == "1":
        import ssl
        tls = os.path.join(E2E_DIR, "troupe-tls")
        ctx = ssl.create_default_context(cafile=os.path.join(tls, "ca.crt"))
        ctx.load_cert_chain(os.path.join(tls, "client.crt"), os.path.join(tls, "client.key"))
        return f"https://127.0.0.1:{e2e_state['TROUPE_PORT']}", ctx
    return f"http://127.0.0.1:{e2e_state['TROUPE_PORT']}", None


@pytest.fixture(scope="session")
def kube(e2e_state):
    return Kube(os.path.join(e2e_state["K8S_BIN"], "kubectl"), KUBECONFIG)


@pytest.fixture(scope="session")
def scheduler_name(e2e_state):
    return e2e_state.get("TROUPE_SCHEDULER_NAME") or "troupe-scheduler"


@pytest.fixture(scope="session")
def troupe(e2e_state):
    return TroupeControl(e2e_state)


@pytest.fixture(scope="session")
def cluster_nodes(e2e_state):
    with open(os.path.join(E2E_DIR, "cluster.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)["nodes"]


@pytest.fixture
def namespace(kube, request):
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"e2e-{base}-{uuid.uuid4().hex[:6]}"
    kube.create_namespace(name)
    yield name
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        pods = kube.kubectl("get", "pods", "-n", name, "-o", "wide", check=False).stdout
        print(f"\n--- namespace {name} at failure ---\n{pods}\nevents:\n{kube.describe_events(name)}")
    kube.delete_namespace(name)


@pytest.fixture(scope="session")
def scheduler_config(e2e_state):
    with open(os.path.join(E2E_DIR, "scheduler-config.yaml"), encoding="utf-8") as f:
        return yaml.safe_load(f)


@pytest.fixture
def troupe_recording(troupe):
    """Directory where the running Troupe records request bodies (a fresh one per start)."""
    if not troupe.is_running():
        troupe.start()  # a test that stopped Troupe and failed before restarting it
    path = troupe_record_dir()
    if path is None:
        troupe.restart(env={"TROUPE_RECORD": "1"})
        path = troupe_record_dir()
    assert path, "Troupe runs without --record-dir even after a restart with TROUPE_RECORD=1"
    return path


@pytest.fixture
def gpu_invariant(kube, namespace):
    yield
    over = gpu_overcommit(kube)
    assert not over, "nodes with more nvidia.com/gpu requested by bound pods than allocatable " \
                     f"(node, requested, allocatable): {over}"
