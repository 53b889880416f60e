"""Gang helpers shared by tests/e2e/test_gangs.py and bench/gang_bind_time.py.

A gang test brings its own fake nodes (Node objects with status.allocatable, as make_nodes.py
makes them), labelled with a fleet id and a part name, and tainted so that no other test's pods
land there; its member pods select their part and tolerate the taint. Deleting the fleet's
nodes afterwards also drops whatever Troupe still held there.
"""
import datetime
import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request

from make_nodes import HERE, load_spec, node_labels, node_object

FLEET_LABEL = "troupe.dev/e2e-gang-fleet"
PART_LABEL = "troupe.dev/e2e-gang-part"
TAINT_KEY = "troupe.dev/e2e-gang"
NOWHERE = {"troupe.dev/e2e-no-such-node": "true"}  # a nodeSelector no node matches


def fleet_nodes(fleet, parts, k8s_version, node_type="h100"):
    """Node objects: parts = {"a": 64, "b": 8}; names gang-<fleet>-<part>-<i>."""
    spec = load_spec(os.path.join(HERE, "nodes.yaml"))
    t = spec["types"][node_type]
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    nodes = []
    for part, count in parts.items():
        for i in range(count):
            name = f"gang-{fleet}-{part}-{i:03d}"
            labels = node_labels(name, t, "zone-g", f"g{part}", f"g{part}{i // 8}")
            labels[FLEET_LABEL] = fleet
            labels[PART_LABEL] = part
            node = node_object(name, t, labels, k8s_version, now)
            node["spec"]["taints"] = [{"key": TAINT_KEY, "value": fleet, "effect": "NoSchedule"}]
            nodes.append(node)
    return nodes


def module_fleet(state, kubeconfig, troupe_url, parts):
    """The body of a test module's fleet fixture: a fresh fleet of `parts`, waited for until Troupe
    knows its nodes, deleted afterwards. Use with `yield from`."""
    import uuid
    fleet_id = uuid.uuid4().hex[:6]
    before = troupe_metrics(troupe_url).get("troupe_nodes", 0)
    create_fleet(state, kubeconfig, fleet_nodes(fleet_id, parts, state["K8S_VERSION"]))
    wait_troupe_nodes(troupe_url, before + sum(parts.values()))
    yield fleet_id
    delete_fleet(state, kubeconfig, fleet_id)


def kubectl(state, kubeconfig, *args, input=None, check=True, timeout=120):
    exe = os.path.join(state["K8S_BIN"], "kubectl")
    env = dict(os.environ, KUBECACHEDIR=os.path.join(os.path.dirname(kubeconfig), "kube-cache"))
    p = subprocess.run([exe, "--kubeconfig", kubeconfig, *args], input=input, capture_output=True, text=True,
                       timeout=timeout, env=env)
    if check and p.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {p.stderr.strip()[-2000:]}")
    return p


def create_fleet(state, kubeconfig, nodes):
    kubectl(state, kubeconfig, "create", "-f", "-", "-o", "name",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}))


def delete_fleet(state, kubeconfig, fleet):
    kubectl(state, kubeconfig, "delete", "nodes", "-l", f"{FLEET_LABEL}={fleet}", "--wait=false", check=False)


def member(name, gang, size, gpus, fleet, part, scheduler, timeout=None, annotations=None, labels=None,
           node_selector=None):
    """A gang member pod: troupe.dev/gang and gang-size unless annotations/labels say otherwise."""
    ann = {"troupe.dev/gang": gang, "troupe.dev/gang-size": str(size)} if gang else {}
    if timeout:
        ann["troupe.dev/gang-timeout"] = timeout
    ann.update(annotations or {})
    return pod(name, gpus, fleet, part, scheduler, annotations=ann, labels=labels, node_selector=node_selector)


def pod(name, gpus, fleet, part, scheduler, annotations=None, labels=None, node_selector=None):
    res = {"requests": {"cpu": "10m", "memory": "16Mi", "nvidia.com/gpu": str(gpus)},
           "limits": {"nvidia.com/gpu": str(gpus)}}
    meta = {"name": name}
    if annotations:
        meta["annotations"] = dict(annotations)
    if labels:
        meta["labels"] = dict(labels)
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": meta,
        "spec": {
            "schedulerName": scheduler,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": dict(node_selector) if node_selector else {FLEET_LABEL: fleet, PART_LABEL: part},
            "tolerations": [{"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10", "resources": res}],
        },
    }


def bound(api, namespace, names):
    """{name: node} of the named pods that are bound now."""
    out = {}
    for p in api.list_pods(namespace):
        n = p["metadata"]["name"]
        if n in names and p["spec"].get("nodeName"):
            out[n] = p["spec"]["nodeName"]
    return out


def troupe_metrics(url):
    """{metric name: summed value} from Troupe's /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(\w+)(\{[^}]*\})?\s+(\S+)$', line)
        if m and not line.startswith("#"):
            out[m.group(1)] = out.get(m.group(1), 0.0) + float(m.group(3))
    return out


def wait_troupe_nodes(url, at_least, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if troupe_metrics(url).get("troupe_nodes", 0) >= at_least:
                return
        except (urllib.error.URLError, OSError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"Troupe knows fewer than {at_least} nodes after {timeout}s")
        time.sleep(0.1)


def troupe_series(url):
    """{(metric name, frozenset of (label, value))}: value} from Troupe's /metrics, one entry per
    series (troupe_metrics sums over labels)."""
    with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    out = {}
    for line in text.splitlines():
        m = re.match(r'^(\w+)(?:\{([^}]*)\})?\s+(\S+)$', line)
        if m and not line.startswith("#"):
            labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def series_value(series, name, **labels):
    """Sum of the series of `name` whose labels include `labels` (0 when there is none)."""
    want = set(labels.items())
    return sum(v for (n, ls), v in series.items() if n == name and want <= set(ls))


# What Troupe keeps for gangs; all zero once no gang pod exists (and no gang waits or holds).
GANG_HOLDS = (("troupe_gang_reserved_gpus", {}), ("troupe_gangs", {"state": "waiting"}),
              ("troupe_gangs", {"state": "planned"}), ("troupe_gang_draining_nodes", {}))


def gang_holds(url):
    """{'troupe_gang_reserved_gpus': v, 'troupe_gangs{state="waiting"}': v, ...} now."""
    s = troupe_series(url)
    out = {}
    for name, labels in GANG_HOLDS:
        key = name + ("{" + ",".join(f'{k}="{v}"' for k, v in labels.items()) + "}" if labels else "")
        out[key] = series_value(s, name, **labels)
    return out


def gang_pods(api):
    """Pods of any gang (troupe.dev/gang, a PodGroup label or spec.schedulingGroup) in any namespace that are not
    finished: ["ns/name", ...]."""
    out = []
    for p in api.list_pods():
        meta = p["metadata"]
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if "troupe.dev/gang" in (meta.get("annotations") or {}) or \
                "scheduling.x-k8s.io/pod-group" in (meta.get("labels") or {}) or \
                (p.get("spec") or {}).get("schedulingGroup"):
            out.append(f'{meta["namespace"]}/{meta["name"]}')
    return out


def wait_no_gang_holds(url, api=None, timeout=15):
    """Troupe must hold nothing for gangs (every GANG_HOLDS series 0) once no gang waits or
    holds; with api, also once no gang pod exists anywhere (which it then requires first).
    Waits up to timeout; returns the seconds it took; raises AssertionError with the values."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while True:
        left = gang_pods(api) if api is not None else []
        holds = gang_holds(url)
        if not left and not any(holds.values()):
            return time.monotonic() - t0
        if time.monotonic() > deadline:
            if left:
                raise AssertionError(f"gang pods still exist after {timeout}s: {left[:6]}")
            what = "no gang pod exists, yet" if api is not None else "nothing waits or is planned, yet"
            raise AssertionError(f"{what} {timeout}s later Troupe still holds for gangs: "
                                 + ", ".join(f"{k} {v:g}" for k, v in holds.items()))
        time.sleep(0.2)
