#!/usr/bin/env bash
# Lint Troupe's /metrics with promtool (Prometheus' naming and exposition rules).
#
# Starts ${TROUPE_BIN:-build/troupe} standalone on examples/cluster.yaml on a free loopback port,
# with two queues defined (so the per-queue series exist; the example pods join the implicit
# default queue, which admits them as without queues), sends the example extender requests
# (scripts/demo.py) so that every labelled series exists, fetches /metrics and runs
# `promtool check metrics`. Exit 0 only when promtool finds nothing.
#
# promtool: $PROMTOOL, else promtool on PATH, else Debian's prometheus package unpacked (not
# installed: no service, no user) into build/tools/prometheus-root by `apt-get download` +
# `dpkg -x`. `scripts/check-metrics.sh --install-only` just does that and prints the bin dir.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
TOOLS=$ROOT/build/tools
PROM_ROOT=$TOOLS/prometheus-root

ensure_prometheus() {
  if [[ -x $PROM_ROOT/usr/bin/promtool && -x $PROM_ROOT/usr/bin/prometheus ]]; then return; fi
  mkdir -p "$TOOLS/deb"
  (cd "$TOOLS/deb" && rm -f prometheus_*.deb && apt-get download prometheus >/dev/null 2>&1) \
    || { echo "check-metrics: 'apt-get download prometheus' failed (run apt-get update?)" >&2; exit 2; }
  rm -rf "$PROM_ROOT" && dpkg -x "$TOOLS"/deb/prometheus_*.deb "$PROM_ROOT"
}

if [[ ${1:-} == --install-only ]]; then ensure_prometheus; echo "$PROM_ROOT/usr/bin"; exit 0; fi

PROMTOOL=${PROMTOOL:-$(command -v promtool || true)}
if [[ -z $PROMTOOL ]]; then ensure_prometheus; PROMTOOL=$PROM_ROOT/usr/bin/promtool; fi

TROUPE_BIN=${TROUPE_BIN:-build/troupe}
[[ -x $TROUPE_BIN ]] || { echo "check-metrics: $TROUPE_BIN missing (build it first)" >&2; exit 2; }

WORK=$(mktemp -d)
PID=
cleanup() {
  if [[ -n $PID ]]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
URL=http://127.0.0.1:$PORT
cat >"$WORK/config.yaml" <<'YAML'
queues:
  definitions:
    - {name: research, weight: 2, guaranteed: {gpus: 8}, limit: {gpus: 32}}
    - {name: research-nlp, parent: research}
YAML
"$TROUPE_BIN" serve --listen "127.0.0.1:$PORT" --cluster examples/cluster.yaml --config "$WORK/config.yaml" \
  --log-level warn >"$WORK/troupe.log" 2>&1 &
PID=$!
for _ in $(seq 100); do
  curl -sf "$URL/healthz" >/dev/null 2>&1 && break
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/troupe.log" >&2; echo "check-metrics: troupe exited" >&2; exit 1; }
  sleep 0.1
done
python3 scripts/demo.py "$URL" >"$WORK/demo.log" 2>&1 || { cat "$WORK/demo.log" >&2; echo "check-metrics: demo.py failed" >&2; exit 1; }
curl -sf "$URL/metrics" >"$WORK/metrics.txt"

grep -q '^troupe_queue_limit_gpus{queue="research"} 32' "$WORK/metrics.txt" \
  || { echo "check-metrics: no troupe_queue_limit_gpus for the queue research" >&2; exit 1; }
series=$(grep -c '^troupe_' "$WORK/metrics.txt" || true)
families=$(grep -c '^# TYPE troupe_' "$WORK/metrics.txt" || true)
rc=0
"$PROMTOOL" check metrics <"$WORK/metrics.txt" >"$WORK/promtool.out" 2>&1 || rc=$?
if [[ $rc -ne 0 ]]; then
  echo "check-metrics: promtool check metrics failed (exit $rc) on $families troupe_ families:" >&2
  cat "$WORK/promtool.out" >&2
  exit 1
fi
# Every family needs HELP text (promtool only warns about it on some versions).
missing=$(awk '/^# TYPE troupe_/{t[$3]=1} /^# HELP troupe_/{ if (NF>3) h[$3]=1 } END{for (n in t) if (!(n in h)) print n}' "$WORK/metrics.txt")
if [[ -n $missing ]]; then echo "check-metrics: no HELP text: $missing" >&2; exit 1; fi
echo "check-metrics: ok: promtool check metrics clean on $families troupe_ families, $series series ($("$PROMTOOL" --version 2>&1 | head -1 | awk '{print $3}'))"
