#!/usr/bin/env bash
# README command 1: install build dependencies, build, then
#   1. replay the Alibaba GPU trace (../shared/data, else the small trace in examples/trace)
#      through Troupe and the FGD paper's policies: table on stdout, plot in build/sim-out/;
#   2. start `troupe serve` on the example cluster (no Kubernetes needed), send it the example
#      extender requests and print its decisions.
# TROUPE_DEMO_SEEDS (default 3) sets the simulator's seeds; the published figures use 10.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
scripts/install-deps.sh
# Only the troupe binary: the tests and benchmarks are scripts/test.sh's. Ninja's "[n/N]" lines
# become one progress line per tenth of the work, with the time since the start.
echo "== building the troupe binary into build/ (a cold build takes about 4 minutes on 2 cores; later runs rebuild only what changed)"
mkdir -p build
if ! TROUPE_BUILD_TARGETS=troupe scripts/build.sh build 2>&1 | tee build/demo-build.log | awk -v t0="$(date +%s)" '
  match($0, /^\[([0-9]+)\/([0-9]+)\]/) {
    split(substr($0, 2, RLENGTH - 2), n, "/"); tenth = int(10 * n[1] / n[2])
    if (tenth > shown || n[1] == n[2]) {
      shown = tenth; e = systime() - t0
      printf "   %3d%%  %d of %d steps  %d:%02d elapsed\n", 100 * n[1] / n[2], n[1], n[2], e / 60, e % 60
      fflush()
    }
  }'; then
  tail -40 build/demo-build.log >&2
  echo "demo: the build failed (whole output: build/demo-build.log)" >&2
  exit 1
fi
echo "   ready after $((SECONDS - t0)) s"
echo "== 1. troupe simulate: unallocated GPUs when the workload reaches 100% of capacity (lower is better)"
build/troupe simulate --seeds "${TROUPE_DEMO_SEEDS:-3}" --out build/sim-out
echo
echo "== 2. troupe serve: the extender answering kube-scheduler's requests"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
log=build/demo-troupe.log
build/troupe serve --listen "127.0.0.1:$port" --cluster examples/cluster.yaml 2>"$log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -fs "http://127.0.0.1:$port/healthz" >/dev/null && break
  sleep 0.1
done
echo "troupe serve is listening on http://127.0.0.1:$port with examples/cluster.yaml (log: $log)"
python3 scripts/demo.py "http://127.0.0.1:$port" --log "$log"
