#!/usr/bin/env python3
"""Rebuilds the FGD artifact's GPU-model-constrained openb traces (openb_pod_list_gpuspecNN.csv).

Usage:
  tools/artifact_gpuspec.py [--variant gpuspecNN] [--pods DEFAULT_CSV] [--models MODELS_CSV] > out.csv

A variant (gpuspec05, gpuspec10, gpuspec20, gpuspec25 or gpuspec33, the default) is the default
pod list with the gpu_spec column filled for the pods named in MODELS_CSV (name,gpu_spec;
default tests/data/fgd-artifact/VARIANT-models.csv); every other column is the default list's.
DEFAULT_CSV defaults to ../shared/data/alibaba-gpu-v2023/openb_pod_list_default.csv. Then
  troupe simulate --nodes ../shared/data/alibaba-gpu-v2023/openb_node_list_gpu_node.csv \\
      --pods out.csv
replays it; for gpuspec33 fgd gives the artifact's published 12.16% unallocated (seeds 42..51).
"""
import argparse
import csv
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", default=os.path.join(ROOT, "..", "shared", "data", "alibaba-gpu-v2023",
                                                   "openb_pod_list_default.csv"))
    ap.add_argument("--variant", default="gpuspec33",
                    choices=["gpuspec05", "gpuspec10", "gpuspec20", "gpuspec25", "gpuspec33"])
    ap.add_argument("--models", help="name,gpu_spec CSV (default: the variant's in tests/data/fgd-artifact/)")
    args = ap.parse_args()
    if not args.models:
        args.models = os.path.join(ROOT, "tests", "data", "fgd-artifact", args.variant + "-models.csv")
    for flag, path in (("--pods", args.pods), ("--models", args.models)):
        if not os.path.isfile(path):
            sys.exit(f"artifact_gpuspec.py: {flag} {path}: no such file")
    with open(args.models, newline="") as f:
        models = {r["name"]: r["gpu_spec"] for r in csv.DictReader(f)}
    with open(args.pods, newline="") as f:
        reader = csv.DictReader(f)
        if "gpu_spec" not in (reader.fieldnames or []):
            sys.exit(f"artifact_gpuspec.py: --pods {args.pods}: no gpu_spec column")
        out = csv.DictWriter(sys.stdout, fieldnames=reader.fieldnames, lineterminator="\n")
        out.writeheader()
        seen = 0
        for row in reader:
            if row["name"] in models:
                row["gpu_spec"] = models[row["name"]]
                seen += 1
            out.writerow(row)
    if seen != len(models):
        sys.exit(f"artifact_gpuspec.py: {len(models) - seen} pods of --models are not in --pods")


if __name__ == "__main__":
    main()
