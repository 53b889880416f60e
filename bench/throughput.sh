#!/usr/bin/env bash
# Scheduling throughput on the real control plane (bench/throughput.py): kube-scheduler alone,
# with Troupe standalone and with Troupe as the chart runs it, at 1,000 and 5,000 nodes, plus a
# 1,024-pod gang. Builds build/troupe first if it is missing; the control plane binaries come
# from scripts/build-k8s.sh (cluster-up.sh checks them).
#
# Usage: bench/throughput.sh [bench/throughput.py options]
#        bench/throughput.sh --nodes 100 --pods 300 --gang 64     # a quick smoke run
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x build/troupe ]; then
  TROUPE_BUILD_TARGETS=troupe scripts/build.sh build -DCMAKE_BUILD_TYPE=RelWithDebInfo
fi
exec python3 bench/throughput.py "$@"
