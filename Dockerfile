# Troupe: the kube-scheduler extender image.
# Build: docker build -t troupe:dev .
# The builder runs the same scripts CI runs (scripts/install-deps.sh, scripts/build.sh), so a
# green CI means these steps work.

FROM debian:bookworm AS build
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
COPY . .
RUN scripts/build.sh build -DCMAKE_BUILD_TYPE=Release -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCH=OFF \
 && strip build/troupe \
 && build/troupe version

FROM debian:bookworm-slim
LABEL org.opencontainers.image.title="troupe" \
      org.opencontainers.image.description="GPU topology and gang scheduling extender for the stock kube-scheduler" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.source="https://troupe.dev"
# Only the shared libraries troupe links: cpprestsdk (with its Boost and OpenSSL), yaml-cpp,
# prometheus-cpp core.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcpprest2.10 libyaml-cpp0.7 libprometheus-cpp-core1.0 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 65532 --no-create-home --shell /usr/sbin/nologin troupe
COPY --from=build /src/build/troupe /usr/local/bin/troupe
USER 65532:65532
# glibc's heap: two arenas, not one per thread, so memory freed after large requests is reused
# instead of kept per thread (docs/security.md: Limits).
ENV MALLOC_ARENA_MAX=2
EXPOSE 8888 8889
ENTRYPOINT ["/usr/local/bin/troupe", "serve"]
# The verbs only on loopback (kube-scheduler runs in the same pod; nothing else may call them,
# unless HTTPS with client certificates is on: README "TLS"); probes and metrics on all addresses.
CMD ["--listen", "127.0.0.1:8888", "--metrics-listen", "0.0.0.0:8889"]
