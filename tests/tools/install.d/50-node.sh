#!/usr/bin/env bash
# The real test node (tests/cluster/realnode.py): runc, the CNI plugins, iptables and conntrack from Debian;
# kubelet, kube-proxy, containerd 2.x and the pause image built here (tests/cluster/build-node.sh); then the
# images its pods run (the project image, the caching agent's) saved as archives for containerd to import
# (tests/tools/node-images.sh). Idempotent: a warm run only checks versions, stamps and image tags.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

# containernetworking-plugins: bridge, host-local, loopback, portmap (/usr/lib/cni), the pod network.
# iptables + conntrack: kube-proxy's Service rules. runc: containerd's runtime (the Debian build, as podman's).
packages=(runc containernetworking-plugins iptables conntrack kmod)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
done
if [ "${#missing[@]}" -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get -q -o DPkg::Lock::Timeout=600 update
  echo "node tooling: installing ${missing[*]}"
  $sudo apt-get install -y -q --no-install-recommends -o DPkg::Lock::Timeout=600 "${missing[@]}"
else
  echo "node tooling: Debian packages present (${packages[*]})"
fi

nice -n 10 bash "$here/../../cluster/build-node.sh"
nice -n 10 bash "$here/../node-images.sh" >/dev/null
