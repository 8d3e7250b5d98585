# Shared by the scripts: install what is missing, quietly, as root on Debian.
# shellcheck shell=bash

# Each line carries the minutes and seconds since the outermost script started (exported, so
# scripts it runs count from the same moment), so a slow stage of a run (CI's) shows in its log.
SA_LOG_START=${SA_LOG_START:-$(date +%s)}
export SA_LOG_START
log() {
  local t=$(($(date +%s) - SA_LOG_START))
  printf '\033[1m==> [%d:%02d] %s\033[0m\n' $((t / 60)) $((t % 60)) "$*" >&2
}

# How much disk is left where the checkout is: the test command says it between stages, so a
# run that fills the disk shows where.
log_free_disk() { log "disk: $(df -h --output=avail "${lib_repo_root:-.}" | tail -n 1 | tr -d ' ') free"; }

# What the machine looked like when a stage failed: disk, memory, Docker's containers by
# state and the kernel's OOM kills. A CI log shows only its tail, so a stage that fails prints
# this last, where it is read.
machine_diagnostics() {
  echo "---- machine at the failure ($(date -u +%H:%M:%SZ)) ----"
  df -h "${lib_repo_root:-.}" /var/lib/docker 2>/dev/null || true
  free -m 2>/dev/null || true
  uptime 2>/dev/null || true
  if command -v docker >/dev/null 2>&1; then
    docker system df 2>&1 | head -n 8 || true
    echo "containers by state:"
    docker ps -a --format '{{.State}}' 2>/dev/null | sort | uniq -c || true
    echo "volumes: $(docker volume ls -q 2>/dev/null | wc -l)"
  fi
  dmesg 2>/dev/null | grep -iE 'out of memory|oom-kill|killed process|no space|blocked for more' | tail -n 10 || true
  docker_goroutines
  echo "---- end of machine report ----"
}

# Where dockerd's goroutines wait, when it is running: SIGUSR1 makes it write every
# goroutine's stack to a file (named in its log), summarised here by the daemon frames most of
# them sit in, so a wedged Engine shows which lock in the CI log.
docker_goroutines() {
  local pid before file deadline
  pid=$(cat /var/run/docker.pid 2>/dev/null || true)
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  before=$(ls /var/run/docker/goroutine-stacks-* 2>/dev/null | wc -l)
  as_root kill -USR1 "$pid" 2>/dev/null || return 0
  deadline=$((SECONDS + 10))
  until [ "$(ls /var/run/docker/goroutine-stacks-* 2>/dev/null | wc -l)" -gt "$before" ]; do
    [ "$SECONDS" -ge "$deadline" ] && { echo "dockerd wrote no goroutine dump within 10 s"; return 0; }
    sleep 0.5
  done
  file=$(ls -t /var/run/docker/goroutine-stacks-* | head -n 1)
  echo "dockerd goroutines: $(grep -c '^goroutine ' "$file") (dump: $file); the daemon frames most wait in:"
  grep -E '^github.com/docker/docker/(daemon|layer|volume|container)' "$file" | sed 's/(0x.*//' \
    | sort | uniq -c | sort -rn | head -n 15
}

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

# git and the OpenSSH client: the server tests deploy keys with `git ls-remote` over ssh. The
# OpenSSH server too: the integration tests run a private sshd for the end-to-end key test.
ensure_git_tools() {
  local missing=()
  command -v git >/dev/null 2>&1 || missing+=(git)
  command -v ssh >/dev/null 2>&1 && command -v ssh-keygen >/dev/null 2>&1 || missing+=(openssh-client)
  [ -x /usr/sbin/sshd ] || missing+=(openssh-server)
  [ "${#missing[@]}" -eq 0 ] && return 0
  log "installing ${missing[*]}"
  apt_install "${missing[@]}"
}

ensure_rust() {
  command -v cargo >/dev/null 2>&1 && return
  echo "cargo is not installed: install Rust with rustup (https://rustup.rs) and run this again." >&2
  exit 1
}

# cargo-nextest, from crates.io (built once into ~/.cargo/bin, outside the clone; about five
# minutes on 2 cores). The Rust tests need a process per test: under `cargo test` every test of
# a binary shares one process, and the pools of the servers earlier tests started stay open
# (with their connections) until that process ends, which exhausts the shared test cluster's
# connections a third of the way through the API tests.
ensure_nextest() {
  cargo nextest --version >/dev/null 2>&1 && return
  log "installing cargo-nextest (crates.io; a few minutes, once per machine)"
  # Without self-update (it could not reach get.nexte.st from here anyway): fewer crates to
  # build on a fresh machine, and the feature set nextest's docs recommend for CI builds. At
  # opt-level 1: a runner spends its time waiting on tests, and a fresh CI machine builds it
  # first, on the clock.
  CARGO_PROFILE_RELEASE_OPT_LEVEL=1 \
    cargo install cargo-nextest --locked --no-default-features --features default-no-update --quiet
}

# ---- Node, Chromium and the web UI -----------------------------------------------------------

# Node.js 20 or later with npm, for building and testing the web UI (web/).
ensure_node() {
  if ! command -v node >/dev/null 2>&1; then
    log "installing Node.js (nodejs)"
    apt_install nodejs
  fi
  if ! command -v npm >/dev/null 2>&1; then
    log "installing npm"
    apt_install npm
  fi
  local major
  major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
  if [ "$major" -lt 20 ]; then
    echo "error: the web UI needs Node.js 20 or later, and $(command -v node) is $(node --version 2>/dev/null);" >&2
    echo "install a newer one (https://nodejs.org/en/download, or NodeSource's packages) and run this again." >&2
    return 1
  fi
}

# Chromium, which the web UI's end-to-end tests drive (playwright-core does not download a
# browser here). CHROMIUM_BIN names another one.
ensure_chromium() {
  [ -x "${CHROMIUM_BIN:-/usr/bin/chromium}" ] && return 0
  log "installing Chromium"
  apt_install chromium
}

# The repository root's view of what the web UI is built from: its sources, public files,
# top-level files (index.html, package.json and its lock, every config) and the OpenAPI
# document its API types are generated from. A change to any of them means a new build.
web_sources_hash() {
  (
    cd "$lib_repo_root" &&
      { find web/src web/public -type f 2>/dev/null
        find web -maxdepth 1 -type f \( -name '*.html' -o -name '*.json' -o -name '*.ts' \
          -o -name '*.js' -o -name '*.mjs' -o -name '*.cjs' -o -name '.npmrc' \)
        echo openapi/openapi.json; } |
      LC_ALL=C sort | tr '\n' '\0' | xargs -0 sha256sum | sha256sum | cut -d' ' -f1
  )
}

# build_web_if_changed: web/dist up to date with the UI's sources. `npm ci` when node_modules is
# missing or package-lock.json changed since the last install, `npm run build` when the sources
# changed since the last build (or web/dist/index.html is gone); the hashes are stamped under
# target/web/. Does nothing, saying so, while there is no web/package.json. The server embeds
# web/dist when it is compiled in release mode, so call this before that build.
build_web_if_changed() {
  local web="$lib_repo_root/web" stamps="$lib_repo_root/target/web" lock_hash sources_hash
  if [ ! -f "$web/package.json" ]; then
    log "no web/package.json: not building the web UI (the server then serves a page saying how)"
    return 0
  fi
  ensure_node || return 1
  mkdir -p "$stamps"
  lock_hash=$(sha256sum "$web/package-lock.json" 2>/dev/null | cut -d' ' -f1)
  if [ ! -d "$web/node_modules" ] || [ "$lock_hash" != "$(cat "$stamps/npm-ci.sha256" 2>/dev/null)" ]; then
    log "installing the web UI's dependencies (npm ci)"
    (cd "$web" && npm ci --no-audit --no-fund --loglevel=error) || return 1
    echo "$lock_hash" >"$stamps/npm-ci.sha256"
  fi
  sources_hash=$(web_sources_hash)
  if [ -f "$web/dist/index.html" ] && [ "$sources_hash" = "$(cat "$stamps/build.sha256" 2>/dev/null)" ]; then
    log "the web UI is up to date (web/dist)"
    return 0
  fi
  log "building the web UI (npm run build, into web/dist)"
  rm -f "$stamps/build.sha256"
  (cd "$web" && npm run build) || return 1
  echo "$sources_hash" >"$stamps/build.sha256"
}

# ---- Docker Engine and the sandbox image --------------------------------------------------

# The repository root, fixed when this file is sourced (the functions below may run after a cd).
lib_repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# A running Docker Engine. There is no init system: dockerd is started in the background, in
# its own session (so it outlives the calling script and its process group), and left running.
# Copes with a daemon that is already running or still starting, and with a dead one that left
# its pid file (and socket) behind.
# Builds the in-sandbox daemon static (`-C target-feature=+crt-static`, which needs an explicit
# --target so that build scripts and proc macros stay dynamic) and prints its path. $1:
# --release, or nothing for the debug build.
build_sandboxd() {
  local profile=debug flags=()
  if [ "${1:-}" = "--release" ]; then profile=release; flags=(--release); fi
  log "building the sandbox daemon (static, $profile)"
  CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
    cargo build --locked "${flags[@]}" -p sandbox-agents-sandboxd --bin sandboxd \
    --target x86_64-unknown-linux-gnu >&2
  echo "$PWD/target/x86_64-unknown-linux-gnu/$profile/sandboxd"
}

ensure_docker() {
  docker info >/dev/null 2>&1 && return 0
  local log_file=/var/log/dockerd.log pid_file=/var/run/docker.pid pid started="" waiting=0 deadline
  local containerd_pid_file=/var/run/docker/containerd/containerd.pid
  if ! command -v dockerd >/dev/null 2>&1; then
    log "installing Docker Engine (docker.io)"
    apt_install docker.io
  fi
  deadline=$((SECONDS + 60))
  until docker info >/dev/null 2>&1; do
    pid=$(cat "$pid_file" 2>/dev/null || true)
    if ! process_alive dockerd "$pid" && ! process_alive dockerd "$started"; then
      if [ -n "$started" ]; then
        echo "dockerd exited while starting; the last lines of $log_file:" >&2
        tail -n 25 "$log_file" >&2 2>/dev/null || true
        return 1
      fi
      if [ -n "$pid" ]; then
        log "removing the stale $pid_file (pid $pid is not a running dockerd)"
        as_root rm -f "$pid_file"
      fi
      # dockerd reuses the containerd named in this file if kill(pid, 0) works, which it does
      # for a zombie: a killed daemon's containerd that nobody has reaped yet.
      pid=$(cat "$containerd_pid_file" 2>/dev/null || true)
      if [ -n "$pid" ] && ! process_alive containerd "$pid"; then
        as_root rm -f "$containerd_pid_file"
      fi
      log "starting dockerd (log: $log_file)"
      # Under sudo, the redirections must happen as root too. $! is dockerd itself: setsid
      # does not fork in a background job of a non-interactive shell.
      # Appended, never truncated: the log of a daemon that wedged in an earlier run (CI runs
      # on a machine later sessions inherit) is what explains it.
      as_root sh -c "echo '==== dockerd started $(date -u +%FT%TZ) ====' >>'$log_file'"
      started=$(as_root sh -c "setsid dockerd >>'$log_file' 2>&1 </dev/null & echo \$!")
    elif [ -z "$started" ] && [ "$waiting" -eq 0 ]; then
      log "dockerd (pid $pid) is running but does not answer yet: waiting for it"
      waiting=1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      echo "dockerd did not answer within 60 s; the last lines of $log_file:" >&2
      tail -n 25 "$log_file" >&2 2>/dev/null || true
      return 1
    fi
    sleep 0.2
  done
}

# process_alive NAME PID: whether PID is a live NAME (not a zombie waiting to be reaped, which
# happens here after a kill, nor another program that got the pid).
process_alive() {
  [ -n "${2:-}" ] && [ "$(cat "/proc/$2/comm" 2>/dev/null)" = "$1" ] || return 1
  case "$(sed 's/.*) //' "/proc/$2/stat" 2>/dev/null | cut -c1)" in
    "" | Z | X) return 1 ;;
  esac
}

# The version of the sandbox image, read from its label in images/sandbox/Dockerfile; the
# image's tag is this number (sandbox-agents-sandbox:N).
sandbox_image_ref() {
  local version
  version=$(sed -n 's/.*io\.sandbox-agents\.image-version="\{0,1\}\([0-9][0-9]*\)"\{0,1\}.*/\1/p' \
    "$lib_repo_root/images/sandbox/Dockerfile" | head -n 1)
  echo "sandbox-agents-sandbox:${version:?no io.sandbox-agents.image-version label in images/sandbox/Dockerfile}"
}

# The sandbox image (sandbox-agents-sandbox:1), built locally without a registry if missing.
ensure_sandbox_image() {
  local image
  image=$(sandbox_image_ref) || return 1
  ensure_docker || return 1
  docker image inspect "$image" >/dev/null 2>&1 && return 0
  command -v debootstrap >/dev/null 2>&1 || { log "installing debootstrap"; apt_install debootstrap; }
  log "building the sandbox image $image (no registry needed; a few minutes)"
  "$lib_repo_root/images/sandbox/build-offline.sh"
}

# An image holding only the sandbox daemon (FROM scratch, /sandboxd as its entrypoint),
# built locally from build_sandboxd's static binary if missing: what a Kubernetes init
# container runs (`install /opt/sa`) to copy the daemon into a volume the sandbox mounts.
# Tagged with the binary's digest, so a changed daemon is a new image. Arguments go to
# build_sandboxd (--release); prints the image's reference as its last line.
ensure_sandboxd_image() {
  local bin digest image context
  bin=$(build_sandboxd "$@") || return 1
  ensure_docker || return 1
  # The daemon where the server's image holds it too (the pod's init container runs that path).
  local recipe='FROM scratch
LABEL io.sandbox-agents.image="sandboxd"
COPY sandboxd /usr/local/bin/sandboxd
ENTRYPOINT ["/usr/local/bin/sandboxd"]'
  # Tagged by what it is built from: the binary and this recipe.
  digest=$( { sha256sum <"$bin"; printf '%s' "$recipe"; } | sha256sum | cut -c1-12)
  image="sandbox-agents-sandboxd:$digest"
  if ! docker image inspect "$image" >/dev/null 2>&1; then
    log "building the daemon's image $image"
    context=$(mktemp -d)
    cp "$bin" "$context/sandboxd"
    chmod 0755 "$context/sandboxd"
    printf '%s\n' "$recipe" >"$context/Dockerfile"
    if ! docker build --quiet --tag "$image" "$context" >&2; then
      rm -rf "$context"
      return 1
    fi
    rm -rf "$context"
  fi
  echo "$image"
}

# ---- The schema database the query macros check against -------------------------------------

# The path of a PostgreSQL program (initdb, pg_ctl, psql): on the PATH, or in the newest
# /usr/lib/postgresql/*/bin, where the Debian package puts the server's.
pg_program() {
  command -v "$1" 2>/dev/null || ls /usr/lib/postgresql/*/bin/"$1" | sort -V | tail -n 1
}

# Runs a PostgreSQL program as the owner of the schema cluster: PostgreSQL refuses to run as
# root, so as root that is the `postgres` user the Debian package creates.
schema_pg_as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

# start_schema_db: a throwaway PostgreSQL cluster (unix socket only, under /tmp so that the
# `postgres` user can reach it wherever the clone is) with a database `sqlx_schema` to which
# every migration under migrations/ has been applied, in order, each in one transaction, as
# `sqlx::migrate!` applies them. Sets SCHEMA_DATABASE_URL for the query macros
# (`DATABASE_URL=$SCHEMA_DATABASE_URL cargo build` checks every query against this schema).
# Stop it with stop_schema_db.
schema_pg_dir=""
start_schema_db() {
  local initdb pg_ctl psql f
  initdb=$(pg_program initdb)
  pg_ctl=$(pg_program pg_ctl)
  psql=$(pg_program psql)
  schema_pg_dir=$(mktemp -d /tmp/sa-sqlx-schema.XXXXXX)
  [ "$(id -u)" -eq 0 ] && chown postgres "$schema_pg_dir"
  schema_pg_as_owner "$initdb" -D "$schema_pg_dir/data" -U postgres -A trust --no-sync \
    >"$schema_pg_dir/initdb.log" 2>&1 || { cat "$schema_pg_dir/initdb.log" >&2; return 1; }
  schema_pg_as_owner "$pg_ctl" start -w -D "$schema_pg_dir/data" -l "$schema_pg_dir/server.log" \
    -o "-c listen_addresses='' -k $schema_pg_dir -c fsync=off" >/dev/null ||
    { cat "$schema_pg_dir/server.log" >&2; return 1; }
  "$psql" -h "$schema_pg_dir" -U postgres -d postgres -qAt -v ON_ERROR_STOP=1 \
    -c 'create database sqlx_schema' >/dev/null
  for f in "$lib_repo_root"/migrations/*.sql; do
    "$psql" -h "$schema_pg_dir" -U postgres -d sqlx_schema -q -v ON_ERROR_STOP=1 \
      --single-transaction -f "$f" >/dev/null ||
      { echo "error: migration $(basename "$f") does not apply to an empty database" >&2; return 1; }
  done
  SCHEMA_DATABASE_URL="postgres://postgres@localhost/sqlx_schema?host=$schema_pg_dir"
}

stop_schema_db() {
  [ -n "$schema_pg_dir" ] || return 0
  if [ -f "$schema_pg_dir/data/postmaster.pid" ]; then
    schema_pg_as_owner "$(pg_program pg_ctl)" stop -D "$schema_pg_dir/data" -m immediate -w \
      >/dev/null 2>&1 || true
  fi
  rm -rf "$schema_pg_dir"
  schema_pg_dir=""
}

# check_offline_data DIR: fails, naming the differences, unless DIR (the query data a build
# with SQLX_OFFLINE_DIR=DIR wrote, one file per query) equals the committed .sqlx/.
check_offline_data() {
  local fresh=$1
  if ! diff -r -q "$lib_repo_root/.sqlx" "$fresh" >/dev/null 2>&1; then
    echo "error: the committed offline query data (.sqlx/) does not match the queries and the" >&2
    echo "migrations; run scripts/sqlx-prepare and commit .sqlx/. The differences:" >&2
    diff -r -q "$lib_repo_root/.sqlx" "$fresh" | sed "s|$lib_repo_root/||; s|$fresh|<fresh>|" >&2 || true
    return 1
  fi
}

# Prints the path of a Python 3.12 or later (sqlsaber-sandbox needs it): pyenv's 3.13.0 or
# newest 3.13/3.12, else python3.13, python3.12 or python3 when recent enough; fails when
# there is none.
find_python312() {
  local candidates=() dir c
  if command -v pyenv >/dev/null 2>&1; then
    local pyenv_root
    pyenv_root=$(pyenv root)
    candidates+=("$pyenv_root/versions/3.13.0/bin/python3")
    while IFS= read -r dir; do
      candidates+=("$dir/bin/python3")
    done < <(ls -d "$pyenv_root"/versions/3.13.* "$pyenv_root"/versions/3.12.* 2>/dev/null | sort -rV)
  fi
  candidates+=(python3.13 python3.12 python3)
  for c in "${candidates[@]}"; do
    if command -v "$c" >/dev/null 2>&1 &&
      "$c" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      command -v "$c"
      return 0
    fi
  done
  return 1
}

# target/sqlsaber-venv (Python 3.12+) with tests/sqlsaber/requirements.txt and the provider
# (python/sandbox-agents-sqlsaber, editable) installed; prints its path. Progress to stderr.
ensure_sqlsaber_venv() {
  local python venv="$lib_repo_root/target/sqlsaber-venv"
  python=$(find_python312) || {
    echo "error: sqlsaber-sandbox needs Python 3.12 or later, with venv; none was found" >&2
    echo "(tried pyenv's 3.13.0, 3.13.x and 3.12.x, python3.13, python3.12, python3)." >&2
    echo "Install one (e.g. 'pyenv install 3.13.0') and run this again." >&2
    return 1
  }
  if [ -x "$venv/bin/python" ] && ! "$venv/bin/python" -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
    log "target/sqlsaber-venv has an older Python: making it again" >&2
    rm -rf "$venv"
  fi
  if [ ! -x "$venv/bin/python" ]; then
    log "creating target/sqlsaber-venv with $python ($("$python" --version 2>&1))" >&2
    "$python" -m venv "$venv" >&2
  fi
  log "installing tests/sqlsaber/requirements.txt and python/sandbox-agents-sqlsaber" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$lib_repo_root/tests/sqlsaber/requirements.txt" \
    -e "$lib_repo_root/python/sandbox-agents-sqlsaber" >&2
  echo "$venv"
}
