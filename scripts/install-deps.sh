#!/usr/bin/env bash
# Installs the Debian packages Troupe builds and tests with, only those missing.
# Usage: scripts/install-deps.sh [--test | --image]
#   --test   adds what the test suite needs
#   --image  only what scripts/image-build.sh and the chart's pod (TROUPE_DEPLOY=chart) need:
#            podman with runc, debootstrap for the base image, strip
set -euo pipefail

packages=(build-essential cmake ninja-build pkg-config python3
          libcpprest-dev nlohmann-json3-dev libyaml-cpp-dev prometheus-cpp-dev libssl-dev
          libboost-dev catch2 curl)
if [[ "${1:-}" == "--test" ]]; then
  # clang + libFuzzer + the sanitizer runtimes: the fuzz targets (scripts/fuzz.sh).
  packages+=(python3-pytest python3-yaml clang-format clang libfuzzer-14-dev libclang-rt-14-dev)
elif [[ "${1:-}" == "--image" ]]; then
  packages=(podman runc debootstrap binutils curl util-linux)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]} == 0)); then
  exit 0
fi
echo "installing: ${missing[*]}" >&2
SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
