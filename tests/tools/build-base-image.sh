#!/usr/bin/env bash
# Builds the two local base images the project image is built FROM, since no registry can be pulled:
#   localhost/debian-base:bookworm       debootstrap --variant=minbase, slimmed like Debian's -slim images
#   localhost/python-base:3.11-bookworm  the same plus python3 (3.11) and python3-venv: the "slim Python base"
# Root filesystems are cached as tarballs under $DREAMKEEPER_CACHE/images (default
# ${XDG_CACHE_HOME:-~/.cache}/dreamkeeper/images), so a machine that lost its podman storage re-imports
# in seconds. Skips everything when both images exist. Needs root (debootstrap, chroot).
#
# Env: DEBIAN_MIRROR (default: the host's apt source for bookworm), DREAMKEEPER_REBUILD_BASE=1 to ignore
# the cached tarballs and images.
set -euo pipefail

DEBIAN_BASE="${DEBIAN_BASE_IMAGE:-localhost/debian-base:bookworm}"
PYTHON_BASE="${PYTHON_BASE_IMAGE:-localhost/python-base:3.11-bookworm}"
SUITE=bookworm
# Bump when the recipe below changes: cached tarballs of an older recipe are then ignored.
RECIPE=2
cache="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}/images"
debian_tar="$cache/debian-base-$SUITE-r$RECIPE.tar"
python_tar="$cache/python-base-3.11-$SUITE-r$RECIPE.tar"
rebuild="${DREAMKEEPER_REBUILD_BASE:-0}"
PATH_ENV="PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

mkdir -p "$cache"
# Tests on several workers (and the node agent) may call this at once: one builder at a time.
exec 9>"$cache/.base-image.lock"
flock 9

log() { echo "base-image: $*" >&2; }

current() { # image: present and made by this recipe
  podman image exists "$1" &&
    [ "$(podman image inspect --format '{{index .Labels "dreamkeeper.base-recipe"}}' "$1")" = "$RECIPE" ]
}
if [ "$rebuild" != 1 ] && current "$DEBIAN_BASE" && current "$PYTHON_BASE"; then
  log "$DEBIAN_BASE and $PYTHON_BASE present"
  exit 0
fi

# The mirror this machine's apt already uses for the suite (deb822 or one-line format).
host_mirror() {
  local suite="$1" f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    uri="$(awk -v s="$suite" '
      /^$/ { if (ok && u != "") { print u; exit } ok = 0; u = "" }
      /^URIs:/ { u = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s) ok = 1 }
      END { if (ok && u != "") print u }' "$f" | sed -n 1p)"
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -e "$f" ] || continue
    uri="$(awk -v s="$suite" '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i == s) { for (j = 2; j < i; j++) if ($j !~ /^\[/) u = $j; print u; exit } }' "$f")"
    [ -n "$uri" ] && { echo "$uri"; return; }
  done
}
mirror="${DEBIAN_MIRROR:-$(host_mirror "$SUITE")}"
mirror="${mirror:-http://deb.debian.org/debian}"
security="$(host_mirror "$SUITE-security")"
security="${security:-${mirror%/debian}/debian-security}"

import_tar() { # tarball image extra-change...
  local tarball="$1" image="$2"
  shift 2
  log "importing $tarball as $image"
  podman import --quiet --change "ENV $PATH_ENV" --change 'CMD ["/bin/bash"]' \
    --change "LABEL dreamkeeper.base-recipe=$RECIPE" "$@" "$tarball" "$image" >/dev/null
}

build_rootfs() {
  local work rootfs
  work="$(mktemp -d "$cache/rootfs.XXXXXX")"
  rootfs="$work/rootfs"
  # shellcheck disable=SC2064 # expand now: the trap must remove this very directory
  trap "rm -rf '$work'" EXIT
  mkdir -p "$cache/debs"
  log "debootstrap --variant=minbase $SUITE from $mirror"
  local t0=$SECONDS
  debootstrap --variant=minbase --cache-dir="$cache/debs" "$SUITE" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -20 "$work/debootstrap.log" >&2; return 1; }

  # Slim like the official -slim images: future installs skip docs, man pages and translations
  # (copyright files are kept, as Debian's licences require).
  cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
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
  cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<'EOF'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache ""; Dir::Cache::srcpkgcache "";
Acquire::GzipIndexes "true"; Acquire::CompressionTypes::Order:: "gz";
APT::Install-Recommends "false"; APT::Install-Suggests "false";
EOF
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 0755 "$rootfs/usr/sbin/policy-rc.d"
  cat >"$rootfs/etc/apt/sources.list" <<EOF
deb $mirror $SUITE main
deb $mirror $SUITE-updates main
deb $security $SUITE-security main
EOF
  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  in_root() { chroot "$rootfs" /usr/bin/env -i "$PATH_ENV" DEBIAN_FRONTEND=noninteractive /bin/sh -ec "$1"; }
  strip_rootfs() {
    rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/debconf/*-old \
      "$rootfs"/var/log/*.log "$rootfs"/var/log/apt/* "$rootfs"/tmp/* "$rootfs"/root/.cache
    find "$rootfs/var/cache/apt" -type f -delete
    find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    find "$rootfs/usr/share/doc" -mindepth 1 -type d -empty -delete
    rm -rf "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/groff/* \
      "$rootfs"/usr/share/lintian/*
    find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    : >"$rootfs/etc/resolv.conf"
  }
  # Security and point-release updates, so the base is not frozen at the debootstrap snapshot.
  in_root 'apt-get update -q && apt-get -y -q -o Dpkg::Options::=--force-confold upgrade' >"$work/upgrade.log" 2>&1 ||
    { tail -20 "$work/upgrade.log" >&2; return 1; }
  strip_rootfs
  tar -C "$rootfs" --numeric-owner -cf "$debian_tar.partial" . && mv "$debian_tar.partial" "$debian_tar"

  cp /etc/resolv.conf "$rootfs/etc/resolv.conf"
  in_root 'apt-get update -q && apt-get install -y -q --no-install-recommends python3 python3-venv ca-certificates' \
    >"$work/python.log" 2>&1 || { tail -20 "$work/python.log" >&2; return 1; }
  strip_rootfs
  tar -C "$rootfs" --numeric-owner -cf "$python_tar.partial" . && mv "$python_tar.partial" "$python_tar"
  log "rootfs built in $((SECONDS - t0)) s: $(du -h "$debian_tar" | cut -f1) minbase, $(du -h "$python_tar" | cut -f1) python"
  rm -rf "$work"
  trap - EXIT
}

if [ "$rebuild" = 1 ] || [ ! -s "$debian_tar" ] || [ ! -s "$python_tar" ]; then
  build_rootfs
fi
import_tar "$debian_tar" "$DEBIAN_BASE" --change "ENV LANG=C.UTF-8"
import_tar "$python_tar" "$PYTHON_BASE" --change "ENV LANG=C.UTF-8" --change 'CMD ["/usr/bin/python3"]'
podman image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' | grep -E "^($DEBIAN_BASE|$PYTHON_BASE) " >&2 || true
