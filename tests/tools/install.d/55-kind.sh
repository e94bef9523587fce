#!/usr/bin/env bash
# kind with the podman provider and a node image built here (tests/cluster/build-kind.sh, docs/kind.md): kind,
# crictl, kubeadm, kubectl and CoreDNS from Go modules, the node image assembled from Debian and the binaries of
# the control plane and the real node (run after 10-control-plane.sh and 50-node.sh). Idempotent: a warm run only
# checks versions and the image's recipe tag.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
nice -n 10 bash "$here/../../cluster/build-kind.sh"
