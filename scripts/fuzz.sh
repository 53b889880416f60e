#!/usr/bin/env bash
# Builds Troupe's libFuzzer targets (clang, AddressSanitizer + UndefinedBehaviorSanitizer) into
# build-fuzz/ and runs each one for a fixed time, seeded from its corpus (docs/fuzzing.md).
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]     (default 15 s, every target)
#   TROUPE_FUZZ_JOBS   targets run at the same time (default 2)
#   TROUPE_FUZZ_BUILD  build folder (default build-fuzz)
#   TROUPE_SHARED_DIR  the shared fixtures' parent (default ../shared): extra JSON seeds
# What each run learns stays in BUILD/corpus/<target>/ (the next run starts from it). A finding
# (crash, UBSan report, timeout, broken property) fails the script; its reproducer is
# BUILD/findings/<target>/crash-*: fix it, then add the file to tests/fuzz/corpus/<target>/ so
# the ctest fuzz_corpus replays it in every build.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-15}
shift || true
build=${TROUPE_FUZZ_BUILD:-build-fuzz}
parallel=${TROUPE_FUZZ_JOBS:-2}
shared=${TROUPE_SHARED_DIR:-$(cd .. && pwd)/shared}
all=(json_scanner wire_filter wire_bind wire_preempt kube_objects pod_contract node_facts quantity duration kubeconfig)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

command -v clang++ >/dev/null || { echo "fuzz: clang++ missing (scripts/install-deps.sh --test)" >&2; exit 2; }
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [[ ! -f $build/CMakeCache.txt ]]; then
  CC=clang CXX=clang++ cmake -S . -B "$build" "${generator[@]}" -DTROUPE_FUZZ=ON -DTROUPE_BUILD_TESTS=OFF \
    -DTROUPE_BUILD_BENCH=OFF -DTROUPE_WERROR=ON -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_FLAGS_RELEASE=-O1 >/dev/null
fi
start=$SECONDS
cmake --build "$build" --target fuzz_all --parallel "$(nproc)"
echo "fuzz: targets built in $((SECONDS - start)) s"

seeds=(tests/corpus)
if [[ -d $shared/fixtures/kube-scheduler ]]; then
  seeds+=("$shared/fixtures/kube-scheduler")
else
  echo "fuzz: $shared/fixtures/kube-scheduler is not there; the JSON targets are seeded without it"
fi
json_target() { case $1 in json_scanner | wire_* | kube_objects) return 0 ;; *) return 1 ;; esac; }
max_len() { if json_target "$1"; then echo 32768; elif [[ $1 == kubeconfig ]]; then echo 8192; else echo 4096; fi; }

run() {
  local t=$1
  local work=$build/corpus/$t findings=$build/findings/$t log=$build/logs/$t.log
  mkdir -p "$work" "$findings" "$(dirname "$log")"
  local dirs=("$work" "tests/fuzz/corpus/$t")
  if json_target "$t"; then dirs+=("${seeds[@]}"); fi
  # Findings abort the target (ASan/UBSan halt on the first report; a property failure aborts).
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 \
    "$build/tests/fuzz/troupe_fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -max_len="$(max_len "$t")" -print_final_stats=1 -artifact_prefix="$findings/" "${dirs[@]}" >"$log" 2>&1
}

pids=() names=() failed=()
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= parallel)); do wait -n || true; done
  run "$t" &
  pids+=($!) names+=("$t")
done
printf '%-13s %12s %9s %7s  %s\n' target executions exec/s units result
total=0
for i in "${!pids[@]}"; do
  t=${names[$i]}
  rc=0
  wait "${pids[$i]}" || rc=$?
  log=$build/logs/$t.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  units=$(find "$build/corpus/$t" -type f | wc -l)
  result=ok
  if ((rc != 0)); then
    result="FINDING (exit $rc): $(ls "$build/findings/$t" 2>/dev/null | head -1); see $log"
    failed+=("$t")
  fi
  total=$((total + ${execs:-0}))
  printf '%-13s %12s %9s %7s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "$units" "$result"
done
echo "fuzz: $total executions in all, ${seconds} s per target"
if ((${#failed[@]})); then
  for t in "${failed[@]}"; do tail -40 "$build/logs/$t.log" >&2; done
  exit 1
fi
