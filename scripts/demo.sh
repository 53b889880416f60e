#!/usr/bin/env bash
# README command 1: install build dependencies, build, start `troupe serve` on the example
# cluster (no Kubernetes needed), send it the example requests and print its decisions.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build >/dev/null
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
