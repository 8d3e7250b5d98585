#!/bin/bash
# The offline PostgreSQL image's entrypoint. On the first start (no cluster in $PGDATA) it runs
# initdb with POSTGRES_USER as the superuser and POSTGRES_PASSWORD (or the contents of
# POSTGRES_PASSWORD_FILE) as its password, creates POSTGRES_DB in single-user mode (nothing
# listens until the cluster is ready), and lets clients in over TCP from any address with
# scram-sha-256 (the unix socket, inside the container only, trusts local users). Then it runs
# the command, `postgres` by default, listening on all addresses, as PID 1.
set -euo pipefail

die() { printf 'postgres-entrypoint: error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -ne 0 ] || die "run as the postgres user (USER postgres), not as root"

# Another command (a shell, pg_dump...) runs as it is; `postgres [options]` (or options alone)
# gets the cluster.
if [ "${1:-}" != "${1#-}" ]; then set -- postgres "$@"; fi
if [ "$#" -gt 0 ] && [ "$1" != postgres ]; then
  exec "$@"
fi
[ "$#" -eq 0 ] || shift

user=${POSTGRES_USER:-postgres}
db=${POSTGRES_DB:-$user}
if [ -n "${POSTGRES_PASSWORD_FILE:-}" ]; then
  password=$(cat "$POSTGRES_PASSWORD_FILE") || die "cannot read POSTGRES_PASSWORD_FILE=$POSTGRES_PASSWORD_FILE"
else
  password=${POSTGRES_PASSWORD:-}
fi

if [ ! -s "$PGDATA/PG_VERSION" ]; then
  [ -n "$password" ] || die "the first start needs POSTGRES_PASSWORD (or POSTGRES_PASSWORD_FILE): clients connect with scram-sha-256"
  echo "postgres-entrypoint: initialising the cluster in $PGDATA (superuser $user, database $db)" >&2
  pwfile=$(mktemp)
  trap 'rm -f "$pwfile"' EXIT
  printf '%s\n' "$password" >"$pwfile"
  initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pwfile" --encoding=UTF8 \
    --locale=C.UTF-8 --auth-local=trust --auth-host=scram-sha-256 >/dev/null
  rm -f "$pwfile"
  trap - EXIT
  # Clients come from other containers: any address, always with a password.
  echo 'host all all all scram-sha-256' >>"$PGDATA/pg_hba.conf"
  {
    echo "listen_addresses = '*'"
    echo "password_encryption = scram-sha-256"
  } >>"$PGDATA/postgresql.conf"
  if [ "$db" != postgres ]; then
    # Single-user mode reads one statement per line; the name is quoted as an identifier.
    out=$(printf 'CREATE DATABASE "%s" OWNER "%s"\n' "${db//\"/\"\"}" "${user//\"/\"\"}" |
      postgres --single -D "$PGDATA" postgres 2>&1) || { printf '%s\n' "$out" >&2; die "creating the database $db failed"; }
    case "$out" in *ERROR*) printf '%s\n' "$out" >&2; die "creating the database $db failed" ;; esac
  fi
  echo "postgres-entrypoint: cluster ready" >&2
fi

exec postgres -D "$PGDATA" "$@"
