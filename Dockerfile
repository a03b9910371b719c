# rampart in a container: a multi-stage build (the toolchain this repository is tested with, then
# a small Debian runtime), running as a non-root user. io_uring and locked memory need settings
# Docker does not give by default: see deploy/README.md, and deploy/compose.yaml for a working set.
#
#   docker build --build-arg RAMPART_REVISION=$(git rev-parse --short=12 HEAD) -t rampart .
#   docker run --rm -p 8080:8080 --ulimit memlock=-1:-1 \
#     --security-opt seccomp=unconfined -v rampart-data:/var/lib/rampart/data rampart

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# No .git in the build context: the revision comes from the build argument.
ARG RAMPART_REVISION=unknown
ENV RAMPART_REVISION=${RAMPART_REVISION}
RUN cargo build --release --locked -p rampart \
 && install -m 0755 target/release/rampart /usr/local/bin/rampart

FROM debian:bookworm-slim
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/rampart --create-home rampart \
 && mkdir -p /var/lib/rampart/data && chown rampart:rampart /var/lib/rampart/data
COPY --from=build /usr/local/bin/rampart /usr/local/bin/rampart
USER rampart
WORKDIR /var/lib/rampart
# Listen on every interface inside the container; the data directory is a volume. Shard CPUs:
# a container's CPU set is honoured (--cpus auto picks from the allowed set).
ENV RAMPART_LISTEN=0.0.0.0:8080 \
    RAMPART_DATA_DIR=/var/lib/rampart/data \
    XDG_RUNTIME_DIR=/var/lib/rampart
VOLUME ["/var/lib/rampart/data"]
EXPOSE 8080
STOPSIGNAL SIGTERM
# /healthz answers 200 once ready (bash's /dev/tcp: the slim image has no curl).
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.0\\r\\n\\r\\n' >&3 && head -n1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["rampart"]
CMD ["serve"]
