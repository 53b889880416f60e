# Troupe: the kube-scheduler extender image.
# Build: scripts/image-build.sh (podman, from a debootstrapped Debian base: docs/image.md), or
#        docker build -t troupe:dev .
# The builder runs the same scripts CI runs (scripts/install-deps.sh, scripts/build.sh), so a
# green CI means these steps work.
#
# Targets: runtime (the default, last): Troupe compiled in the builder stage. prebuilt: the same
# runtime image with a binary built on a Debian bookworm host (build/image/troupe, which
# scripts/image-build.sh --prebuilt stages), so CI packages the binary it has just tested.

# The bases: Docker Hub's Debian images by default; scripts/image-build.sh passes a local one.
ARG BUILD_BASE=debian:bookworm
ARG RUNTIME_BASE=debian:bookworm-slim

FROM ${BUILD_BASE} AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
# CI's build (its build type, RelWithDebInfo, and -Werror) of the troupe target alone, stripped:
# the binary CI tests. (A Release build is not what CI compiles: GCC 12 at -O3 warns, and
# -Werror stops, in code CI builds cleanly at -O2.)
RUN rm -rf build \
 && TROUPE_BUILD_TARGETS=troupe scripts/build.sh build -DTROUPE_WERROR=ON -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCH=OFF \
 && strip build/troupe \
 && build/troupe version

FROM ${RUNTIME_BASE} AS runtime-base
LABEL org.opencontainers.image.title="troupe" \
      org.opencontainers.image.description="GPU topology and gang scheduling extender for the stock kube-scheduler" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://troupe.dev"
# Only the shared libraries troupe links: cpprestsdk (with its Boost, OpenSSL and Brotli),
# yaml-cpp, prometheus-cpp core (scripts/image-build.sh checks each resolves). The user and its
# group are both 65532, the IDs the chart's securityContext runs as.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcpprest2.10 libyaml-cpp0.7 libprometheus-cpp-core1.0 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb \
 && groupadd --system --gid 65532 troupe \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin troupe
USER 65532:65532
# glibc's heap: two arenas, not one per thread, so memory freed after large requests is reused
# instead of kept per thread (docs/security.md: Limits).
ENV MALLOC_ARENA_MAX=2
EXPOSE 8888 8889
ENTRYPOINT ["/usr/local/bin/troupe", "serve"]
# The verbs only on loopback (kube-scheduler runs in the same pod; nothing else may call them,
# unless HTTPS with client certificates is on: README "TLS"); probes and metrics on all addresses.
CMD ["--listen", "127.0.0.1:8888", "--metrics-listen", "0.0.0.0:8889"]

FROM runtime-base AS prebuilt
# Which host build it packages (scripts/image-build.sh --prebuilt passes the binary's sha256).
ARG TROUPE_BINARY_SHA256=""
LABEL troupe.binary-sha256="${TROUPE_BINARY_SHA256}"
COPY build/image/troupe /usr/local/bin/troupe

FROM runtime-base AS runtime
COPY --from=build /src/build/troupe /usr/local/bin/troupe
