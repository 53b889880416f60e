#!/usr/bin/env bash
# Stop/start only Troupe inside a running e2e cluster (same port, same
# build/e2e/cluster.yaml, log appended to build/e2e/logs/troupe.log).
#
# Usage: scripts/troupe-restart.sh [restart|start|stop|status]   (default restart)
# Env:   TROUPE_BIN, TROUPE_ARGS, TROUPE_NARROW_TO, TROUPE_WAIT_S (health wait, default 30)
set -euo pipefail
# shellcheck source=scripts/lib-e2e.sh
. "$(dirname "$0")/lib-e2e.sh"

e2e_load_state || e2e_die "no e2e cluster state in $E2E_STATE; run scripts/cluster-up.sh first"
case "${1:-restart}" in
  stop) troupe_stop ;;
  start) troupe_start ;;
  restart) troupe_stop; troupe_start ;;
  status)
    if e2e_troupe_ok; then echo "troupe running (pid $(e2e_pid troupe)) on http://127.0.0.1:$TROUPE_PORT"
    else echo "troupe not running (port $TROUPE_PORT)"; exit 1; fi ;;
  *) echo "usage: $0 [restart|start|stop|status]" >&2; exit 2 ;;
esac
