#!/usr/bin/env bash
# Check charts/troupe, the dashboard and the plain manifests in deploy/:
#   1. the dashboard JSON matches scripts/chart-dashboard.py and uses only metrics that
#      src/adapters/metrics/metrics.cc registers;
#   2. helm lint --strict (default values and each ci/*-values.yaml);
#   3. helm template (default and each ci file); the schema rejects bad values;
#   4. the rendered configs load: kube-scheduler --write-config-to (strict decoding) and
#      troupe serve --config (unknown keys are errors), when those binaries are built;
#   5. deploy/troupe.yaml equals a fresh render (regenerate: scripts/chart-render-deploy.sh);
#   6. when the e2e cluster answers (build/e2e/kubeconfig), kubectl apply --dry-run=server of
#      every render and of deploy/*.yaml (ServiceMonitor, PodMonitor skipped: no CRD there).
# helm is built from tools/helm on first use (scripts/chart-build-helm.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CHART=charts/troupe
HELM=$ROOT/build/tools/helm
K8S_BIN=$ROOT/build/k8s/v1.36.3/bin
KUBECONFIG_E2E=$ROOT/build/e2e/kubeconfig
TROUPE_BIN=${TROUPE_BIN:-build/troupe}
NS=kube-system
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
t0=$(date +%s)
step() { echo "chart-check [+$(( $(date +%s) - t0 ))s] $*"; }
fail() { echo "chart-check: FAIL: $*" >&2; exit 1; }

scripts/chart-build-helm.sh

step "dashboard"
python3 scripts/chart-dashboard.py --print >"$WORK/dashboard.json"
for f in $CHART/dashboards/troupe.json deploy/grafana-dashboard.json; do
  diff -q "$WORK/dashboard.json" "$f" >/dev/null \
    || fail "$f is stale: run python3 scripts/chart-dashboard.py && scripts/chart-render-deploy.sh"
done
known=$(grep -o '\.Name("troupe_[a-z_]*")' src/adapters/metrics/metrics.cc | sed 's/.*("\(.*\)")/\1/')
grep -o 'troupe_[a-z_]*' "$WORK/dashboard.json" | sort -u | while read -r name; do
  base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$name")
  grep -qx "$name" <<<"$known" || grep -qx "$base" <<<"$known" \
    || fail "dashboard uses $name, which src/adapters/metrics/metrics.cc does not register"
done

CI_FILES=("$CHART"/ci/*-values.yaml)
step "helm lint (default + ${#CI_FILES[@]} ci files)"
"$HELM" lint --strict "$CHART" >"$WORK/lint.log" 2>&1 || { cat "$WORK/lint.log"; fail "helm lint"; }
for f in "${CI_FILES[@]}"; do
  "$HELM" lint --strict "$CHART" -f "$f" >"$WORK/lint.log" 2>&1 || { cat "$WORK/lint.log"; fail "helm lint -f $f"; }
done

step "helm template"
renders=("$WORK/default.yaml")
"$HELM" template troupe "$CHART" --namespace $NS >"$WORK/default.yaml"
for f in "${CI_FILES[@]}"; do
  out="$WORK/$(basename "$f" .yaml).yaml"
  "$HELM" template troupe "$CHART" --namespace $NS -f "$f" >"$out"
  renders+=("$out")
done
grep -q 'kind: ServiceMonitor' "$WORK/binpack-values.yaml" || fail "ci/binpack-values.yaml renders no ServiceMonitor"
grep -q 'kind: ServiceMonitor' "$WORK/default.yaml" && fail "default values render a ServiceMonitor"
grep -q 'kind: PodMonitor' "$WORK/binpack-values.yaml" || fail "ci/binpack-values.yaml renders no PodMonitor"
grep -q 'kind: PodMonitor' "$WORK/default.yaml" && fail "default values render a PodMonitor"
# The verbs on loopback only; probes, Service and monitors on the metrics port.
grep -q -- '--listen=127.0.0.1:8888' "$WORK/default.yaml" || fail "default render: extender not on 127.0.0.1:8888"
grep -q -- '--metrics-listen=0.0.0.0:8889' "$WORK/default.yaml" || fail "default render: no --metrics-listen=0.0.0.0:8889"
grep -q -- '--metrics-listen=\[::\]:8889' "$WORK/binpack-values.yaml" || fail "binpack render: IPv6 --metrics-listen not bracketed"
grep -q 'kind: Service$' "$WORK/loopback-values.yaml" && fail "loopback metrics address still renders a Service"
grep -q 'path: /healthz' "$WORK/loopback-values.yaml" && fail "loopback metrics address still renders HTTP probes"
if "$HELM" template troupe "$CHART" --set troupe.metricsPort=8888 >/dev/null 2>&1; then
  fail "metricsPort equal to port accepted"
fi
# replicaCount > 1 (ci/binpack-values.yaml: 2): a PodDisruptionBudget, a soft anti-affinity, the
# Lease timings; without leader election the render fails and says why.
grep -q 'kind: PodDisruptionBudget' "$WORK/binpack-values.yaml" || fail "replicaCount 2 renders no PodDisruptionBudget"
grep -q 'minAvailable: 1' "$WORK/binpack-values.yaml" || fail "the PodDisruptionBudget is not minAvailable 1"
grep -q 'kind: PodDisruptionBudget' "$WORK/default.yaml" && fail "replicaCount 1 renders a PodDisruptionBudget"
grep -q 'podAntiAffinity' "$WORK/binpack-values.yaml" || fail "replicaCount 2 renders no anti-affinity"
grep -q 'podAntiAffinity' "$WORK/default.yaml" && fail "replicaCount 1 renders an anti-affinity"
grep -q 'leaseDuration: 15s' "$WORK/default.yaml" || fail "default render: leaseDuration is not 15s"
grep -q 'leaseDuration: 8s' "$WORK/binpack-values.yaml" || fail "binpack render: leaseDuration 8s not rendered"
if out=$("$HELM" template troupe "$CHART" --set replicaCount=2 --set kubeScheduler.leaderElection.enabled=false 2>&1); then
  fail "replicaCount 2 without leader election accepted"
fi
grep -q 'kubeScheduler.leaderElection.enabled is false' <<<"$out" \
  || fail "replicaCount 2 without leader election fails without saying why: $out"
grep -q 'httpTimeout: 330s' "$WORK/default.yaml" || fail "default httpTimeout is not gangTimeoutSeconds+margin (330s)"
grep -q 'bindVerb: bind' "$WORK/default.yaml" || fail "default render lacks bindVerb"
grep -q 'bindVerb: bind' "$WORK/binpack-values.yaml" && fail "kubernetesApi=false still renders bindVerb"
# The schema must reject bad values.
for bad in troupe.policy.name=best troupe.logLevel=verbose nosuchkey=1 troupe.weights.pack=1 \
           kubeScheduler.leaderElection.leaseName=kube-scheduler troupe.policy.weights.pack=2 \
           kubeScheduler.leaderElection.leaseDuration=15 replicaCount=0; do
  if "$HELM" template troupe "$CHART" --set "$bad" >/dev/null 2>&1; then fail "schema accepted --set $bad"; fi
done

step "rendered configs load"
extract() {  # extract RENDER KEY: the data[KEY] of the -config ConfigMap
  python3 - "$1" "$2" <<'PY'
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "ConfigMap" and sys.argv[2] in d.get("data", {}):
        sys.stdout.write(d["data"][sys.argv[2]]); break
else:
    sys.exit(f"no ConfigMap with {sys.argv[2]} in {sys.argv[1]}")
PY
}
cat >"$WORK/dummy-kubeconfig" <<'KC'
apiVersion: v1
kind: Config
clusters: [{name: x, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: x, user: {token: x}}]
contexts: [{name: x, context: {cluster: x, user: x}}]
current-context: x
KC
for r in "${renders[@]}"; do
  n=$(basename "$r" .yaml)
  if [[ -x $K8S_BIN/kube-scheduler ]]; then
    extract "$r" scheduler-config.yaml | sed "s#kubeconfig: \"\"#kubeconfig: $WORK/dummy-kubeconfig#" >"$WORK/$n-ks.yaml"
    "$K8S_BIN/kube-scheduler" --config "$WORK/$n-ks.yaml" --write-config-to "$WORK/$n-ks-out.yaml" \
      >"$WORK/$n-ks.log" 2>&1 || { tail -3 "$WORK/$n-ks.log"; fail "kube-scheduler rejects the $n scheduler config"; }
  else
    step "  (no $K8S_BIN/kube-scheduler: scheduler config not loaded; scripts/build-k8s.sh builds it)"
  fi
  if [[ -x $TROUPE_BIN ]]; then
    extract "$r" config.yaml >"$WORK/$n-troupe.yaml"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    KUBERNETES_SERVICE_HOST="" "$TROUPE_BIN" serve --listen "127.0.0.1:$port" --config "$WORK/$n-troupe.yaml" \
      --cluster examples/cluster.yaml >"$WORK/$n-troupe.log" 2>&1 &
    pid=$!; PIDS+=("$pid"); ok=
    for _ in $(seq 50); do
      curl -sf "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 && { ok=1; break; }
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
    [[ -n $ok ]] || { cat "$WORK/$n-troupe.log"; fail "troupe rejects the $n config.yaml"; }
  else
    step "  (no $TROUPE_BIN: Troupe config not loaded)"
  fi
done

if [[ -f deploy/rbac.yaml ]]; then
  step "Troupe's ClusterRole rules match deploy/rbac.yaml"
  python3 - "$WORK/default.yaml" deploy/rbac.yaml <<'PY' || fail "charts/troupe/templates/rbac.yaml and deploy/rbac.yaml grant Troupe different rules"
import sys, yaml
def rules(path, name_suffix):
    for d in yaml.safe_load_all(open(path)):
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"].endswith(name_suffix):
            return sorted(yaml.safe_dump(r, sort_keys=True) for r in d["rules"])
    sys.exit(f"no ClusterRole *{name_suffix} in {path}")
a, b = rules(sys.argv[1], "-troupe"), rules(sys.argv[2], "troupe")
if a != b:
    sys.exit(f"chart: {a}\nrbac.yaml: {b}")
PY
fi

step "deploy/troupe.yaml up to date"
scripts/chart-render-deploy.sh --print >"$WORK/deploy.yaml"
diff -u deploy/troupe.yaml "$WORK/deploy.yaml" >"$WORK/deploy.diff" \
  || { head -40 "$WORK/deploy.diff"; fail "deploy/troupe.yaml is stale: run scripts/chart-render-deploy.sh"; }

if [[ -f $KUBECONFIG_E2E && -x $K8S_BIN/kubectl ]] \
   && "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_E2E" --request-timeout=5s get --raw /readyz >/dev/null 2>&1; then
  step "kubectl apply --dry-run=server (e2e cluster)"
  export KUBECACHEDIR=$ROOT/build/e2e/kube-cache
  # Namespaces the manifests create must exist for a server-side dry run of their contents:
  # create them for real (empty) in this throwaway cluster.
  { grep -h -A2 '^kind: Namespace' deploy/*.yaml 2>/dev/null || true; } | awk '$1=="name:"{print $2}' |
    while read -r ns; do
      "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_E2E" get namespace "$ns" >/dev/null 2>&1 \
        || "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_E2E" create namespace "$ns" >/dev/null
    done
  for r in "${renders[@]}" deploy/troupe.yaml $(ls deploy/rbac.yaml 2>/dev/null); do
    python3 - "$r" >"$WORK/apply.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d and d.get("kind") not in ("ServiceMonitor", "PodMonitor")]
yaml.safe_dump_all(docs, sys.stdout)
PY
    "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_E2E" apply --dry-run=server -f "$WORK/apply.yaml" \
      >"$WORK/apply.log" 2>&1 || { cat "$WORK/apply.log"; fail "apply --dry-run=server $r"; }
    step "  $(basename "$r"): $(wc -l <"$WORK/apply.log") objects accepted"
  done
  if [[ -f deploy/kustomization.yaml ]]; then
    "$K8S_BIN/kubectl" --kubeconfig "$KUBECONFIG_E2E" apply --dry-run=server -k deploy/ >"$WORK/apply.log" 2>&1 \
      || { cat "$WORK/apply.log"; fail "apply --dry-run=server -k deploy/"; }
    step "  deploy/ (kustomize): $(wc -l <"$WORK/apply.log") objects accepted"
  fi
else
  step "no e2e cluster answering ($KUBECONFIG_E2E): server-side dry run skipped (scripts/cluster-up.sh)"
fi
step "ok"
