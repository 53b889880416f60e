#!/usr/bin/env bash
# Start a real local control plane for e2e tests: etcd (data on /dev/shm),
# kube-apiserver (TLS on 127.0.0.1, static token, RBAC), kube-controller-manager
# (Jobs, ServiceAccounts, garbage collection; no node-lifecycle), fake GPU nodes,
# Troupe (if built) and kube-scheduler as "troupe-scheduler" with Troupe as
# its extender (TROUPE_REPLICAS=2: two such pairs, one leader). All ports are
# picked free at start. No-op if already up.
#
# Env:
#   NODES=N                generate N mixed nodes instead of tests/e2e/nodes.yaml's fleet
#   NODES_CSV=path         one node per GPU row of an openb trace node list instead (the
#                          trace's CPU, memory, GPUs and model; tests/e2e/trace_replay.py)
#   SCHEDULER_TEMPLATE=path  kube-scheduler config template (default
#                          tests/e2e/scheduler-config.tmpl.yaml)
#   TROUPE_BIN=path        Troupe binary (default build/troupe; skipped with a warning if absent)
#   TROUPE_ARGS="..."      extra arguments for `troupe serve`
#   TROUPE_NARROW_TO=all   Troupe's filter passes every fitting node (default best: only the
#                          node it ranks first, as the chart ships it)
#   TROUPE_RECORD=0        do not record request bodies (default: build/e2e/record/<start>/)
#   TROUPE_PORT=p          Troupe's port (default: a free port)
#   TROUPE_METRICS_PORT=p  Troupe's --metrics-listen port: /healthz /readyz /metrics only
#                          (default: a free port)
#   TROUPE_BIND_VERB=bind  add bindVerb to the extender config (default: unset = not used)
#   TROUPE_PREEMPT_VERB=preempt   add preemptVerb (default: unset = not used)
#   TROUPE_MODE=kube       Troupe watches the cluster through the API and binds pods itself:
#                          TROUPE_BIND_VERB defaults to bind. Troupe runs with the ServiceAccount
#                          troupe-system/troupe of deploy/rbac.yaml (build/e2e/troupe-kubeconfig;
#                          TROUPE_E2E_ADMIN=1 runs it as admin) and --scheduler-name
#                          $TROUPE_SCHEDULER_NAME. Default: standalone (--cluster
#                          build/e2e/cluster.yaml). Kept in state.env, so troupe-restart.sh starts
#                          the same mode.
#   TROUPE_TLS=1           kube-scheduler calls Troupe over HTTPS with a client certificate
#                          (enableHTTPS, tlsConfig); openssl makes the certificates in
#                          build/e2e/troupe-tls/. Kept in state.env like TROUPE_MODE.
#   TROUPE_SCHEDULER_NAME  scheduler profile name (default troupe-scheduler)
#   TROUPE_REPLICAS=N      N scheduler pairs (kube-scheduler + its own Troupe), as the Helm chart's
#                          replicaCount: leader election on, one Lease (kube-system/troupe-scheduler),
#                          only the leader's kube-scheduler schedules; the others are warm standbys.
#                          Default 1: one pair, leader election off. Kept in state.env.
#   TROUPE_LEASE_DURATION, TROUPE_RENEW_DEADLINE, TROUPE_RETRY_PERIOD   the Lease timings with
#                          TROUPE_REPLICAS > 1 (default 15s, 10s, 2s: kube-scheduler's and the
#                          chart's defaults). A SIGKILLed leader is replaced within about
#                          leaseDuration + retryPeriod.
#   K8S_VERSION=v1.NN.P    the Kubernetes to build (scripts/build-k8s.sh, build/k8s/<V>/) and run;
#                          default: tools/k8s/go.mod's (docs/kubernetes-versions.md). Kept in state.env.
#   K8S_FEATURES=workload  Kubernetes' native gangs: kube-apiserver with the Workload API's gates
#                          and API version for K8S_VERSION (1.36: GenericWorkload,GangScheduling and
#                          scheduling.k8s.io/v1alpha2; 1.37+: GenericWorkload and v1beta1; see
#                          e2e_feature_gates in lib-e2e.sh), kube-scheduler with the same gates (its
#                          PodGroup cycle and gang plugin; docs/gangs-native.md). Default: none. Kept in
#                          state.env like TROUPE_MODE.
#   K8S_FEATURES=workload-jobs  (1.37+) workload, and WorkloadWithJob on kube-apiserver and
#                          kube-controller-manager: the Job controller makes each new Job's Workload
#                          and PodGroup (tests/e2e/test_jobs.py).
#   TROUPE_DEPLOY=chart    the scheduler pair is the Helm chart's own pod, not host processes:
#                          `helm install` of charts/troupe, its Deployment's two containers run
#                          under podman from the built images with the chart's RBAC, tokens,
#                          config and probes (scripts/chart-pod.sh; docs/e2e-tests.md). Implies
#                          TROUPE_MODE=kube; one pair, no TROUPE_TLS. Kept in state.env.
#   NODE_CREATE_PARALLEL   max concurrent kubectl create processes for nodes (default 2)
#   KEEP_ON_FAILURE=1      leave processes running if startup fails (for debugging)
# State, kubeconfig and logs: build/e2e/ (see scripts/lib-e2e.sh).
set -euo pipefail
# shellcheck source=scripts/lib-e2e.sh
. "$(dirname "$0")/lib-e2e.sh"
cd "$E2E_ROOT"

usage_hint() {
  local n
  if [ "${TROUPE_DEPLOY:-}" = chart ]; then chart_usage_hint; return; fi
  n="$(grep -c '^  - name:' "$E2E_DIR/cluster.yaml" 2>/dev/null || echo '?')"
  cat <<MSG

Cluster is up: Kubernetes $K8S_VERSION, $n fake GPU nodes, scheduler "${TROUPE_SCHEDULER_NAME:-troupe-scheduler}".
  apiserver  https://127.0.0.1:$APISERVER_PORT     (logs: build/e2e/logs/)
  troupe     $(e2e_troupe_url)  $(e2e_troupe_ok && echo "(running, pid $(e2e_pid troupe))" || echo "(NOT running)")$(pairs_hint)
Use it with:
  export KUBECONFIG=$E2E_KUBECONFIG; $KUBECTL get nodes
Restart only Troupe: scripts/troupe-restart.sh [restart|stop|start|status] [PAIR]
Scheduler pairs:     scripts/scheduler-pair.sh [status|leader|kill|stop|start] [PAIR]
Tear down:           scripts/cluster-down.sh
MSG
}
# TROUPE_DEPLOY=chart: the chart's pod is the scheduler pair.
chart_usage_hint() {
  cat <<MSG

Cluster is up: Kubernetes $K8S_VERSION, the chart's pod $CHART_NAMESPACE/$CHART_DEPLOYMENT ($TROUPE_IMAGE) as scheduler "$TROUPE_SCHEDULER_NAME".
  apiserver  https://127.0.0.1:$APISERVER_PORT  troupe $(e2e_troupe_url), metrics http://127.0.0.1:$TROUPE_METRICS_PORT  (logs: $E2E_LOGS/chart-*.log)
Use it with:
  export KUBECONFIG=$E2E_KUBECONFIG; $KUBECTL get nodes
  build/tools/helm upgrade $CHART_RELEASE charts/troupe -n $CHART_NAMESPACE -f $CHART_VALUES --set ...
The pod:   scripts/chart-pod.sh status
Tear down: scripts/cluster-down.sh
MSG
}

# With more than one pair: which one leads and where the others are.
pairs_hint() {
  local i
  [ "$(e2e_replicas)" -gt 1 ] || return 0
  for i in $(seq 1 $(( $(e2e_replicas) - 1 ))); do
    printf '\n  troupe-%s   http://127.0.0.1:%s  %s' "$i" "$(e2e_pair_var TROUPE_PORT "$i")" \
      "$(e2e_troupe_ok "$i" && echo "(running, pid $(e2e_pid "troupe-$i"))" || echo "(NOT running)")"
  done
  printf '\n  leader     pair %s of %s (Lease kube-system/%s)' "$(e2e_leader || echo none)" "$(e2e_replicas)" "${TROUPE_LEASE_NAME:-}"
}

# ---- already up? -------------------------------------------------------------
requested_mode="${TROUPE_MODE:-}"
requested_deploy="${TROUPE_DEPLOY:-}"
requested_tls="${TROUPE_TLS:-}"
requested_replicas="${TROUPE_REPLICAS:-}"
requested_features="${K8S_FEATURES:-}"
requested_version="$K8S_VERSION"   # from K8S_VERSION or the default (lib-e2e.sh), before state.env
requested_bin="$K8S_BIN"
case "${requested_replicas:-1}" in
  '' | *[!0-9]* | 0) e2e_die "TROUPE_REPLICAS='$requested_replicas' must be a number >= 1" ;;
esac
if e2e_load_state; then
  if e2e_etcd_ok && e2e_apiserver_ok && e2e_kcm_ok && e2e_scheduler_ok; then
    e2e_log "cluster already up and healthy"
    if [ -n "${NODES:-}" ] && [ "${NODES}" != "${E2E_NODES:-}" ]; then
      e2e_warn "running cluster was created with NODES='${E2E_NODES:-}' (requested '$NODES'); run cluster-down first to change it"
    fi
    if [ -n "$requested_mode" ] && [ "$requested_mode" != "${TROUPE_MODE:-standalone}" ]; then
      e2e_warn "running cluster was created with TROUPE_MODE='${TROUPE_MODE:-standalone}' (requested '$requested_mode'); run cluster-down first to change it"
    fi
    if [ -n "$requested_tls" ] && [ "$requested_tls" != "${TROUPE_TLS:-0}" ]; then
      e2e_warn "running cluster was created with TROUPE_TLS='${TROUPE_TLS:-0}' (requested '$requested_tls'); run cluster-down first to change it"
    fi
    if [ -n "$requested_features" ] && [ "$requested_features" != "${K8S_FEATURES:-}" ]; then
      e2e_warn "running cluster was created with K8S_FEATURES='${K8S_FEATURES:-}' (requested '$requested_features'); run cluster-down first to change it"
    fi
    if [ "$requested_version" != "$K8S_VERSION" ]; then
      e2e_warn "running cluster runs Kubernetes $K8S_VERSION (requested $requested_version); run cluster-down first to change it"
    fi
    if [ -n "$requested_replicas" ] && [ "$requested_replicas" != "$(e2e_replicas)" ]; then
      e2e_warn "running cluster was created with TROUPE_REPLICAS='$(e2e_replicas)' (requested '$requested_replicas'); run cluster-down first to change it"
    fi
    [ "${TROUPE_DEPLOY:-}" = chart ] || for i in $(e2e_pairs); do troupe_start "$i"; done
    usage_hint
    exit 0
  fi
  e2e_warn "stale or unhealthy cluster state found; tearing it down first"
fi
if [ -f "$E2E_STATE" ] || compgen -G "$E2E_PIDS/*.pid" >/dev/null; then
  "$E2E_ROOT/scripts/cluster-down.sh"
fi

# ---- binaries ----------------------------------------------------------------
K8S_VERSION="$requested_version"   # not a stale state.env's
K8S_BIN="$requested_bin"
K8S_VERSION="$K8S_VERSION" "$E2E_ROOT/scripts/build-k8s.sh"
for b in etcd kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [ -x "$K8S_BIN/$b" ] || e2e_die "missing $K8S_BIN/$b"
done
command -v openssl >/dev/null || e2e_die "openssl not found"
command -v curl >/dev/null || e2e_die "curl not found"
python3 -c 'import yaml' 2>/dev/null || e2e_die "python3 with PyYAML needed: pip install -r tests/e2e/requirements.txt"

_e2e_t0="$(date +%s.%N)"   # time the startup itself, not the build check
ok=0
cleanup_on_failure() {
  if [ "$ok" != 1 ]; then
    if [ "${KEEP_ON_FAILURE:-0}" = 1 ]; then
      e2e_warn "startup failed; KEEP_ON_FAILURE=1 so processes are left running (scripts/cluster-down.sh to stop)"
    else
      e2e_warn "startup failed; tearing down (logs kept in $E2E_LOGS)"
      "$E2E_ROOT/scripts/cluster-down.sh" || true
    fi
  fi
}
trap cleanup_on_failure EXIT

# ---- fresh state ------------------------------------------------------------
rm -rf "$E2E_LOGS" "$E2E_PIDS" "$E2E_DIR/pki" "$E2E_DIR/nodes" "$E2E_RECORD" "$E2E_TROUPE_KUBECONFIG" "$E2E_TROUPE_TLS"
mkdir -p "$E2E_LOGS" "$E2E_PIDS" "$E2E_DIR/pki"
TROUPE_REPLICAS="${requested_replicas:-1}"   # not a stale state.env's
read -r ETCD_PORT ETCD_PEER_PORT APISERVER_PORT KCM_PORT SCHEDULER_PORT free_troupe_port free_metrics_port extra_ports \
  <<< "$(e2e_free_ports $(( 7 + 3 * (TROUPE_REPLICAS - 1) )))"
TROUPE_PORT="${TROUPE_PORT:-$free_troupe_port}"
TROUPE_METRICS_PORT="${TROUPE_METRICS_PORT:-$free_metrics_port}"   # /healthz /readyz /metrics only
TROUPE_SCHEDULER_NAME="${TROUPE_SCHEDULER_NAME:-troupe-scheduler}"
# Pairs 1..N-1: their own kube-scheduler, Troupe and metrics ports (SCHEDULER_PORT_1, ...).
pair_state=""
read -r -a extra <<< "${extra_ports:-}"
for ((i = 1; i < TROUPE_REPLICAS; i++)); do
  printf -v "SCHEDULER_PORT_$i" '%s' "${extra[$(( 3 * (i - 1) ))]}"
  printf -v "TROUPE_PORT_$i" '%s' "${extra[$(( 3 * (i - 1) + 1 ))]}"
  printf -v "TROUPE_METRICS_PORT_$i" '%s' "${extra[$(( 3 * (i - 1) + 2 ))]}"
  pair_state+="SCHEDULER_PORT_$i=$(e2e_pair_var SCHEDULER_PORT "$i")"$'\n'
  pair_state+="TROUPE_PORT_$i=$(e2e_pair_var TROUPE_PORT "$i")"$'\n'
  pair_state+="TROUPE_METRICS_PORT_$i=$(e2e_pair_var TROUPE_METRICS_PORT "$i")"$'\n'
done
# Leader election only with more than one pair (one pair: exactly as before, leaderElect false).
TROUPE_LEASE_NAME=""
if [ "$TROUPE_REPLICAS" -gt 1 ]; then
  TROUPE_LEASE_NAME="$TROUPE_SCHEDULER_NAME"
  TROUPE_LEASE_DURATION="${TROUPE_LEASE_DURATION:-15s}"
  TROUPE_RENEW_DEADLINE="${TROUPE_RENEW_DEADLINE:-10s}"
  TROUPE_RETRY_PERIOD="${TROUPE_RETRY_PERIOD:-2s}"
fi
TROUPE_MODE="${requested_mode:-standalone}"   # not a stale state.env's
TROUPE_TLS="${requested_tls:-0}"
case "$TROUPE_TLS" in 0|1) ;; *) e2e_die "TROUPE_TLS='$TROUPE_TLS' must be 0 or 1" ;; esac
K8S_FEATURES="$requested_features"   # not a stale state.env's
case "$K8S_FEATURES" in
  '' | workload) ;;
  workload-jobs) [ "$(k8s_minor "$K8S_VERSION")" -ge 37 ] || e2e_die "K8S_FEATURES=workload-jobs needs Kubernetes 1.37+ (WorkloadWithJob)" ;;
  *) e2e_die "K8S_FEATURES='$K8S_FEATURES' must be empty, workload or workload-jobs" ;;
esac
TROUPE_DEPLOY="$requested_deploy"   # not a stale state.env's
case "$TROUPE_DEPLOY" in
  '') ;;
  chart)
    [ "$TROUPE_REPLICAS" = 1 ] && [ "$TROUPE_TLS" = 0 ] ||
      e2e_die "TROUPE_DEPLOY=chart runs one pod of the chart, without TROUPE_REPLICAS or TROUPE_TLS"
    TROUPE_MODE=kube ;;
  *) e2e_die "TROUPE_DEPLOY='$TROUPE_DEPLOY' must be empty or chart" ;;
esac
case "$TROUPE_MODE" in
  standalone) ;;
  kube) export TROUPE_BIND_VERB="${TROUPE_BIND_VERB-bind}" ;;
  *) e2e_die "TROUPE_MODE='$TROUPE_MODE' must be standalone or kube" ;;
esac
if [ -d /dev/shm ] && [ -w /dev/shm ]; then
  ETCD_DIR="$(mktemp -d /dev/shm/troupe-e2e-etcd.XXXXXX)"
else
  e2e_warn "/dev/shm not writable; etcd data goes to build/e2e (slower)"
  ETCD_DIR="$(mktemp -d "$E2E_DIR/troupe-e2e-etcd.XXXXXX")"
fi
cat > "$E2E_STATE" <<STATE
# Written by scripts/cluster-up.sh; read by cluster-down.sh, troupe-restart.sh, tests/e2e/conftest.py
K8S_VERSION=$K8S_VERSION
K8S_BIN=$K8S_BIN
ETCD_DIR=$ETCD_DIR
ETCD_PORT=$ETCD_PORT
ETCD_PEER_PORT=$ETCD_PEER_PORT
APISERVER_PORT=$APISERVER_PORT
KCM_PORT=$KCM_PORT
SCHEDULER_PORT=$SCHEDULER_PORT
TROUPE_PORT=$TROUPE_PORT
TROUPE_METRICS_PORT=$TROUPE_METRICS_PORT
TROUPE_SCHEDULER_NAME=$TROUPE_SCHEDULER_NAME
E2E_NODES=${NODES:-}
TROUPE_MODE=$TROUPE_MODE
TROUPE_TLS=$TROUPE_TLS
TROUPE_REPLICAS=$TROUPE_REPLICAS
TROUPE_LEASE_NAME=$TROUPE_LEASE_NAME
K8S_FEATURES=$K8S_FEATURES
STATE
printf '%s' "$pair_state" >> "$E2E_STATE"
e2e_log "ports: etcd $ETCD_PORT/$ETCD_PEER_PORT apiserver $APISERVER_PORT controller-manager $KCM_PORT scheduler $SCHEDULER_PORT troupe $TROUPE_PORT (metrics $TROUPE_METRICS_PORT); etcd data $ETCD_DIR"
for ((i = 1; i < TROUPE_REPLICAS; i++)); do
  e2e_log "pair $i ports: scheduler $(e2e_pair_var SCHEDULER_PORT "$i") troupe $(e2e_pair_var TROUPE_PORT "$i") (metrics $(e2e_pair_var TROUPE_METRICS_PORT "$i"))"
done

# ---- etcd --------------------------------------------------------------------
etcd_client="http://127.0.0.1:$ETCD_PORT"
etcd_peer="http://127.0.0.1:$ETCD_PEER_PORT"
e2e_start etcd "$K8S_BIN/etcd" \
  --name=e2e --data-dir="$ETCD_DIR" \
  --listen-client-urls="$etcd_client" --advertise-client-urls="$etcd_client" \
  --listen-peer-urls="$etcd_peer" --initial-advertise-peer-urls="$etcd_peer" \
  --initial-cluster="e2e=$etcd_peer" --initial-cluster-state=new \
  --unsafe-no-fsync --log-level=warn
e2e_wait_http etcd "$etcd_client/health" 30 || e2e_die "etcd did not become healthy"
e2e_log "etcd healthy (pid $(e2e_pid etcd))"

# ---- credentials ---------------------------------------------------------------
token="$(openssl rand -hex 24)"
kcm_token="$(openssl rand -hex 24)"   # system:kube-controller-manager: RBAC's bootstrap role, no group
umask 077
echo "$token,e2e-admin,e2e-admin-uid,\"system:masters\"" > "$E2E_DIR/tokens.csv"
echo "$kcm_token,system:kube-controller-manager,e2e-kcm-uid" >> "$E2E_DIR/tokens.csv"
openssl genrsa -out "$E2E_DIR/sa.key" 2048 2>/dev/null
umask 022

# ---- kube-apiserver ------------------------------------------------------------
# Admission without ServiceAccount (a pod created right after its namespace would be refused
# until the controller manager has made the namespace's default ServiceAccount; no kubelet mounts
# a token anyway) and TaintNodesByCondition (the node-lifecycle controller that lifts the
# not-ready taint is off: the fake nodes have no kubelet).
e2e_start kube-apiserver "$K8S_BIN/kube-apiserver" \
  --etcd-servers="$etcd_client" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$APISERVER_PORT" \
  --cert-dir="$E2E_DIR/pki" \
  --token-auth-file="$E2E_DIR/tokens.csv" --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$E2E_DIR/sa.key" --service-account-signing-key-file="$E2E_DIR/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 --endpoint-reconciler-type=none \
  --disable-admission-plugins=ServiceAccount,TaintNodesByCondition \
  --enable-priority-and-fairness=false \
  --max-requests-inflight=800 --max-mutating-requests-inflight=400 \
  $(e2e_apiserver_feature_args) \
  --v=1
e2e_wait_http kube-apiserver "https://127.0.0.1:$APISERVER_PORT/readyz" 90 -k ||
  e2e_die "kube-apiserver did not become ready"
e2e_apiserver_ok || e2e_die "kube-apiserver's certificate does not verify against $E2E_DIR/pki/apiserver.crt"
e2e_log "kube-apiserver ready (pid $(e2e_pid kube-apiserver))"

# ---- kubeconfigs (CA-verified TLS, static tokens) -------------------------------
umask 077
write_kubeconfig() {  # FILE USER TOKEN
  cat > "$1.tmp" <<KC
apiVersion: v1
kind: Config
clusters:
- name: troupe-e2e
  cluster:
    server: https://127.0.0.1:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$E2E_DIR/pki/apiserver.crt")
users:
- name: $2
  user:
    token: $3
contexts:
- name: troupe-e2e
  context: {cluster: troupe-e2e, user: $2, namespace: default}
current-context: troupe-e2e
KC
  mv "$1.tmp" "$1"
}
write_kubeconfig "$E2E_KUBECONFIG" e2e-admin "$token"
write_kubeconfig "$E2E_KCM_KUBECONFIG" kube-controller-manager "$kcm_token"
umask 022
"$KUBECTL" --kubeconfig "$E2E_KUBECONFIG" get --raw /version >/dev/null ||
  e2e_die "kubectl cannot reach the apiserver with $E2E_KUBECONFIG"

# ---- kube-controller-manager ------------------------------------------------------
kcm_start

# ---- fake GPU nodes + cluster.yaml for Troupe -----------------------------------
gen_args=()
[ -n "${NODES:-}" ] && gen_args=(--generate "$NODES")
[ -n "${NODES_CSV:-}" ] && gen_args=(--trace-nodes "$NODES_CSV")
python3 "$E2E_ROOT/tests/e2e/make_nodes.py" "${gen_args[@]}" --out-dir "$E2E_DIR" \
  --k8s-version "$K8S_VERSION" --create --kubectl "$KUBECTL" --kubeconfig "$E2E_KUBECONFIG" \
  --parallel "${NODE_CREATE_PARALLEL:-2}"
e2e_log "nodes created"

# ---- TROUPE_DEPLOY=chart: the chart's pod is the scheduler pair --------------------------
if [ "$TROUPE_DEPLOY" = chart ]; then
  "$E2E_ROOT/scripts/chart-pod.sh" up
  e2e_log "cluster ready in $(e2e_elapsed) s"
  ok=1
  e2e_load_state
  usage_hint
  exit 0
fi

# ---- Troupe (optional) and kube-scheduler, pair by pair ------------------------------
# Each kube-scheduler calls its own Troupe. Pair 0 starts first, so it normally takes the Lease.
tls_env=(TROUPE_SCHEME=http TROUPE_ENABLE_HTTPS= TROUPE_TLS_DIR=)
[ "$TROUPE_TLS" = 1 ] && tls_env=(TROUPE_SCHEME=https TROUPE_ENABLE_HTTPS=true TROUPE_TLS_DIR="$E2E_TROUPE_TLS")
leader_elect=false
[ "$TROUPE_REPLICAS" -gt 1 ] && leader_elect=true
for i in $(e2e_pairs); do
  troupe_start "$i"
  E2E_KUBECONFIG="$E2E_KUBECONFIG" TROUPE_PORT="$(e2e_pair_var TROUPE_PORT "$i")" \
    TROUPE_SCHEDULER_NAME="$TROUPE_SCHEDULER_NAME" TROUPE_LEADER_ELECT="$leader_elect" \
    TROUPE_LEASE_NAME="$TROUPE_LEASE_NAME" TROUPE_LEASE_DURATION="${TROUPE_LEASE_DURATION:-}" \
    TROUPE_RENEW_DEADLINE="${TROUPE_RENEW_DEADLINE:-}" TROUPE_RETRY_PERIOD="${TROUPE_RETRY_PERIOD:-}" \
    env "${tls_env[@]}" python3 "$E2E_ROOT/tests/e2e/render_template.py" \
    "${SCHEDULER_TEMPLATE:-$E2E_ROOT/tests/e2e/scheduler-config.tmpl.yaml}" \
    "$E2E_DIR/scheduler-config$(e2e_sfx "$i").yaml"
  if [ "$leader_elect" = true ] && ! grep -q '^  leaderElect: true' "$E2E_DIR/scheduler-config$(e2e_sfx "$i").yaml"; then
    e2e_die "TROUPE_REPLICAS=$TROUPE_REPLICAS needs leader election, but the scheduler template does not set leaderElect: \${TROUPE_LEADER_ELECT}"
  fi
  scheduler_start "$i"
done
if [ "$TROUPE_REPLICAS" -gt 1 ]; then
  for _ in $(seq 100); do e2e_leader >/dev/null && break; sleep 0.2; done
  e2e_log "leader: pair $(e2e_leader || echo "none yet") of $TROUPE_REPLICAS (Lease kube-system/$TROUPE_LEASE_NAME)"
fi
e2e_log "cluster ready in $(e2e_elapsed) s"

ok=1
usage_hint
