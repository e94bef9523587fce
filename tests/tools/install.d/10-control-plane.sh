#!/usr/bin/env bash
# kube-apiserver, kube-controller-manager, kube-scheduler and etcd built from Go modules (cached; see
# tests/cluster/README.md). A cold build takes tens of minutes on 2 cores; later runs only check versions.
set -euo pipefail
exec bash "$(cd "$(dirname "$0")/../../cluster" && pwd)/build-control-plane.sh"
