#!/usr/bin/env python3
"""Live trace replay: one slice of the FGD trace through `troupe simulate` and through the real
control plane (kube-apiserver + kube-scheduler v1.36 + Troupe in Kubernetes mode), compared.

The slice:
  nodes  every k-th GPU node of the trace's node list (sorted by name), --nodes of them, so the
         GPU models keep the trace's mix;
  pods   the trace's pods in the order `troupe simulate` tries them for --seed (the FGD
         artifact's seeded shuffle, read from `troupe simulate --placements`), taken until the
         GPU they ask for reaches --fill % of the slice's GPU capacity (CPU-only pods included).
Both sides replay the slice's pods once each, in that order:
  simulator  troupe simulate --in-order --nodes slice/nodes.csv --pods slice/pods.csv
  live       a fresh cluster (scripts/cluster-up.sh, state in build/e2e-replay) with one fake
             Node per slice node (the trace's CPU, memory and GPUs) and Troupe as the extender
             with --narrow-to best; each pod is created, then awaited until it is bound or
             kube-scheduler reports it unschedulable, which is then deleted (no retries).
Unallocated GPU % is computed as the simulator does: the mean over the pods whose arrived GPU
request rounds to --arrive % of capacity of round(allocated %, 2); 100 minus that.

    python3 tests/e2e/trace_replay.py --nodes 60 --fill 105                # ~400 pods, < 2 min
    python3 tests/e2e/trace_replay.py --nodes 300 --fill 105 --json out.json   # ~2,000 pods
Exit status 0 when live is within --tolerance points of the simulator, 1 otherwise.
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from kubeapi import KubeAPI  # noqa: E402

TRACE_DIR = os.path.join(os.path.dirname(ROOT), "shared", "data", "alibaba-gpu-v2023")
SCHEDULER = "troupe-scheduler"
NAMESPACE = "default"


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        return reader.fieldnames, list(reader)


def write_csv(path, fields, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)


def gpu_milli(pod):
    """The pod's GPU request in milli-GPU (gpu_milli is per GPU, clamped to 1000)."""
    n = int(pod["num_gpu"])
    return n * min(1000, int(pod["gpu_milli"])) if n > 0 else 0


def simulate(troupe, nodes_csv, pods_csv, extra, policy="troupe"):
    """Runs troupe simulate with --placements; returns (placements rows, JSON report)."""
    with tempfile.NamedTemporaryFile(suffix=".csv") as out:
        cmd = [troupe, "simulate", "--nodes", nodes_csv, "--pods", pods_csv, "--policy", policy,
               "--seeds", "1", "--threads", "1", "--json", "--placements", out.name] + extra
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
        _, rows = read_csv(out.name)
        return rows, json.loads(p.stdout)


def make_slice(troupe, trace_dir, node_count, fill, seed, out_dir):
    """Writes out_dir/nodes.csv and out_dir/pods.csv; returns (nodes, pods) rows."""
    node_fields, nodes = read_csv(os.path.join(trace_dir, "openb_node_list_gpu_node.csv"))
    pods_csv = os.path.join(trace_dir, "openb_pod_list_default.csv")
    pod_fields, pods = read_csv(pods_csv)
    gpu_nodes = sorted((n for n in nodes if int(n["gpu"]) > 0), key=lambda n: n["sn"])
    if node_count > len(gpu_nodes):
        raise SystemExit(f"trace_replay: --nodes {node_count}: the trace has {len(gpu_nodes)} GPU nodes")
    step = len(gpu_nodes) / node_count
    chosen = [gpu_nodes[int(i * step)] for i in range(node_count)]
    capacity = sum(int(n["gpu"]) for n in chosen)
    # The seed's order: the first len(pods) rows of the placements are the shuffled originals
    # (tuning clones come after them).
    order, _ = simulate(troupe, os.path.join(trace_dir, "openb_node_list_gpu_node.csv"), pods_csv,
                        ["--first-seed", str(seed)])
    by_name = {p["name"]: p for p in pods}
    target = capacity * 1000 * fill / 100.0
    picked, arrived = [], 0
    for row in order[:len(pods)]:
        if arrived >= target:
            break
        pod = by_name[row["pod"]]
        picked.append(pod)
        arrived += gpu_milli(pod)
    os.makedirs(out_dir, exist_ok=True)
    write_csv(os.path.join(out_dir, "nodes.csv"), node_fields, chosen)
    write_csv(os.path.join(out_dir, "pods.csv"), pod_fields, picked)
    return chosen, picked


def unallocated(pods, node_of, capacity_gpus, arrive):
    """100 - the simulator's allocation at `arrive` % (summary.cc's allocationAt), and at the end."""
    arrived = used = 0
    window = []
    for pod in pods:
        arrived += gpu_milli(pod)
        if node_of.get(pod["name"]):
            used += gpu_milli(pod)
        # round() is half-to-even on the binary value, as std::nearbyint in the simulator
        if round(arrived / capacity_gpus / 10) == arrive:
            window.append(round(used / capacity_gpus / 10 * 100) / 100)
    at = 100 - sum(window) / len(window) if window else None
    return at, 100 - used / capacity_gpus / 10, arrived / capacity_gpus / 10


def pod_manifest(pod):
    resources = {"requests": {"cpu": f"{int(pod['cpu_milli'])}m", "memory": f"{int(pod['memory_mib'])}Mi"}}
    annotations = {}
    n, milli = int(pod["num_gpu"]), min(1000, int(pod["gpu_milli"]))
    if n > 0 and milli >= 1000:
        resources["limits"] = {"nvidia.com/gpu": str(n)}
    elif n == 1:
        annotations["troupe.dev/gpu-milli"] = str(milli)
    elif n > 1:
        raise SystemExit(f"trace_replay: pod {pod['name']}: {n} GPUs of {milli} milli each cannot be asked live")
    if pod.get("gpu_spec"):
        annotations["troupe.dev/gpu-model"] = pod["gpu_spec"].replace("|", ",")
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod["name"], "annotations": annotations},
            "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": resources}]}}


class Cluster:
    """A dedicated control plane for the replay (its own state dir, ports and Troupe)."""

    def __init__(self, nodes_csv, policy, state_dir, narrow_to="best"):
        self.dir = state_dir
        config = os.path.join(state_dir + "-troupe.yaml")
        os.makedirs(os.path.dirname(config), exist_ok=True)
        with open(config, "w", encoding="utf-8") as f:
            f.write(f"policy: {{name: {policy}}}\n")
        self.env = dict(os.environ, TROUPE_E2E_DIR=state_dir, TROUPE_MODE="kube", NODES_CSV=nodes_csv,
                        SCHEDULER_TEMPLATE=os.path.join(HERE, "scheduler-config-replay.tmpl.yaml"),
                        TROUPE_ARGS=f"--config {config}", TROUPE_NARROW_TO=narrow_to, TROUPE_RECORD="0",
                        TROUPE_SCHEDULER_NAME=SCHEDULER)
        self.env.pop("NODES", None)

    def _script(self, name):
        p = subprocess.run([os.path.join(ROOT, "scripts", name)], env=self.env, cwd=ROOT,
                           capture_output=True, text=True, timeout=900)
        if p.returncode != 0:
            raise RuntimeError(f"scripts/{name} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")

    def up(self):
        self._script("cluster-down.sh")  # never reuse a cluster with another fleet
        self._script("cluster-up.sh")
        return KubeAPI.from_kubeconfig(os.path.join(self.dir, "kubeconfig"))

    def down(self):
        self._script("cluster-down.sh")


def replay_live(api, pods, timeout_s=60.0):
    """Creates each pod, waits for its fate; returns {pod name: node or ""}."""
    node_of = {}
    for i, pod in enumerate(pods):
        name = pod["name"]
        api.create_pod(NAMESPACE, pod_manifest(pod))
        deadline = time.monotonic() + timeout_s
        delay = 0.002
        while True:
            got = api.get_pod(NAMESPACE, name)
            node = (got.get("spec") or {}).get("nodeName") if got else None
            if node:
                node_of[name] = node
                break
            cond = next((c for c in ((got or {}).get("status") or {}).get("conditions") or []
                         if c.get("type") == "PodScheduled"), None)
            if cond and cond.get("status") == "False":
                if cond.get("reason") != "Unschedulable":
                    raise RuntimeError(f"pod {name}: {cond.get('reason')}: {cond.get('message')}")
                node_of[name] = ""
                api.delete_pod(NAMESPACE, name)  # the simulator drops it: no retry
                while api.get_pod(NAMESPACE, name) is not None:
                    time.sleep(0.005)
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"pod {name} neither bound nor unschedulable after {timeout_s} s")
            time.sleep(delay)
            delay = min(0.02, delay * 1.5)
        if (i + 1) % 250 == 0:
            print(f"  live: {i + 1}/{len(pods)} pods", file=sys.stderr, flush=True)
    return node_of


def run(args):
    troupe = os.path.abspath(args.troupe)
    if not os.access(troupe, os.X_OK):
        raise SystemExit(f"trace_replay: {troupe} is not built (scripts/build.sh build)")
    if not os.path.exists(os.path.join(args.trace_dir, "openb_pod_list_default.csv")):
        raise SystemExit(f"trace_replay: the trace is not at {args.trace_dir}")
    work = os.path.abspath(args.work_dir)
    nodes, pods = make_slice(troupe, args.trace_dir, args.nodes, args.fill, args.seed, work)
    capacity = sum(int(n["gpu"]) for n in nodes)
    nodes_csv, pods_csv = os.path.join(work, "nodes.csv"), os.path.join(work, "pods.csv")
    print(f"slice: {len(nodes)} nodes, {capacity} GPUs; {len(pods)} pods (seed {args.seed} order), "
          f"asking {sum(gpu_milli(p) for p in pods) / capacity / 10:.1f}% of the GPUs", file=sys.stderr)

    sim_rows, report = simulate(troupe, nodes_csv, pods_csv, ["--in-order", "--arrive", str(args.arrive)],
                                args.policy)
    sim_of = {r["pod"]: r["node"] for r in sim_rows}
    sim_at, sim_end, arrived = unallocated(pods, sim_of, capacity, args.arrive)
    reported = (report["policies"][0]["unallocated_percent"].get(str(args.arrive)) or {}).get("mean")

    t0 = time.monotonic()
    cluster = Cluster(nodes_csv, args.policy, os.path.join(ROOT, "build", "e2e-replay"), args.narrow_to)
    api = cluster.up()
    up_s = time.monotonic() - t0
    try:
        t1 = time.monotonic()
        live_of = replay_live(api, pods)
        live_s = time.monotonic() - t1
    finally:
        if not args.keep:
            cluster.down()
    live_at, live_end, _ = unallocated(pods, live_of, capacity, args.arrive)
    differ = [p["name"] for p in pods if live_of.get(p["name"], "") != sim_of.get(p["name"], "")]
    result = {
        "policy": args.policy, "narrow_to": args.narrow_to, "seed": args.seed, "nodes": len(nodes), "gpus": capacity, "pods": len(pods),
        "arrived_percent": round(arrived, 2), "arrive": args.arrive,
        "sim_unallocated_at": sim_at, "sim_unallocated_reported": reported, "sim_unallocated_end": sim_end,
        "live_unallocated_at": live_at, "live_unallocated_end": live_end,
        "sim_placed": sum(1 for v in sim_of.values() if v), "live_placed": sum(1 for v in live_of.values() if v),
        "pods_on_other_nodes": len(differ), "first_differences": differ[:10],
        "cluster_up_s": round(up_s, 1), "live_replay_s": round(live_s, 1),
    }
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=60, help="GPU nodes in the slice (default 60)")
    ap.add_argument("--fill", type=float, default=105, help="pods until they ask this %% of the GPUs (105)")
    ap.add_argument("--seed", type=int, default=42, help="whose shuffled pod order to take (42)")
    ap.add_argument("--arrive", type=int, default=100, help="read unallocated GPUs at this arrived %% (100)")
    ap.add_argument("--policy", default="troupe")
    ap.add_argument("--narrow-to", default="best", choices=["best", "all"],
                    help="Troupe's filter.narrowTo (all: kube-scheduler adds Troupe's 0..10 scores to its own)")
    ap.add_argument("--tolerance", type=float, default=0.5, help="allowed |live - sim| in points (0.5)")
    ap.add_argument("--trace-dir", default=TRACE_DIR)
    ap.add_argument("--troupe", default=os.environ.get("TROUPE_BIN") or os.path.join(ROOT, "build", "troupe"),
                    help="the troupe binary (default: $TROUPE_BIN, else build/troupe)")
    ap.add_argument("--work-dir", default=os.path.join(ROOT, "build", "e2e-replay-slice"))
    ap.add_argument("--keep", action="store_true", help="leave the replay cluster up (build/e2e-replay)")
    ap.add_argument("--json", metavar="FILE", help="also write the result as JSON")
    args = ap.parse_args()
    result = run(args)
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    ok = result["live_unallocated_at"] is not None and result["sim_unallocated_at"] is not None and \
        abs(result["live_unallocated_at"] - result["sim_unallocated_at"]) <= args.tolerance
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
