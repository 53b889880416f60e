#!/usr/bin/env python3
"""Every place that states Troupe's configuration states the binary's defaults.

The defaults are defined once, in ServeConfig's member initialisers
(src/adapters/yaml/config.h); `troupe serve --print-config` writes them. This check loads each
other statement of the config through the binary itself (`troupe serve --config FILE
--print-config`), so it compares what Troupe would actually run with, and reports every key
whose value differs from the default:

  - the Helm chart's rendered config (--chart-render: a `helm template` output),
  - deploy/troupe.yaml (the chart rendered with default values, for kubectl apply),
  - examples/config.yaml,
  - the README's config block (after "Config file (`--config`"),
  - the key list in the comment at the top of src/adapters/yaml/config.h.

A source may differ only where DELIBERATE below says so, with the reason; anything else is an
error naming the source, the key, both values and the fix.

Usage: scripts/check-defaults.py --binary build/troupe [--chart-render RENDER.yaml]
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Differences that are choices, not drift: (source, key) -> (value, why).
NARROW = ("best", "the chart narrows the filter to Troupe's first-ranked node so kube-scheduler binds "
                  "exactly where the simulator would (docs/live-replay.md); the binary's default stays 'all'")
DELIBERATE = {
    ("chart", "filter.narrowTo"): NARROW,
    ("deploy/troupe.yaml", "filter.narrowTo"): NARROW,
    ("README.md", "filter.narrowTo"): ("best", "the README's example shows the chart's choice, "
                                               "its comment names 'all' as the default"),
    ("config.h", "filter.narrowTo"): ("best", "the comment shows the value and names 'all' as the default"),
}


def config_map_data(render_text, key="config.yaml"):
    for doc in yaml.safe_load_all(render_text):
        if doc and doc.get("kind") == "ConfigMap" and key in (doc.get("data") or {}):
            return doc["data"][key]
    return None


def readme_block(text):
    start = text.index("Config file (`--config`")
    m = re.search(r"```yaml\n(.*?)```", text[start:], re.S)
    return m.group(1) if m else None


def header_comment(text):
    start = text.index("// Config (--config)")
    end = text.index("// Cluster (--cluster)", start)
    lines = text[start:end].splitlines()[1:]
    return "\n".join(re.sub(r"^//( {2})?", "", line) for line in lines) + "\n"


def flatten(value, prefix=""):
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def printed(binary, config_text=None):
    """The config Troupe runs with for this --config text (None: the defaults), flattened."""
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(config_text or "")
        path = f.name
    try:
        args = [binary, "serve", "--print-config"] + (["--config", path] if config_text is not None else [])
        r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=30)
    finally:
        os.unlink(path)
    if r.returncode != 0:
        raise ValueError(r.stderr.strip() or f"exit {r.returncode}")
    return flatten(yaml.safe_load(r.stdout))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.path.join(ROOT, "build/troupe"))
    ap.add_argument("--chart-render", help="a `helm template` output of charts/troupe with default values")
    args = ap.parse_args()
    if not os.access(args.binary, os.X_OK):
        sys.exit(f"check-defaults: no Troupe binary at {args.binary}; build it (scripts/build.sh build)")

    def read(rel):
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            return f.read()

    sources = {}
    if args.chart_render:
        with open(args.chart_render, encoding="utf-8") as f:
            sources["chart"] = config_map_data(f.read())
    else:
        print("check-defaults: no --chart-render given; the chart is checked by scripts/chart-check.sh")
    sources["deploy/troupe.yaml"] = config_map_data(read("deploy/troupe.yaml"))
    sources["examples/config.yaml"] = read("examples/config.yaml")
    sources["README.md"] = readme_block(read("README.md"))
    sources["config.h"] = header_comment(read("src/adapters/yaml/config.h"))

    defaults = printed(args.binary)
    problems, checked = [], 0
    for name, text in sources.items():
        if text is None:
            problems.append(f"{name}: no Troupe config found in it")
            continue
        try:
            actual = printed(args.binary, text)
        except ValueError as e:
            problems.append(f"{name}: Troupe refuses it: {e}")
            continue
        checked += 1
        for key, default in defaults.items():
            value = actual.get(key)
            if value == default:
                continue
            allowed = DELIBERATE.get((name, key))
            if allowed and allowed[0] == value:
                continue
            problems.append(f"{name}: {key} is {value!r}, but the binary's default is {default!r}; state the "
                            f"default there (it is defined in src/adapters/yaml/config.h), or, if the "
                            f"difference is deliberate, add it to DELIBERATE in scripts/check-defaults.py "
                            f"with the reason")
        for (src, key), (value, _) in DELIBERATE.items():
            if src == name and actual.get(key) != value:
                problems.append(f"{name}: {key} is {actual.get(key)!r}; DELIBERATE in scripts/check-defaults.py "
                                f"expects {value!r}: update one of them")
    for p in problems:
        print("check-defaults: FAIL: " + p, file=sys.stderr)
    if problems:
        return 1
    print(f"check-defaults: {checked} sources state the binary's {len(defaults)} defaults "
          f"({len(DELIBERATE)} deliberate differences)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
