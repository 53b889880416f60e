#!/usr/bin/env bash
# Stop/start only Troupe inside a running e2e cluster (same port, same
# build/e2e/cluster.yaml, log appended to build/e2e/logs/troupe.log).
#
# Usage: scripts/troupe-restart.sh [restart|start|stop|status] [PAIR]   (default: restart, every pair)
#   PAIR   only that scheduler pair's Troupe (0, 1, ...; TROUPE_REPLICAS > 1, see cluster-up.sh)
# Env:   TROUPE_BIN, TROUPE_ARGS, TROUPE_NARROW_TO, TROUPE_WAIT_S (health wait, default 30)
set -euo pipefail
# shellcheck source=scripts/lib-e2e.sh
. "$(dirname "$0")/lib-e2e.sh"

e2e_load_state || e2e_die "no e2e cluster state in $E2E_STATE; run scripts/cluster-up.sh first"
pairs=()
if [ -n "${2:-}" ]; then
  e2e_check_pair "$2"
  pairs=("$2")
else
  mapfile -t pairs < <(e2e_pairs)
fi
rc=0
for i in "${pairs[@]}"; do
  name="troupe$(e2e_sfx "$i")"
  case "${1:-restart}" in
    stop) troupe_stop "$i" ;;
    start) troupe_start "$i" ;;
    restart) troupe_stop "$i"; troupe_start "$i" ;;
    status)
      if e2e_troupe_ok "$i"; then echo "$name running (pid $(e2e_pid "$name")) on http://127.0.0.1:$(e2e_pair_var TROUPE_PORT "$i")"
      else echo "$name not running (port $(e2e_pair_var TROUPE_PORT "$i"))"; rc=1; fi ;;
    *) echo "usage: $0 [restart|start|stop|status] [PAIR]" >&2; exit 2 ;;
  esac
done
exit "$rc"
