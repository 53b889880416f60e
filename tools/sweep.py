#!/usr/bin/env python3
"""Runs the placement-quality sweep: every policy on workloads derived from the openb pod list
along the FGD paper's four sensitivity axes, several seeded runs per point.

Usage:
  tools/sweep.py --out DIR [--cache DIR] [--points SPEC] [--runs N] [--policy LIST]
      [--jobs N] [--recompute LIST] [--troupe BIN] [--nodes CSV] [--pods CSV]

A point is an axis and a value of tools/derive_workload.py:
  multigpu S  multi-GPU pods (2+ GPUs) hold S (0..1) of the GPU request
  gpushare S  GPU-sharing pods (1 GPU, under 1000 milli) hold S (0..1) of the GPU request
  cpu F       F x the list's CPU-only pods (0 = none)
  gpuspec S   S (0..1) of the GPU pods are constrained to GPU models (gpu_spec)
  default     the pod list itself, unchanged
  mixed       several axes at once, e.g. mixed:cpu=2.1,gpuspec=0.2 (derive_workload.py applies
              them in its own order: multigpu, gpushare, cpu, gpuspec)
The default points are: default; multigpu 0.1..0.5; gpushare 0.2..1.0; cpu 0, 0.5, 2, 3;
gpuspec 0.05, 0.1, 0.2, 0.33. --points overrides them: space- or ';'-separated items, each
"default", AXIS=V1,V2,... or mixed:AXIS=V,AXIS=V,... e.g. --points "default multigpu=0.2,0.4 cpu=0"
(--points "" with --random N: the random points only).

--random N adds N mixed points drawn with --random-seed S (default 1): the CPU-only pods 0-3x
the list's, and each of the others with some chance: GPU pods constrained to models (half the
points, 2-33%), GPU sharing (a third, 20-100%) and multi-GPU pods (a third, 10-50% of the GPU
request). The axes' single-valued points vary one thing at a time; these are held-out
combinations that nothing was tuned on. A seed always draws the same points.

Run i (1..N) of a point replays the workload derived with generator seed i, shuffled with the
replay seed 41+i: 'troupe simulate --pods W --first-seed 41+i --seeds 1 --json --threads 1'. So
the runs of a point vary both the derived workload and the replay's shuffle, and every policy
sees the same N (workload, shuffle) pairs; the default point's runs are seeds 42..41+N of the
pod list itself, the published figures' seeds.

Outputs in --out DIR:
  runs.csv   axis,value,run,workload_seed,replay_seed,policy,unallocated_pct_100,
             unallocated_pct_130 (unallocated GPU % when the arrived requests reach 100% and
             130% of the cluster's GPUs; lower is better),floor_pct_100,failed_8gpu_100 (requests
             of 8+ GPUs that found no node up to 100% arrived)
  table.md   per point: each policy's mean +- sd over the runs (at 100%), troupe against fgd
             ((troupe - fgd) / fgd) and the runs where troupe <= fgd; last row: the average
             relative difference and the points where troupe <= fgd; then the failed 8-GPU
             requests per point, troupe against fgd
  sweep.svg  one panel per axis: unallocated GPU % at 100% against the axis value, one line per
             policy with sd error bars (the default point sits at the pod list's own value);
             not written when every point is mixed
  mixed.svg  with mixed points, troupe and fgd: (troupe - fgd) / fgd per mixed point, sorted

--cache DIR keeps each (point, run, policy) result as a JSON file, keyed by the node list, the
content of the run's workload, the replay seed and the policy. A re-run derives the workloads
(seconds) and simulates only what is missing, so adding a policy or a point is cheap, and a change
to tools/derive_workload.py recomputes only the points whose workloads it changes. The troupe
binary is not part of the key: after changing a policy, --recompute troupe simulates that
policy's runs again (and refreshes them in the cache). Progress goes to stderr.
"""

import argparse
import concurrent.futures
import csv
import hashlib
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DERIVE = os.path.join(ROOT, "tools", "derive_workload.py")
TRACE = os.path.join(os.path.dirname(ROOT), "shared", "data", "alibaba-gpu-v2023")
ALL_POLICIES = ["troupe", "fgd", "best-fit", "gpu-packing", "gpu-clustering", "dot-product", "random"]
KNOWN_POLICIES = ALL_POLICIES + ["kube", "binpack", "spread"]
# The colors of src/sim/report.cc's allocation.svg, by the same policy order.
COLORS = ["#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
AXES = ["multigpu", "gpushare", "cpu", "gpuspec"]
AXIS_TITLES = {
    "multigpu": "multi-GPU pods' share of the GPU request",
    "gpushare": "GPU-sharing pods' share of the GPU request",
    "cpu": "CPU-only pods, x the default list's",
    "gpuspec": "share of GPU pods constrained to GPU models",
}
DEFAULT_POINTS = "default multigpu=0.1,0.2,0.3,0.4,0.5 gpushare=0.2,0.4,0.6,0.8,1.0 cpu=0,0.5,2,3 gpuspec=0.05,0.1,0.2,0.33"
CACHE_VERSION = 2
# The size class of whole-node (8+ GPU) requests in troupe simulate's by_size_100.
BIG = "8+"


class UsageError(Exception):
    pass


def fail(message, code=2):
    sys.stderr.write("sweep: " + message + "\n")
    sys.exit(code)


def fmt_value(v):
    """A number as %g; a mixed point's value (already text) as it is."""
    return v if isinstance(v, str) else "%g" % v


def axis_range(axis):
    return 10.0 if axis == "cpu" else 1.0


def mixed_value(pairs):
    """{axis: value} -> the mixed point's canonical text, axes in AXES order: 'cpu=2.1,gpuspec=0.2'."""
    return ",".join(f"{axis}={fmt_value(pairs[axis])}" for axis in AXES if axis in pairs)


def mixed_pairs(value):
    """A mixed point's text -> [(axis, number)]."""
    return [(axis, float(text)) for axis, _, text in (kv.partition("=") for kv in value.split(","))]


def parse_value(axis, text, item, where=""):
    """One value of `axis` from --points, checked against the axis's range; `where` names the
    mixed point it sits in."""
    try:
        v = float(text)
    except ValueError:
        raise UsageError(f"--points: '{text}' in '{item}' is not a number") from None
    hi = axis_range(axis)
    if not 0.0 <= v <= hi:
        raise UsageError(f"--points: {axis}={text}{where} is out of range; give 0 to {fmt_value(hi)}")
    return v


def parse_mixed(item):
    """'mixed:cpu=2.1,gpuspec=0.2' -> ("mixed", "cpu=2.1,gpuspec=0.2")."""
    pairs = {}
    for kv in item[len("mixed:"):].split(","):
        axis, sep, text = kv.partition("=")
        if not sep or axis not in AXES:
            raise UsageError(f"--points: '{kv}' in '{item}' is not AXIS=V with AXIS one of {', '.join(AXES)}")
        if axis in pairs:
            raise UsageError(f"--points: '{item}' gives {axis} twice")
        pairs[axis] = parse_value(axis, text, item, f" in '{item}'")
    return ("mixed", mixed_value(pairs))


def random_points(count, seed):
    """`count` mixed points drawn with `seed` (the --help says how)."""
    rng = random.Random(seed)
    points = []
    while len(points) < count:
        pairs = {"cpu": round(rng.uniform(0.0, 3.0), 2)}
        if rng.random() < 0.5:
            pairs["gpuspec"] = round(rng.uniform(0.02, 0.33), 2)
        if rng.random() < 1 / 3:
            pairs["gpushare"] = round(rng.uniform(0.2, 1.0), 2)
        if rng.random() < 1 / 3:
            pairs["multigpu"] = round(rng.uniform(0.1, 0.5), 2)
        point = ("mixed", mixed_value(pairs))
        if point not in points:
            points.append(point)
    return points


def parse_points(spec):
    """'default multigpu=0.1,0.2' -> [("default", None), ("multigpu", 0.1), ("multigpu", 0.2)]."""
    points = []
    for item in spec.replace(";", " ").split():
        if item == "default":
            points.append(("default", None))
            continue
        if item.startswith("mixed:"):
            points.append(parse_mixed(item))
            continue
        axis, sep, values = item.partition("=")
        if not sep or axis not in AXES:
            raise UsageError(f"--points: '{item}' is not 'default' or AXIS=V1,V2 with AXIS one of {', '.join(AXES)}")
        for text in values.split(","):
            points.append((axis, parse_value(axis, text, item)))
    return points


def check_points(points):
    if not points:
        raise UsageError("--points: no point given; e.g. --points 'default multigpu=0.2'")
    if len(set(points)) != len(points):
        raise UsageError("--points: a point is given twice (--random may draw one --points names)")
    return points


def parse_policies(flag, text, allow_empty=False):
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names and not allow_empty:
        raise UsageError(f"{flag}: give at least one policy, e.g. {flag} troupe,fgd")
    for p in names:
        if p not in KNOWN_POLICIES:
            raise UsageError(f"{flag}: unknown policy '{p}'; known: {', '.join(KNOWN_POLICIES)}")
    return names


def file_hash(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def read_pods(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def natural_values(pods):
    """Where the unchanged pod list sits on each axis (the default point's x in the plot)."""

    def req(p):
        return int(p["num_gpu"]) * int(p["gpu_milli"])

    total = sum(req(p) for p in pods) or 1
    gpu = [p for p in pods if int(p["num_gpu"]) > 0]
    return {
        "multigpu": sum(req(p) for p in pods if int(p["num_gpu"]) > 1) / total,
        "gpushare": sum(req(p) for p in pods if int(p["num_gpu"]) == 1 and int(p["gpu_milli"]) < 1000) / total,
        "cpu": 1.0,
        "gpuspec": sum(1 for p in gpu if (p.get("gpu_spec") or "").strip()) / (len(gpu) or 1),
    }


def file_part(value):
    """A point's value as part of a file name: 'cpu=2.1,gpuspec=0.2' -> 'cpu2.1_gpuspec0.2'."""
    return fmt_value(value).replace("=", "").replace(",", "_")


class Sweep:
    def __init__(self, args):
        self.args = args
        self.nodes_hash = file_hash(args.nodes)
        self.simulate_calls = 0

    def seeds(self, run):
        return run, 41 + run  # workload seed, replay seed

    def cache_path(self, axis, value, run, policy, workload_hash):
        """Keyed by what the result depends on: the nodes, the workload's content (so a change to
        the generator that leaves a point's workload alone keeps its results), the replay seed
        and the policy. Not by the troupe binary: --recompute is for that."""
        _, rseed = self.seeds(run)
        key = {"version": CACHE_VERSION, "nodes": self.nodes_hash, "workload": workload_hash,
               "replay_seed": rseed, "policy": policy}
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        name = f"{axis}" + (f"-{file_part(value)}" if value is not None else "") + f"-run{run}-{digest}.json"
        return os.path.join(self.args.cache, policy, name)

    def cached(self, path):
        try:
            with open(path) as f:
                r = json.load(f)
            floor = r.get("floor_pct_100")
            return float(r["unallocated_pct_100"]), float(r["unallocated_pct_130"]), \
                None if floor is None else float(floor), r.get("failed_100")
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def derive(self, axis, value, run, workdir):
        """The run's workload file and the hash of its content."""
        if axis == "default":
            return self.args.pods, file_hash(self.args.pods)
        path = os.path.join(workdir, f"{axis}-{file_part(value)}-seed{run}.csv")
        cmd = [sys.executable, DERIVE, "--pods", self.args.pods, "--nodes", self.args.nodes, "--seed", str(run)]
        for a, v in (mixed_pairs(value) if axis == "mixed" else [(axis, value)]):
            cmd += [f"--{a}", fmt_value(v)]
        with open(path, "w") as out:
            r = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"deriving {axis}={fmt_value(value)} seed {run} failed: {r.stderr.strip()}")
        return path, file_hash(path)

    def simulate(self, pods, run, policies):
        _, rseed = self.seeds(run)
        cmd = [self.args.troupe, "simulate", "--nodes", self.args.nodes, "--pods", pods]
        cmd += ["--first-seed", str(rseed), "--seeds", "1", "--json", "--threads", "1", "--policy", ",".join(policies)]
        self.simulate_calls += 1
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            tail = (r.stderr or r.stdout).strip()[-600:]
            raise RuntimeError(f"{' '.join(cmd)} exited with {r.returncode}: {tail}")
        try:
            doc = json.loads(r.stdout)
            got = {}
            for p in doc["policies"]:
                u = p["unallocated_percent"]
                if u["100"] is None or u["130"] is None:
                    # A trace so small that one pod's request jumps over the 100% (or 130%) mark.
                    raise RuntimeError(f"{' '.join(cmd)}: no pod arrived at 100% and 130% of the GPU capacity for "
                                       f"{p['policy']}; the node/pod lists are too small for this point")
                # The hindsight floor (troupe simulate --help) is the run's, not the policy's; a
                # binary from before it has none.
                floor = (doc.get("floor_percent_100") or {}).get("per_seed", [None])[0]
                # Failed requests by size class at 100% arrived; a binary from before them has none.
                by_size = p.get("by_size_100")
                failed = None if by_size is None else {k: v["failed"]["mean"] for k, v in by_size.items()}
                got[p["policy"]] = (float(u["100"]["per_seed"][0]), float(u["130"]["per_seed"][0]),
                                    None if floor is None else float(floor), failed)
        except (ValueError, KeyError, IndexError, TypeError) as e:
            raise RuntimeError(f"{' '.join(cmd)}: unexpected JSON ({e!r}); is --troupe a troupe binary?") from None
        missing = [p for p in policies if p not in got]
        if missing:
            raise RuntimeError(f"{' '.join(cmd)}: no result for {', '.join(missing)}")
        return got

    def run_one(self, axis, value, run, policies, workload):
        """Simulates the policies a run lacks and caches them; returns {policy: (u100, u130)}."""
        t0 = time.monotonic()
        pods, workload_hash = workload
        got = self.simulate(pods, run, policies)
        wseed, rseed = self.seeds(run)
        for policy in policies:
            u100, u130, floor, failed = got[policy]
            path = self.cache_path(axis, value, run, policy, workload_hash)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            record = {
                "axis": axis,
                "value": value,
                "run": run,
                "workload_seed": wseed if axis != "default" else None,
                "replay_seed": rseed,
                "policy": policy,
                "workload_sha256": workload_hash,
                "unallocated_pct_100": u100,
                "unallocated_pct_130": u130,
                "floor_pct_100": floor,
                "failed_100": failed,
            }
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                json.dump(record, f)
            os.replace(tmp, path)  # a killed sweep never leaves half a file in the cache
        return got, time.monotonic() - t0

    def parallel(self, pool, jobs, call):
        """Runs call(*job) for each job on the pool; the first failure stops the sweep."""
        futures = {pool.submit(call, *job): job for job in jobs}
        for fut in concurrent.futures.as_completed(futures):
            try:
                yield futures[fut], fut.result()
            except RuntimeError as e:
                for f in futures:
                    f.cancel()
                fail(str(e), 1)

    def execute(self, points):
        a = self.args
        results = {}  # (axis, value, run, policy) -> (u100, u130)
        runs = [(axis, value, run) for axis, value in points for run in range(1, a.runs + 1)]
        t_start = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="troupe-sweep-") as workdir, \
                concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            # The workloads first: the cache is keyed by their content (deriving one takes well
            # under a second; simulating it, seconds).
            workloads = {}
            for job, got in self.parallel(pool, [r + (workdir,) for r in runs], self.derive):
                workloads[job[:3]] = got
            todo = []
            for axis, value, run in runs:
                need = []
                for policy in a.policy:
                    path = self.cache_path(axis, value, run, policy, workloads[(axis, value, run)][1])
                    hit = None if policy in a.recompute else self.cached(path)
                    if hit is None:
                        need.append(policy)
                    else:
                        results[(axis, value, run, policy)] = hit
                if need:
                    todo.append((axis, value, run, need, workloads[(axis, value, run)]))
            total = len(runs) * len(a.policy)
            sys.stderr.write(f"sweep: {len(points)} points x {a.runs} runs x {len(a.policy)} policies = {total} "
                             f"results; {total - sum(len(t[3]) for t in todo)} from the cache, {len(todo)} simulate "
                             f"calls to make ({a.jobs} at once); workloads derived in "
                             f"{time.monotonic() - t_start:.0f} s\n")
            for done, (job, (got, seconds)) in enumerate(self.parallel(pool, todo, self.run_one), 1):
                axis, value, run, need, _ = job
                for policy in need:
                    results[(axis, value, run, policy)] = got[policy]
                label = axis if value is None else f"{axis}={fmt_value(value)}"
                sys.stderr.write(f"[{done}/{len(todo)}] {label} run {run} ({','.join(need)}): {seconds:.1f} s, "
                                 f"{time.monotonic() - t_start:.0f} s in all\n")
        return results


def mean_sd(xs):
    m = statistics.fmean(xs)
    return m, (statistics.stdev(xs) if len(xs) > 1 else 0.0)


def point_label(axis, value):
    return ("default", "-") if value is None else (axis, fmt_value(value))


def write_runs(path, points, runs, policies, results):
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["axis", "value", "run", "workload_seed", "replay_seed", "policy", "unallocated_pct_100",
                    "unallocated_pct_130", "floor_pct_100", "failed_8gpu_100"])
        for axis, value in points:
            for run in range(1, runs + 1):
                for policy in policies:
                    u100, u130, _, failed = results[(axis, value, run, policy)]
                    floor = floor_of(results, (axis, value), run, policies)
                    f8 = None if failed is None else failed.get(BIG)
                    w.writerow([axis, "" if value is None else fmt_value(value), run,
                                "" if value is None else run, 41 + run, policy, f"{u100:.4f}", f"{u130:.4f}",
                                "" if floor is None else f"{floor:.4f}", "" if f8 is None else f"{f8:g}"])


def floor_of(results, pt, run, policies):
    """The run's hindsight floor at 100% arrived, from any policy's result that carries it."""
    return next((results[pt + (run, p)][2] for p in policies if results[pt + (run, p)][2] is not None), None)


def floor_stats(points, runs, policies, results):
    """{point: (mean, sd)} of the floor, for the points where every run has one."""
    out = {}
    for pt in points:
        fs = [floor_of(results, pt, r, policies) for r in range(1, runs + 1)]
        if all(f is not None for f in fs):
            out[pt] = mean_sd(fs)
    return out


def big_stats(points, runs, policies, results):
    """{point: {policy: (mean, sd)}} of the failed 8-GPU requests at 100% arrived, for the
    policies whose runs all carry them (a cached result from an older binary has none)."""
    out = {}
    for pt in points:
        per = {}
        for p in policies:
            fs = [results[pt + (r, p)][3] for r in range(1, runs + 1)]
            if all(f is not None and BIG in f for f in fs):
                per[p] = mean_sd([f[BIG] for f in fs])
        out[pt] = per
    return out


def big_lines(points, runs, big):
    """The table of failed 8-GPU requests, troupe against fgd; [] without both."""
    if not all("troupe" in big[pt] and "fgd" in big[pt] for pt in points):
        return []
    pols = [p for p in big[points[0]] if all(p in big[pt] for pt in points)]
    lines = ["", "## Failed 8-GPU requests at 100% arrived", "",
             f"Requests of 8 or more GPUs (a whole node) that found no node, mean ± sd over {runs} runs; "
             "lower is better. ▲ marks a point where troupe's mean is above fgd's.", "",
             "| axis | value | " + " | ".join(pols) + " | troupe − fgd |",
             "|---|---:|" + "---:|" * (len(pols) + 1)]
    ok = 0
    for pt in points:
        axis, value = point_label(*pt)
        cells = [axis, value] + [f"{big[pt][p][0]:.1f} ± {big[pt][p][1]:.1f}" for p in pols]
        d = big[pt]["troupe"][0] - big[pt]["fgd"][0]
        ok += d <= 1e-9
        cells.append(f"{d:+.1f}" if d <= 1e-9 else f"**{d:+.1f} ▲**")
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Failed 8-GPU requests: troupe ≤ fgd at {ok} of {len(points)} points."]
    return lines


def summarize(points, runs, policies, results, at=0):
    """{point: {policy: (mean, sd)}} and, where troupe and fgd both ran, the paired comparison;
    at 100% arrived (at=0) or 130% (at=1)."""
    stats, compare = {}, {}
    for pt in points:
        stats[pt] = {p: mean_sd([results[pt + (r, p)][at] for r in range(1, runs + 1)]) for p in policies}
        if "troupe" in policies and "fgd" in policies:
            t, g = stats[pt]["troupe"][0], stats[pt]["fgd"][0]
            wins = sum(1 for r in range(1, runs + 1)
                       if results[pt + (r, "troupe")][at] <= results[pt + (r, "fgd")][at])
            compare[pt] = ((t - g) / g * 100.0 if g else 0.0, t <= g, wins)
    return stats, compare


def headline(points, runs, compare):
    rels = [compare[pt][0] for pt in points]
    ok = sum(1 for pt in points if compare[pt][1])
    wins = sum(compare[pt][2] for pt in points)
    return (f"troupe ≤ fgd at {ok} of {len(points)} points; average relative difference "
            f"{statistics.fmean(rels):+.2f}%; troupe ≤ fgd in {wins} of {runs * len(points)} paired runs")


def write_table(path, points, runs, policies, stats, compare, compare130, floors=None, big=None):
    lines = [
        "# The sweep: unallocated GPU % at 100% arrived",
        "",
        f"Mean ± sd over {runs} runs per point (run i: workload seed i, replay seed 41+i; the default "
        f"point: the pod list itself, seeds 42..{41 + runs}); lower is better, the best mean of each row is bold. "
        f"Written by tools/sweep.py.",
    ]
    if compare:
        lines += ["\"troupe vs fgd\" is (troupe - fgd) / fgd of the means; ▲ marks a point where troupe's mean is "
                  "above fgd's. \"runs ≤\" counts the paired runs (same workload, same shuffle) where troupe "
                  "leaves no more GPUs unallocated than fgd."]
    floors = floors or {}
    gap = bool(compare) and any(pt in floors for pt in points)
    if floors:
        lines += ["\"floor\" is what the request sizes alone leave idle: the same arrived requests packed with "
                  "hindsight into the cluster's GPUs, CPU, nodes and models left out (troupe simulate --help)."
                  + (" \"gap closed\" is the share of fgd's distance to the floor that troupe removes, "
                     "(fgd - troupe) / (fgd - floor)." if gap else "")]
    lines.append("")
    head = ["axis", "value"] + policies + (["floor"] if floors else []) + \
        (["troupe vs fgd", "runs ≤"] if compare else []) + (["gap closed"] if gap else [])
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "|".join(["---", "---:"] + ["---:"] * (len(head) - 2)) + "|")
    for pt in points:
        axis, value = point_label(*pt)
        best = min(stats[pt][p][0] for p in policies)
        cells = [axis, value]
        for p in policies:
            m, sd = stats[pt][p]
            text = f"{m:.2f} ± {sd:.2f}"
            cells.append(f"**{text}**" if round(m, 2) == round(best, 2) else text)
        if floors:
            cells.append(f"{floors[pt][0]:.2f} ± {floors[pt][1]:.2f}" if pt in floors else "n/a")
        if compare:
            rel, ok, wins = compare[pt]
            cells.append(f"{rel:+.2f}%" if ok else f"**{rel:+.2f}% ▲**")
            cells.append(f"{wins}/{runs}")
        if gap:
            cells.append(closed_text(stats[pt], floors.get(pt)))
        lines.append("| " + " | ".join(cells) + " |")
    if compare:
        rels = [compare[pt][0] for pt in points]
        ok = sum(1 for pt in points if compare[pt][1])
        wins = sum(compare[pt][2] for pt in points)
        cells = ["**all points**", ""] + [""] * len(policies) + ([""] if floors else [])
        cells += [f"**{statistics.fmean(rels):+.2f}%** (average)", f"{wins}/{runs * len(points)}"]
        if gap:
            cells.append("")
        lines.append("| " + " | ".join(cells) + " |")
        lines += ["", f"At 100% arrived: {headline(points, runs, compare)}.",
                  f"At 130% arrived (runs.csv): {headline(points, runs, compare130)}."]
        mixed = [pt for pt in points if pt[0] == "mixed"]
        single = [pt for pt in points if pt[0] != "mixed"]
        if mixed and single:
            lines += [f"The axes' points alone, at 100%: {headline(single, runs, compare)}.",
                      f"The mixed points alone, at 100%: {headline(mixed, runs, compare)}."]
    if big:
        lines += big_lines(points, runs, big)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def closed_text(point_stats, floor):
    """(fgd - troupe) / (fgd - floor) as a percent; n/a without a floor or with fgd on it."""
    if floor is None or point_stats["fgd"][0] - floor[0] <= 0.005:
        return "n/a"
    return f"{(point_stats['fgd'][0] - point_stats['troupe'][0]) / (point_stats['fgd'][0] - floor[0]) * 100:+.0f}%"


def nice_ticks(lo, hi, count=5):
    span = hi - lo if hi > lo else 1.0
    raw = span / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    t = first
    while t <= hi + step * 0.5:
        ticks.append(round(t, 10))
        t += step
    return ticks


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def svg_head(width, height, font_size, title_size, title):
    """The opening lines of a plot: the svg element, a white background and the title."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="{font_size}">',
            f'<rect width="{width}" height="{height}" fill="white"/>',
            f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="{title_size}">{esc(title)}</text>']


def svg_write(path, lines):
    with open(path, "w") as f:
        f.write("\n".join(lines + ["</svg>"]) + "\n")


def write_svg(path, points, runs, policies, stats, natural, floors=None):
    width, pw, ph = 900, 380, 250  # panel plot area
    left, top, gap_x, gap_y = 62, 50, 80, 95
    legend_y = top + 2 * ph + gap_y + 72
    height = legend_y + 30
    out = svg_head(width, height, 12, 15, f"Unallocated GPUs at 100% arrived (mean ± sd over {runs} runs; "
                   f"lower is better)")
    default = ("default", None) if ("default", None) in points else None
    for k, axis in enumerate(AXES):
        ox = left + (k % 2) * (pw + gap_x)
        oy = top + (k // 2) * (ph + gap_y)
        pts = [pt for pt in points if pt[0] == axis]
        xs = [(pt[1], pt) for pt in pts] + ([(natural[axis], default)] if default else [])
        xs.sort(key=lambda e: e[0])
        out.append(f'<text x="{ox + pw / 2}" y="{oy + ph + 40}" text-anchor="middle">{esc(AXIS_TITLES[axis])}</text>')
        out.append(f'<rect x="{ox}" y="{oy}" width="{pw}" height="{ph}" fill="none" stroke="#999"/>')
        if not pts:
            out.append(f'<text x="{ox + pw / 2}" y="{oy + ph / 2}" text-anchor="middle" fill="#777">'
                       f'no point on this axis</text>')
            continue
        floors = floors or {}
        ys = [stats[pt][p][0] + s * stats[pt][p][1] for _, pt in xs for p in policies for s in (-1, 1)]
        ys += [floors[pt][0] for _, pt in xs if pt in floors]
        yt = nice_ticks(max(0.0, min(ys)), max(ys))
        y0, y1 = yt[0], yt[-1] if yt[-1] > yt[0] else yt[0] + 1
        x0, x1 = min(x for x, _ in xs), max(x for x, _ in xs)
        if x1 == x0:
            x0, x1 = x0 - 0.5, x1 + 0.5
        pad = (x1 - x0) * 0.05

        def sx(x):
            return ox + (x - x0 + pad) / (x1 - x0 + 2 * pad) * pw

        def sy(y):
            return oy + ph - (y - y0) / (y1 - y0) * ph

        for t in yt:
            out.append(f'<line x1="{ox}" x2="{ox + pw}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#eee"/>')
            out.append(f'<text x="{ox - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{t:g}</text>')
        for x, pt in xs:
            label = f"{x:.2f}".rstrip("0").rstrip(".") if pt is default else fmt_value(x)
            out.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{oy + ph}" y2="{oy + ph + 4}" stroke="#999"/>')
            # The default's own value can sit next to a point's: its label then gives way.
            crowded = pt is default and any(abs(sx(x) - sx(o)) < 26 for o, q in xs if q is not default)
            if not crowded:
                out.append(f'<text x="{sx(x):.1f}" y="{oy + ph + 17}" text-anchor="middle">{label}</text>')
            if pt is default:
                out.append(f'<text x="{sx(x):.1f}" y="{oy - 5}" text-anchor="middle" fill="#777" font-size="11">'
                           f'default</text>')
                out.append(f'<line x1="{sx(x):.1f}" x2="{sx(x):.1f}" y1="{oy}" y2="{oy + ph}" stroke="#ccc" '
                           f'stroke-dasharray="3,3"/>')
        out.append(f'<text x="{ox - 42}" y="{oy + ph / 2}" text-anchor="middle" '
                   f'transform="rotate(-90 {ox - 42} {oy + ph / 2})">unallocated GPU %</text>')
        if all(pt in floors for _, pt in xs):
            coords = " ".join(f"{sx(x):.1f},{sy(floors[pt][0]):.1f}" for x, pt in xs)
            out.append(f'<polyline fill="none" stroke="#555" stroke-width="1.4" stroke-dasharray="5,4" '
                       f'points="{coords}"/>')
        n = len(policies)
        for i, p in enumerate(policies):
            color = COLORS[KNOWN_POLICIES.index(p) % len(COLORS)]
            # Lines of the same x are nudged apart so their error bars stay visible.
            dx = (i - (n - 1) / 2) * 2.0
            coords = []
            for x, pt in xs:
                m, sd = stats[pt][p]
                cx = sx(x) + dx
                coords.append(f"{cx:.1f},{sy(m):.1f}")
                if sd > 0:
                    out.append(f'<path d="M{cx:.1f},{sy(m - sd):.1f}V{sy(m + sd):.1f}M{cx - 3:.1f},{sy(m - sd):.1f}'
                               f'h6M{cx - 3:.1f},{sy(m + sd):.1f}h6" stroke="{color}" fill="none" '
                               f'stroke-width="1"/>')
                out.append(f'<circle cx="{cx:.1f}" cy="{sy(m):.1f}" r="2.5" fill="{color}"/>')
            width_line = 2.4 if p == "troupe" else 1.6
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="{width_line}" '
                       f'points="{" ".join(coords)}"/>')
    slot = width / max(len(policies) + (1 if floors else 0), 1)
    if floors:
        x = slot * len(policies) + 20
        out.append(f'<line x1="{x:.1f}" x2="{x + 22:.1f}" y1="{legend_y}" y2="{legend_y}" stroke="#555" '
                   f'stroke-width="1.4" stroke-dasharray="5,4"/>')
        out.append(f'<text x="{x + 28:.1f}" y="{legend_y + 4}">floor</text>')
    for i, p in enumerate(policies):
        color = COLORS[KNOWN_POLICIES.index(p) % len(COLORS)]
        x = slot * i + 20
        out.append(f'<line x1="{x:.1f}" x2="{x + 22:.1f}" y1="{legend_y}" y2="{legend_y}" stroke="{color}" '
                   f'stroke-width="3"/>')
        out.append(f'<text x="{x + 28:.1f}" y="{legend_y + 4}">{esc(p)}</text>')
    svg_write(path, out)


def write_mixed_svg(path, points, runs, compare):
    """One bar per mixed point: (troupe - fgd) / fgd in %, sorted; below zero troupe leaves fewer
    GPUs idle."""
    rows = sorted(((compare[pt][0], pt[1]) for pt in points), key=lambda r: r[0])
    bar, left, right, top = 16, 390, 40, 50
    width = 900
    height = top + bar * len(rows) + 60
    lo = min(0.0, min(r[0] for r in rows))
    hi = max(0.0, max(r[0] for r in rows))
    ticks = nice_ticks(lo, hi)
    t0, t1 = ticks[0], ticks[-1] if ticks[-1] > ticks[0] else ticks[0] + 1

    def sx(x):
        return left + (x - t0) / (t1 - t0) * (width - left - right)

    out = svg_head(width, height, 11, 14, f"troupe against fgd on mixed points: (troupe - fgd) / fgd, % "
                   f"unallocated at 100% arrived ({runs} runs each; left is better)")
    for t in ticks:
        out.append(f'<line x1="{sx(t):.1f}" x2="{sx(t):.1f}" y1="{top}" y2="{top + bar * len(rows)}" '
                   f'stroke="{"#999" if t == 0 else "#eee"}"/>')
        out.append(f'<text x="{sx(t):.1f}" y="{top + bar * len(rows) + 16}" text-anchor="middle">{t:g}%</text>')
    for i, (rel, label) in enumerate(rows):
        y = top + i * bar
        x0, x1 = sorted((sx(0.0), sx(rel)))
        color = COLORS[KNOWN_POLICIES.index("troupe")] if rel > 0 else COLORS[KNOWN_POLICIES.index("fgd")]
        out.append(f'<rect x="{x0:.1f}" y="{y + 2}" width="{max(x1 - x0, 0.5):.1f}" height="{bar - 4}" '
                   f'fill="{color}"/>')
        out.append(f'<text x="{left - 6}" y="{y + bar - 4}" text-anchor="end">{esc(label)}</text>')
    svg_write(path, out)


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for runs.csv, table.md and sweep.svg (created)")
    ap.add_argument("--cache", help="folder of cached run results (created); without it nothing is reused")
    ap.add_argument("--points", default=DEFAULT_POINTS, help="the points, e.g. 'default multigpu=0.2,0.4 cpu=0'")
    ap.add_argument("--random", default="0", help="add N mixed points drawn over all four axes (default 0)")
    ap.add_argument("--random-seed", default="1", help="the seed --random draws with (default 1)")
    ap.add_argument("--runs", default="10", help="runs per point (default 10)")
    ap.add_argument("--policy", default=",".join(ALL_POLICIES), help="comma-separated policies (default: "
                    + ",".join(ALL_POLICIES) + ")")
    ap.add_argument("--recompute", default="", help="policies to simulate again even when cached, e.g. troupe")
    ap.add_argument("--jobs", default="2", help="simulate processes at once (default 2; each runs --threads 1)")
    ap.add_argument("--troupe", default=os.path.join(ROOT, "build", "troupe"), help="the troupe binary "
                    "(default build/troupe)")
    ap.add_argument("--nodes", default=os.path.join(TRACE, "openb_node_list_gpu_node.csv"),
                    help="openb node list (default ../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv)")
    ap.add_argument("--pods", default=os.path.join(TRACE, "openb_pod_list_default.csv"),
                    help="openb pod list the points derive from (default: the default pod list there)")
    a = ap.parse_args(argv)
    for flag, attr, lo in (("--runs", "runs", 1), ("--jobs", "jobs", 1), ("--random", "random", 0),
                           ("--random-seed", "random_seed", 0)):
        try:
            setattr(a, attr, int(getattr(a, attr)))
        except ValueError:
            raise UsageError(f"{flag} {getattr(a, attr)}: give a whole number, e.g. {flag} 2") from None
        if getattr(a, attr) < lo:
            raise UsageError(f"{flag} {getattr(a, attr)}: give at least {lo}")
    a.policy = parse_policies("--policy", a.policy)
    a.recompute = parse_policies("--recompute", a.recompute, allow_empty=True)
    for p in a.recompute:
        if p not in a.policy:
            raise UsageError(f"--recompute: {p} is not in --policy ({','.join(a.policy)})")
    a.points = check_points(parse_points(a.points) + random_points(a.random, a.random_seed))
    for flag, path in (("--nodes", a.nodes), ("--pods", a.pods)):
        if not os.path.isfile(path):
            raise UsageError(f"{flag} {path}: no such file; pass an openb CSV (docs/placement-quality.md says "
                             f"where to get the trace)")
    if not (os.path.isfile(a.troupe) and os.access(a.troupe, os.X_OK)):
        raise UsageError(f"--troupe {a.troupe}: not an executable; build it (scripts/build.sh) or pass its path")
    if a.cache is None:
        a.cache = tempfile.mkdtemp(prefix="troupe-sweep-cache-")
        a.drop_cache = True
    else:
        a.drop_cache = False
    return a


def main(argv):
    try:
        a = parse_args(argv)
    except UsageError as e:
        fail(str(e))
    pods = read_pods(a.pods)
    natural = natural_values(pods)
    sweep = Sweep(a)
    t0 = time.monotonic()
    try:
        results = sweep.execute(a.points)
    finally:
        if a.drop_cache:
            shutil.rmtree(a.cache, ignore_errors=True)
    os.makedirs(a.out, exist_ok=True)
    write_runs(os.path.join(a.out, "runs.csv"), a.points, a.runs, a.policy, results)
    stats, compare = summarize(a.points, a.runs, a.policy, results)
    _, compare130 = summarize(a.points, a.runs, a.policy, results, at=1)
    floors = floor_stats(a.points, a.runs, a.policy, results)
    big = big_stats(a.points, a.runs, a.policy, results)
    write_table(os.path.join(a.out, "table.md"), a.points, a.runs, a.policy, stats, compare, compare130, floors, big)
    written = "runs.csv, table.md"
    if any(pt[0] != "mixed" for pt in a.points):  # its panels are the single axes
        write_svg(os.path.join(a.out, "sweep.svg"), a.points, a.runs, a.policy, stats, natural, floors)
        written += ", sweep.svg"
    mixed = [pt for pt in a.points if pt[0] == "mixed"]
    if mixed and compare:
        write_mixed_svg(os.path.join(a.out, "mixed.svg"), mixed, a.runs, compare)
        written += ", mixed.svg"
    sys.stderr.write(f"sweep: {sweep.simulate_calls} simulate calls in {time.monotonic() - t0:.0f} s; wrote "
                     f"{a.out}/{written}\n")
    if compare:
        sys.stderr.write(f"sweep: at 100% arrived, {headline(a.points, a.runs, compare)}\n")


if __name__ == "__main__":
    main(sys.argv[1:])
