#!/usr/bin/env bash
# Rewrites every tracked C++ file with clang-format (.clang-format).
set -euo pipefail
cd "$(dirname "$0")/.."
git ls-files '*.cc' '*.h' | xargs clang-format -i
