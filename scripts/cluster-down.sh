#!/usr/bin/env bash
# Stop everything scripts/cluster-up.sh started (by PID) and delete the etcd
# data dir on /dev/shm. Logs in build/e2e/logs/ are kept. Idempotent.
set -euo pipefail
# shellcheck source=scripts/lib-e2e.sh
. "$(dirname "$0")/lib-e2e.sh"

e2e_load_state || true
stopped=0
# Stop the clients of etcd together (their graceful shutdowns overlap), then
# etcd: kube-apiserver shuts down slowly once etcd is gone.
names=()
for f in "$E2E_PIDS"/*.pid; do
  [ -e "$f" ] || continue
  name="$(basename "$f" .pid)"
  [ "$name" = etcd ] || names+=("$name")
done
if [ "${#names[@]}" -gt 0 ]; then e2e_stop -t 10 "${names[@]}"; stopped=1; fi
if [ -f "$E2E_PIDS/etcd.pid" ]; then e2e_stop -t 10 etcd; stopped=1; fi
# TROUPE_DEPLOY=chart: the chart pod's containers, should its kubelet stand-in have left any.
if [ "${TROUPE_DEPLOY:-}" = chart ]; then "$E2E_ROOT/scripts/chart-pod.sh" down; fi

if [ -n "${ETCD_DIR:-}" ] && [ -d "$ETCD_DIR" ]; then
  case "$ETCD_DIR" in
    /dev/shm/troupe-e2e-etcd.*|"$E2E_DIR"/troupe-e2e-etcd.*)
      rm -rf "$ETCD_DIR"; e2e_log "removed $ETCD_DIR"; stopped=1 ;;
    *) e2e_warn "not removing unexpected etcd dir '$ETCD_DIR'" ;;
  esac
fi
rm -rf "$E2E_STATE" "$E2E_KUBECONFIG" "$E2E_KCM_KUBECONFIG" "$E2E_DIR/tokens.csv" "$E2E_DIR/sa.key" "$E2E_DIR/pki" "$E2E_PIDS" "$KUBECACHEDIR"
if [ "$stopped" = 1 ]; then
  e2e_log "cluster down (logs kept in $E2E_LOGS)"
else
  e2e_log "no cluster running"
fi
