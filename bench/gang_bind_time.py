#!/usr/bin/env python3
"""Gang time-to-bind on the real control plane: from the creation of a gang's last member to
all of its members bound, for gangs of 8, 32 and 128 pods of 4 GPUs each, on 256 fake
8-GPU nodes (plus the e2e cluster's default fleet, which the gangs do not use).

It starts its own cluster in Kubernetes mode (TROUPE_MODE=kube: Troupe watches the API and
binds, so the bind barrier is in the path) in build/e2e-gangbench, adds the 256 nodes with
tests/e2e/gang_fleet.py, runs each size --repeats times (the pods of a run are deleted before
the next), prints a table and writes build/gang-bind-time.json. Not part of CI (a few minutes).

Usage: bench/gang_bind_time.py [--sizes 8,32,128] [--repeats 3] [--keep]
Needs build/troupe and the control plane binaries (scripts/build-k8s.sh), as scripts/e2e.sh.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
E2E_DIR = os.path.join(ROOT, "build", "e2e-gangbench")
os.environ["TROUPE_E2E_DIR"] = E2E_DIR  # read by kubehelpers at import
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))

from gang_fleet import bound, create_fleet, fleet_nodes, member, wait_troupe_nodes  # noqa: E402
from kubeapi import APIError, KubeAPI  # noqa: E402
from kubehelpers import read_state  # noqa: E402

NAMESPACE = "gangbench"


def cluster_up():
    env = dict(os.environ, TROUPE_MODE="kube", TROUPE_E2E_DIR=E2E_DIR, TROUPE_RECORD="0")
    subprocess.run([os.path.join(ROOT, "scripts", "cluster-up.sh")], check=True, env=env, cwd=ROOT)


def cluster_down():
    env = dict(os.environ, TROUPE_E2E_DIR=E2E_DIR)
    subprocess.run([os.path.join(ROOT, "scripts", "cluster-down.sh")], check=False, env=env, cwd=ROOT)


def clear_pods(api):
    api.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods",
                {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0})
    deadline = time.monotonic() + 60
    while api.list_pods(NAMESPACE):
        if time.monotonic() > deadline:
            raise TimeoutError("pods of the last run still present after 60s")
        time.sleep(0.1)
    time.sleep(1.0)  # Troupe sees the deletions through its watch


def run_once(api, fleet, scheduler, size, tag):
    names = [f"{tag}-{i:03d}" for i in range(size)]
    t_first = time.monotonic()
    for n in names:
        api.create_pod(NAMESPACE, member(n, tag, size, 4, fleet, "x", scheduler, timeout="5m"))
    t_last = time.monotonic()
    seen_partial = 0
    deadline = t_last + 300
    while True:
        b = bound(api, NAMESPACE, set(names))
        if len(b) == size:
            t_done = time.monotonic()
            break
        if b:
            seen_partial = max(seen_partial, len(b))
        if time.monotonic() > deadline:
            raise TimeoutError(f"gang {tag}: {len(b)} of {size} bound after 300s")
        time.sleep(0.02)
    return {"size": size, "create_s": t_last - t_first, "last_created_to_all_bound_s": t_done - t_last,
            "nodes": len(set(b.values())), "max_partial_seen": seen_partial}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="8,32,128")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--keep", action="store_true", help="leave the cluster running")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    cluster_up()
    try:
        state = read_state(os.path.join(E2E_DIR, "state.env"))
        kubeconfig = os.path.join(E2E_DIR, "kubeconfig")
        api = KubeAPI.from_kubeconfig(kubeconfig)
        url = f"http://127.0.0.1:{state['TROUPE_PORT']}"
        fleet = f"bench{int(time.time()) % 100000}"
        t0 = time.monotonic()
        create_fleet(state, kubeconfig, fleet_nodes(fleet, {"x": args.nodes}, state["K8S_VERSION"]))
        wait_troupe_nodes(url, args.nodes, timeout=120)
        print(f"[gang-bench] {args.nodes} nodes created and known to Troupe in {time.monotonic() - t0:.1f}s")
        try:
            api.request("POST", "/api/v1/namespaces",
                        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
        except APIError as e:
            if e.status != 409:
                raise
        runs = []
        for size in sizes:
            for r in range(args.repeats):
                res = run_once(api, fleet, state["TROUPE_SCHEDULER_NAME"], size, f"g{size}r{r}")
                print(f"[gang-bench] gang of {size:3d}: last created -> all bound "
                      f"{res['last_created_to_all_bound_s']:.2f}s (creating took {res['create_s']:.2f}s, "
                      f"{res['nodes']} nodes, largest partial count seen {res['max_partial_seen']})")
                runs.append(res)
                clear_pods(api)
        table = []
        for size in sizes:
            xs = [r["last_created_to_all_bound_s"] for r in runs if r["size"] == size]
            table.append({"size": size, "p50_s": statistics.median(xs), "max_s": max(xs), "runs": len(xs)})
        machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, {platform.system()}"
        print(f"\nGang of 4-GPU pods on {args.nodes} fake 8-GPU nodes ({machine}); "
              f"last member created -> all bound:")
        print("| gang size | p50 | max | runs |")
        print("|---:|---:|---:|---:|")
        for row in table:
            print(f"| {row['size']} | {row['p50_s']:.2f} s | {row['max_s']:.2f} s | {row['runs']} |")
        with open(os.path.join(ROOT, "build", "gang-bind-time.json"), "w", encoding="utf-8") as f:
            json.dump({"machine": machine, "nodes": args.nodes, "runs": runs, "table": table}, f, indent=2)
    finally:
        if not args.keep:
            cluster_down()


if __name__ == "__main__":
    main()
