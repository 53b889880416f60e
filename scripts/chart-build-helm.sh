#!/usr/bin/env bash
# Build helm from the pinned Go module in tools/helm into build/tools/helm.
#
# Skipped when build/tools/helm is newer than tools/helm/go.{mod,sum} (FORCE=1 rebuilds).
# The -X flags set helm's default KubeVersion (otherwise v1.20.0, which fails the chart's
# kubeVersion >=1.28 constraint); they match the k8s version of the e2e control plane.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
GO=${GO:-go}
OUT=$ROOT/build/tools/helm
MOD=$ROOT/tools/helm
KMAJOR=1
KMINOR=36

if [[ -z "${FORCE:-}" && -x "$OUT" && "$OUT" -nt "$MOD/go.mod" && "$OUT" -nt "$MOD/go.sum" ]]; then
  exit 0
fi
mkdir -p "$(dirname "$OUT")"
VERSION=$(cd "$MOD" && "$GO" list -m -f '{{.Version}}' helm.sh/helm/v3)
t0=$(date +%s)
(
  cd "$MOD"
  CGO_ENABLED=0 "$GO" build -trimpath -pgo=off -mod=readonly -o "$OUT" \
    -ldflags "-s -w \
      -X helm.sh/helm/v3/internal/version.version=$VERSION \
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=$KMAJOR \
      -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$KMINOR \
      -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMajor=$KMAJOR \
      -X helm.sh/helm/v3/pkg/lint/rules.k8sVersionMinor=$KMINOR" \
    helm.sh/helm/v3/cmd/helm
)
echo "chart-build-helm: built $OUT ($VERSION, default KubeVersion v$KMAJOR.$KMINOR) in $(( $(date +%s) - t0 ))s" >&2
