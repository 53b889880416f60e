#!/usr/bin/env bash
# Restart only kube-apiserver of the running e2e cluster, with exactly the command line it
# runs with now (read from /proc before it stops), and wait until it is ready again. For tests
# of what survives an API server restart (watches, binds in flight).
#
# Usage: scripts/apiserver-restart.sh [--kill]
#   --kill   SIGKILL (a crash) instead of SIGTERM (a graceful shutdown, which drains requests)
# Env:     APISERVER_DOWN_S  seconds to stay down before starting again (default 0)
#          APISERVER_WAIT_S  readiness wait after the start (default 90)
set -euo pipefail
# shellcheck source=scripts/lib-e2e.sh
. "$(dirname "$0")/lib-e2e.sh"

e2e_load_state || e2e_die "no e2e cluster state in $E2E_STATE; run scripts/cluster-up.sh first"
signal=TERM
case "${1:-}" in
  --kill) signal=KILL ;;
  "") ;;
  *) echo "usage: $0 [--kill]" >&2; exit 2 ;;
esac
pid="$(e2e_pid kube-apiserver)" || e2e_die "kube-apiserver is not running"
mapfile -d '' argv < "/proc/$pid/cmdline"
[ "${#argv[@]}" -gt 1 ] || e2e_die "cannot read the command line of kube-apiserver (pid $pid)"

t0="$(date +%s.%N)"
if [ "$signal" = KILL ]; then
  kill -KILL "$pid"
  for _ in $(seq 100); do _e2e_alive "$pid" || break; sleep 0.1; done
  rm -f "$E2E_PIDS/kube-apiserver.pid"
  e2e_log "killed kube-apiserver (pid $pid)"
else
  e2e_stop -t 30 kube-apiserver
fi
sleep "${APISERVER_DOWN_S:-0}"
# The serving certificate in --cert-dir is reused, so the kubeconfig's CA stays valid.
e2e_start kube-apiserver "${argv[0]}" "${argv[@]:1}"
e2e_wait_http kube-apiserver "https://127.0.0.1:$APISERVER_PORT/readyz" "${APISERVER_WAIT_S:-90}" \
  --cacert "$E2E_DIR/pki/apiserver.crt" || e2e_die "kube-apiserver did not become ready again"
e2e_log "kube-apiserver ready again (pid $(e2e_pid kube-apiserver)) after $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
