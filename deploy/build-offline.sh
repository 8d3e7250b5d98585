#!/usr/bin/env bash
# Builds the images deploy/compose.offline.yml runs, without an image registry:
#   sandbox-agents-sandbox:N        the sandbox image (images/sandbox/build-offline.sh, when missing;
#                                   it also makes the base below)
#   sandbox-agents-postgres:offline PostgreSQL from Debian's packages (deploy/postgres)
#   sandbox-agents-server:offline   the server from binaries built on this host (deploy/server)
# all on sandbox-agents-base:bookworm, the debootstrap root file system build-offline.sh imports.
# Usage:
#   deploy/build-offline.sh [--server-bin PATH] [--sandboxd-bin PATH]
# --server-bin defaults to target/release/sandbox-agents, --sandboxd-bin to the static build
# scripts/build-sandboxd --release makes. Build them on Debian bookworm (or older): the server is
# linked against the host's glibc. Needs root when the sandbox image is missing (debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/lib.sh
root=$PWD

die() { printf 'deploy/build-offline.sh: error: %s\n' "$*" >&2; exit 1; }

server_bin=$root/target/release/sandbox-agents
sandboxd_bin=$root/target/x86_64-unknown-linux-gnu/release/sandboxd
while [ "$#" -gt 0 ]; do
  case "$1" in
    --server-bin) server_bin=${2:?--server-bin needs a path}; shift 2 ;;
    --sandboxd-bin) sandboxd_bin=${2:?--sandboxd-bin needs a path}; shift 2 ;;
    -h | --help) sed -n '2,12s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (see --help)" ;;
  esac
done
[ -x "$server_bin" ] || die "no server binary at $server_bin: cargo build --release -p sandbox-agents-server (or --server-bin)"
[ -x "$sandboxd_bin" ] || die "no sandboxd at $sandboxd_bin: scripts/build-sandboxd --release (or --sandboxd-bin)"
file_out=$(file -b "$sandboxd_bin" 2>/dev/null || true)
case "$file_out" in
  *dynamically\ linked*) die "$sandboxd_bin is dynamically linked: sandboxes need the static build (scripts/build-sandboxd)" ;;
esac

ensure_docker
ensure_sandbox_image # images/sandbox/build-offline.sh when the sandbox image is missing
docker image inspect sandbox-agents-base:bookworm >/dev/null 2>&1 ||
  die "no sandbox-agents-base:bookworm: run images/sandbox/build-offline.sh (it imports it)"

# build TAG CONTEXT DOCKERFILE: a classic build (no BuildKit, which would look for the base
# image in a registry), then the image the tag pointed at before is removed if nothing uses it.
build() {
  local tag=$1 context=$2 dockerfile=$3 old new out
  old=$(docker image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
  log "building $tag"
  if ! out=$(DOCKER_BUILDKIT=0 docker build -t "$tag" -f "$context/$dockerfile" "$context" 2>&1); then
    printf '%s\n' "$out" | tail -n 30 >&2
    die "docker build of $tag failed"
  fi
  new=$(docker image inspect --format '{{.Id}}' "$tag")
  if [ -n "$old" ] && [ "$old" != "$new" ]; then
    docker rmi "$old" >/dev/null 2>&1 || true
  fi
}

build sandbox-agents-postgres:offline "$root/deploy/postgres" Dockerfile

context=$(mktemp -d /tmp/sa-server-image.XXXXXX)
trap 'rm -rf "$context"' EXIT
cp "$root/deploy/server/Dockerfile.offline" "$root/deploy/server/.dockerignore" "$context/"
# Hard links when the temporary directory is on the same file system (a debug build is large).
cp -l "$server_bin" "$context/sandbox-agents" 2>/dev/null || cp "$server_bin" "$context/sandbox-agents"
cp -l "$sandboxd_bin" "$context/sandboxd" 2>/dev/null || cp "$sandboxd_bin" "$context/sandboxd"
build sandbox-agents-server:offline "$context" Dockerfile.offline
log "built sandbox-agents-postgres:offline, sandbox-agents-server:offline ($(sandbox_image_ref) for the sandboxes)"
