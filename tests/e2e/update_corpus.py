#!/usr/bin/env python3
"""Copy a small set of request bodies the real kube-scheduler sent to Troupe into the corpus
that the unit tests decode (tests/unit/adapters/http/corpus_test.cc).

Troupe records every request body under build/e2e/record/<start>/<verb>-<seq>.json during an
e2e run (scripts/lib-e2e.sh starts it with --record-dir). The e2e tests label the pods worth
keeping with troupe.dev/e2e-corpus=<key>; this script keeps the first body per (verb, key),
byte for byte, as <verb>-<key>.json, and writes index.json: what each body holds, read here
with Python's json module, so the C++ decoder is checked against an independent reading. It
also copies build/e2e/cluster.yaml, the fleet Troupe knew during the run, so the unit test can
replay Troupe's decisions on the recorded bodies.

Usage (after an e2e run, e.g. scripts/e2e.sh or make cluster-up + pytest tests/e2e):
  python3 tests/e2e/update_corpus.py            # rewrite tests/corpus/kube-scheduler-<minor>/
  python3 tests/e2e/update_corpus.py --dry-run  # only list what it would keep
"""
import argparse
import datetime
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
from kubehelpers import pod_gpu_request  # noqa: E402

LABEL = "troupe.dev/e2e-corpus"
VERBS = ("filter", "prioritize", "preempt", "bind")


def k8s_version():
    with open(os.path.join(ROOT, "tools", "k8s", "go.mod"), encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and parts[0] == "k8s.io/kubernetes" and parts[1].startswith("v1."):
                return parts[1]
    raise SystemExit("update_corpus: no k8s.io/kubernetes line in tools/k8s/go.mod")


def recorded(root):
    out = []
    for dirpath, _, files in os.walk(root):
        for name in files:
            verb = name.split("-", 1)[0]
            if name.endswith(".json") and verb in VERBS:
                path = os.path.join(dirpath, name)
                out.append((os.path.getmtime(path), path, verb))
    return sorted(out)


def expectation(verb, body):
    """What the body holds, as the unit test must decode it."""
    if verb == "bind":
        return {"pod": {"name": body["PodName"], "namespace": body["PodNamespace"], "uid": body["PodUID"]},
                "node": body["Node"]}
    pod = body["Pod"]
    meta, spec = pod["metadata"], pod.get("spec", {})
    exp = {"pod": {
        "name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
        "priority": spec.get("priority", 0), "gpus": pod_gpu_request(pod),
        "annotations": {k: v for k, v in (meta.get("annotations") or {}).items() if k.startswith("troupe.dev/")},
    }}
    if verb in ("filter", "prioritize"):
        exp["nodeCache"] = body["Nodes"] is None
        exp["nodeNames"] = body["NodeNames"]
    else:
        meta_victims = body["NodeNameToMetaVictims"]
        exp["nodeCache"] = meta_victims is not None
        if meta_victims is not None:
            exp["victims"] = {n: [p["UID"] for p in v["Pods"]] for n, v in meta_victims.items()}
            exp["pdbViolations"] = {n: v["NumPDBViolations"] for n, v in meta_victims.items()}
        else:
            full = body["NodeNameToVictims"] or {}
            exp["victims"] = {n: [p["metadata"]["uid"] for p in v["Pods"]] for n, v in full.items()}
            exp["pdbViolations"] = {n: v["NumPDBViolations"] for n, v in full.items()}
    return exp


def main():
    version = k8s_version()
    minor = ".".join(version.lstrip("v").split(".")[:2])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--record-dir", default=os.path.join(ROOT, "build", "e2e", "record"))
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "corpus", f"kube-scheduler-{minor}"))
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args()

    if not os.path.isdir(args.record_dir):
        raise SystemExit(f"update_corpus: {args.record_dir} does not exist; run the e2e tests first "
                         "(scripts/e2e.sh, or scripts/cluster-up.sh then python3 -m pytest tests/e2e)")
    chosen, seen_bytes = {}, set()
    for _, path, verb in recorded(args.record_dir):
        with open(path, "rb") as f:
            raw = f.read()
        body = json.loads(raw)
        labels = ((body.get("Pod") or {}).get("metadata") or {}).get("labels") or {}
        key = labels.get(LABEL)
        if not key or (verb, key) in chosen or raw in seen_bytes:
            continue
        chosen[(verb, key)] = (path, raw, body)
        seen_bytes.add(raw)
    if not chosen:
        raise SystemExit(f"update_corpus: no recorded body under {args.record_dir} is from a pod labelled {LABEL}")
    missing = [v for v in ("filter", "prioritize", "preempt") if v not in {v for v, _ in chosen}]

    files = {}
    for (verb, key), (path, raw, body) in sorted(chosen.items()):
        name = f"{verb}-{key}.json"
        files[name] = (path, raw, verb, body)
        print(f"{name:32s} <- {os.path.relpath(path, ROOT)} ({len(raw)} bytes)")
    if missing:
        print(f"update_corpus: WARNING: nothing recorded for {', '.join(missing)} "
              "(preempt needs TROUPE_PREEMPT_VERB=preempt, which scripts/e2e.sh sets)", file=sys.stderr)
    if args.dry_run:
        return

    os.makedirs(args.out, exist_ok=True)
    for old in os.listdir(args.out):
        if old.endswith(".json"):
            os.remove(os.path.join(args.out, old))
    index = {
        "kubernetesVersion": version,
        "captured": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "how": "tests/e2e/update_corpus.py after the e2e suite (see README.md here)",
        "files": {},
    }
    for name, (_, raw, verb, body) in files.items():
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(raw)  # exactly the bytes kube-scheduler sent
        index["files"][name] = {"verb": verb, **expectation(verb, body)}
    # The fleet Troupe had (--cluster), so the unit test can replay Troupe's decisions.
    cluster = os.path.join(ROOT, "build", "e2e", "cluster.yaml")
    if not os.path.exists(cluster):
        raise SystemExit(f"update_corpus: {cluster} is missing (written by scripts/cluster-up.sh)")
    shutil.copyfile(cluster, os.path.join(args.out, "cluster.yaml"))
    with open(os.path.join(args.out, "index.json"), "w", encoding="utf-8") as f:
        json.dump(index, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"update_corpus: wrote {len(files)} bodies, index.json and cluster.yaml to {os.path.relpath(args.out, ROOT)}")


if __name__ == "__main__":
    main()
