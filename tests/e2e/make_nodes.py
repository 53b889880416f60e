#!/usr/bin/env python3
"""Expand tests/e2e/nodes.yaml into fake GPU Nodes and Troupe's cluster.yaml.

Outputs (in --out-dir, default build/e2e):
  nodes.json    a v1 List of Node objects *with status* (capacity/allocatable
                incl. nvidia.com/gpu and pods, Ready condition). The node
                registry keeps status on create, so one create per node is
                enough and no kubelet/KWOK is needed.
  cluster.yaml  the same fleet in Troupe's --cluster format.

With --create the Nodes are also created through kubectl, in --parallel
shards (each shard is a List file created by one `kubectl create -f`).

Examples:
  make_nodes.py                              # default fleet from nodes.yaml
  make_nodes.py --generate 1000              # 1,000 nodes of the mixed types
  make_nodes.py --trace-nodes nodes.csv      # one node per row of an openb node list
                                             # (sn,cpu_milli,memory_mib,gpu,model): the
                                             # trace's CPU, memory and GPUs, product = model
  make_nodes.py --create --kubectl build/k8s/v1.37.2/bin/kubectl \
                --kubeconfig build/e2e/kubeconfig
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load_spec(path):
    with open(path, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    for key in ("types", "groups", "generate"):
        if key not in spec:
            raise SystemExit(f"make_nodes: {path}: missing '{key}'")
    for name, t in spec["types"].items():
        for key in ("product", "gpuMemoryMiB", "gpus", "cpu", "memory"):
            if key not in t:
                raise SystemExit(f"make_nodes: {path}: type {name}: missing '{key}'")
    return spec


def default_fleet(spec):
    """Yield (name, type, zone, block, rack) for the groups section."""
    next_index = {}
    for g in spec["groups"]:
        t, n, racks = g["type"], int(g["count"]), list(g["racks"])
        if t not in spec["types"]:
            raise SystemExit(f"make_nodes: group uses unknown type {t!r}")
        for j in range(n):
            i = next_index.get(t, 0)
            next_index[t] = i + 1
            yield f"{t}-{i}", t, g["zone"], g["block"], racks[j * len(racks) // n]


def split_counts(total, mix):
    """Split `total` by integer weights with the largest-remainder method."""
    weight_sum = sum(mix.values())
    exact = {t: total * w / weight_sum for t, w in mix.items()}
    counts = {t: int(x) for t, x in exact.items()}
    left = total - sum(counts.values())
    order = sorted(mix, key=lambda t: (-(exact[t] - counts[t]), list(mix).index(t)))
    for t in order[:left]:
        counts[t] += 1
    return counts


def generated_fleet(spec, total):
    """Yield (name, type, zone, block, rack) for --generate N.

    Racks hold nodesPerRack nodes of a single type; blocks hold racksPerBlock
    racks of a single type; blocks go to zones round-robin.
    """
    gen = spec["generate"]
    per_rack, per_block, zones = int(gen["nodesPerRack"]), int(gen["racksPerBlock"]), gen["zones"]
    for t in gen["mix"]:
        if t not in spec["types"]:
            raise SystemExit(f"make_nodes: generate.mix uses unknown type {t!r}")
    rack_no = block_no = 0
    for t, count in split_counts(total, gen["mix"]).items():
        racks_in_block = per_block  # force a new block for each type
        for i in range(count):
            if i % per_rack == 0:
                rack_no += 1
                racks_in_block += 1
                if racks_in_block > per_block:
                    block_no += 1
                    racks_in_block = 1
            yield (f"{t}-{i}", t, zones[(block_no - 1) % len(zones)],
                   f"b{block_no}", f"r{rack_no}")


def node_labels(name, t, zone, block, rack):
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "topology.kubernetes.io/zone": zone,
        "troupe.dev/block": block,
        "troupe.dev/rack": rack,
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": t["product"],
        "nvidia.com/gpu.memory": str(t["gpuMemoryMiB"]),
        "nvidia.com/gpu.count": str(t["gpus"]),
    }
    if "family" in t:
        labels["nvidia.com/gpu.family"] = t["family"]
    labels.update({k: str(v) for k, v in (t.get("labels") or {}).items()})
    return labels


def trace_fleet(path):
    """Yield (name, type, labels) for each GPU node of an openb node list CSV.

    The node carries what `troupe simulate` gives the same row: its CPU, memory, GPU count and
    product, room for 1,001 pods (the FGD artifact's node YAML), and no other GPU label, so
    Troupe guesses the same topology profile as the simulator does.
    """
    import csv
    with open(path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows):
        for key in ("sn", "cpu_milli", "memory_mib", "gpu", "model"):
            if key not in row:
                raise SystemExit(f"make_nodes: {path}: row {i + 2}: missing column '{key}'")
        if int(row["gpu"]) == 0:
            continue  # the simulator's cluster is the GPU nodes
        name = row["sn"]
        t = {"product": row["model"], "gpus": int(row["gpu"]), "cpu": f"{int(row['cpu_milli'])}m",
             "memory": f"{int(row['memory_mib'])}Mi", "pods": 1001}
        labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                  "nvidia.com/gpu.product": row["model"]}
        yield name, t, labels


def node_object(name, t, labels, k8s_version, now):
    resources = {
        "cpu": str(t["cpu"]),
        "memory": str(t["memory"]),
        "pods": str(t.get("pods", 110)),
        "ephemeral-storage": str(t.get("ephemeralStorage", "1Ti")),
        "nvidia.com/gpu": str(t["gpus"]),
    }
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {"troupe.dev/e2e-fake-node": "true"},
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{
                "type": "Ready",
                "status": "True",
                "reason": "KubeletReady",
                "message": "fake node created by tests/e2e/make_nodes.py",
                "lastHeartbeatTime": now,
                "lastTransitionTime": now,
            }],
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": k8s_version,
                "containerRuntimeVersion": "fake://0",
                "osImage": "fake",
                "kernelVersion": "0.0.0",
                "machineID": "", "systemUUID": "", "bootID": "", "kubeProxyVersion": "",
            },
        },
    }


_PLAIN = re.compile(r"^([A-Za-z][A-Za-z0-9._/-]*|[0-9]+[KMGTPE]i?)$")  # "1Ti" stays plain
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def yaml_scalar(value):
    s = str(value)
    if _PLAIN.match(s) and s.lower() not in _YAML_WORDS:
        return s
    return json.dumps(s)  # a JSON string is a valid YAML double-quoted scalar


def cluster_yaml(entries):
    out = ["# Generated by tests/e2e/make_nodes.py; do not edit.", "nodes:"]
    for name, t, labels in entries:
        flow = ", ".join(f"{k}: {yaml_scalar(v)}" for k, v in labels.items())
        out += [
            f"  - name: {yaml_scalar(name)}",
            f"    labels: {{{flow}}}",
            f"    gpus: {int(t['gpus'])}",
            f"    cpu: {json.dumps(str(t['cpu']))}",
            f"    memory: {yaml_scalar(t['memory'])}",
        ]
    return "\n".join(out) + "\n"


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def create_nodes(nodes, out_dir, kubectl, kubeconfig, parallel):
    shard_dir = os.path.join(out_dir, "nodes")
    os.makedirs(shard_dir, exist_ok=True)
    for old in os.listdir(shard_dir):
        os.remove(os.path.join(shard_dir, old))
    # one kubectl per ~100 nodes, at most --parallel; on 2 cores more does not help
    parallel = max(1, min(parallel, (len(nodes) + 99) // 100))
    procs = []
    for s in range(parallel):
        path = os.path.join(shard_dir, f"shard-{s:02d}.json")
        write(path, json.dumps({"apiVersion": "v1", "kind": "List",
                                "items": nodes[s::parallel]}))
        procs.append((path, subprocess.Popen(
            [kubectl, "--kubeconfig", kubeconfig, "create", "-f", path, "-o", "name"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)))
    failed = False
    for path, p in procs:
        _, err = p.communicate()
        if p.returncode != 0:
            failed = True
            sys.stderr.write(f"make_nodes: kubectl create -f {path} failed:\n{err[-4000:]}\n")
    if failed:
        raise SystemExit(1)
    return parallel


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", default=os.path.join(HERE, "nodes.yaml"))
    ap.add_argument("--generate", type=int, metavar="N",
                    help="generate N nodes of the mixed types instead of the default fleet")
    ap.add_argument("--trace-nodes", metavar="CSV",
                    help="one node per GPU row of an openb node list instead of the default fleet")
    ap.add_argument("--out-dir", default=os.path.join(ROOT, "build", "e2e"))
    ap.add_argument("--k8s-version", default="v1.36.3", help="kubeletVersion reported by the nodes")
    ap.add_argument("--create", action="store_true", help="also create the Nodes with kubectl")
    ap.add_argument("--kubectl", default="kubectl")
    ap.add_argument("--kubeconfig", default=os.path.join(ROOT, "build", "e2e", "kubeconfig"))
    ap.add_argument("--parallel", type=int, default=2,
                    help="max concurrent kubectl create processes (one per ~100 nodes)")
    args = ap.parse_args()

    if args.trace_nodes and args.generate is not None:
        raise SystemExit("make_nodes: give --trace-nodes or --generate, not both")
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    entries = []
    if args.trace_nodes:
        entries = list(trace_fleet(args.trace_nodes))
    else:
        spec = load_spec(args.spec)
        if args.generate is not None:
            if args.generate < 1:
                raise SystemExit("make_nodes: --generate needs N >= 1")
            fleet = list(generated_fleet(spec, args.generate))
        else:
            fleet = list(default_fleet(spec))
        for name, tname, zone, block, rack in fleet:
            t = spec["types"][tname]
            entries.append((name, t, node_labels(name, t, zone, block, rack)))
    names = [e[0] for e in entries]
    if not names:
        raise SystemExit("make_nodes: no nodes to create")
    if len(set(names)) != len(names):
        raise SystemExit("make_nodes: duplicate node names")
    nodes = [node_object(name, t, labels, args.k8s_version, now) for name, t, labels in entries]

    os.makedirs(args.out_dir, exist_ok=True)
    write(os.path.join(args.out_dir, "nodes.json"),
          json.dumps({"apiVersion": "v1", "kind": "List", "items": nodes}, indent=1))
    write(os.path.join(args.out_dir, "cluster.yaml"), cluster_yaml(entries))
    gpus = sum(int(e[1]["gpus"]) for e in entries)
    msg = f"make_nodes: {len(nodes)} nodes, {gpus} GPUs -> {args.out_dir}/{{nodes.json,cluster.yaml}}"

    if args.create:
        t0 = time.monotonic()
        used = create_nodes(nodes, args.out_dir, args.kubectl, args.kubeconfig, args.parallel)
        msg += f"; created in {time.monotonic() - t0:.1f} s ({used} parallel kubectl)"
    print(msg)


if __name__ == "__main__":
    main()
