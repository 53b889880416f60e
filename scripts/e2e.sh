#!/usr/bin/env bash
# End-to-end tests: Troupe behind the real kube-scheduler on a local control plane.
#   1. Python test deps (pytest, PyYAML), pip-installed only if missing
#   2. the control plane binaries (scripts/build-k8s.sh; needs Go unless already built)
#   3. scripts/cluster-up.sh with TROUPE_BIN (default build/troupe) and the preempt verb on
#   4. python3 -m pytest tests/e2e
#   5. scripts/cluster-down.sh, always (even on failure or Ctrl-C)
# and prints how long each phase took. Troupe must be built first (scripts/build.sh build,
# which scripts/test.sh runs).
#
# If a healthy cluster is already up (make cluster-up), it is reused and left running; only
# Troupe is restarted so the tests run the binary just built. Warm: well under a minute.
#
# Usage: scripts/e2e.sh [pytest args...]      e.g. scripts/e2e.sh -k nvlink -x
# Env:   TROUPE_BIN=path  GO=path/to/go  NODES=N (fleet size of a new cluster)
#        K8S_VERSION=v1.NN.P  the Kubernetes to build and run (docs/kubernetes-versions.md)
#        E2E_KEEP=1       leave a cluster this script started running (for debugging)
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }
t_all="$(now)"
phases=()
phase_done() { phases+=("$(printf '%-28s %7s s' "$1" "$2")"); echo "[e2e.sh] $1: $2 s"; }
die() { echo "[e2e.sh] ERROR: $*" >&2; exit 1; }

started_cluster=0
cluster_phase=0
# shellcheck disable=SC2317  # invoked by the EXIT trap
summary() {
  local rc=$?
  if [ "$started_cluster" = 1 ]; then
    if [ "${E2E_KEEP:-0}" = 1 ]; then
      echo "[e2e.sh] E2E_KEEP=1: cluster left running; stop it with scripts/cluster-down.sh"
    else
      local t; t="$(now)"
      scripts/cluster-down.sh || rc=1
      phase_done "cluster-down" "$(since "$t")"
    fi
  fi
  echo
  echo "== e2e timings"
  local p
  for p in "${phases[@]}"; do echo "   $p"; done
  printf '   %-28s %7s s\n' "total" "$(since "$t_all")"
  if [ "$rc" != 0 ]; then
    if [ "$cluster_phase" = 1 ]; then
      echo "[e2e.sh] FAILED (exit $rc); logs of the control plane and Troupe: $root/build/e2e/logs/" >&2
    else
      echo "[e2e.sh] FAILED (exit $rc) before starting a cluster" >&2
    fi
  fi
  exit "$rc"
}
trap summary EXIT
trap 'exit 130' INT TERM

# ---- 0. Troupe itself -------------------------------------------------------------------
export TROUPE_BIN="${TROUPE_BIN:-build/troupe}"
if [ ! -x "$TROUPE_BIN" ] || [ -d "$TROUPE_BIN" ]; then
  die "no Troupe binary at $TROUPE_BIN; build it first (scripts/build.sh build, or scripts/test.sh) or set TROUPE_BIN"
fi

# ---- 1. Python dependencies --------------------------------------------------------------
t="$(now)"
if ! python3 -c 'import pytest, yaml' 2>/dev/null; then
  echo "[e2e.sh] installing tests/e2e/requirements.txt (pytest, PyYAML)"
  python3 -m pip install --quiet -r tests/e2e/requirements.txt ||
    die "could not pip-install tests/e2e/requirements.txt; install pytest and PyYAML for $(command -v python3)"
fi
phase_done "python deps" "$(since "$t")"

# ---- 2. control plane binaries (Go) ---------------------------------------------------------
t="$(now)"
# shellcheck source=scripts/lib-k8s-version.sh
. scripts/lib-k8s-version.sh
k8s_asked="${K8S_VERSION:-}"
k8s_v="$(k8s_version "$PWD")" || die "bad K8S_VERSION"
k8s_mod="$(k8s_module_dir "$PWD" "$k8s_v")" || die "K8S_VERSION=$k8s_v has no wrapper module (tools/k8s/gen-gomod.sh $k8s_v)"
need_go="$(awk '$1=="go"{print $2; exit}' "$k8s_mod/go.mod")"
if [ -z "${GO:-}" ]; then
  if command -v go >/dev/null; then GO=go
  elif [ -x /usr/local/go/bin/go ]; then GO=/usr/local/go/bin/go
  else GO=go
  fi
fi
export GO
if command -v "$GO" >/dev/null; then
  have_go="$("$GO" env GOVERSION 2>/dev/null | sed 's/^go//')"
  # GOTOOLCHAIN=auto (Go's default) fetches a newer toolchain itself when go.mod asks for one.
  if [ -n "$have_go" ] && [ "$("$GO" env GOTOOLCHAIN)" = local ] && [ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]; then
    die "Go $have_go ($GO) is older than the go $need_go that ${k8s_mod#"$PWD"/}/go.mod needs to build Kubernetes $k8s_v; install Go >= $need_go (https://go.dev/dl/) or set GO=/path/to/go"
  fi
fi
if ! K8S_VERSION="$k8s_v" scripts/build-k8s.sh; then
  command -v "$GO" >/dev/null ||
    die "the Go toolchain ('$GO') was not found: building kube-apiserver, kube-scheduler, etcd and kubectl (tools/k8s) needs Go >= $need_go; install it (https://go.dev/dl/) or set GO=/path/to/go"
  die "scripts/build-k8s.sh failed (see above)"
fi
phase_done "build control plane" "$(since "$t")"

# ---- 3. cluster ---------------------------------------------------------------------------------
t="$(now)"
cluster_phase=1
# shellcheck source=scripts/lib-e2e.sh
. scripts/lib-e2e.sh
if e2e_load_state && e2e_etcd_ok && e2e_apiserver_ok && e2e_scheduler_ok; then
  [ -z "$k8s_asked" ] || [ "$K8S_VERSION" = "$k8s_v" ] ||
    die "the running cluster runs Kubernetes $K8S_VERSION, not $k8s_v: run scripts/cluster-down.sh first"
  if [ "${TROUPE_DEPLOY:-}" = chart ]; then
    echo "[e2e.sh] reusing the running cluster (left running afterwards): the chart's pod runs $TROUPE_IMAGE"
  else
    echo "[e2e.sh] reusing the running cluster (left running afterwards); restarting Troupe from $TROUPE_BIN"
    scripts/troupe-restart.sh restart
  fi
else
  started_cluster=1
  TROUPE_PREEMPT_VERB="${TROUPE_PREEMPT_VERB-preempt}" scripts/cluster-up.sh
fi
phase_done "cluster-up" "$(since "$t")"

# ---- 4. tests -----------------------------------------------------------------------------------
t="$(now)"
rc=0
python3 -m pytest tests/e2e -q -rs -p no:cacheprovider --junitxml "$root/build/e2e/junit.xml" "$@" || rc=$?
phase_done "pytest tests/e2e" "$(since "$t")"
if [ "$rc" = 5 ]; then
  echo "[e2e.sh] no test was collected" >&2
fi
exit "$rc"
