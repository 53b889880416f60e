# shellcheck shell=bash
# Which Kubernetes the local control plane runs (sourced by build-k8s.sh and lib-e2e.sh).
#
# K8S_VERSION=v1.NN.P picks it; unset, it is the version tools/k8s/go.mod requires
# (the default). The default's wrapper module is tools/k8s itself; any other
# version's is tools/k8s/versions/<V>/ (tools/k8s/gen-gomod.sh <V>).

# The default version: the k8s.io/kubernetes require of tools/k8s/go.mod.
k8s_default_version() {
  awk '$1=="k8s.io/kubernetes" && $2 ~ /^v1\./ {print $2; exit}' "$1/tools/k8s/go.mod"
}

# k8s_version ROOT: $K8S_VERSION, or the default.
k8s_version() {
  local v="${K8S_VERSION:-}"
  [ -n "$v" ] || v="$(k8s_default_version "$1")"
  [ -n "$v" ] || { echo "k8s: no k8s.io/kubernetes requirement in $1/tools/k8s/go.mod" >&2; return 1; }
  case "$v" in
    v1.*) ;;
    1.*) v="v$v" ;;
    *) echo "k8s: K8S_VERSION=$v is not a version like v1.37.2" >&2; return 1 ;;
  esac
  echo "$v"
}

# k8s_module_dir ROOT V: the wrapper module that builds V.
k8s_module_dir() {
  if [ "$2" = "$(k8s_default_version "$1")" ]; then
    echo "$1/tools/k8s"
  elif [ -f "$1/tools/k8s/versions/$2/go.mod" ]; then
    echo "$1/tools/k8s/versions/$2"
  else
    echo "k8s: no wrapper module for $2: run tools/k8s/gen-gomod.sh $2 (known:" \
      "$(k8s_default_version "$1") $(ls "$1/tools/k8s/versions" 2>/dev/null | tr '\n' ' '))" >&2
    return 1
  fi
}

# k8s_minor V: 37 for v1.37.2.
k8s_minor() { echo "$1" | cut -d. -f2; }
