#!/usr/bin/env python3
"""Derives a workload from an openb pod list along the FGD paper's four sensitivity axes.

Usage:
  tools/derive_workload.py --pods POD_CSV --nodes NODE_CSV --seed S
      [--multigpu SHARE] [--gpushare SHARE] [--cpu FACTOR] [--gpuspec SHARE] > out.csv

Applied in this order, each on the result of the one before:

--multigpu SHARE multi-GPU pods (2+ GPUs) hold at least SHARE (0..1) of the GPU request: seeded
                 copies of the list's multi-GPU pods, drawn uniformly with replacement, are
                 appended, as the artifact's multigpu20 trace is the default one plus 172 such
                 copies. A SHARE below the list's own removes a seeded subset of them instead.
--gpushare SHARE GPU-sharing pods (1 GPU, under 1000 milli) hold SHARE of the GPU request, the
                 GPU pods' total request staying the list's: seeded pods of the class above its
                 target are removed and seeded copies of the class below it appended (1.0:
                 sharing pods only). How the paper drew its gpushareNN traces is not known here.
--cpu FACTOR     FACTOR x the list's CPU-only pods: a seeded subset (FACTOR < 1) or seeded
                 copies appended (FACTOR > 1); 0 removes them.
--gpuspec SHARE  constrain SHARE (0..1) of the GPU pods to GPU models (column gpu_spec).
                 The pods are a seeded sample. Each gets a model list drawn from the lists the
                 FGD artifact's constrained trace uses for pods of its kind (sharing, whole
                 1-GPU, multi-GPU), with their frequencies there (SPEC_WEIGHTS), among the lists
                 with a node that could host the pod when empty (so no pod is made impossible;
                 a pod no list could host is left alone and another is drawn). See
                 docs/gpu-spec-fidelity.md.

The output keeps the input's columns and row order (a gpu_spec column is added when missing);
removed pods are left out and copies are appended, named on from the list's highest
openb-pod-NNNN. A seed always gives the same file. Standard library only.
"""

import argparse
import csv
import random
import sys

# gpu_spec lists and how often each occurs among the constrained pods of the FGD artifact's
# openb_pod_list_gpuspec33.csv (2,388 constrained of 7,064 GPU pods; its lists are in
# tests/data/fgd-artifact/gpuspec33-models.csv), by the kind of pod they constrain. Lists are
# kept as the artifact spells them (a repeated model included).
SPEC_WEIGHTS = {
    "sharing": [("T4", 593), ("P100", 278), ("G2|P100|T4|V100M16|V100M32", 13)],
    "whole": [
        ("T4", 698),
        ("G2", 321),
        ("V100M16|V100M32", 137),
        ("P100|V100M16|V100M32", 102),
        ("G3", 80),
        ("P100|T4|V100M16|V100M32", 33),
        ("G2|P100|T4|V100M16|V100M32", 26),
        ("A10|G2|T4|V100M16|V100M32", 24),
        ("V100M16|V100M32|V100M32", 19),
        ("V100M32", 18),
        ("A10|T4", 6),
        ("P100|V100M16", 4),
        ("A10|G2|P100|T4|V100M16|V100M32|V100M32", 3),
        ("V100M16", 3),
        ("P100", 1),
        ("T4|V100M16|V100M32", 1),
    ],
    "multi": [
        ("G2", 10),
        ("G3", 6),
        ("V100M16|V100M32", 4),
        ("V100M16|V100M32|V100M32", 3),
        ("T4|V100M16|V100M32", 2),
        ("V100M32", 2),
        ("P100|V100M16|V100M32", 1),
    ],
}


def kind_of(pod):
    if int(pod["num_gpu"]) > 1:
        return "multi"
    return "sharing" if int(pod["gpu_milli"]) < 1000 else "whole"


def fail(message):
    sys.stderr.write("derive_workload: " + message + "\n")
    sys.exit(2)


def read_csv(path):
    try:
        with open(path, newline="") as f:
            reader = csv.DictReader(f)
            return reader.fieldnames, list(reader)
    except OSError as e:
        fail(f"cannot read {path}: {e.strerror}; pass an existing file")


def hostable(pod, nodes, spec):
    """True when some empty node of a model in spec could take the pod."""
    models = set(spec.split("|"))
    return any(
        n["model"] in models
        and int(n["gpu"]) >= int(pod["num_gpu"])
        and int(n["cpu_milli"]) >= int(pod["cpu_milli"])
        and int(n["memory_mib"]) >= int(pod["memory_mib"])
        for n in nodes
    )


def gpu_request(p):
    return int(p["num_gpu"]) * int(p["gpu_milli"])


def is_multi(p):
    return int(p["num_gpu"]) > 1


def is_sharing(p):
    return int(p["num_gpu"]) == 1 and int(p["gpu_milli"]) < 1000


def is_other_gpu(p):
    return int(p["num_gpu"]) > 0 and not is_sharing(p)


def is_cpu_only(p):
    return int(p["num_gpu"]) == 0


class Namer:
    """Names for copies, continuing the list's openb-pod-NNNN numbering."""

    def __init__(self, pods):
        nums = [int(p["name"].rsplit("-", 1)[1]) for p in pods if p["name"].rsplit("-", 1)[-1].isdigit()]
        self.next = max(nums, default=-1) + 1
        self.prefix = "openb-pod-"

    def copy(self, pod):
        c = dict(pod)
        c["name"] = f"{self.prefix}{self.next:04d}"
        self.next += 1
        return c


def share_of(pods, member):
    total = sum(gpu_request(p) for p in pods)
    return sum(gpu_request(p) for p in pods if member(p)) / total if total else 0.0


def raise_share(pods, member, share, rng, namer):
    """Appends copies of member pods until they hold at least `share` of the GPU request."""
    pool = [p for p in pods if member(p)]
    if not pool:
        fail("the list has no pod of the class to copy; cannot raise its share")
    while share_of(pods, member) < share:
        pods.append(namer.copy(rng.choice(pool)))


def lower_share(pods, member, share, rng):
    """Removes seeded member pods until they hold at most `share` of the GPU request."""
    idx = [i for i, p in enumerate(pods) if member(p)]
    rng.shuffle(idx)
    drop = set()
    total = sum(gpu_request(p) for p in pods)
    held = sum(gpu_request(pods[i]) for i in idx)
    for i in idx:
        if held <= share * total:
            break
        drop.add(i)
        held -= gpu_request(pods[i])
        total -= gpu_request(pods[i])
    pods[:] = [p for i, p in enumerate(pods) if i not in drop]


def set_multigpu(pods, share, rng, namer):
    if share >= share_of(pods, is_multi):
        raise_share(pods, is_multi, share, rng, namer)
    else:
        lower_share(pods, is_multi, share, rng)


def set_gpushare(pods, share, rng, namer):
    total = sum(gpu_request(p) for p in pods)
    for member, target in ((is_sharing, share * total), (is_other_gpu, (1 - share) * total)):
        held = sum(gpu_request(p) for p in pods if member(p))
        if held > target:
            idx = [i for i, p in enumerate(pods) if member(p)]
            rng.shuffle(idx)
            drop = set()
            for i in idx:
                if held <= target:
                    break
                drop.add(i)
                held -= gpu_request(pods[i])
            pods[:] = [p for i, p in enumerate(pods) if i not in drop]
    for member, target in ((is_sharing, share * total), (is_other_gpu, (1 - share) * total)):
        pool = [p for p in pods if member(p)]
        held = sum(gpu_request(p) for p in pool)
        if held < target and not pool and target > 0:
            fail("no pod of the class left to copy; use a --gpushare strictly between 0 and 1")
        while held < target:
            c = namer.copy(rng.choice(pool))
            pods.append(c)
            held += gpu_request(c)


def set_cpu(pods, factor, rng, namer):
    cpu = [i for i, p in enumerate(pods) if is_cpu_only(p)]
    want = round(factor * len(cpu))
    if want <= len(cpu):
        keep = set(rng.sample(cpu, want))
        pods[:] = [p for i, p in enumerate(pods) if not is_cpu_only(p) or i in keep]
    else:
        pool = [pods[i] for i in cpu]
        if not pool:
            fail("the list has no CPU-only pod to copy; --cpu above 1 needs some")
        for _ in range(want - len(cpu)):
            pods.append(namer.copy(rng.choice(pool)))


def constrain(pods, nodes, share, rng):
    gpu_pods = [i for i, p in enumerate(pods) if int(p["num_gpu"]) > 0]
    target = round(share * len(gpu_pods))
    order = gpu_pods[:]
    rng.shuffle(order)
    done = 0
    for i in order:
        if done == target:
            break
        kind = kind_of(pods[i])
        choices = [(s, w) for s, w in SPEC_WEIGHTS[kind] if hostable(pods[i], nodes, s)]
        if not choices and kind == "multi":  # no multi-GPU list fits this pod: a whole one
            choices = [(s, w) for s, w in SPEC_WEIGHTS["whole"] if hostable(pods[i], nodes, s)]
        if not choices:
            continue
        specs, weights = zip(*choices)
        pods[i]["gpu_spec"] = rng.choices(specs, weights=weights)[0]
        done += 1
    if done < target:
        fail(f"only {done} of {target} GPU pods could be constrained; lower --gpuspec")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", required=True, help="openb pod list (CSV)")
    ap.add_argument("--nodes", required=True, help="openb node list (CSV), to keep pods placeable")
    ap.add_argument("--seed", type=int, required=True, help="random seed; the same seed gives the same file")
    ap.add_argument("--multigpu", type=float, help="share of the GPU request held by multi-GPU pods, 0..1")
    ap.add_argument("--gpushare", type=float, help="share of the GPU request held by sharing pods, 0..1")
    ap.add_argument("--cpu", type=float, help="CPU-only pods, as a multiple of the list's (0 = none)")
    ap.add_argument("--gpuspec", type=float, default=0.0, help="share of GPU pods given a gpu_spec, 0..1")
    args = ap.parse_args()
    for flag, value in (("--multigpu", args.multigpu), ("--gpushare", args.gpushare), ("--gpuspec", args.gpuspec)):
        if value is not None and not 0.0 <= value <= 1.0:
            fail(f"{flag} {value}: give a share from 0 to 1, e.g. 0.33")
    if args.cpu is not None and not 0.0 <= args.cpu <= 10.0:
        fail(f"--cpu {args.cpu}: give a factor from 0 to 10, e.g. 2 for twice the CPU-only pods")

    fields, pods = read_csv(args.pods)
    _, nodes = read_csv(args.nodes)
    for need in ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"):
        if need not in (fields or []):
            fail(f"{args.pods}: column {need} missing; expected an openb pod list")
    if "gpu_spec" not in fields:
        fields = fields[:5] + ["gpu_spec"] + fields[5:]
    for p in pods:
        p.setdefault("gpu_spec", "")
        p["gpu_spec"] = p["gpu_spec"] or ""

    rng = random.Random(args.seed)
    namer = Namer(pods)
    if args.multigpu is not None:
        set_multigpu(pods, args.multigpu, rng, namer)
    if args.gpushare is not None:
        set_gpushare(pods, args.gpushare, rng, namer)
    if args.cpu is not None:
        set_cpu(pods, args.cpu, rng, namer)
    if args.gpuspec > 0:
        constrain(pods, nodes, args.gpuspec, rng)

    out = csv.DictWriter(sys.stdout, fieldnames=fields, lineterminator="\n")
    out.writeheader()
    out.writerows(pods)


if __name__ == "__main__":
    main()
