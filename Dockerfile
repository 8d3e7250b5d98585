# The control-plane server. Built by docker-compose.yml; needs a registry for the base images.
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p sandbox-agents-server

FROM debian:bookworm-slim
# git and the OpenSSH client: deploy keys are used from the control plane (git ls-remote, clones).
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates git openssh-client \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /var/lib/sandbox-agents sandbox-agents
COPY --from=build /src/target/release/sandbox-agents /usr/local/bin/sandbox-agents
USER sandbox-agents
ENV SANDBOX_AGENTS_BIND=0.0.0.0:8000 SANDBOX_AGENTS_DATA_DIR=/var/lib/sandbox-agents
# The API and UI, and the port previews' own origin.
EXPOSE 8000 8001
ENTRYPOINT ["sandbox-agents"]
CMD ["serve"]
