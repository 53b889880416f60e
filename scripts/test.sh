#!/usr/bin/env bash
# README command 2: install what is missing, build, and run the whole test suite:
#   1. format check (clang-format); the core's and the adapters' includes (scripts/check-layers.py);
#      function length (scripts/check-function-length.py); README length and docs index
#      (scripts/check-readme.py); doc links (scripts/check-doc-links.py)
#   2. build with -Werror; unit + HTTP integration tests (ctest)
#   3. the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   4. the concurrent core under ThreadSanitizer
#   4b. the libFuzzer targets, a fixed time each, under ASan + UBSan (scripts/fuzz.sh)
#   5. the Helm chart, dashboard and deploy/ manifests; promtool on /metrics
#   6. a quick benchmark run (smoke: it must run, numbers are not asserted)
#   7. end-to-end tests on a real kube-apiserver + kube-scheduler built from Go modules
#   8. the container image (podman) and the chart's own pod as the scheduler pair (e2e)
# Set TROUPE_SKIP_SANITIZERS=1, TROUPE_SKIP_FUZZ=1 and/or TROUPE_SKIP_E2E=1 for a fast local loop;
# TROUPE_FUZZ_SECONDS sets the fuzzing time per target (default 15).
# TROUPE_E2E_K8S_EXTRA (default "v1.35.4 v1.38.0-beta.0"; "" skips them) runs a compatibility
# slice of the e2e (smoke, GPU pods, a gang, native PodGroups where served, DRA, NVLink domains,
# the GPU invariant)
# on each of these Kubernetes versions (docs/kubernetes-versions.md). Their control planes build
# at the lowest CPU priority while the default version's e2e runs (mostly waiting on the API),
# so a cold build costs little of the CI's time.
set -euo pipefail
cd "$(dirname "$0")/.."
export TROUPE_SHARED_DIR="${TROUPE_SHARED_DIR:-$(cd .. && pwd)/shared}"
# Each step prints the minutes:seconds since the start, so a slow CI run shows where it went.
t_start=$SECONDS
step() { printf '\n=== [%d:%02d] %s\n' $(((SECONDS - t_start) / 60)) $(((SECONDS - t_start) % 60)) "$*"; }

step "dependencies"
scripts/install-deps.sh --test

# The Go modules for helm and the e2e control plane download in the background while C++
# compiles; the builds that need them later find them in the module cache (or fetch what is
# missing themselves, and report the error there).
GO_BIN="$(command -v go || echo /usr/local/go/bin/go)"
if [[ -x "$GO_BIN" ]]; then
  mkdir -p build
  for m in tools/helm tools/k8s; do
    (cd "$m" && "$GO_BIN" mod download) >"build/go-mod-download-${m##*/}.log" 2>&1 &
  done
fi

# The compatibility slices' control planes (scripts/build-k8s.sh for each extra version) build in
# the background from here on at nice 19: they take only the CPU the rest leaves idle (single-
# threaded test runs, fuzzing, the e2e waiting on the API), so no timing-bound test is starved;
# the slices wait for them at the end. 1.38's modules need Go 1.27 (the Go proxy serves it).
extra_versions="${TROUPE_E2E_K8S_EXTRA-v1.35.4 v1.38.0-beta.0}"
k8s_toolchain() {
  case "$1" in v1.3[0-7].*) echo "${GOTOOLCHAIN:-}" ;; *) echo "${GOTOOLCHAIN_K8S_NEW:-go1.27.3}" ;; esac
}
if [[ "${TROUPE_SKIP_E2E:-0}" != "1" && -n "$extra_versions" && -x "$GO_BIN" ]]; then
  rm -f build/build-k8s-extra.failed
  (for v in $extra_versions; do
    GO="$GO_BIN" GOTOOLCHAIN="$(k8s_toolchain "$v")" K8S_VERSION="$v" nice -n 19 scripts/build-k8s.sh \
      >"build/build-k8s-$v.log" 2>&1 || echo "build-k8s $v failed: build/build-k8s-$v.log" >>build/build-k8s-extra.failed
  done) &
  extra_build=$!
fi

step "format (scripts/verify-format.sh)"
scripts/verify-format.sh

step "layers: the core includes only the standard library and the layers below it; adapters only the core, adapters/common and their own headers (scripts/check-layers.py)"
python3 scripts/check-layers.py --self-test
python3 scripts/check-layers.py

step "functions: none in src/ or include/ over 120 lines (scripts/check-function-length.py)"
python3 scripts/check-function-length.py --self-test
python3 scripts/check-function-length.py

step "docs: the README under 350 lines with its two set-up commands, docs/README.md indexes every page (scripts/check-readme.py)"
python3 scripts/check-readme.py --self-test
python3 scripts/check-readme.py

step "docs: every relative link in README.md and docs/ resolves (scripts/check-doc-links.py)"
python3 scripts/check-doc-links.py

step "pod contract: every key once in include/troupe/model/pod_contract.h, README's table equal to its pod section (scripts/check-pod-contract.py)"
python3 scripts/check-pod-contract.py --self-test
python3 scripts/check-pod-contract.py

step "tools: the workload generator (tests/tools/derive_workload_test.py)"
python3 tests/tools/derive_workload_test.py

step "build with -Werror and run the tests"
scripts/build.sh build -DTROUPE_WERROR=ON -DTROUPE_BUILD_TESTS=ON
ctest --test-dir build --output-on-failure

step "the README's demo: every step of scripts/demo.py against troupe serve (tests/tools/demo_test.py)"
python3 tests/tools/demo_test.py

step "tools: the placement-quality sweep (tests/tools/sweep_test.py, with build/troupe)"
python3 tests/tools/sweep_test.py

step "chart, dashboard and deploy/ manifests (scripts/chart-check.sh)"
scripts/chart-check.sh

step "metric names and help texts (scripts/check-metrics.sh: promtool check metrics)"
scripts/check-metrics.sh

if [[ "${TROUPE_SKIP_SANITIZERS:-0}" != "1" ]]; then
  step "AddressSanitizer + UndefinedBehaviorSanitizer"
  scripts/build.sh build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTROUPE_SANITIZE=address,undefined -DTROUPE_BUILD_BENCH=OFF
  ASAN_OPTIONS=detect_leaks=1 ctest --test-dir build-asan --output-on-failure

  step "ThreadSanitizer (the scheduling core under concurrent calls)"
  # The concurrent core: the Scheduler under many threads and gang barriers (cpprestsdk is
  # not TSan-instrumented, so the HTTP layer runs under ASan only); only the unit tests build.
  TROUPE_BUILD_TARGETS=troupe_unit_tests \
    scripts/build.sh build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTROUPE_SANITIZE=thread -DTROUPE_BUILD_BENCH=OFF
  # TSan needs a low-entropy address layout on recent kernels; setarch -R disables ASLR.
  TSAN_OPTIONS="halt_on_error=1" setarch "$(uname -m)" -R \
    build-tsan/tests/troupe_unit_tests "[scheduler],[gang],[concurrency]"
fi

if [[ "${TROUPE_SKIP_FUZZ:-0}" != "1" ]]; then
  step "fuzzing: every libFuzzer target for ${TROUPE_FUZZ_SECONDS:-15} s under ASan + UBSan (scripts/fuzz.sh)"
  scripts/fuzz.sh "${TROUPE_FUZZ_SECONDS:-15}"
fi

if [[ -x build/bench/troupe_bench ]]; then
  step "benchmark smoke run (bench/troupe_bench --quick)"
  build/bench/troupe_bench --quick
fi
if [[ "${TROUPE_SKIP_E2E:-0}" != "1" ]]; then
  step "end-to-end: real kube-scheduler v1.37 + Troupe on a local control plane (scripts/e2e.sh)"
  scripts/e2e.sh
  step "end-to-end in Kubernetes mode over HTTPS with the 1.37 workload gates (native PodGroups, scheduling.k8s.io/v1beta1): Troupe watches the API and binds; kube-scheduler calls it with a client certificate (scripts/e2e.sh, TROUPE_MODE=kube TROUPE_TLS=1)"
  K8S_FEATURES=workload TROUPE_MODE=kube TROUPE_TLS=1 TROUPE_E2E_DIR="$PWD/build/e2e-kube" TROUPE_BIN="$PWD/build/troupe" scripts/e2e.sh
  step "end-to-end: Jobs with WorkloadWithJob on (K8S_FEATURES=workload-jobs): the Job controller's own PodGroup is the gang, and a Job's troupe.dev/gang still wins over the basic PodGroup it gets (scripts/e2e.sh -k test_jobs)"
  K8S_FEATURES=workload-jobs TROUPE_MODE=kube TROUPE_E2E_DIR="$PWD/build/e2e-jobs" TROUPE_BIN="$PWD/build/troupe" scripts/e2e.sh -k test_jobs
  if [[ -n "${extra_build:-}" ]]; then
    wait "$extra_build" || true
    if [[ -f build/build-k8s-extra.failed ]]; then
      cat build/build-k8s-extra.failed
      for v in $extra_versions; do tail -n 30 "build/build-k8s-$v.log"; done
      exit 1
    fi
  fi
  for v in $extra_versions; do
    step "end-to-end compatibility slice on Kubernetes $v in Kubernetes mode with its workload gates (K8S_VERSION=$v scripts/e2e.sh -k ...; built in the background: build/build-k8s-$v.log)"
    grep -h "build-k8s: .* s$\|up to date" "build/build-k8s-$v.log" || true
    GOTOOLCHAIN="$(k8s_toolchain "$v")" K8S_VERSION="$v" K8S_FEATURES=workload TROUPE_MODE=kube TROUPE_E2E_DIR="$PWD/build/e2e-$v" \
      TROUPE_BIN="$PWD/build/troupe" scripts/e2e.sh \
      -k "test_smoke or test_gpu_pods_bind_to_nodes_that_can_host_them or test_32_member_gang or test_native_podgroups or test_dra or test_nvlink_domains"
  done
  step "the image (podman, a debootstrapped base) around the binary just tested, and its checks (scripts/image-build.sh --prebuilt; the full build: docs/image.md)"
  scripts/image-build.sh --prebuilt
  step "end-to-end with the chart's own pod as the scheduler pair: helm install, its two containers under podman with the chart's RBAC, tokens, config and probes; GPU pods, a gang, a queue limit, Prometheus, helm upgrade and uninstall (TROUPE_DEPLOY=chart scripts/e2e.sh)"
  TROUPE_DEPLOY=chart TROUPE_E2E_DIR="$PWD/build/e2e-chart" scripts/e2e.sh
fi
step "all tests passed"
