#!/usr/bin/env bash
# Profiles troupe_bench's target cases with perf and prints where the time goes.
# Usage: bench/profile.sh [BUILD_DIR]   (default: build; needs perf, python3, and a
# RelWithDebInfo build so the stacks have symbols)
#   1. names-only filter, 5,000 nodes     2. full-node filter, 1,000 nodes
#   3. loopback HTTP, 64 connections (all threads: HTTP stack vs handler vs client)
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-build}/bench/troupe_bench"
[[ -x "$bin" ]] || { echo "no $bin: build the bench first" >&2; exit 1; }
command -v perf >/dev/null || { echo "perf not installed (apt-get install linux-perf)" >&2; exit 1; }
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

profile() {  # profile NAME SUMMARY-ARGS -- BENCH-ARGS...
  local name=$1 summary=$2
  shift 3
  echo
  echo "=== $name"
  perf record -q -F 999 --call-graph dwarf,16384 -o "$tmp/$name.data" -- "$bin" "$@" >/dev/null 2>&1
  perf script -i "$tmp/$name.data" -F comm,ip,sym --no-inline 2>/dev/null | python3 bench/perf_summary.py $summary
  rm -f "$tmp/$name.data"
}
common=(--no-memory --no-breakdown --pods 4gpu)
profile names-filter-5000 "--depth 3" -- --nodes 5000 --only filter/names --iterations 500 --no-loopback "${common[@]}"
profile full-filter-1000 "--depth 3" -- --nodes 1000 --only filter/full --iterations 15 --no-loopback "${common[@]}"
profile loopback-64 "--server" -- --no-latency --connections 64 --duration 3 "${common[@]}"
