#!/usr/bin/env python3
"""tools/sweep.py on the small trace in examples/trace/: the CSV, table and SVG agree with one
another, runs pair workload and replay seeds, the cache spares simulate calls (counted through a
fake --troupe), --recompute redoes one policy, and bad flags stop with a message naming the flag.
When build/troupe exists, one short sweep also runs through the real simulator.

Run: python3 tests/tools/sweep_test.py (scripts/test.sh does)."""

import csv
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import textwrap
import unittest
import xml.etree.ElementTree as ET

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "sweep.py")
NODES = os.path.join(ROOT, "examples", "trace", "nodes.csv")
PODS = os.path.join(ROOT, "examples", "trace", "pods.csv")
REAL = os.environ.get("TROUPE_BIN", os.path.join(ROOT, "build", "troupe"))

# A stand-in for 'troupe simulate --json': it logs each call (argv and a hash of the pod file) to
# $FAKE_LOG and answers a value made from the pod file, the seed and the policy, so different
# workloads and seeds give different numbers. troupe is made worse than fgd on derived "cpu-"
# workloads so that the table has a point to mark. FAKE_FAIL=1 makes it fail like a crash. The
# hindsight floor depends on the pod file and seed only; FAKE_NO_FLOOR=1 leaves it out.
FAKE = textwrap.dedent(
    """\
    #!/usr/bin/env python3
    import hashlib, json, os, sys
    a = sys.argv[1:]
    if os.environ.get("FAKE_FAIL"):
        sys.stderr.write("boom: simulated crash\\n")
        sys.exit(3)
    opt = {a[i]: a[i + 1] for i in range(1, len(a) - 1) if a[i].startswith("--") and not a[i + 1].startswith("--")}
    data = open(opt["--pods"], "rb").read()
    digest = hashlib.sha256(data).hexdigest()
    with open(os.environ["FAKE_LOG"], "a") as f:
        f.write(json.dumps({"argv": a, "pods_sha": digest, "pods_lines": data.count(b"\\n")}) + "\\n")
    base = {"troupe": 4.0, "fgd": 4.5, "best-fit": 7.0, "random": 13.0}
    out = []
    for p in opt["--policy"].split(","):
        noise = int(hashlib.sha256((digest + opt["--first-seed"] + p).encode()).hexdigest()[:6], 16) / 16**6
        v = base.get(p, 9.0) + noise + (1.5 if p == "troupe" and "cpu-" in opt["--pods"] else 0)
        u = lambda x: {"mean": x, "sd": 0, "min": x, "max": x, "per_seed": [x]}
        run_noise = int(hashlib.sha256((digest + opt["--first-seed"]).encode()).hexdigest()[:6], 16) / 16**6
        big = {"failed": {"mean": float(int(run_noise * 10) + (3 if p == "fgd" else 0))}}
        out.append({"policy": p, "unallocated_percent": {"100": u(round(v, 4)), "130": u(round(v - 0.1, 4))},
                    "by_size_100": {"8+": big}})
    doc = {"first_seed": int(opt["--first-seed"]), "seeds": 1, "policies": out}
    if not os.environ.get("FAKE_NO_FLOOR"):  # a binary from before the floor has none
        f = 2.0 + int(hashlib.sha256((digest + opt["--first-seed"]).encode()).hexdigest()[:6], 16) / 16**6
        doc["floor_percent_100"] = {"mean": round(f, 4), "sd": 0, "per_seed": [round(f, 4)]}
    print(json.dumps(doc))
    """
)


def parse_table(path):
    """{(axis, value): {column: cell}} from table.md's point rows."""
    with open(path) as f:
        text = f.read().split("\n## ")[0]  # the failed 8-GPU requests' table follows
        lines = [ln for ln in text.splitlines() if ln.startswith("| ")]
    head = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = {}
    for ln in lines[1:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        rows[(cells[0], cells[1])] = dict(zip(head, cells))
    return rows


def mean_sd(cell):
    m = re.fullmatch(r"\**([0-9.]+) ± ([0-9.]+)\**", cell)
    assert m, cell
    return float(m.group(1)), float(m.group(2))


class SweepTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        self.fake = os.path.join(self.dir, "fake-troupe")
        with open(self.fake, "w") as f:
            f.write(FAKE)
        os.chmod(self.fake, 0o755)
        self.log = os.path.join(self.dir, "calls.jsonl")
        self.cache = os.path.join(self.dir, "cache")
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        self.tmp.cleanup()

    def sweep(self, *args, troupe=None, env=None):
        cmd = [sys.executable, TOOL, "--nodes", NODES, "--pods", PODS, "--troupe", troupe or self.fake]
        cmd += ["--out", self.out, "--runs", "2", "--points", "default cpu=0.5"] + list(args)
        e = dict(os.environ, FAKE_LOG=self.log, **(env or {}))
        return subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=120)

    def calls(self):
        if not os.path.exists(self.log):
            return []
        with open(self.log) as f:
            return [json.loads(ln) for ln in f]

    def runs_csv(self):
        with open(os.path.join(self.out, "runs.csv")) as f:
            return list(csv.DictReader(f))

    def test_outputs_agree_and_seeds_pair(self):
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd,random")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = self.runs_csv()
        self.assertEqual(len(rows), 2 * 2 * 3)
        for row in rows:
            self.assertEqual(int(row["replay_seed"]), 41 + int(row["run"]))
            self.assertEqual(row["workload_seed"], "" if row["axis"] == "default" else row["run"])
            self.assertLess(float(row["unallocated_pct_130"]), float(row["unallocated_pct_100"]))
        # The failed 8-GPU requests: per run in runs.csv, per point in table.md (the fake fails
        # 3 more for fgd than for troupe on the same run).
        with open(os.path.join(self.out, "table.md")) as f:
            text = f.read()
        self.assertIn("## Failed 8-GPU requests at 100% arrived", text)
        self.assertIn("Failed 8-GPU requests: troupe ≤ fgd at 2 of 2 points.", text)
        for pt in ("default", "cpu"):
            f8 = {p: statistics.fmean(float(r["failed_8gpu_100"]) for r in rows
                                      if r["axis"] == pt and r["policy"] == p) for p in ("troupe", "fgd")}
            self.assertAlmostEqual(f8["fgd"] - f8["troupe"], 3.0)
        # One simulate call per (point, run), every policy in it, seeds 42 and 43.
        calls = self.calls()
        self.assertEqual(len(calls), 4)
        seeds = sorted(c["argv"][c["argv"].index("--first-seed") + 1] for c in calls)
        self.assertEqual(seeds, ["42", "42", "43", "43"])
        self.assertTrue(all("--threads" in c["argv"] and c["argv"][c["argv"].index("--threads") + 1] == "1"
                            for c in calls))
        # The default point replays the pod list itself; the cpu point two different derived lists
        # with half the CPU-only pods.
        with open(PODS, "rb") as f:
            data = f.read()
        own = hashlib.sha256(data).hexdigest()
        by_file = {c["argv"][c["argv"].index("--pods") + 1]: c for c in calls}
        self.assertEqual(sum(1 for c in calls if c["pods_sha"] == own), 2)
        derived = [c for p, c in by_file.items() if p != PODS]
        self.assertEqual(len(derived), 2)
        self.assertNotEqual(derived[0]["pods_sha"], derived[1]["pods_sha"])
        with open(PODS) as f:
            pods = list(csv.DictReader(f))
        cpu_only = sum(1 for p in pods if p["num_gpu"] == "0")
        for c in derived:
            self.assertEqual(c["pods_lines"], data.count(b"\n") - (cpu_only - round(0.5 * cpu_only)))

        # table.md: each cell is the mean +- sd of runs.csv; the relative difference and its mark.
        table = parse_table(os.path.join(self.out, "table.md"))
        self.assertEqual(set(table), {("default", "-"), ("cpu", "0.5"), ("**all points**", "")})
        rels = []
        for (axis, value), cells in table.items():
            if axis.startswith("**"):
                continue
            means = {}
            for policy in ("troupe", "fgd", "random"):
                xs = [float(r["unallocated_pct_100"]) for r in rows
                      if r["axis"] == axis and r["value"] == ("" if value == "-" else value) and r["policy"] == policy]
                m, sd = mean_sd(cells[policy])
                self.assertAlmostEqual(m, statistics.fmean(xs), delta=0.005)
                self.assertAlmostEqual(sd, statistics.stdev(xs), delta=0.005)
                means[policy] = statistics.fmean(xs)
            rel = (means["troupe"] - means["fgd"]) / means["fgd"] * 100
            rels.append(rel)
            self.assertAlmostEqual(float(cells["troupe vs fgd"].strip("*▲ %")), rel, delta=0.005)
            self.assertEqual("▲" in cells["troupe vs fgd"], means["troupe"] > means["fgd"])
        self.assertIn("▲", table[("cpu", "0.5")]["troupe vs fgd"])  # the fake makes troupe worse there
        self.assertNotIn("▲", table[("default", "-")]["troupe vs fgd"])
        last = table[("**all points**", "")]["troupe vs fgd"]
        self.assertAlmostEqual(float(re.search(r"([+-][0-9.]+)%", last).group(1)), statistics.fmean(rels), delta=0.005)
        with open(os.path.join(self.out, "table.md")) as f:
            text = f.read()
        self.assertIn("At 100% arrived: troupe ≤ fgd at 1 of 2 points", text)
        rel130 = []
        for axis, value in (("default", ""), ("cpu", "0.5")):
            m = {p: statistics.fmean(float(r["unallocated_pct_130"]) for r in rows
                                     if (r["axis"], r["value"], r["policy"]) == (axis, value, p)) for p in ("troupe", "fgd")}
            rel130.append((m["troupe"] - m["fgd"]) / m["fgd"] * 100)
        self.assertIn(f"At 130% arrived (runs.csv): troupe ≤ fgd at 1 of 2 points; average relative difference "
                      f"{statistics.fmean(rel130):+.2f}%", text)

        # sweep.svg: well-formed, four panels, a line per policy on the cpu panel and on each
        # panel the default point sits on, a legend entry per policy.
        svg = ET.parse(os.path.join(self.out, "sweep.svg")).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        self.assertEqual(svg.get("width"), "900")
        texts = [t.text for t in svg.iter(ns + "text")]
        for title in ("multi-GPU pods' share of the GPU request", "CPU-only pods, x the default list's"):
            self.assertIn(title, texts)
        # Only the cpu panel has points: a line per policy through the default (x = 1) and 0.5,
        # and the floor's (dashed).
        lines = list(svg.iter(ns + "polyline"))
        self.assertEqual(len(lines), 4)
        self.assertEqual(sum(1 for ln in lines if ln.get("stroke-dasharray")), 1)
        self.assertTrue(all(len(ln.get("points").split()) == 2 for ln in lines))
        self.assertEqual(texts.count("no point on this axis"), 3)
        self.assertIn("default", texts)
        for policy in ("troupe", "fgd", "random"):
            self.assertIn(policy, texts)

    def test_cache_reused_and_recompute(self):
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.calls()), 4)
        first = self.runs_csv()
        with open(os.path.join(self.out, "table.md")) as f:
            table = f.read()
        # Same sweep again: nothing to simulate, the same outputs.
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.calls()), 4)
        self.assertEqual(self.runs_csv(), first)
        with open(os.path.join(self.out, "table.md")) as f:
            self.assertEqual(f.read(), table)
        # A new policy: only its runs are simulated.
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd,best-fit")
        self.assertEqual(r.returncode, 0, r.stderr)
        new = self.calls()[4:]
        self.assertEqual(len(new), 4)
        self.assertTrue(all(c["argv"][c["argv"].index("--policy") + 1] == "best-fit" for c in new))
        # --recompute troupe: troupe's runs only, even though they are cached.
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd,best-fit", "--recompute", "troupe")
        self.assertEqual(r.returncode, 0, r.stderr)
        new = self.calls()[8:]
        self.assertEqual(len(new), 4)
        self.assertTrue(all(c["argv"][c["argv"].index("--policy") + 1] == "troupe" for c in new))
        # Another point or more runs: only the new (point, run)s.
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd,best-fit", "--runs", "3")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.calls()), 12 + 2)
        # The key is the workload's content: the same pod list elsewhere hits the cache, one
        # pod more misses it (both points: the cpu point derives from the list).
        copy = os.path.join(self.dir, "pods-copy.csv")
        with open(PODS) as f, open(copy, "w") as g:
            g.write(f.read())
        before = len(self.calls())
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd", "--pods", copy)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.calls()), before)
        with open(copy, "a") as g:
            g.write("example-pod-9999,1000,1024,1,500,\n")
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd", "--pods", copy)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.calls()), before + 4)
        # Without --cache nothing is kept between runs.
        before = len(self.calls())
        for _ in range(2):
            r = self.sweep("--policy", "fgd")
            self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.calls()), before + 8)

    def test_simulate_failure_names_the_command(self):
        r = self.sweep("--cache", self.cache, env={"FAKE_FAIL": "1"})
        self.assertEqual(r.returncode, 1)
        self.assertIn("simulate", r.stderr)
        self.assertIn("boom: simulated crash", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.out, "table.md")))
        # A failed run leaves nothing in the cache.
        cached = [f for _, _, fs in os.walk(self.cache) for f in fs] if os.path.isdir(self.cache) else []
        self.assertEqual(cached, [])

    def test_bad_flags_name_the_flag(self):
        for args, flag in (
            (["--runs", "0"], "--runs"),
            (["--runs", "ten"], "--runs"),
            (["--jobs", "-1"], "--jobs"),
            (["--policy", "troupe,nope"], "--policy"),
            (["--policy", ""], "--policy"),
            (["--policy", "troupe,fgd", "--recompute", "best-fit"], "--recompute"),
            (["--points", "multigpu=0.2 shards=3"], "--points"),
            (["--points", "gpushare=1.5"], "--points"),
            (["--points", "cpu=two"], "--points"),
            (["--points", "cpu=1 cpu=1"], "--points"),
            (["--points", "mixed:cpu=2,cpu=3"], "--points"),
            (["--points", "mixed:shards=1,cpu=2"], "--points"),
            (["--points", "mixed:gpuspec=2"], "--points"),
            (["--points", "mixed:cpu=two"], "--points"),
            (["--points", "", "--random", "0"], "--points"),
            (["--random", "-1"], "--random"),
            (["--random", "many"], "--random"),
            (["--nodes", os.path.join(self.dir, "missing.csv")], "--nodes"),
            (["--troupe", os.path.join(self.dir, "no-troupe")], "--troupe"),
        ):
            r = self.sweep(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(flag, r.stderr, args)
            self.assertNotIn("Traceback", r.stderr, args)
        self.assertEqual(self.calls(), [])
        r = subprocess.run([sys.executable, TOOL, "--help"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        for words in ("41+i", "--recompute", "runs.csv", "sweep.svg"):
            self.assertIn(words, r.stdout)

    def test_mixed_and_random_points(self):
        """A mixed point derives its workload with every flag it names, random points are drawn the
        same for a seed and within their ranges, and the table, CSV and mixed.svg carry them."""
        sys.path.insert(0, os.path.join(ROOT, "tools"))
        import sweep as tool  # noqa: E402 (the tool's own drawing, to compare with its output)

        drawn = tool.random_points(6, 3)
        self.assertEqual(drawn, tool.random_points(6, 3))
        self.assertNotEqual(drawn, tool.random_points(6, 4))
        for axis, value in drawn:
            self.assertEqual(axis, "mixed")
            pairs = dict(tool.mixed_pairs(value))
            self.assertIn("cpu", pairs)
            self.assertTrue(0 <= pairs["cpu"] <= 3)
            self.assertTrue(0.02 <= pairs.get("gpuspec", 0.1) <= 0.33)
            self.assertTrue(0.2 <= pairs.get("gpushare", 0.5) <= 1.0)
            self.assertTrue(0.1 <= pairs.get("multigpu", 0.2) <= 0.5)
        r = self.sweep("--points", "cpu=0.5 mixed:gpushare=0.5,cpu=2", "--random", "2", "--random-seed", "3",
                       "--policy", "troupe,fgd")
        self.assertEqual(r.returncode, 0, r.stderr)
        points = [("mixed", "gpushare=0.5,cpu=2")] + tool.random_points(2, 3)
        rows = self.runs_csv()
        for _, value in points:
            got = [row for row in rows if row["axis"] == "mixed" and row["value"] == value]
            self.assertEqual(len(got), 2 * 2, value)  # 2 runs x 2 policies
        # Run 1 of the named mixed point is derive_workload.py with both flags and seed 1.
        derive = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "derive_workload.py"), "--pods", PODS,
                                 "--nodes", NODES, "--seed", "1", "--cpu", "2", "--gpushare", "0.5"],
                                capture_output=True, check=True)
        want = hashlib.sha256(derive.stdout).hexdigest()
        self.assertIn(want, [c["pods_sha"] for c in self.calls() if c["argv"][c["argv"].index("--first-seed") + 1] == "42"])
        only_cpu = subprocess.run([sys.executable, os.path.join(ROOT, "tools", "derive_workload.py"), "--pods", PODS,
                                   "--nodes", NODES, "--seed", "1", "--cpu", "2"], capture_output=True, check=True)
        self.assertNotEqual(hashlib.sha256(only_cpu.stdout).hexdigest(), want)
        table = parse_table(os.path.join(self.out, "table.md"))
        for _, value in points:
            self.assertIn(("mixed", value), table)
        with open(os.path.join(self.out, "table.md")) as f:
            text = f.read()
        self.assertIn("The mixed points alone, at 100%: troupe ≤ fgd at", text)
        self.assertIn("The axes' points alone, at 100%: troupe ≤ fgd at", text)
        svg = ET.parse(os.path.join(self.out, "mixed.svg")).getroot()
        ns = "{http://www.w3.org/2000/svg}"
        labels = [t.text for t in svg.iter(ns + "text")]
        for _, value in points:
            self.assertIn(value, labels)
        self.assertEqual(len([b for b in svg.iter(ns + "rect") if b.get("fill") != "white"]), len(points))

    def test_floor_column(self):
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd")
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = self.runs_csv()
        table = parse_table(os.path.join(self.out, "table.md"))
        for (axis, value), cells in table.items():
            if axis.startswith("**"):
                continue
            mine = [r for r in rows if r["axis"] == axis and r["value"] == ("" if value == "-" else value)]
            # One floor per run, the same in every policy's row.
            by_run = {}
            for row in mine:
                by_run.setdefault(row["run"], set()).add(row["floor_pct_100"])
            self.assertTrue(all(len(v) == 1 for v in by_run.values()), by_run)
            floors = [float(next(iter(v))) for v in by_run.values()]
            m, sd = mean_sd(cells["floor"])
            self.assertAlmostEqual(m, statistics.fmean(floors), delta=0.005)
            self.assertAlmostEqual(sd, statistics.stdev(floors), delta=0.005)
            t = statistics.fmean(float(r["unallocated_pct_100"]) for r in mine if r["policy"] == "troupe")
            g = statistics.fmean(float(r["unallocated_pct_100"]) for r in mine if r["policy"] == "fgd")
            closed = (g - t) / (g - statistics.fmean(floors)) * 100
            self.assertEqual(cells["gap closed"], f"{closed:+.0f}%")
        with open(os.path.join(self.out, "sweep.svg")) as f:
            self.assertIn(">floor</text>", f.read())
        # A cached result keeps its floor; a binary without one leaves the column out.
        calls = len(self.calls())
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd", env={"FAKE_NO_FLOOR": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(self.calls()), calls)
        self.assertIn("floor", parse_table(os.path.join(self.out, "table.md"))[("default", "-")])
        r = self.sweep("--policy", "troupe,fgd", env={"FAKE_NO_FLOOR": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("floor", parse_table(os.path.join(self.out, "table.md"))[("default", "-")])
        self.assertTrue(all(row["floor_pct_100"] == "" for row in self.runs_csv()))

    @unittest.skipUnless(os.access(REAL, os.X_OK), "build/troupe not built")
    def test_real_simulator(self):
        r = self.sweep("--cache", self.cache, "--policy", "troupe,fgd", "--points", "default gpuspec=0.2",
                       troupe=REAL)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = self.runs_csv()
        self.assertEqual(len(rows), 8)
        # The default point's run 1 is 'troupe simulate' at seed 42 on the pod list itself.
        sim = subprocess.run([REAL, "simulate", "--nodes", NODES, "--pods", PODS, "--first-seed", "42", "--seeds", "1",
                              "--json", "--policy", "fgd"], capture_output=True, text=True, timeout=60)
        want = json.loads(sim.stdout)["policies"][0]["unallocated_percent"]["100"]["per_seed"][0]
        got = [r for r in rows if r["axis"] == "default" and r["run"] == "1" and r["policy"] == "fgd"][0]
        self.assertAlmostEqual(float(got["unallocated_pct_100"]), want, delta=1e-4)
        table = parse_table(os.path.join(self.out, "table.md"))
        self.assertIn(("gpuspec", "0.2"), table)
        # The floor is simulate's, and no policy's run leaves fewer GPUs idle than it.
        self.assertAlmostEqual(float(got["floor_pct_100"]), json.loads(sim.stdout)["floor_percent_100"]["per_seed"][0],
                               delta=1e-4)
        for row in rows:
            self.assertLessEqual(float(row["floor_pct_100"]), float(row["unallocated_pct_100"]), row)


if __name__ == "__main__":
    unittest.main()
