#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite:
#   1. format check (clang-format)
#   2. build with -Werror; unit + HTTP integration tests (ctest)
#   3. the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   4. the concurrent core under ThreadSanitizer
#   5. a quick benchmark run (smoke: it must run, numbers are not asserted)
# Set TROUPE_SKIP_SANITIZERS=1 for a fast local loop.
set -euo pipefail
cd "$(dirname "$0")/.."
export TROUPE_SHARED_DIR="${TROUPE_SHARED_DIR:-$(cd .. && pwd)/shared}"
step() { printf '\n=== %s\n' "$*"; }

step "dependencies"
scripts/install-deps.sh --test

step "format (scripts/verify-format.sh)"
scripts/verify-format.sh

step "build with -Werror and run the tests"
scripts/build.sh build -DTROUPE_WERROR=ON -DTROUPE_BUILD_TESTS=ON
ctest --test-dir build --output-on-failure

if [[ "${TROUPE_SKIP_SANITIZERS:-0}" != "1" ]]; then
  step "AddressSanitizer + UndefinedBehaviorSanitizer"
  scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=Debug -DTROUPE_SANITIZE=address,undefined -DTROUPE_BUILD_BENCH=OFF
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure

  step "ThreadSanitizer (the scheduling core under concurrent calls)"
  scripts/build.sh build-tsan -DCMAKE_BUILD_TYPE=Debug -DTROUPE_SANITIZE=thread -DTROUPE_BUILD_BENCH=OFF
  # TSan needs a low-entropy address layout on recent kernels; setarch -R disables ASLR.
  TSAN_OPTIONS="halt_on_error=1" setarch "$(uname -m)" -R ctest --test-dir build-tsan -R '^unit$' --output-on-failure
fi

if [[ -x build/bench/troupe_bench ]]; then
  step "benchmark smoke run (bench/troupe_bench --quick)"
  build/bench/troupe_bench --quick
fi
step "all tests passed"
