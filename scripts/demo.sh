#!/usr/bin/env bash
# README command 1: install build dependencies, build, then
#   1. replay the Alibaba GPU trace (../shared/data, else the small trace in examples/trace)
#      through Troupe and the FGD paper's policies: table on stdout, plot in build/sim-out/;
#   2. start `troupe serve` on the example cluster (no Kubernetes needed), send it the example
#      extender requests and print its decisions.
# TROUPE_DEMO_SEEDS (default 3) sets the simulator's seeds; the published figures use 10.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build >/dev/null
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
python3 scripts/demo.py "http://127.0.0.1:$port"
