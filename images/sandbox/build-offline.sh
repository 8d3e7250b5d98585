#!/usr/bin/env bash
# Builds the sandbox image (sandbox-agents-sandbox:N, N = io.sandbox-agents.image-version) without
# an image registry:
#   1. debootstrap a Debian bookworm minbase root file system with the packages of Dockerfile,
#      from the Debian mirror apt already uses (override: DEBIAN_MIRROR=http://...);
#   2. slim it like debian:bookworm-slim and `docker import` it as sandbox-agents-base:bookworm;
#   3. `docker build` Dockerfile.offline on top (user, workspace, labels, tini...).
# The base image is reused while its package list is unchanged; --fresh rebuilds everything.
# Needs root, debootstrap and a running Docker Engine (see ensure_docker in scripts/lib.sh).
# Safe to re-run and to run twice at once (the second waits); leaves no root file system behind.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SUITE=bookworm
# Keep this list equal to the apt-get install line of Dockerfile.
PACKAGES=(bash coreutils findutils python3 python3-pip python3-venv git curl procps
  ca-certificates tar tini)
BASE=sandbox-agents-base:$SUITE
work="$here/.build"
rootfs="$work/rootfs"

die() { printf 'build-offline.sh: error: %s\n' "$*" >&2; exit 1; }
say() { printf '\033[1m--> %s\033[0m\n' "$*" >&2; }

fresh=0
for arg in "$@"; do
  case "$arg" in
    --fresh) fresh=1 ;;
    -h | --help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) die "unknown argument: $arg (usage: build-offline.sh [--fresh])" ;;
  esac
done

version=$(sed -n 's/.*io\.sandbox-agents\.image-version="\{0,1\}\([0-9][0-9]*\)"\{0,1\}.*/\1/p' \
  "$here/Dockerfile.offline" | head -n 1)
[ -n "$version" ] || die "no io.sandbox-agents.image-version label in $here/Dockerfile.offline"
IMAGE=sandbox-agents-sandbox:$version

[ "$(id -u)" -eq 0 ] || die "must run as root (debootstrap and chroot need it)"
command -v debootstrap >/dev/null 2>&1 ||
  die "debootstrap is not installed: apt-get install -y debootstrap"
docker info >/dev/null 2>&1 ||
  die "the Docker Engine does not answer: start it (scripts/lib.sh: ensure_docker) and re-run"

# The first http(s)/ftp/file URI that apt uses for "$SUITE" (one-line and deb822 formats).
detect_mirror() {
  local f uri
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    uri=$(awk -v suite="$SUITE" '
      $1 == "deb" {
        i = 2
        if ($2 ~ /^\[/) { while (i <= NF && $i !~ /\]$/) i++; i++ }
        if ($(i + 1) == suite) { print $i; exit }
      }' "$f")
    case "$uri" in http://* | https://* | ftp://* | file:/*) echo "$uri"; return ;; esac
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    uri=$(awk -v suite="$SUITE" '
      function flush() {
        if (!found && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ") &&
            tolower(enabled) != "no" && uris != "") {
          split(uris, u, " "); print u[1]; found = 1
        }
        types = suites = uris = enabled = last = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]/ { if (last == "uris") uris = uris " " $0; if (last == "suites") suites = suites " " $0; next }
      {
        key = tolower($1); sub(/:.*/, "", key); val = $0; sub(/^[^:]*:[ \t]*/, "", val)
        last = key
        if (key == "types") types = val; else if (key == "uris") uris = val
        else if (key == "suites") suites = val; else if (key == "enabled") enabled = val
      }
      END { flush() }' "$f")
    case "$uri" in http://* | https://* | ftp://* | file:/*) echo "$uri"; return ;; esac
  done
}

unmount_rootfs() {
  local m
  # Deepest first; debootstrap can leave proc/sys mounted in the target when it fails.
  awk -v r="$rootfs" '$2 == r || index($2, r "/") == 1 { print $2 }' /proc/self/mounts |
    sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
}
remove_rootfs() {
  [ -e "$rootfs" ] || return 0
  unmount_rootfs
  rm -rf --one-file-system "$rootfs"
}

mkdir -p "$work"
exec 9>"$work/lock"
if ! flock -n 9; then
  say "another build-offline.sh is running: waiting for it"
  flock -w 900 9 || die "timed out waiting for $work/lock"
fi
trap remove_rootfs EXIT
trap 'echo "build-offline.sh: interrupted" >&2; exit 130' INT TERM
remove_rootfs # what an interrupted run left

start=$SECONDS
old_base=$(docker image inspect --format '{{.Id}}' "$BASE" 2>/dev/null || true)
old_image=$(docker image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
packages_csv=$(IFS=,; echo "${PACKAGES[*]}")
base_key="$SUITE:$packages_csv"

if [ "$fresh" -eq 0 ] && [ -n "$old_base" ] &&
  [ "$(docker image inspect --format '{{index .Config.Labels "io.sandbox-agents.base"}}' "$BASE")" = "$base_key" ]; then
  say "reusing $BASE (same packages; --fresh rebuilds it)"
else
  mirror=${DEBIAN_MIRROR:-$(detect_mirror || true)}
  if [ -z "$mirror" ]; then
    mirror=http://deb.debian.org/debian
    say "no $SUITE mirror found in /etc/apt/sources.list*: trying $mirror"
  fi
  say "debootstrap $SUITE (minbase + ${#PACKAGES[@]} packages) from $mirror"
  t0=$SECONDS
  if ! debootstrap --variant=minbase --components=main --include="$packages_csv" \
    "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1; then
    tail -n 20 "$work/debootstrap.log" >&2
    [ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -n 20 "$rootfs/debootstrap/debootstrap.log" >&2
    die "debootstrap from $mirror failed (full output: $work/debootstrap.log). Is the mirror reachable? Set DEBIAN_MIRROR to another one."
  fi
  say "debootstrap took $((SECONDS - t0)) s"
  unmount_rootfs

  for bin in /usr/bin/tini /usr/bin/python3 /usr/bin/git /usr/bin/curl /usr/bin/ps /usr/bin/pip3; do
    [ -x "$rootfs$bin" ] || die "the root file system has no $bin"
  done

  # Slim it like debian:bookworm-slim: no manuals, documentation or translations, now or later.
  mkdir -p "$rootfs/etc/dpkg/dpkg.cfg.d"
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$rootfs/usr/share/doc" -mindepth 1 -not -type d -not -name copyright -delete
  find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$rootfs"/usr/share/{man,groff,info,lintian,linda}/*
  find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
  # No package lists, caches or logs; and none of the build host's identity.
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin \
    "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/archives/partial/* \
    "$rootfs"/var/cache/debconf/*-old "$rootfs"/var/lib/dpkg/*-old \
    "$rootfs"/var/log/apt/* "$rootfs"/var/log/dpkg.log "$rootfs"/var/log/alternatives.log \
    "$rootfs"/var/log/bootstrap.log "$rootfs"/tmp/* "$rootfs"/root/.bash_history
  : >"$rootfs/etc/resolv.conf"        # Docker mounts its own over these
  echo localhost >"$rootfs/etc/hostname"
  [ -e "$rootfs/etc/machine-id" ] && : >"$rootfs/etc/machine-id"
  # The same apt sources as debian:bookworm-slim, whatever mirror built it.
  rm -f "$rootfs/etc/apt/sources.list"
  cat >"$rootfs/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: http://deb.debian.org/debian
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF

  say "importing the root file system ($(du -sh --one-file-system "$rootfs" | cut -f1)) as $BASE"
  tar -C "$rootfs" --numeric-owner --one-file-system -cf - . |
    docker import --change "LABEL io.sandbox-agents.base=$base_key" \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' - "$BASE" >/dev/null ||
    die "docker import of the root file system failed"
  remove_rootfs
fi

say "docker build $IMAGE (Dockerfile.offline)"
build_args=(-t "$IMAGE" -f - "$here")
[ "$fresh" -eq 1 ] && build_args=(--no-cache "${build_args[@]}")
# No COPY in Dockerfile.offline; the context (.dockerignore leaves out .build) stays tiny.
DOCKER_BUILDKIT=0 docker build -q "${build_args[@]}" <"$here/Dockerfile.offline" >/dev/null 2>"$work/build.log" || {
  cat "$work/build.log" >&2
  die "docker build of $IMAGE failed"
}

# Drop the images these tags pointed at before, if nothing else uses them.
new_base=$(docker image inspect --format '{{.Id}}' "$BASE")
new_image=$(docker image inspect --format '{{.Id}}' "$IMAGE")
if [ -n "$old_image" ] && [ "$old_image" != "$new_image" ]; then
  docker rmi "$old_image" >/dev/null 2>&1 || true
fi
if [ -n "$old_base" ] && [ "$old_base" != "$new_base" ]; then
  docker rmi "$old_base" >/dev/null 2>&1 || true
fi

size=$(docker image inspect --format '{{.Size}}' "$IMAGE")
say "built $IMAGE (${new_image:7:12}, $((size / 1000000)) MB) in $((SECONDS - start)) s"
