#!/usr/bin/env bash
# Build the e2e control-plane binaries (kube-apiserver, kube-scheduler,
# kube-controller-manager, etcd, kubectl) from a wrapper module in a single `go build`, into
# build/k8s/<version>/bin/. Does nothing if every binary is newer than the
# wrapper module's inputs (go.mod, go.sum, cmd/*/main.go). FORCE=1 rebuilds.
#
# Env: K8S_VERSION=v1.NN.P  the version to build (default: the one tools/k8s/go.mod
#                           requires). Other versions need tools/k8s/versions/<V>/
#                           (tools/k8s/gen-gomod.sh <V>); each keeps its binaries
#                           in its own build/k8s/<V>/, so switching is free once built.
#      FORCE=1   rebuild even if up to date
#      GO=go     Go toolchain to use (needs >= the go line of the module's go.mod)
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
GO="${GO:-go}"
# shellcheck source=scripts/lib-k8s-version.sh
. "$root/scripts/lib-k8s-version.sh"
V="$(k8s_version "$root")" || exit 1
mod="$(k8s_module_dir "$root" "$V")" || exit 1
MINOR="$(echo "$V" | cut -d. -f2)"
bin="$root/build/k8s/$V/bin"
bins="kube-apiserver kube-scheduler kube-controller-manager etcd kubectl"

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f", b-a}'; }

up_to_date() {
  [ "${FORCE:-0}" = 1 ] && return 1
  local b i
  for b in $bins; do
    [ -x "$bin/$b" ] || return 1
    for i in "$mod/go.mod" "$mod/go.sum" "$root"/tools/k8s/cmd/*/main.go; do
      [ "$bin/$b" -nt "$i" ] || return 1
    done
  done
}

if up_to_date; then
  echo "build-k8s: $bin is up to date ($V); FORCE=1 to rebuild"
  exit 0
fi

need_go="$(awk '$1=="go"{print $2; exit}' "$mod/go.mod")"
command -v "$GO" >/dev/null || { echo "build-k8s: '$GO' not found (need Go >= $need_go)" >&2; exit 1; }
have_go="$("$GO" env GOVERSION | sed 's/^go//')"
if [ "$("$GO" env GOTOOLCHAIN)" = local ] && [ "$(printf '%s\n%s\n' "$need_go" "$have_go" | sort -V | head -n1)" != "$need_go" ]; then
  echo "build-k8s: Kubernetes $V needs Go >= $need_go, this is $have_go with GOTOOLCHAIN=local:" \
    "set GOTOOLCHAIN=go<newer> (e.g. go1.27.3 for 1.38; the Go proxy serves it) or GO=" >&2
  exit 1
fi
echo "build-k8s: $($GO version); building $V into $bin"
echo "build-k8s: GOMODCACHE=$($GO env GOMODCACHE) GOCACHE=$($GO env GOCACHE)"
mkdir -p "$bin"

t0="$(now)"
t="$(now)"
(cd "$mod" && "$GO" mod download)
echo "build-k8s: module download: $(since "$t") s"

ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $p.gitVersion=$V -X $p.gitMajor=1 -X $p.gitMinor=$MINOR -X $p.gitTreeState=clean"
done

t="$(now)"
pkgs=""
for b in $bins; do pkgs+=" ./cmd/$b"; done
if [ "$mod" != "$root/tools/k8s" ]; then
  # A per-version module has only go.mod/go.sum: build it in build/k8s/<V>/mod
  # beside a copy of the shared mains (go does not follow a symlinked cmd/).
  src="$root/build/k8s/$V/mod"
  rm -rf "$src" && mkdir -p "$src"
  cp "$mod/go.mod" "$mod/go.sum" "$src/" && cp -r "$root/tools/k8s/cmd" "$src/cmd"
  mod="$src"
fi
# One invocation so the packages shared by the five binaries compile once.
# shellcheck disable=SC2086
(cd "$mod" && CGO_ENABLED=0 "$GO" build -mod=readonly -trimpath -pgo=off \
    -ldflags "$ldflags" -o "$bin/" $pkgs)
for b in $bins; do touch "$bin/$b"; done   # go build may keep an old mtime if output is unchanged
echo "build-k8s: go build: $(since "$t") s"

# (no `| head` here: SIGPIPE would fail the script under pipefail)
echo "build-k8s: $("$bin/kube-apiserver" --version); $("$bin/etcd" --version | sed -n 1p);" \
  "kubectl $("$bin/kubectl" version --client -o json | sed -n 's/.*"gitVersion": "\(.*\)",/\1/p' | sed -n 1p)"
ls -l "$bin"
echo "build-k8s: total: $(since "$t0") s"
