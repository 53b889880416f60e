#!/usr/bin/env bash
# Fails when a C++ file differs from clang-format's output (.clang-format); the fix is
# scripts/update-format.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "clang-format not installed: run scripts/install-deps.sh --test" >&2
  exit 1
fi
bad=0
while IFS= read -r f; do
  if ! clang-format --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f" >&2
    bad=1
  fi
done < <(git ls-files '*.cc' '*.h' 2>/dev/null || find src include tests bench -name '*.cc' -o -name '*.h')
if ((bad)); then
  echo "run scripts/update-format.sh to fix" >&2
  exit 1
fi
echo "format ok"
