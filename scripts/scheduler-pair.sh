#!/usr/bin/env bash
# The scheduler pairs of a running e2e cluster (scripts/cluster-up.sh with TROUPE_REPLICAS=N):
# each pair is a kube-scheduler and the Troupe it calls, as one pod of the Helm chart. Only the
# pair whose kube-scheduler holds the Lease schedules; the others are warm standbys.
#
# Usage: scripts/scheduler-pair.sh status            every pair: pids, ports, health, who leads
#        scripts/scheduler-pair.sh leader            print the leading pair's number
#        scripts/scheduler-pair.sh kill PAIR|leader  SIGKILL its kube-scheduler and Troupe at once
#                                                    (a node or pod crash: the Lease is not released)
#        scripts/scheduler-pair.sh stop PAIR|leader  SIGTERM both (a graceful shutdown)
#        scripts/scheduler-pair.sh start PAIR        start its Troupe, then its kube-scheduler; it
#                                                    comes back as a standby while another leads
set -euo pipefail
# shellcheck source=scripts/lib-e2e.sh
. "$(dirname "$0")/lib-e2e.sh"

e2e_load_state || e2e_die "no e2e cluster state in $E2E_STATE; run scripts/cluster-up.sh first"
usage() { sed -n '6,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }

pair_arg() {
  local p="${1:-}"
  if [ "$p" = leader ]; then
    p="$(e2e_leader)" || e2e_die "no pair holds the Lease now"
  fi
  e2e_check_pair "$p"
  echo "$p"
}

case "${1:-status}" in
  status)
    leader="$(e2e_leader || true)"
    for i in $(e2e_pairs); do
      s="$(e2e_sfx "$i")"
      printf 'pair %s: kube-scheduler %s (port %s, pid %s)  troupe %s (port %s, pid %s)%s\n' "$i" \
        "$(e2e_scheduler_pair_ok "$i" && echo healthy || echo DOWN)" "$(e2e_pair_var SCHEDULER_PORT "$i")" \
        "$(e2e_pid "kube-scheduler$s" || echo -)" \
        "$(e2e_troupe_ok "$i" && echo healthy || echo DOWN)" "$(e2e_pair_var TROUPE_PORT "$i")" \
        "$(e2e_pid "troupe$s" || echo -)" \
        "$([ "$leader" = "$i" ] && echo "  LEADER" || true)"
    done
    [ -n "$leader" ] || echo "no pair holds the Lease now"
    ;;
  leader) e2e_leader || { echo "no pair holds the Lease now" >&2; exit 1; } ;;
  kill)
    i="$(pair_arg "${2:-}")"
    s="$(e2e_sfx "$i")"
    pids=()
    for name in "kube-scheduler$s" "troupe$s"; do
      if pid="$(e2e_pid "$name")"; then pids+=("$pid"); fi
    done
    [ "${#pids[@]}" -gt 0 ] || e2e_die "pair $i runs nothing to kill"
    kill -KILL "${pids[@]}"
    for pid in "${pids[@]}"; do
      for _ in $(seq 50); do _e2e_alive "$pid" || break; sleep 0.1; done
    done
    rm -f "$E2E_PIDS/kube-scheduler$s.pid" "$E2E_PIDS/troupe$s.pid"
    e2e_log "killed pair $i (pids ${pids[*]})"
    ;;
  stop)
    i="$(pair_arg "${2:-}")"
    e2e_stop -t 10 "kube-scheduler$(e2e_sfx "$i")" "troupe$(e2e_sfx "$i")"
    ;;
  start)
    i="$(pair_arg "${2:-}")"
    troupe_start "$i"
    scheduler_start "$i"
    ;;
  *) usage ;;
esac
