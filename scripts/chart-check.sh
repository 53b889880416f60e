#!/usr/bin/env bash
# Check charts/troupe, the dashboard and the plain manifests in deploy/:
#   0. the chart's CRDs (charts/troupe/crds/) are deploy/crds/'s, byte for byte;
#   1. the dashboard JSON matches scripts/chart-dashboard.py and uses only metrics that
#      src/adapters/metrics/ exports;
#   2. helm lint --strict (default values and each ci/*-values.yaml);
#   3. helm template (default and each ci file); the schema rejects bad values;
#   4. the rendered configs load: kube-scheduler --write-config-to (strict decoding) and
#      troupe serve --config (unknown keys are errors), when those binaries are built;
#   4b. the chart, deploy/, examples/ and the README state the binary's defaults
#      (scripts/check-defaults.py, against troupe serve --print-config);
#   5. deploy/troupe.yaml equals a fresh render (regenerate: scripts/chart-render-deploy.sh);
#   6. when the e2e cluster answers (build/e2e/kubeconfig), kubectl apply --dry-run=server of
#      the CRDs, every render and deploy/*.yaml (ServiceMonitor, PodMonitor skipped: no CRD there).
# helm is built from tools/helm on first use (scripts/chart-build-helm.sh).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
CHART=charts/troupe
HELM=$ROOT/build/tools/helm
# The chart's kube-scheduler image tag picks the binaries that load its rendered config.
K8S_TAG=$(awk '/^kubeScheduler:/ {ks=1} ks && /^ *tag:/ {print $2; exit}' $CHART/values.yaml)
K8S_BIN=$ROOT/build/k8s/$K8S_TAG/bin
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

step "CRDs: charts/troupe/crds/ = deploy/crds/"
for f in deploy/crds/*.yaml; do
  cmp -s "$f" "$CHART/crds/$(basename "$f")" || fail "$CHART/crds/$(basename "$f") differs from $f: cp $f $CHART/crds/"
done
for f in "$CHART"/crds/*.yaml; do
  [[ -f deploy/crds/$(basename "$f") ]] || fail "$f has no deploy/crds/$(basename "$f")"
done
python3 - deploy/crds/*.yaml <<'PY' || fail "a CRD in deploy/crds/ is malformed (above)"
import sys, yaml
for path in sys.argv[1:]:
    crd = yaml.safe_load(open(path))
    assert crd["kind"] == "CustomResourceDefinition", f"{path}: kind {crd['kind']}"
    for v in crd["spec"]["versions"]:
        assert "status" in v.get("subresources", {}), f"{path} {v['name']}: no status subresource"
        assert v["schema"]["openAPIV3Schema"]["type"] == "object", f"{path} {v['name']}: schema is not an object"
PY

step "dashboard"
python3 scripts/chart-dashboard.py --print >"$WORK/dashboard.json"
for f in $CHART/dashboards/troupe.json deploy/grafana-dashboard.json; do
  diff -q "$WORK/dashboard.json" "$f" >/dev/null \
    || fail "$f is stale: run python3 scripts/chart-dashboard.py && scripts/chart-render-deploy.sh"
done
# Every metric name is a string literal in src/adapters/metrics/ (registered through
# prometheus-cpp, or written directly: # TYPE in node_gpus_text.cc).
known=$({
  grep -oh '"troupe_[a-z_]*"' src/adapters/metrics/*.cc | tr -d '"'
  grep -oh '# TYPE troupe_[a-z_]*' src/adapters/metrics/*.cc | sed 's/# TYPE //'
})
grep -o 'troupe_[a-z_]*' "$WORK/dashboard.json" | sort -u | while read -r name; do
  base=$(sed -E 's/_(bucket|sum|count)$//' <<<"$name")
  grep -qx "$name" <<<"$known" || grep -qx "$base" <<<"$known" \
    || fail "dashboard uses $name, which src/adapters/metrics/ does not export"
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
# Queues in Kubernetes mode with standbys: Troupe follows its kube-scheduler's Lease
# (--leader-lease), and may read that Lease only.
grep -q -- '--leader-lease' "$WORK/default.yaml" && fail "replicaCount 1 passes --leader-lease"
grep -q -- '--leader-lease' "$WORK/binpack-values.yaml" && fail "kubernetesApi=false passes --leader-lease"
"$HELM" template troupe "$CHART" --namespace $NS --set replicaCount=2 >"$WORK/replicas2.yaml"
grep -q -- '--leader-lease=kube-system/troupe-scheduler$' "$WORK/replicas2.yaml" \
  || fail "replicaCount 2 does not pass --leader-lease=kube-system/troupe-scheduler"
python3 - "$WORK/replicas2.yaml" <<'PY' || fail "replicaCount 2: Troupe's Lease Role (above)"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
role = next(d for d in docs if d["kind"] == "Role" and d["metadata"]["name"].endswith("-troupe-leader"))
assert role["rules"] == [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                          "resourceNames": ["troupe-scheduler"], "verbs": ["get"]}], role["rules"]
binding = next(d for d in docs if d["kind"] == "RoleBinding" and d["roleRef"]["name"] == role["metadata"]["name"])
assert [s["name"] for s in binding["subjects"]] == ["troupe-scheduler-troupe"], binding["subjects"]
PY
# The queues block reaches Troupe's config as values state it.
python3 - "$WORK/default.yaml" <<'PY' || fail "default render: Troupe's queues config (above)"
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {}):
        q = yaml.safe_load(d["data"]["config.yaml"])["queues"]
        break
assert q == {"default": "default", "minRuntime": "5m", "reclaim": True, "reclaimTimeout": "2m", "definitions": []}, q
PY
# topology: the preset alone by default; a preset set by --set; explicit levels (ci file) kept.
"$HELM" template troupe "$CHART" --namespace $NS --set troupe.topology.preset=nvidia-topograph \
  >"$WORK/topograph.yaml"
python3 - "$WORK/default.yaml" "$WORK/topograph.yaml" "$WORK/binpack-values.yaml" <<'PY' || fail "topology config (above)"
import sys, yaml
def topology(path):
    for d in yaml.safe_load_all(open(path)):
        if d and d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {}):
            return yaml.safe_load(d["data"]["config.yaml"])["topology"]
assert topology(sys.argv[1]) == {"preset": "default"}, topology(sys.argv[1])
assert topology(sys.argv[2]) == {"preset": "nvidia-topograph"}, topology(sys.argv[2])
assert topology(sys.argv[3]) == {"preset": "default", "levels": ["example.com/hall", "troupe.dev/rack"]}, \
    topology(sys.argv[3])
PY
if "$HELM" template troupe "$CHART" --set troupe.topology.preset=nvl72 >/dev/null 2>&1; then
  fail "the schema accepts an unknown topology preset"
fi
grep -q 'httpTimeout: 330s' "$WORK/default.yaml" || fail "default httpTimeout is not gangTimeoutSeconds+margin (330s)"
grep -q 'bindVerb: bind' "$WORK/default.yaml" || fail "default render lacks bindVerb"
grep -q 'bindVerb: bind' "$WORK/binpack-values.yaml" && fail "kubernetesApi=false still renders bindVerb"
# Least privilege (docs/security.md): who gets which API token, the RBAC, the NetworkPolicy.
python3 - "$WORK/default.yaml" "$WORK/binpack-values.yaml" "$WORK/loopback-values.yaml" <<'PY' || fail "least-privilege checks (above)"
import sys, yaml
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
def load(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]
def one(docs, kind, pred=lambda d: True):
    found = [d for d in docs if d["kind"] == kind and pred(d)]
    assert len(found) == 1, f"{len(found)} {kind} objects"
    return found[0]
def token_volume(dep, container):
    c = next(c for c in dep["spec"]["template"]["spec"]["containers"] if c["name"] == container)
    mounts = [m["name"] for m in c.get("volumeMounts", []) if m["mountPath"] == SA_DIR]
    return mounts[0] if mounts else None
def troupe_role(docs):
    return one(docs, "ClusterRole", lambda d: d["metadata"]["name"].endswith("-troupe"))
def role_subject(docs, role):
    b = one(docs, "ClusterRoleBinding", lambda d: d["roleRef"]["name"] == role)
    return [s["name"] for s in b["subjects"]]
def sa_of(dep):
    return dep["spec"]["template"]["spec"]["serviceAccountName"]
errors = []
def check(ok, what):
    if not ok:
        errors.append(what)
default, binpack, loopback = (load(p) for p in sys.argv[1:])
for name, docs in (("default", default), ("binpack", binpack), ("loopback", loopback)):
    dep = one(docs, "Deployment")
    check(dep["spec"]["template"]["spec"].get("automountServiceAccountToken") is False,
          f"{name}: the pod automounts the ServiceAccount token")
    check(token_volume(dep, "kube-scheduler") == "kube-api-access", f"{name}: kube-scheduler has no API token")
# Default: Troupe's own ServiceAccount and token, bound to Troupe's ClusterRole only, no pod writes.
dep = one(default, "Deployment")
check(token_volume(dep, "troupe") == "troupe-token", "default: troupe container does not use its own token")
role = troupe_role(default)
check(role_subject(default, role["metadata"]["name"]) == ["troupe-scheduler-troupe"],
      "default: Troupe's ClusterRole is not bound to Troupe's own ServiceAccount alone")
check(sa_of(dep) not in role_subject(default, role["metadata"]["name"]),
      "default: kube-scheduler's ServiceAccount holds Troupe's role")
# Writes only where docs/security.md says why: Bindings, events, evictions (they honour
# PodDisruptionBudgets; a delete would not), the status of Queues (never their spec) and the
# PodGroupScheduled condition of native PodGroups (their status only), the troupe.dev/wake
# annotation of pending pods (through pods/status, never their spec).
ALLOWED_WRITES = {"pods/binding": {"create"}, "events": {"create"}, "pods/eviction": {"create"},
                  "pods/status": {"patch"},
                  "queues/status": {"patch", "update"}, "podgroups/status": {"patch"}}
for r in role["rules"]:
    writes = set(r["verbs"]) - {"get", "list", "watch"}
    check(not writes or (len(r["resources"]) == 1 and writes <= ALLOWED_WRITES.get(r["resources"][0], set())),
          f"default: Troupe's ClusterRole writes {r['resources']} ({sorted(writes)})")
check(not [d for d in default if d["kind"] == "Role" and d["metadata"]["name"].endswith("-troupe-leader")],
      "default (replicaCount 1): renders the Lease Role for --leader-lease")
secret = one(default, "Secret", lambda d: d["type"] == "kubernetes.io/service-account-token")
check(secret["metadata"]["annotations"]["kubernetes.io/service-account.name"] == "troupe-scheduler-troupe",
      "default: the token Secret is not Troupe's ServiceAccount's")
check("schedulerNames: [\"troupe-scheduler\"]" in one(default, "ConfigMap", lambda d: "config.yaml" in d.get("data", {}))["data"]["config.yaml"],
      "default: Troupe's config lacks schedulerNames [troupe-scheduler]")
check(not [d for d in default if d["kind"] == "NetworkPolicy"], "default: renders a NetworkPolicy")
# kubernetesApi: false (binpack): no token in Troupe's container, no Troupe role, no Secret.
dep = one(binpack, "Deployment")
check(token_volume(dep, "troupe") is None, "binpack (kubernetesApi: false): troupe container gets an API token")
check(not [d for d in binpack if d["kind"] == "Secret"], "binpack: renders a token Secret")
np = one(binpack, "NetworkPolicy")
check(np["spec"]["policyTypes"] == ["Ingress"] and len(np["spec"]["ingress"]) == 1
      and np["spec"]["ingress"][0]["ports"] == [{"port": 8889, "protocol": "TCP"}]
      and np["spec"]["ingress"][0]["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] == "monitoring",
      "binpack: the NetworkPolicy does not admit exactly the metrics port from metricsFrom")
# separate: false (loopback): Troupe shares the pod's projected token; its role is bound to the pod's account.
dep = one(loopback, "Deployment")
check(token_volume(dep, "troupe") == "kube-api-access", "loopback (separate: false): troupe container lacks the pod's token")
check(role_subject(loopback, troupe_role(loopback)["metadata"]["name"]) == [sa_of(dep)],
      "loopback: Troupe's ClusterRole is not bound to the pod's ServiceAccount")
for e in errors:
    print("  " + e)
sys.exit(1 if errors else 0)
PY
# HTTPS between kube-scheduler and Troupe only when troupe.tls.enabled; then both sides are set.
grep -q 'enableHTTPS' "$WORK/default.yaml" && fail "default values render enableHTTPS"
grep -q 'value: "2"' "$WORK/default.yaml" || fail "default render does not set MALLOC_ARENA_MAX"
for want in 'urlPrefix: https://127.0.0.1:8888' 'enableHTTPS: true' 'certFile: /etc/kubernetes/troupe-tls/client.crt' \
            '--client-ca=/etc/troupe/tls/ca.crt' '--tls-cert=/etc/troupe/tls/tls.crt' 'client.key:' 'fsGroup: 65532'; do
  grep -qF -- "$want" "$WORK/tls-values.yaml" || fail "ci/tls-values.yaml render lacks '$want'"
done
if "$HELM" template troupe "$CHART" --set troupe.tls.enabled=true --set troupe.tls.existingSecret=mine \
     >"$WORK/tls-existing.yaml" 2>&1; then
  python3 - "$WORK/tls-existing.yaml" <<'PY' || fail "troupe.tls.existingSecret still renders a TLS Secret"
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
sys.exit(1 if [d for d in docs if d["kind"] == "Secret" and d["metadata"]["name"].endswith("-tls")] else 0)
PY
  grep -q 'secretName: mine' "$WORK/tls-existing.yaml" || fail "troupe.tls.existingSecret is not mounted"
else
  cat "$WORK/tls-existing.yaml"; fail "helm template with troupe.tls.existingSecret"
fi
# The schema must reject bad values.
for bad in troupe.policy.name=best troupe.logLevel=verbose nosuchkey=1 troupe.weights.pack=1 \
           kubeScheduler.leaderElection.leaseName=kube-scheduler troupe.policy.weights.pack=2 \
           networkPolicy.enabled=yes troupe.serviceAccount.separate=maybe \
           troupe.limits.maxConnections=0 troupe.limits.headerTimeout=5 troupe.tls.enable=true \
           troupe.maxBodyBytes=4294967296 kubeScheduler.leaderElection.leaseDuration=15 replicaCount=0 \
           troupe.queues.minRuntime=5 troupe.queues.reclaim=yes troupe.queues.default=Team_A \
           'troupe.queues.definitions[0].weight=1' \
           'troupe.queues.definitions[0].name=a,troupe.queues.definitions[0].weight=0' \
           'troupe.queues.definitions[0].name=a,troupe.queues.definitions[0].limit.gpus=-1' \
           'troupe.queues.definitions[0].name=a,troupe.queues.definitions[0].limit.gpus=two' \
           'troupe.queues.definitions[0].name=a,troupe.queues.definitions[0].wieght=2'; do
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
tls_files() {  # tls_files RENDER DIR: the generated TLS Secret's files into DIR; false when none
  python3 - "$1" "$2" <<'PY'
import base64, os, sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d["kind"] == "Secret" and d["metadata"]["name"].endswith("-tls"):
        os.makedirs(sys.argv[2], exist_ok=True)
        for k, v in d["data"].items():
            open(os.path.join(sys.argv[2], k), "wb").write(base64.b64decode(v))
        break
else:
    sys.exit(1)
PY
}
for r in "${renders[@]}"; do
  n=$(basename "$r" .yaml)
  # With troupe.tls: both containers load the chart's generated certificates (kube-scheduler
  # builds its extender client from them; Troupe serves HTTPS with them).
  tls_args=()
  if tls_files "$r" "$WORK/$n-tls"; then
    tls_args=(--tls-cert "$WORK/$n-tls/tls.crt" --tls-key "$WORK/$n-tls/tls.key" --client-ca "$WORK/$n-tls/ca.crt")
  fi
  if [[ -x $K8S_BIN/kube-scheduler ]]; then
    extract "$r" scheduler-config.yaml | sed -e "s#kubeconfig: \"\"#kubeconfig: $WORK/dummy-kubeconfig#" \
      -e "s#/etc/kubernetes/troupe-tls/#$WORK/$n-tls/#" >"$WORK/$n-ks.yaml"
    "$K8S_BIN/kube-scheduler" --config "$WORK/$n-ks.yaml" --write-config-to "$WORK/$n-ks-out.yaml" \
      >"$WORK/$n-ks.log" 2>&1 || { tail -3 "$WORK/$n-ks.log"; fail "kube-scheduler rejects the $n scheduler config"; }
  else
    step "  (no $K8S_BIN/kube-scheduler: scheduler config not loaded; scripts/build-k8s.sh builds it)"
  fi
  if [[ -x $TROUPE_BIN ]]; then
    extract "$r" config.yaml >"$WORK/$n-troupe.yaml"
    port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
    KUBERNETES_SERVICE_HOST="" "$TROUPE_BIN" serve --listen "127.0.0.1:$port" --config "$WORK/$n-troupe.yaml" \
      --cluster examples/cluster.yaml "${tls_args[@]}" >"$WORK/$n-troupe.log" 2>&1 &
    pid=$!; PIDS+=("$pid"); ok=
    probe=(curl -sf "http://127.0.0.1:$port/healthz")
    if ((${#tls_args[@]})); then  # as kube-scheduler: its client certificate, Troupe's checked against ca.crt
      probe=(curl -sf --cacert "$WORK/$n-tls/ca.crt" --cert "$WORK/$n-tls/client.crt" --key "$WORK/$n-tls/client.key"
             "https://127.0.0.1:$port/healthz")
    fi
    for _ in $(seq 50); do
      "${probe[@]}" >/dev/null 2>&1 && { ok=1; break; }
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if [[ -n $ok ]] && ((${#tls_args[@]})) &&
       curl -sf --cacert "$WORK/$n-tls/ca.crt" "https://127.0.0.1:$port/healthz" >/dev/null 2>&1; then
      kill "$pid" 2>/dev/null || true
      fail "the $n render: Troupe answered a client without a certificate"
    fi
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

step "docs/security.md's ClusterRole (RBAC) is deploy/rbac.yaml's"
python3 - docs/security.md deploy/rbac.yaml <<'PY' || fail "docs/security.md's ClusterRole differs from deploy/rbac.yaml: update its RBAC section"
import re, sys, yaml
text = open(sys.argv[1]).read()
section = text[text.index("## RBAC"):]
block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
readme = yaml.safe_load(block)["rules"]
shipped = next(d for d in yaml.safe_load_all(open(sys.argv[2])) if d and d["kind"] == "ClusterRole")["rules"]
sys.exit(0 if readme == shipped else f"docs/security.md: {readme}\nrbac.yaml: {shipped}")
PY

if [[ -x $TROUPE_BIN ]]; then
  step "the chart, deploy/, examples/ and the README state the binary's defaults (scripts/check-defaults.py)"
  python3 scripts/check-defaults.py --binary "$TROUPE_BIN" --chart-render "$WORK/default.yaml" \
    || fail "a stated default differs from the binary's (troupe serve --print-config); see above"
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
  for r in deploy/crds/*.yaml "${renders[@]}" deploy/troupe.yaml $(ls deploy/rbac.yaml 2>/dev/null); do
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
