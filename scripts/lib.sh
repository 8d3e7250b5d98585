# Shared by the scripts: install what is missing, quietly, as root on Debian.
# shellcheck shell=bash

log() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    as_root apt-get update -qq >/dev/null
    apt_updated=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    -o Dpkg::Options::=--force-confold "$@" >/dev/null
}

# PostgreSQL server binaries (initdb, pg_ctl, postgres), without the Debian "main" cluster:
# the server runs its own private cluster.
ensure_postgres_binaries() {
  if command -v initdb >/dev/null 2>&1 || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
    return
  fi
  log "installing the PostgreSQL server binaries"
  as_root mkdir -p /etc/postgresql-common
  [ -f /etc/postgresql-common/createcluster.conf ] ||
    echo 'create_main_cluster = false' | as_root tee /etc/postgresql-common/createcluster.conf >/dev/null
  apt_install postgresql
}

ensure_rust() {
  command -v cargo >/dev/null 2>&1 && return
  echo "cargo is not installed: install Rust with rustup (https://rustup.rs) and run this again." >&2
  exit 1
}
