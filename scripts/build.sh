#!/usr/bin/env bash
# Configures and builds Troupe into a build directory.
# Usage: scripts/build.sh [BUILD_DIR] [extra cmake args...]   (default build/)
# Env:   TROUPE_BUILD_TARGETS="a b"  build only these targets (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-build}"
shift || true
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f "$dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$dir" "${generator[@]}" "$@" >/dev/null
elif (($# > 0)); then
  cmake -S . -B "$dir" "$@" >/dev/null
fi
targets=()
for t in ${TROUPE_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$dir" --parallel "$(nproc)" "${targets[@]}"
