#!/usr/bin/env python3
"""tools/derive_workload.py on a small synthetic pod list: each axis reaches its target, a seed
always gives the same file, and bad input stops with a message naming the flag or file.

Run: python3 tests/tools/derive_workload_test.py (scripts/test.sh does)."""

import csv
import io
import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "derive_workload.py")

NODES = [
    "sn,cpu_milli,memory_mib,gpu,model",
    "n-0,96000,393216,8,G2",
    "n-1,104000,524288,2,T4",
    "n-2,32000,131072,4,V100M16",
    "n-3,64000,262144,2,P100",
]


def pod_rows():
    rows = ["name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos"]
    n = 0
    # 60 whole 1-GPU, 30 sharing (500), 6 multi-GPU (2 x 2, 2 x 4, 2 x 8), 20 CPU-only.
    for kind, count in (("1,1000", 60), ("1,500", 30), ("2,1000", 2), ("4,1000", 2), ("8,1000", 2), ("0,0", 20)):
        for _ in range(count):
            rows.append(f"openb-pod-{n:04d},4000,8192,{kind},,LS")
            n += 1
    return rows


def run(args, pods="\n".join(pod_rows()) + "\n"):
    with tempfile.TemporaryDirectory() as d:
        p, n = os.path.join(d, "pods.csv"), os.path.join(d, "nodes.csv")
        with open(p, "w") as f:
            f.write(pods)
        with open(n, "w") as f:
            f.write("\n".join(NODES) + "\n")
        r = subprocess.run([sys.executable, TOOL, "--pods", p, "--nodes", n] + args, capture_output=True, text=True)
    return r


def parse(out):
    return list(csv.DictReader(io.StringIO(out)))


def req(p):
    return int(p["num_gpu"]) * int(p["gpu_milli"])


def share(rows, member):
    total = sum(req(p) for p in rows)
    return sum(req(p) for p in rows if member(p)) / total


class DeriveWorkloadTest(unittest.TestCase):
    def test_multigpu_appends_copies_until_the_share(self):
        rows = parse(run(["--seed", "1", "--multigpu", "0.4"]).stdout)
        self.assertGreaterEqual(share(rows, lambda p: int(p["num_gpu"]) > 1), 0.4)
        self.assertEqual(rows[:116], parse("\n".join(pod_rows()) + "\n"))  # originals kept, in order
        self.assertEqual(len({p["name"] for p in rows}), len(rows))
        self.assertEqual(rows[116]["name"], "openb-pod-0116")

    def test_gpushare_keeps_the_total_request(self):
        base = sum(req(p) for p in parse("\n".join(pod_rows()) + "\n"))
        for target in (0.2, 0.6, 1.0):
            rows = parse(run(["--seed", "2", "--gpushare", str(target)]).stdout)
            sharing = share(rows, lambda p: int(p["num_gpu"]) == 1 and int(p["gpu_milli"]) < 1000)
            self.assertAlmostEqual(sharing, target, delta=0.02)
            self.assertAlmostEqual(sum(req(p) for p in rows), base, delta=1000)

    def test_cpu_scales_the_cpu_only_pods(self):
        for factor, want in ((0, 0), (0.5, 10), (3, 60)):
            rows = parse(run(["--seed", "3", "--cpu", str(factor)]).stdout)
            self.assertEqual(sum(1 for p in rows if p["num_gpu"] == "0"), want)

    def test_gpuspec_constrains_a_share_of_gpu_pods_to_hostable_models(self):
        rows = parse(run(["--seed", "4", "--gpuspec", "0.33"]).stdout)
        gpu = [p for p in rows if int(p["num_gpu"]) > 0]
        constrained = [p for p in gpu if p["gpu_spec"]]
        self.assertEqual(len(constrained), round(0.33 * len(gpu)))
        self.assertFalse(any(p["gpu_spec"] for p in rows if p["num_gpu"] == "0"))
        gpus_of = {"G2": 8, "T4": 2, "V100M16": 4, "P100": 2}
        for p in constrained:
            models = p["gpu_spec"].split("|")
            self.assertTrue(any(gpus_of.get(m, 0) >= int(p["num_gpu"]) for m in models), p)

    def test_a_seed_gives_the_same_file(self):
        args = ["--seed", "5", "--multigpu", "0.3", "--cpu", "2", "--gpuspec", "0.2"]
        self.assertEqual(run(args).stdout, run(args).stdout)
        self.assertNotEqual(run(args).stdout, run(["--seed", "6"] + args[2:]).stdout)

    def test_bad_input_names_the_flag_or_file(self):
        r = run(["--seed", "1", "--gpuspec", "1.5"])
        self.assertEqual(r.returncode, 2)
        self.assertIn("--gpuspec 1.5", r.stderr)
        r = run(["--seed", "1"], pods="name,cpu_milli\nx,1\n")
        self.assertEqual(r.returncode, 2)
        self.assertIn("column memory_mib missing", r.stderr)


if __name__ == "__main__":
    unittest.main()
