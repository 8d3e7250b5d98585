# The control-plane server. Built by docker-compose.yml; needs a registry for the base images
# (deploy/server/Dockerfile.offline builds one without).
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p sandbox-agents-server \
    && CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
       cargo build --release --locked -p sandbox-agents-sandboxd --bin sandboxd \
       --target x86_64-unknown-linux-gnu

FROM debian:bookworm-slim
# git and the OpenSSH client: deploy keys are used from the control plane (git ls-remote, clones).
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates git openssh-client \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /var/lib/sandbox-agents sandbox-agents
COPY --from=build /src/target/release/sandbox-agents /usr/local/bin/sandbox-agents
# The in-sandbox daemon (static), beside the server where it looks for it; the server copies it
# into a volume every sandbox mounts read-only.
COPY --from=build /src/target/x86_64-unknown-linux-gnu/release/sandboxd /usr/local/bin/sandboxd
USER sandbox-agents
WORKDIR /var/lib/sandbox-agents
ENV SANDBOX_AGENTS_BIND=0.0.0.0:8000 SANDBOX_AGENTS_DATA_DIR=/var/lib/sandbox-agents
# The API and UI, and the port previews' own origin.
EXPOSE 8000 8001
ENTRYPOINT ["sandbox-agents"]
CMD ["serve"]
