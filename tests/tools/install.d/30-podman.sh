#!/usr/bin/env bash
# Container and monitoring tooling from Debian: podman + runc (build and run the project image),
# debootstrap (the base image: no registry can be pulled), prometheus (promtool for rule tests and a
# real server that scrapes the operator in tests). Idempotent: does nothing when all are present.
set -euo pipefail

packages=(podman runc conmon debootstrap prometheus containernetworking-plugins iptables ca-certificates)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  echo "podman tooling: already installed ($(podman --version), $(promtool --version 2>&1 | sed -n 1p))"
  exit 0
fi

sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"

# The prometheus package starts its daemon from postinst. Tests start their own server on a
# temporary port, so forbid service starts for the duration of the install (policy-rc.d exit 101
# is the Debian convention); an existing policy-rc.d is left exactly as it was.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' | $sudo tee "$policy" >/dev/null
  $sudo chmod 0755 "$policy"
  own_policy=1
fi
cleanup() { if [ "$own_policy" -eq 1 ]; then $sudo rm -f "$policy"; fi; }
trap cleanup EXIT

export DEBIAN_FRONTEND=noninteractive
apt_opts=(-y -q --no-install-recommends -o DPkg::Lock::Timeout=600)
# Package lists may be stale or absent on a fresh machine.
$sudo apt-get -q -o DPkg::Lock::Timeout=600 update
echo "podman tooling: installing ${missing[*]}"
$sudo apt-get install "${apt_opts[@]}" "${missing[@]}"

# Some init-system fallbacks still launch the daemon; never leave one behind.
if command -v pgrep >/dev/null && pgrep -x prometheus >/dev/null 2>&1; then
  if command -v service >/dev/null; then $sudo service prometheus stop >/dev/null 2>&1 || true; fi
fi

podman --version
promtool --version 2>&1 | sed -n 1p
