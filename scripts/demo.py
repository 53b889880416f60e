#!/usr/bin/env python3
"""Sends the example extender requests in examples/requests/ to a running `troupe serve` and
prints each decision in words. Usage: scripts/demo.py http://127.0.0.1:8888"""
import json
import sys
import urllib.request
from pathlib import Path

STEPS = [
    ("00-seed-filter.json", "filter", None),
    ("00-seed-bind.json", "bind", "Set-up: a 4-GPU pod already runs on h100-0"),
    ("01-filter-8gpu-nvlink.json", "filter", "An 8-GPU pod that needs all 8 GPUs in one NVLink domain"),
    ("02-filter-h100-only.json", "filter", "A 4-GPU pod for H100s with at least 79Gi per GPU"),
    ("03-prioritize-4gpu.json", "prioritize", "Ranking nodes for a 4-GPU pod (0..10, kube-scheduler adds weight x 10 x score)"),
    ("07-bind-4gpu.json", "bind", "kube-scheduler binds it to the winner; Troupe picks the concrete GPUs"),
    ("04-filter-16gpu.json", "filter", "A 16-GPU pod: bigger than every node"),
    ("05-filter-bad-annotation.json", "filter", "A typo in troupe.dev/gpu-memory"),
    ("06-filter-shared-gpu.json", "filter", "Half a GPU for a notebook (troupe.dev/gpu-milli: 500)"),
]


def post(base, verb, body):
    req = urllib.request.Request(f"{base}/{verb}", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def main():
    base = sys.argv[1].rstrip("/")
    root = Path(__file__).resolve().parent.parent / "examples" / "requests"
    for name, verb, title in STEPS:
        body = (root / name).read_bytes()
        answer = post(base, verb, body)
        if title is None:
            continue
        pod = json.loads(body).get("Pod", {}).get("metadata", {}).get("name") or json.loads(body).get("PodName")
        print(f"\n== {title}\n   POST /{verb}  (examples/requests/{name}, pod {pod})")
        if verb == "filter":
            passed = answer.get("NodeNames") or []
            print(f"   fits now      : {', '.join(passed) if passed else '(none)'}")
            for label, key in (("busy, may free", "FailedNodes"), ("never fits", "FailedAndUnresolvableNodes")):
                groups = {}
                for node, reason in sorted((answer.get(key) or {}).items()):
                    groups.setdefault(reason, []).append(node)
                for reason, nodes in groups.items():
                    print(f"   {label:<14}: {', '.join(nodes)}\n                   -> {reason}")
        elif verb == "prioritize":
            for entry in sorted(answer, key=lambda e: -e["Score"]):
                bar = "#" * entry["Score"]
                print(f"   {entry['Host']:<10} {entry['Score']:>2} {bar}")
        elif verb == "bind":
            print("   bound" if not answer.get("Error") else f"   refused: {answer['Error']}")
    metrics = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    allocated = [l for l in metrics.splitlines() if l.startswith("troupe_gpus{") and 'state="allocated"' in l]
    print("\n== Cluster after the demo (GET /metrics)")
    for line in allocated:
        print("   " + line)


if __name__ == "__main__":
    main()
