#!/usr/bin/env bash
# The Helm chart's own pod as the scheduler pair of the e2e control plane (TROUPE_DEPLOY=chart;
# scripts/cluster-up.sh calls `up`). Instead of kube-scheduler and Troupe from the host as admin:
#   1. images: localhost/troupe:dev (scripts/image-build.sh --prebuilt when podman lacks it) and
#      localhost/kube-scheduler:<K8S_VERSION>, the control plane's own kube-scheduler binary
#      FROM scratch (rebuilt when the binary changes);
#   2. `helm install` of charts/troupe (build/tools/helm) into $CHART_NAMESPACE with those images
#      (pullPolicy Never) and free ports for the verbs and the metrics port (the pod shares the
#      host's network): its ServiceAccounts, RBAC, ConfigMaps, token Secret, Deployment;
#   3. tests/e2e/chart_pod.py, a kubelet for that Deployment (see its docstring): the two
#      containers under podman with the chart's args, securityContext, volumes, tokens and probes,
#      and the token controller and root CA publisher where no kube-controller-manager runs;
#   4. waits until both containers pass their probes, and writes the chart's rendered
#      KubeSchedulerConfiguration to scheduler-config.yaml for the tests.
#
# Usage: scripts/chart-pod.sh up|down|status|ok|images
#   up      the steps above (the cluster's API server must be up: cluster-up.sh)
#   down    stop the kubelet stand-in and remove the pod's containers (cluster-down.sh calls it)
#   status  the pod, its containers, probes and recent events (from chart-pod/status.json)
#   ok      exit 0 when the stand-in runs and the pod is ready
#   images  only step 1
# Env: TROUPE_IMAGE (default localhost/troupe:dev), CHART_NAMESPACE (troupe-system),
#      CHART_RELEASE (troupe), CHART_VALUES (an extra values file for helm install),
#      CHART_READY_TIMEOUT_S (120). State, logs: $TROUPE_E2E_DIR (build/e2e): chart-pod/,
#      chart-values.yaml, logs/chart-pod.log (the stand-in), logs/chart-<container>.log.
set -euo pipefail
# shellcheck source=scripts/lib-e2e.sh
. "$(dirname "$0")/lib-e2e.sh"
# shellcheck source=scripts/lib-podman.sh
. "$(dirname "$0")/lib-podman.sh"
PODMAN_LOG_TAG=chart-pod

CHART_DIR="$(realpath -m "$E2E_DIR/chart-pod")"   # absolute: the containers' label names it
CHART_STATUS="$CHART_DIR/status.json"
CHART_VALUES_FILE="$E2E_DIR/chart-values.yaml"
HELM="$E2E_ROOT/build/tools/helm"
TROUPE_IMAGE="${TROUPE_IMAGE:-localhost/troupe:dev}"
KS_IMAGE="localhost/kube-scheduler:$K8S_VERSION"

# state_set KEY VALUE: KEY=VALUE in state.env, replacing an earlier KEY.
state_set() {
  sed -i "/^$1=/d" "$E2E_STATE"
  echo "$1=$2" >>"$E2E_STATE"
}

chart_images() {
  podman_require
  local bin sum have ctx why=""
  # localhost/troupe:dev is (re)built around $TROUPE_BIN when missing, or when it packages
  # another build of it (its label; a full build has none and is kept).
  if ! pm image exists "$TROUPE_IMAGE"; then
    why="podman has no $TROUPE_IMAGE"
  elif [ -x "$TROUPE_BIN" ]; then
    have="$(pm image inspect --format '{{index .Labels "troupe.binary-sha256"}}' "$TROUPE_IMAGE" 2>/dev/null || true)"
    [ -z "$have" ] || [ "$have" = "$(sha256sum "$TROUPE_BIN" | cut -c1-64)" ] || why="$TROUPE_IMAGE packages another build of $TROUPE_BIN"
  fi
  if [ -n "$why" ]; then
    [ "$TROUPE_IMAGE" = localhost/troupe:dev ] ||
      podman_die "$why (TROUPE_IMAGE); build it with scripts/image-build.sh --tag $TROUPE_IMAGE"
    podman_log "$why: building it from $TROUPE_BIN (scripts/image-build.sh --prebuilt)"
    TROUPE_BIN="$TROUPE_BIN" "$E2E_ROOT/scripts/image-build.sh" --prebuilt
  fi
  bin="$K8S_BIN/kube-scheduler"
  [ -x "$bin" ] || podman_die "no $bin (scripts/build-k8s.sh)"
  sum="$(sha256sum "$bin" | cut -c1-64)"
  have="$(pm image inspect --format '{{index .Labels "troupe.binary-sha256"}}' "$KS_IMAGE" 2>/dev/null || true)"
  if [ "$have" != "$sum" ]; then
    ctx="$(mktemp -d)"
    cp "$bin" "$ctx/kube-scheduler"
    # A static Go binary needs no base; PATH lets the chart's `command: [kube-scheduler, ...]`
    # find it, as in the upstream image.
    cat >"$ctx/Containerfile" <<CF
FROM scratch
COPY kube-scheduler /usr/local/bin/kube-scheduler
ENV PATH=/usr/local/bin:/usr/bin:/bin
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kube-scheduler"]
LABEL troupe.binary-sha256=$sum
CF
    pm build --pull=never -q -t "$KS_IMAGE" -f "$ctx/Containerfile" "$ctx" >/dev/null ||
      { rm -rf "$ctx"; podman_die "podman build of $KS_IMAGE failed"; }
    rm -rf "$ctx"
    podman_log "built $KS_IMAGE from $bin"
  fi
  podman_log "images: $TROUPE_IMAGE ($(pm image inspect --format '{{.Id}}' "$TROUPE_IMAGE" | cut -c1-12)), $KS_IMAGE"
}

# The pod's containers of this cluster (labelled with its state directory), stopped and removed.
chart_remove_containers() {
  command -v podman >/dev/null || return 0
  local ids
  ids="$(pm ps -aq --filter "label=troupe.e2e.dir=$CHART_DIR" 2>/dev/null || true)"
  [ -n "$ids" ] || return 0
  # shellcheck disable=SC2086
  pm rm -f -t 5 $ids >/dev/null 2>&1 || true
  podman_log "removed containers $(tr '\n' ' ' <<<"$ids")"
}

chart_ready() {
  e2e_pid chart-pod >/dev/null && [ -f "$CHART_STATUS" ] &&
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); sys.exit(0 if s.get("pod") and s["pod"]["ready"] else 1)' "$CHART_STATUS"
}

chart_status() {
  [ -f "$CHART_STATUS" ] || { echo "no $CHART_STATUS: TROUPE_DEPLOY=chart scripts/cluster-up.sh"; return 1; }
  python3 - "$CHART_STATUS" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
p = s.get("pod")
print(f"deployment {s['deployment']}: {s['rollouts']} rollout(s); kube-controller-manager: "
      f"{'runs' if s.get('controllerManager') else 'none (stand-ins: ' + json.dumps(s.get('standIns')) + ')'}")
if not p:
    print("  no pod" + (f" (last error: {s['lastError']})" if s.get("lastError") else ""))
else:
    print(f"  pod {p['namespace']}/{p['name']}: {p['phase']}{' ' + p['reason'] if p['reason'] else ''}, "
          f"ready {p['ready']}")
    for name, c in p["containers"].items():
        probes = ", ".join(f"{k} {v['ok']} ok/{v['failed']} failed ({v['last']})" for k, v in c["probes"].items())
        print(f"    {name}: {c['state']}{' ' + c['reason'] if c['reason'] else ''}, ready {c['ready']}, "
              f"restarts {c['restarts']}, {c['image']}; probes: {probes or 'none'}")
print("  events:")
for e in s["events"][-8:]:
    print("    " + e)
PY
}

chart_up() {
  e2e_load_state || e2e_die "no $E2E_STATE: start the control plane first (TROUPE_DEPLOY=chart scripts/cluster-up.sh)"
  # kube-scheduler's secure port is not a chart value: the pod, on the host's network, takes 10259.
  if python3 -c 'import socket; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 10259))' 2>/dev/null; then :; else
    e2e_die "port 10259 (kube-scheduler's secure port in the chart's pod) is taken: another TROUPE_DEPLOY=chart cluster? (scripts/cluster-down.sh with its TROUPE_E2E_DIR)"
  fi
  chart_images
  "$E2E_ROOT/scripts/chart-build-helm.sh"
  local ns="${CHART_NAMESPACE:-troupe-system}" release="${CHART_RELEASE:-troupe}"
  cat >"$CHART_VALUES_FILE" <<VALUES
# Written by scripts/chart-pod.sh: the local images and this cluster's free ports (host network).
troupe:
  image: {repository: ${TROUPE_IMAGE%:*}, tag: "${TROUPE_IMAGE##*:}", pullPolicy: Never}
  port: $TROUPE_PORT
  metricsPort: $TROUPE_METRICS_PORT
kubeScheduler:
  image: {repository: ${KS_IMAGE%:*}, tag: "${KS_IMAGE##*:}", pullPolicy: Never}
VALUES
  state_set TROUPE_DEPLOY chart
  state_set TROUPE_MODE kube
  state_set SCHEDULER_PORT 10259
  state_set CHART_NAMESPACE "$ns"
  state_set CHART_RELEASE "$release"
  state_set CHART_VALUES "$CHART_VALUES_FILE"
  state_set TROUPE_IMAGE "$TROUPE_IMAGE"
  local extra=()
  [ -n "${CHART_VALUES:-}" ] && extra=(-f "$CHART_VALUES")
  "$HELM" --kubeconfig "$E2E_KUBECONFIG" install "$release" "$E2E_ROOT/charts/troupe" --namespace "$ns" \
    --create-namespace -f "$CHART_VALUES_FILE" "${extra[@]}" >"$E2E_LOGS/helm-install.log" 2>&1 ||
    { cat "$E2E_LOGS/helm-install.log" >&2; e2e_die "helm install failed"; }
  e2e_log "helm install $release charts/troupe -n $ns: $(grep -c '^kind:' <("$HELM" --kubeconfig "$E2E_KUBECONFIG" get manifest "$release" -n "$ns")) objects"
  local deployment
  deployment="$("$HELM" --kubeconfig "$E2E_KUBECONFIG" get manifest "$release" -n "$ns" |
    python3 -c 'import sys, yaml; print(next(d["metadata"]["name"] for d in yaml.safe_load_all(sys.stdin) if d and d["kind"] == "Deployment"))')"
  state_set CHART_DEPLOYMENT "$deployment"

  chart_remove_containers
  mkdir -p "$CHART_DIR"
  rm -f "$CHART_STATUS"
  e2e_start chart-pod "$(python3 -c 'import sys; print(sys.executable)')" "$E2E_ROOT/tests/e2e/chart_pod.py" \
    --kubeconfig "$E2E_KUBECONFIG" --namespace "$ns" --deployment "$deployment" \
    --apiserver-port "$APISERVER_PORT" --ca-file "$E2E_DIR/pki/apiserver.crt" \
    --work-dir "$CHART_DIR" --logs "$E2E_LOGS" --status "$CHART_STATUS" --runc "$PODMAN_RUNC"
  local deadline=$(( $(date +%s) + ${CHART_READY_TIMEOUT_S:-120} ))
  until chart_ready; do
    if ! e2e_pid chart-pod >/dev/null || [ "$(date +%s)" -gt "$deadline" ]; then
      chart_status >&2 || true
      tail -n 20 "$E2E_LOGS/chart-pod.log" "$E2E_LOGS"/chart-kube-scheduler.log "$E2E_LOGS"/chart-troupe.log >&2 2>/dev/null || true
      e2e_die "the chart's pod did not become ready (logs: $E2E_LOGS/chart-*.log)"
    fi
    sleep 0.5
  done
  # The chart's KubeSchedulerConfiguration, for the tests' scheduler_config fixture.
  "$KUBECTL" --kubeconfig "$E2E_KUBECONFIG" get configmap -n "$ns" "$deployment-config" \
    -o jsonpath='{.data.scheduler-config\.yaml}' >"$E2E_DIR/scheduler-config.yaml"
  e2e_log "the chart's pod is ready: $(chart_status | sed -n 2p | sed 's/^ *//')"
}

case "${1:-status}" in
  up) chart_up ;;
  down)
    e2e_load_state || true
    e2e_stop -t 15 chart-pod
    chart_remove_containers
    ;;
  status) e2e_load_state || true; chart_status ;;
  ok) e2e_load_state && chart_ready ;;
  images) chart_images ;;
  *) sed -n '16,22p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
