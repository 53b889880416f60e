# shellcheck shell=bash
# Podman on this project's machines, for scripts/image-build.sh and scripts/chart-pod.sh. Source it.
#
# Debian's podman runs here with runc: crun, its default, fails on the hybrid (v1 + v2) cgroups
# of the CI kernel. Ulimits must stay below the machine's hard limits (podman's defaults ask for
# more and are refused). No image registry is reachable: base images are made locally
# (podman_base_image: debootstrap, then podman import).

PODMAN_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PODMAN_RUNC="${PODMAN_RUNC:-/usr/sbin/runc}"
PODMAN_IMAGE_DIR="${PODMAN_IMAGE_DIR:-$PODMAN_ROOT/build/image}"
# The local Debian base, made by debootstrap (both Dockerfile stages start from it).
PODMAN_BASE_IMAGE="${PODMAN_BASE_IMAGE:-localhost/debian:bookworm-minbase}"
PODMAN_BASE_TAR="$PODMAN_IMAGE_DIR/debian-bookworm-minbase.tar"
PODMAN_DEBIAN_MIRROR="${PODMAN_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

_pod_t0="$(date +%s.%N)"
podman_elapsed() { awk -v a="$_pod_t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }
podman_log() { echo "[${PODMAN_LOG_TAG:-podman} +$(podman_elapsed)s] $*"; }
podman_die() { echo "[${PODMAN_LOG_TAG:-podman} +$(podman_elapsed)s] ERROR: $*" >&2; exit 1; }

# pm ARGS...: podman with runc. Ulimits go on `run` and `build` (podman_run_limits).
pm() { podman --runtime "$PODMAN_RUNC" "$@"; }
podman_run_limits=(--ulimit nofile=1024:1024 --ulimit nproc=4096:4096)

# podman_require: podman, runc and debootstrap, installed with apt when missing
# (scripts/install-deps.sh --image).
podman_require() {
  if ! command -v podman >/dev/null || [ ! -x "$PODMAN_RUNC" ] || ! command -v debootstrap >/dev/null; then
    "$PODMAN_ROOT/scripts/install-deps.sh" --image
  fi
  command -v podman >/dev/null || podman_die "podman not found (apt-get install podman)"
  [ -x "$PODMAN_RUNC" ] || podman_die "$PODMAN_RUNC not found (apt-get install runc)"
}

# podman_base_image: make $PODMAN_BASE_IMAGE unless podman has it: Debian bookworm minbase by
# debootstrap (about a minute), with the security and updates suites that Debian's own images
# list, kept as $PODMAN_BASE_TAR so a second machine state only imports it.
podman_base_image() {
  if pm image exists "$PODMAN_BASE_IMAGE"; then return 0; fi
  mkdir -p "$PODMAN_IMAGE_DIR"
  if [ ! -s "$PODMAN_BASE_TAR" ]; then
    command -v debootstrap >/dev/null || podman_die "debootstrap not found (apt-get install debootstrap)"
    local root t
    t="$(date +%s)"
    root="$(mktemp -d "$PODMAN_IMAGE_DIR/rootfs.XXXXXX")"
    podman_log "debootstrap --variant=minbase bookworm ($PODMAN_DEBIAN_MIRROR) into $root"
    # A second try from scratch: a mirror's hiccup should not fail CI.
    if ! debootstrap --variant=minbase bookworm "$root" "$PODMAN_DEBIAN_MIRROR" >"$PODMAN_IMAGE_DIR/debootstrap.log" 2>&1; then
      podman_log "debootstrap failed ($(tail -1 "$PODMAN_IMAGE_DIR/debootstrap.log")); trying once more"
      rm -rf "$root" && mkdir -p "$root"
      debootstrap --variant=minbase bookworm "$root" "$PODMAN_DEBIAN_MIRROR" >"$PODMAN_IMAGE_DIR/debootstrap.log" 2>&1 ||
        { tail -20 "$PODMAN_IMAGE_DIR/debootstrap.log" >&2; rm -rf "$root"; podman_die "debootstrap failed (log: $PODMAN_IMAGE_DIR/debootstrap.log)"; }
    fi
    rm -f "$root/etc/apt/sources.list" "$root/etc/resolv.conf" "$root/etc/hostname"
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    # As Debian's slim images: no manuals, docs (but copyrights) or translations, now or later.
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/locale/*
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
      'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' 'path-exclude /usr/share/locale/*' \
      >"$root/etc/dpkg/dpkg.cfg.d/slim"
    cat >"$root/etc/apt/sources.list.d/debian.sources" <<SRC
Types: deb
URIs: $PODMAN_DEBIAN_MIRROR
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${PODMAN_DEBIAN_MIRROR%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    tar -C "$root" --numeric-owner -cf "$PODMAN_BASE_TAR.tmp" . && mv "$PODMAN_BASE_TAR.tmp" "$PODMAN_BASE_TAR"
    rm -rf "$root"
    podman_log "base rootfs: $(du -h "$PODMAN_BASE_TAR" | cut -f1) in $(( $(date +%s) - t )) s ($PODMAN_BASE_TAR)"
  fi
  pm import --quiet --change 'CMD ["/bin/bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$PODMAN_BASE_TAR" "$PODMAN_BASE_IMAGE" >/dev/null || podman_die "podman import $PODMAN_BASE_TAR failed"
  podman_log "imported $PODMAN_BASE_IMAGE"
}
