#!/usr/bin/env python3
"""Sends the example extender requests in examples/requests/ to a running `troupe serve`, in the
order kube-scheduler would (filter, then prioritize of the nodes that passed, then bind), and
prints each decision in words. Each step also states what it must show; an answer that differs
(a refused bind, a node in the wrong column) is printed as UNEXPECTED and the exit status is 1,
so the demo cannot break silently (tests/tools/demo_test.py runs it against the real server).

Usage: scripts/demo.py http://127.0.0.1:8888 [--log FILE]
  --log FILE  Troupe's log (its stderr): a bind step reads the GPUs Troupe chose from it, since
              the extender's bind answer carries only an error field."""
import argparse
import json
import sys
import time
import urllib.request
from pathlib import Path

H100_4GPU_NODES = {"h100-0", "h100-1", "a100-0", "l40s-0"}


def fits(answer):
    return set(answer.get("NodeNames") or [])


def reasons(answer):
    out = {}
    for key in ("FailedNodes", "FailedAndUnresolvableNodes"):
        out.update(answer.get(key) or {})
    return out


# (request file, verb, title, check): a check returns None when the answer is as the demo
# describes it, else what is wrong. A step without a title sets the scene and prints nothing.
STEPS = [
    ("00-seed-filter.json", "filter", None, lambda a, _: None if fits(a) == {"h100-0"} else "h100-0 should pass"),
    ("00-seed-bind.json", "bind", "Set-up: a 4-GPU pod already runs on h100-0",
     lambda a, g: a.get("Error") or (None if g is None or len(g) == 4 else f"expected 4 GPUs, log shows {g}")),
    ("01-filter-8gpu-nvlink.json", "filter", "An 8-GPU pod that needs all 8 GPUs in one NVLink domain",
     lambda a, _: None if "h100-1" in fits(a) and "h100-0" not in fits(a)
     and "NVLink" in reasons(a).get("l40s-0", "") else "h100-1 should fit, h100-0 not, l40s-0 for lack of NVLink"),
    ("02-filter-h100-only.json", "filter", "A 4-GPU pod for H100s with at least 79Gi per GPU",
     lambda a, _: None if fits(a) == {"h100-0", "h100-1", "h100-2", "h100-3"} else "only the four H100 nodes should fit"),
    ("03-filter-4gpu.json", "filter", "kube-scheduler asks which nodes fit a 4-GPU pod",
     lambda a, _: None if fits(a) == H100_4GPU_NODES else f"all of {sorted(H100_4GPU_NODES)} should fit"),
    ("03-prioritize-4gpu.json", "prioritize",
     "... and ranks the nodes that fit (0..10, kube-scheduler adds weight x 10 x score)",
     lambda a, _: None if a and max(a, key=lambda e: e["Score"])["Host"] == "h100-0"
     else "h100-0, half full already, should rank first"),
    ("07-bind-4gpu.json", "bind", "kube-scheduler binds it to the winner; Troupe picks the concrete GPUs",
     lambda a, g: a.get("Error") or (None if g is None or len(g) == 4 and not set(g) & {"0", "1", "2", "3"}
                                     else f"expected the 4 free GPUs of h100-0, log shows {g}")),
    ("04-filter-16gpu.json", "filter", "A 16-GPU pod: bigger than every node",
     lambda a, _: None if not fits(a) else "no node should fit"),
    ("05-filter-bad-annotation.json", "filter", "A typo in troupe.dev/gpu-memory",
     lambda a, _: None if not fits(a) and all("troupe.dev/gpu-memory" in r for r in reasons(a).values())
     else "every node should refuse it, naming troupe.dev/gpu-memory"),
    ("06-filter-shared-gpu.json", "filter", "Half a GPU for a notebook (troupe.dev/gpu-milli: 500)",
     lambda a, _: None if fits(a) == {"a10-0"} else "a10-0 should fit"),
]


def post(base, verb, body):
    req = urllib.request.Request(f"{base}/{verb}", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.loads(resp.read())


def bound_gpus(log, pod):
    """The GPU IDs of Troupe's last 'bound' log line for pod (namespace/name); [] when the log
    has none, None without a log (the bind checks then look at the answer only)."""
    if log is None:
        return None
    for _ in range(20):  # the line is written before the answer; allow for a slow disk
        found = None
        for line in Path(log).read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if entry.get("msg") == "bound" and entry.get("pod") == pod:
                found = [g for g in entry.get("gpus", "").split(",") if g]
        if found is not None:
            return found
        time.sleep(0.1)
    return []


def show(verb, answer, gpus, node):
    if verb == "filter":
        passed = answer.get("NodeNames") or []
        print(f"   fits now      : {', '.join(passed) if passed else '(none)'}")
        for label, key in (("busy, may free", "FailedNodes"), ("never fits", "FailedAndUnresolvableNodes")):
            groups = {}
            for n, reason in sorted((answer.get(key) or {}).items()):
                groups.setdefault(reason, []).append(n)
            for reason, nodes in groups.items():
                print(f"   {label:<14}: {', '.join(nodes)}\n                   -> {reason}")
    elif verb == "prioritize":
        for entry in sorted(answer, key=lambda e: -e["Score"]):
            print(f"   {entry['Host']:<10} {entry['Score']:>2} {'#' * entry['Score']}")
    elif answer.get("Error"):
        print(f"   refused: {answer['Error']}")
    else:
        print(f"   bound to {node}, GPUs {', '.join(gpus) if gpus else '(in Troupe log; --log shows them here)'}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("base")
    parser.add_argument("--log")
    args = parser.parse_args()
    base = args.base.rstrip("/")
    root = Path(__file__).resolve().parent.parent / "examples" / "requests"
    unexpected = []
    for name, verb, title, check in STEPS:
        body = (root / name).read_bytes()
        request = json.loads(body)
        answer = post(base, verb, body)
        meta = request.get("Pod", {}).get("metadata", {})
        pod = meta.get("name") or request.get("PodName")
        namespace = meta.get("namespace") or request.get("PodNamespace")
        gpus = bound_gpus(args.log, f"{namespace}/{pod}") if verb == "bind" else []
        problem = check(answer, gpus)
        if problem:
            unexpected.append(f"{name}: {problem}")
        if title is None and not problem:
            continue
        print(f"\n== {title or name}\n   POST /{verb}  (examples/requests/{name}, pod {pod})")
        show(verb, answer, gpus, request.get("Node"))
        if problem:
            print(f"   UNEXPECTED: {problem}")
    metrics = urllib.request.urlopen(f"{base}/metrics", timeout=10).read().decode()
    allocated = [l for l in metrics.splitlines() if l.startswith("troupe_gpus{") and 'state="allocated"' in l]
    print("\n== Cluster after the demo (GET /metrics)")
    for line in allocated:
        print("   " + line)
    if unexpected:
        print(f"\ndemo: {len(unexpected)} step(s) did not answer as described:", file=sys.stderr)
        for u in unexpected:
            print("  " + u, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
