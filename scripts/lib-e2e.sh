# shellcheck shell=bash disable=SC2034  # variables are used by the sourcing scripts
# Helpers shared by scripts/cluster-up.sh, cluster-down.sh and troupe-restart.sh.
# Source it; it defines variables and functions only.
#
# Layout (all under build/e2e/):
#   state.env          ports, etcd data dir, node count (sourced by the scripts)
#   pids/<name>.pid    "<pid> <executable>" per started process
#   logs/<name>.log    etcd, kube-apiserver, kube-scheduler, troupe (and kube-scheduler-1, troupe-1, ...)
#   record/<start>/    request bodies Troupe recorded (--record-dir), one dir per Troupe start
#   kubeconfig         admin kubeconfig (static token, CA-verified TLS)
#   troupe-kubeconfig  TROUPE_MODE=kube: Troupe's own, a token of the ServiceAccount
#                      troupe-system/troupe with deploy/rbac.yaml's ClusterRole and nothing
#                      else (made at the first Troupe start, renewed after a day; TROUPE_E2E_ADMIN=1:
#                      admin instead)
#   troupe-tls/        with TROUPE_TLS=1: ca.crt, Troupe's server.crt/.key, kube-scheduler's client.crt/.key
#   pki/ tokens.csv kcm-kubeconfig sa.key scheduler-config.yaml nodes.json cluster.yaml
#
# Scheduler pairs (TROUPE_REPLICAS, kept in state.env; default 1): pair 0 is "kube-scheduler" +
# "troupe" on SCHEDULER_PORT, TROUPE_PORT and TROUPE_METRICS_PORT with scheduler-config.yaml;
# pair i > 0 is "kube-scheduler-i" + "troupe-i" on SCHEDULER_PORT_i, TROUPE_PORT_i and
# TROUPE_METRICS_PORT_i with scheduler-config-i.yaml. Each kube-scheduler calls its own Troupe;
# with more than one pair they elect a leader through one Lease (kube-system/$TROUPE_LEASE_NAME).

E2E_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# TROUPE_E2E_DIR: another state directory, for a second cluster beside the default one.
E2E_DIR="${TROUPE_E2E_DIR:-$E2E_ROOT/build/e2e}"
E2E_LOGS="$E2E_DIR/logs"
E2E_PIDS="$E2E_DIR/pids"
E2E_STATE="$E2E_DIR/state.env"
E2E_KUBECONFIG="$E2E_DIR/kubeconfig"
E2E_TROUPE_KUBECONFIG="$E2E_DIR/troupe-kubeconfig"
E2E_KCM_KUBECONFIG="$E2E_DIR/kcm-kubeconfig"   # kube-controller-manager's own identity
E2E_RECORD="$E2E_DIR/record"   # request bodies Troupe recorded (kept by cluster-down)
E2E_TROUPE_TLS="$E2E_DIR/troupe-tls"   # TROUPE_TLS=1: the extender's certificates
# shellcheck source=scripts/lib-k8s-version.sh
. "$E2E_ROOT/scripts/lib-k8s-version.sh"
# K8S_VERSION=v1.NN.P: the Kubernetes to build and run (default: tools/k8s/go.mod's; a running
# cluster's state.env names its own).
K8S_VERSION="$(k8s_version "$E2E_ROOT")" || exit 1
K8S_BIN="${K8S_BIN:-$E2E_ROOT/build/k8s/$K8S_VERSION/bin}"
KUBECTL="$K8S_BIN/kubectl"
# Keep kubectl's per-server discovery cache out of ~/.kube (ports change every run).
export KUBECACHEDIR="$E2E_DIR/kube-cache"
TROUPE_BIN="${TROUPE_BIN:-build/troupe}"
case "$TROUPE_BIN" in /*) ;; *) TROUPE_BIN="$E2E_ROOT/$TROUPE_BIN" ;; esac

_e2e_t0="$(date +%s.%N)"
e2e_elapsed() { awk -v a="$_e2e_t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
e2e_log() { echo "[e2e +$(e2e_elapsed)s] $*"; }
e2e_warn() { echo "[e2e +$(e2e_elapsed)s] WARNING: $*" >&2; }
e2e_die() { echo "[e2e +$(e2e_elapsed)s] ERROR: $*" >&2; exit 1; }

# shellcheck disable=SC1090  # generated file
e2e_load_state() { [ -f "$E2E_STATE" ] && . "$E2E_STATE"; }

# e2e_free_ports N: print N distinct free TCP ports on 127.0.0.1.
e2e_free_ports() {
  python3 - "$1" <<'PY'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
PY
}

# e2e_pid NAME: print the pid of a started process if it is still the same
# executable we started (guards against pid reuse); fail otherwise.
e2e_pid() {
  local f="$E2E_PIDS/$1.pid" pid exe cur
  [ -f "$f" ] || return 1
  read -r pid exe < "$f" || return 1
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 1
  _e2e_zombie "$pid" && return 1
  cur="$(readlink "/proc/$pid/exe" 2>/dev/null)" || return 1
  [ "${cur% (deleted)}" = "$exe" ] || return 1
  echo "$pid"
}

# e2e_start NAME EXE ARGS...: start EXE in its own session, logging
# (appending) to logs/NAME.log, and record its pid.
e2e_start() {
  local name="$1" exe="$2"; shift 2
  mkdir -p "$E2E_LOGS" "$E2E_PIDS"
  exe="$(readlink -f "$exe")"
  echo "===== $(date -u +%FT%TZ) start: $exe $*" >> "$E2E_LOGS/$name.log"
  # setsid: survives the calling shell/CI step; no fork, so $! is EXE's pid.
  setsid "$exe" "$@" >> "$E2E_LOGS/$name.log" 2>&1 < /dev/null &
  local pid=$! i cur
  echo "$pid $exe" > "$E2E_PIDS/$name.pid"
  # Until setsid has exec'ed EXE, /proc/PID/exe is setsid and e2e_pid would call it gone.
  for ((i = 0; i < 50; i++)); do
    cur="$(readlink "/proc/$pid/exe" 2>/dev/null)" || break
    [ "${cur% (deleted)}" = "$exe" ] && break
    sleep 0.02
  done
}

# _e2e_zombie PID: true if PID has exited but is not reaped yet.
_e2e_zombie() { [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" = Z ]; }
_e2e_alive() { kill -0 "$1" 2>/dev/null && ! _e2e_zombie "$1"; }

# e2e_stop [-t TIMEOUT_S] NAME...: SIGTERM all of them at once, wait for them
# to exit, SIGKILL whatever is left after TIMEOUT_S (default 10).
e2e_stop() {
  local timeout=10 name pid i left
  local -a names=() pids=()
  if [ "${1:-}" = -t ]; then timeout="$2"; shift 2; fi
  for name in "$@"; do
    if pid="$(e2e_pid "$name")"; then
      kill -TERM "$pid" 2>/dev/null || true
      names+=("$name"); pids+=("$pid")
    fi
  done
  for ((i = 0; i < timeout * 10; i++)); do
    left=0
    for pid in "${pids[@]}"; do _e2e_alive "$pid" && left=1; done
    [ "$left" = 0 ] && break
    sleep 0.1
  done
  for i in "${!pids[@]}"; do
    if _e2e_alive "${pids[$i]}"; then
      e2e_warn "${names[$i]} (pid ${pids[$i]}) ignored SIGTERM for ${timeout}s; sending SIGKILL"
      kill -KILL "${pids[$i]}" 2>/dev/null || true
    fi
  done
  for i in "${!pids[@]}"; do
    for ((left = 0; left < 50; left++)); do _e2e_alive "${pids[$i]}" || break; sleep 0.1; done
    e2e_log "stopped ${names[$i]} (pid ${pids[$i]})"
  done
  for name in "$@"; do rm -f "$E2E_PIDS/$name.pid"; done
}

# e2e_wait_http NAME URL TIMEOUT_S [CURL_ARGS...]: poll URL until 2xx while
# process NAME is alive. On failure print the log tail and return 1.
e2e_wait_http() {
  local name="$1" url="$2" timeout="$3" deadline; shift 3
  deadline=$(( $(date +%s) + timeout ))
  while :; do
    if curl -fsS -o /dev/null --max-time 2 "$@" "$url" 2>/dev/null; then
      return 0
    fi
    if ! e2e_pid "$name" >/dev/null; then
      echo "[e2e] $name exited; last lines of $E2E_LOGS/$name.log:" >&2
      tail -n 30 "$E2E_LOGS/$name.log" >&2
      return 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "[e2e] $name not healthy at $url after ${timeout}s; last lines of $E2E_LOGS/$name.log:" >&2
      tail -n 30 "$E2E_LOGS/$name.log" >&2
      return 1
    fi
    sleep 0.2
  done
}

# ---- scheduler pairs ----------------------------------------------------------------------
e2e_replicas() { echo "${TROUPE_REPLICAS:-1}"; }
e2e_pairs() { seq 0 $(( $(e2e_replicas) - 1 )); }
# e2e_sfx PAIR: "" for pair 0, "-PAIR" otherwise (process, log and config names).
e2e_sfx() { [ "${1:-0}" = 0 ] || echo "-$1"; }
# e2e_pair_var NAME PAIR: $NAME for pair 0, $NAME_PAIR otherwise ("" when unset).
e2e_pair_var() {
  local n="$1"
  [ "${2:-0}" = 0 ] || n="${n}_$2"
  echo "${!n:-}"
}
# e2e_check_pair PAIR: fail unless PAIR is a pair of this cluster.
e2e_check_pair() {
  case "${1:-}" in '' | *[!0-9]*) e2e_die "pair '${1:-}' must be a number (0..$(( $(e2e_replicas) - 1 )))" ;; esac
  [ "$1" -lt "$(e2e_replicas)" ] || e2e_die "pair $1: the cluster has $(e2e_replicas) scheduler pair(s) (TROUPE_REPLICAS)"
}

# Health checks of a running cluster (state must be loaded).
e2e_etcd_ok() { e2e_pid etcd >/dev/null && curl -fsS --max-time 2 "http://127.0.0.1:$ETCD_PORT/health" >/dev/null 2>&1; }
e2e_apiserver_ok() {
  e2e_pid kube-apiserver >/dev/null &&
    curl -fsS --max-time 3 --cacert "$E2E_DIR/pki/apiserver.crt" "https://127.0.0.1:$APISERVER_PORT/readyz" >/dev/null 2>&1
}
# kube-controller-manager (absent from a cluster started before it was added: not checked then).
e2e_kcm_ok() {
  [ -n "${KCM_PORT:-}" ] || return 0
  e2e_pid kube-controller-manager >/dev/null &&
    curl -fsSk --max-time 2 "https://127.0.0.1:$KCM_PORT/healthz" >/dev/null 2>&1
}
# e2e_troupe_url [PAIR]: that pair's extender address (default pair 0): https:// with
# TROUPE_TLS=1 (kept in state.env), else http://.
e2e_troupe_url() {
  local port scheme=http
  port="$(e2e_pair_var TROUPE_PORT "${1:-0}")"
  [ "${TROUPE_TLS:-0}" = 1 ] && scheme=https
  echo "$scheme://127.0.0.1:$port"
}
# curl arguments to reach the extender port: with TLS, kube-scheduler's client certificate.
e2e_troupe_curl_args() {
  if [ "${TROUPE_TLS:-0}" = 1 ]; then
    echo "--cacert $E2E_TROUPE_TLS/ca.crt --cert $E2E_TROUPE_TLS/client.crt --key $E2E_TROUPE_TLS/client.key"
  fi
}

# e2e_troupe_certs: a CA, Troupe's server certificate for 127.0.0.1 and kube-scheduler's client
# certificate, with openssl, in $E2E_TROUPE_TLS (kept when already there).
e2e_troupe_certs() {
  local d="$E2E_TROUPE_TLS"
  [ -s "$d/ca.crt" ] && [ -s "$d/server.crt" ] && [ -s "$d/client.crt" ] && return 0
  mkdir -p "$d"
  (
    cd "$d"
    umask 077
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 \
      -subj "/CN=troupe-e2e-extender-ca" -keyout ca.key -out ca.crt \
      -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=troupe-extender" \
      -keyout server.key -out server.csr 2>/dev/null
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=serverAuth" "subjectAltName=IP:127.0.0.1,DNS:localhost" > server.ext
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 \
      -extfile server.ext -out server.crt 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=kube-scheduler" \
      -keyout client.key -out client.csr 2>/dev/null
    printf '%s\n' "basicConstraints=critical,CA:FALSE" "keyUsage=critical,digitalSignature" \
      "extendedKeyUsage=clientAuth" > client.ext
    openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 7 \
      -extfile client.ext -out client.crt 2>/dev/null
    rm -f ./*.csr ./*.ext ca.srl
    # A client certificate from another CA, which Troupe must refuse (tests/e2e/test_tls.py).
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 7 \
      -subj "/CN=someone-else" -keyout stranger.key -out stranger.crt 2>/dev/null
    chmod 0644 ./*.crt
  ) || e2e_die "could not make Troupe's TLS certificates in $d (openssl)"
}

# e2e_troupe_credentials: write $E2E_TROUPE_KUBECONFIG, Troupe's kubeconfig with a token of
# troupe-system/troupe bound to deploy/rbac.yaml's ClusterRole only, so the e2e runs Troupe with
# the permissions the project ships (a missing one shows as Forbidden). Applies deploy/rbac.yaml.
# A file younger than a day (the token lasts two) is reused, so restarts stay fast; cluster-up
# removes it with the rest of a cluster's state.
e2e_troupe_credentials() {
  if [ -n "$(find "$E2E_TROUPE_KUBECONFIG" -mmin -1440 2>/dev/null)" ]; then return 0; fi
  "$KUBECTL" --kubeconfig "$E2E_KUBECONFIG" apply -f "$E2E_ROOT/deploy/rbac.yaml" >/dev/null ||
    e2e_die "kubectl apply -f deploy/rbac.yaml failed"
  local token server ca
  token="$("$KUBECTL" --kubeconfig "$E2E_KUBECONFIG" create token troupe -n troupe-system --duration=48h)" ||
    e2e_die "kubectl create token troupe -n troupe-system failed"
  server="$(awk '$1=="server:"{print $2; exit}' "$E2E_KUBECONFIG")"
  ca="$(awk '$1=="certificate-authority-data:"{print $2; exit}' "$E2E_KUBECONFIG")"
  (
    umask 077
    cat > "$E2E_TROUPE_KUBECONFIG.tmp" <<KC
apiVersion: v1
kind: Config
clusters:
- name: troupe-e2e
  cluster:
    server: $server
    certificate-authority-data: $ca
users:
- name: troupe-sa
  user:
    token: $token
contexts:
- name: troupe
  context: {cluster: troupe-e2e, user: troupe-sa, namespace: troupe-system}
current-context: troupe
KC
    mv "$E2E_TROUPE_KUBECONFIG.tmp" "$E2E_TROUPE_KUBECONFIG"
  )
}

# e2e_scheduler_pair_ok PAIR: that pair's kube-scheduler answers /healthz (a standby does too).
e2e_scheduler_pair_ok() {
  local port
  port="$(e2e_pair_var SCHEDULER_PORT "$1")"
  [ -n "$port" ] && e2e_pid "kube-scheduler$(e2e_sfx "$1")" >/dev/null &&
    curl -fsSk --max-time 2 "https://127.0.0.1:$port/healthz" >/dev/null 2>&1
}
# e2e_scheduler_ok: every pair's kube-scheduler is healthy (TROUPE_DEPLOY=chart: the chart's pod
# is ready).
e2e_scheduler_ok() {
  local i
  if [ "${TROUPE_DEPLOY:-}" = chart ]; then "$E2E_ROOT/scripts/chart-pod.sh" ok; return; fi
  for i in $(e2e_pairs); do e2e_scheduler_pair_ok "$i" || return 1; done
}
# e2e_troupe_ok [PAIR]: that pair's Troupe (default pair 0) answers /healthz.
e2e_troupe_ok() {
  local port
  port="$(e2e_pair_var TROUPE_PORT "${1:-0}")"
  if [ "${TROUPE_DEPLOY:-}" = chart ]; then   # the chart pod's container, on the host's network
    curl -fsS --max-time 2 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1
    return
  fi
  [ -n "$port" ] && e2e_pid "troupe$(e2e_sfx "${1:-0}")" >/dev/null &&
    # shellcheck disable=SC2046
    curl -fsS --max-time 2 $(e2e_troupe_curl_args) "$(e2e_troupe_url "${1:-0}")/healthz" >/dev/null 2>&1
}

# e2e_leader: print the pair whose kube-scheduler holds the Lease now (its
# leader_election_master_status metric is 1); fail if none does. With one pair and leader
# election off, pair 0 always leads.
e2e_leader() {
  local i port token metrics
  if [ "$(e2e_replicas)" = 1 ]; then
    e2e_scheduler_pair_ok 0 && echo 0
    return
  fi
  token="$(sed -n '1s/,.*//p' "$E2E_DIR/tokens.csv")"   # line 1: the admin
  for i in $(e2e_pairs); do
    port="$(e2e_pair_var SCHEDULER_PORT "$i")"
    e2e_pid "kube-scheduler$(e2e_sfx "$i")" >/dev/null || continue
    # Read it whole first: grep -q would end the pipe early (SIGPIPE fails it under pipefail).
    metrics="$(curl -fsSk --max-time 2 -H "Authorization: Bearer $token" "https://127.0.0.1:$port/metrics" 2>/dev/null)" ||
      continue
    if grep -Eq '^leader_election_master_status\{[^}]*\} 1$' <<<"$metrics"; then
      echo "$i"
      return 0
    fi
  done
  return 1
}

# K8S_FEATURES (state.env): the feature gates and APIs of the control plane, per K8S_VERSION
# (kube-apiserver refuses a gate it does not know, so they differ between minors).
# workload: Kubernetes' native gangs (the Workload API).
#   1.35: GenericWorkload + GangScheduling, scheduling.k8s.io/v1alpha1 (Workloads only: no
#         PodGroup objects, which Troupe does not read there)
#   1.36: GenericWorkload + GangScheduling, scheduling.k8s.io/v1alpha2 (PodGroups)
#   1.37+: GenericWorkload (beta; GangScheduling and WorkloadAwarePreemption were folded into
#         it), scheduling.k8s.io/v1beta1 (PodGroups; v1alpha2 was removed)
# workload-jobs (1.37+): workload and WorkloadWithJob (alpha): the Job controller makes a Workload
#   and a PodGroup for every new Job (a basic one unless the Job asks for a gang).
e2e_feature_gates() {
  case "${K8S_FEATURES:-}" in
    workload-jobs) echo "GenericWorkload=true,WorkloadWithJob=true" ;;
    workload)
      if [ "$(k8s_minor "$K8S_VERSION")" -ge 37 ]; then
        echo "GenericWorkload=true"
      else
        echo "GenericWorkload=true,GangScheduling=true"
      fi ;;
  esac
}
# The scheduling.k8s.io version that serves the Workload API on K8S_VERSION.
e2e_workload_api_version() {
  local minor
  minor="$(k8s_minor "$K8S_VERSION")"
  if [ "$minor" -ge 37 ]; then echo v1beta1; elif [ "$minor" -eq 36 ]; then echo v1alpha2; else echo v1alpha1; fi
}
e2e_apiserver_feature_args() {
  local gates
  gates="$(e2e_feature_gates)"
  [ -n "$gates" ] || return 0
  echo "--feature-gates=$gates --runtime-config=scheduling.k8s.io/$(e2e_workload_api_version)=true"
}
e2e_scheduler_feature_args() {
  local gates
  gates="$(e2e_feature_gates)"
  [ -n "$gates" ] || return 0
  echo "--feature-gates=$gates"
}

# kcm_start: kube-controller-manager with every controller that needs no cloud (kcm has none
# since 1.31) except node-lifecycle: the fake nodes have no kubelet to renew their Leases, so it
# would mark them unreachable, taint them and evict their pods. Its own identity
# (system:kube-controller-manager, the token in kcm-kubeconfig), one ServiceAccount per
# controller, ServiceAccount tokens signed with kube-apiserver's key pair (sa.key), leader
# election off. Ready when /healthz on its secure port answers.
kcm_start() {
  e2e_start kube-controller-manager "$K8S_BIN/kube-controller-manager" \
    --kubeconfig="$E2E_KCM_KUBECONFIG" \
    --authentication-kubeconfig="$E2E_KCM_KUBECONFIG" --authorization-kubeconfig="$E2E_KCM_KUBECONFIG" \
    --authentication-skip-lookup \
    --bind-address=127.0.0.1 --secure-port="$KCM_PORT" --cert-dir="$E2E_DIR/pki/kcm" \
    --leader-elect=false --use-service-account-credentials=true \
    --controllers='*,-node-lifecycle-controller,-kube-apiserver-serving-clustertrustbundle-publisher-controller' \
    --service-account-private-key-file="$E2E_DIR/sa.key" --root-ca-file="$E2E_DIR/pki/apiserver.crt" \
    --service-cluster-ip-range=10.0.0.0/24 \
    $(e2e_scheduler_feature_args) \
    --v=1
  e2e_wait_http kube-controller-manager "https://127.0.0.1:$KCM_PORT/healthz" 60 -k ||
    e2e_die "kube-controller-manager did not become healthy"
  e2e_log "kube-controller-manager healthy (pid $(e2e_pid kube-controller-manager))"
}

# scheduler_start [PAIR]: start that pair's kube-scheduler with its rendered
# scheduler-config[-PAIR].yaml (cluster-up renders it) and wait for /healthz.
scheduler_start() {
  local i="${1:-0}" name port config
  name="kube-scheduler$(e2e_sfx "$i")"
  port="$(e2e_pair_var SCHEDULER_PORT "$i")"
  config="$E2E_DIR/scheduler-config$(e2e_sfx "$i").yaml"
  [ -n "$port" ] || e2e_die "SCHEDULER_PORT of pair $i unknown: is the cluster up? (scripts/cluster-up.sh)"
  [ -f "$config" ] || e2e_die "no $config: is the cluster up? (scripts/cluster-up.sh)"
  if e2e_scheduler_pair_ok "$i"; then
    e2e_log "$name already running (pid $(e2e_pid "$name"))"
    return 0
  fi
  e2e_stop -t 5 "$name"   # a live but unhealthy leftover
  e2e_start "$name" "$K8S_BIN/kube-scheduler" \
    --config="$config" \
    --bind-address=127.0.0.1 --secure-port="$port" \
    --authentication-kubeconfig="$E2E_KUBECONFIG" --authorization-kubeconfig="$E2E_KUBECONFIG" \
    $(e2e_scheduler_feature_args) \
    --v=2
  e2e_wait_http "$name" "https://127.0.0.1:$port/healthz" 60 -k || e2e_die "$name did not become healthy"
  e2e_log "$name healthy (pid $(e2e_pid "$name"))"
}

# troupe_start [PAIR]: start that pair's Troupe (default pair 0) on its port if $TROUPE_BIN is
# executable; otherwise warn and return 0 (the control plane is still usable).
# Extra arguments come from $TROUPE_ARGS (word-split).
troupe_start() {
  local i="${1:-0}" name port metrics_port
  name="troupe$(e2e_sfx "$i")"
  port="$(e2e_pair_var TROUPE_PORT "$i")"
  metrics_port="$(e2e_pair_var TROUPE_METRICS_PORT "$i")"
  [ -n "$port" ] || e2e_die "TROUPE_PORT of pair $i unknown: is the cluster up? (scripts/cluster-up.sh)"
  if e2e_troupe_ok "$i"; then
    e2e_log "$name already running (pid $(e2e_pid "$name")) on 127.0.0.1:$port"
    return 0
  fi
  e2e_stop -t 5 "$name"   # a live but unhealthy leftover
  if [ ! -x "$TROUPE_BIN" ] || [ -d "$TROUPE_BIN" ]; then
    e2e_warn "$TROUPE_BIN is not an executable; NOT starting Troupe (GPU pods will fail the extender call). Build it or set TROUPE_BIN."
    return 0
  fi
  # Record every request body kube-scheduler sends (tests/e2e reads them; tests/e2e/update_corpus.py
  # turns them into tests/corpus/). One directory per start: Troupe numbers files from 1 again
  # after a restart. TROUPE_RECORD=0, or a --record-dir in TROUPE_ARGS, turns this off.
  local record=()
  case " ${TROUPE_ARGS:-} " in *" --record-dir"*) ;; *)
    if [ "${TROUPE_RECORD:-1}" != 0 ]; then
      record=(--record-dir "$E2E_RECORD/$(date -u +%Y%m%dT%H%M%S)-$$-$RANDOM")
    fi ;;
  esac
  # TROUPE_MODE=kube (kept in state.env): Troupe watches the cluster through the API and binds
  # pods itself; otherwise it runs standalone on build/e2e/cluster.yaml.
  local source=(--cluster "$E2E_DIR/cluster.yaml") ready_path=/healthz
  if [ "${TROUPE_MODE:-standalone}" = kube ]; then
    if [ "${TROUPE_E2E_ADMIN:-0}" = 1 ]; then
      source=(--kubeconfig "$E2E_KUBECONFIG")
    else
      e2e_troupe_credentials
      source=(--kubeconfig "$E2E_TROUPE_KUBECONFIG")
    fi
    # Troupe binds only the pods of kube-scheduler's profile.
    source+=(--scheduler-name "${TROUPE_SCHEDULER_NAME:-troupe-scheduler}")
    ready_path=/readyz   # ready once its first list of nodes and pods is in
  fi
  # Probes and Prometheus on their own port, as the Helm chart runs it (older state.env: none).
  local metrics=()
  [ -n "$metrics_port" ] && metrics=(--metrics-listen "127.0.0.1:$metrics_port")
  # TROUPE_TLS=1 (kept in state.env): the verbs over HTTPS, kube-scheduler's client certificate
  # required, as the chart runs it with troupe.tls.enabled.
  local tls=()
  if [ "${TROUPE_TLS:-0}" = 1 ]; then
    e2e_troupe_certs
    tls=(--tls-cert "$E2E_TROUPE_TLS/server.crt" --tls-key "$E2E_TROUPE_TLS/server.key"
         --client-ca "$E2E_TROUPE_TLS/ca.crt")
  fi
  # Filter narrowed to Troupe's best node, as the chart ships it (docs/live-replay.md);
  # TROUPE_NARROW_TO=all for scores only. A --narrow-to in TROUPE_ARGS comes later and wins.
  # shellcheck disable=SC2086
  e2e_start "$name" "$TROUPE_BIN" serve --listen "127.0.0.1:$port" "${metrics[@]}" \
    "${source[@]}" "${record[@]}" "${tls[@]}" --narrow-to "${TROUPE_NARROW_TO:-best}" ${TROUPE_ARGS:-}
  # shellcheck disable=SC2046
  e2e_wait_http "$name" "$(e2e_troupe_url "$i")$ready_path" "${TROUPE_WAIT_S:-30}" $(e2e_troupe_curl_args) ||
    e2e_die "$name did not become healthy"
  e2e_log "$name healthy (pid $(e2e_pid "$name")) on $(e2e_troupe_url "$i")"
}

# troupe_stop [PAIR]: stop that pair's Troupe (default pair 0).
troupe_stop() { e2e_stop -t "${TROUPE_STOP_TIMEOUT_S:-10}" "troupe$(e2e_sfx "${1:-0}")"; }
