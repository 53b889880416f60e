#!/usr/bin/env bash
# Build the Troupe image from the Dockerfile with podman, then check it:
#   1. `troupe version` runs, as UID and GID 65532 (the image's user; the chart runs it so);
#   2. every shared library of /usr/local/bin/troupe resolves inside the image (ldd);
#   3. the default command (ENTRYPOINT + CMD) serves /healthz and /readyz on the metrics port
#      (8889) and the verbs on 127.0.0.1:8888, in a network namespace of its own (--network
#      none; curl from the host enters it with nsenter).
# The base is Debian bookworm minbase made by debootstrap and imported (no image registry is
# reachable here); its tarball is kept in build/image/, so later builds only import it.
#
# Usage: scripts/image-build.sh [--prebuilt] [--tag IMAGE] [--no-check | --check-only]
#   (default)   the Dockerfile's runtime target: its builder stage installs the build packages
#               (scripts/install-deps.sh) and compiles Troupe (scripts/build.sh, Release), as CI's
#               scripts apart from the flags; ~20 min cold on 2 cores (docs/image.md)
#   --prebuilt  the prebuilt target: the same runtime stage with build/troupe (TROUPE_BIN), the
#               binary this machine built and tested, stripped (CI; ~1.5 min cold)
#   --tag       image name (default localhost/troupe:dev)
#   --no-check  skip the checks
#   --check-only  only check IMAGE (built before, by this script or docker build)
# Env: TROUPE_BIN (default build/troupe), PODMAN_RUNC (default /usr/sbin/runc).
set -euo pipefail
# shellcheck source=scripts/lib-podman.sh
. "$(dirname "$0")/lib-podman.sh"
PODMAN_LOG_TAG=image-build
cd "$PODMAN_ROOT"

target=runtime
tag=localhost/troupe:dev
check=1
build=1
while (($#)); do
  case "$1" in
    --prebuilt) target=prebuilt ;;
    --tag) tag="${2:?--tag needs an image name}"; shift ;;
    --no-check) check=0 ;;
    --check-only) build=0 ;;
    -h | --help) sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) podman_die "unknown argument '$1' (--prebuilt, --tag IMAGE, --no-check, --check-only)" ;;
  esac
  shift
done

podman_require
if [ "$build" = 1 ]; then
  podman_base_image
  labels=()   # build args of the prebuilt target
  if [ "$target" = prebuilt ]; then
    bin="${TROUPE_BIN:-build/troupe}"
    [ -x "$bin" ] || podman_die "no Troupe binary at $bin: build it first (scripts/build.sh build) or set TROUPE_BIN"
    mkdir -p build/image   # where the Dockerfile's prebuilt target copies it from
    strip -o build/image/troupe "$bin"
    # Which binary it packages: scripts/chart-pod.sh rebuilds the image when build/troupe changed.
    labels=(--build-arg "TROUPE_BINARY_SHA256=$(sha256sum "$bin" | cut -c1-64)")
    podman_log "staged $bin, stripped: $(du -h build/image/troupe | cut -f1)"
  fi

  podman_log "podman build --target $target -t $tag (log: $PODMAN_IMAGE_DIR/build-$target.log)"
  t="$(date +%s)"
  mkdir -p "$PODMAN_IMAGE_DIR"
  # --network host: the apt steps reach Debian's mirror; --pull=never: the bases are local.
  if ! pm build "${podman_run_limits[@]}" --network host --pull=never \
       --build-arg BUILD_BASE="$PODMAN_BASE_IMAGE" --build-arg RUNTIME_BASE="$PODMAN_BASE_IMAGE" \
       --target "$target" "${labels[@]}" -t "$tag" -f Dockerfile . >"$PODMAN_IMAGE_DIR/build-$target.log" 2>&1; then
    tail -30 "$PODMAN_IMAGE_DIR/build-$target.log" >&2
    podman_die "podman build failed (log: $PODMAN_IMAGE_DIR/build-$target.log)"
  fi
  podman_log "built $tag in $(( $(date +%s) - t )) s: $(pm image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f MB", $1/1e6}')"
else
  pm image exists "$tag" || podman_die "podman has no image $tag to check"
fi

[ "$check" = 1 ] || exit 0

# 1. The version, as the image's own user.
out="$(pm run --rm "${podman_run_limits[@]}" --network none --entrypoint /bin/sh "$tag" \
  -c 'echo "uid=$(id -u) gid=$(id -g)"; exec /usr/local/bin/troupe version')" ||
  podman_die "troupe version fails in $tag: $out"
grep -q '^uid=65532 gid=65532$' <<<"$out" || podman_die "$tag runs as $(head -1 <<<"$out"), not uid=65532 gid=65532"
podman_log "check: $(tr '\n' ' ' <<<"$out")"

# 2. Every shared library resolves.
libs="$(pm run --rm "${podman_run_limits[@]}" --network none --entrypoint ldd "$tag" /usr/local/bin/troupe)" ||
  podman_die "ldd /usr/local/bin/troupe fails in $tag: $libs"
if grep -q 'not found' <<<"$libs"; then
  podman_die "$tag lacks shared libraries of troupe:"$'\n'"$(grep 'not found' <<<"$libs")"
fi
podman_log "check: ldd: $(grep -c '=>' <<<"$libs") shared libraries, all found"

# 3. The default command serves probes and verbs.
name="troupe-image-check-$$"
cleanup() { pm rm -f -t 2 "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT
pm run -d --name "$name" "${podman_run_limits[@]}" --network none "$tag" >/dev/null ||
  podman_die "podman run $tag (its default command) failed"
pid="$(pm inspect --format '{{.State.Pid}}' "$name")"
in_pod() { nsenter -t "$pid" -n curl -fsS --max-time 2 "$@"; }
for _ in $(seq 50); do in_pod http://127.0.0.1:8889/healthz >/dev/null 2>&1 && break; sleep 0.2; done
for url in http://127.0.0.1:8889/healthz http://127.0.0.1:8889/readyz http://127.0.0.1:8888/healthz; do
  in_pod "$url" >/dev/null 2>&1 || { pm logs "$name" 2>&1 | tail -20 >&2; podman_die "the default command does not answer $url"; }
done
# The verbs are on 127.0.0.1 only (CMD); the metrics port answers them 404.
code="$(nsenter -t "$pid" -n curl -s -o /dev/null -w '%{http_code}' -X POST -d '{}' http://127.0.0.1:8889/filter)"
[ "$code" = 404 ] || podman_die "the metrics port answers /filter with $code, not 404"
user="$(awk '/^Uid:/{print $2}' "/proc/$pid/status")"
[ "$user" = 65532 ] || podman_die "the default command runs as uid $user, not 65532"
podman_log "check: the default command serves /healthz, /readyz (8889) and the verbs (127.0.0.1:8888) as uid $user"
podman_log "ok: $tag"
