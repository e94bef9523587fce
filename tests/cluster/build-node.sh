#!/usr/bin/env bash
# Builds what the real test node runs (tests/cluster/realnode.py; README.md "The real node") into
# $CACHE/k8s/node-$K8S_VERSION/:
#   kubelet, kube-proxy      k8s.io/kubernetes/cmd/... through the control plane's wrapper module (k8s-lib.sh)
#   containerd, containerd-shim-runc-v2, ctr
#                            go install github.com/containerd/containerd/v2/cmd/...@$CONTAINERD_VERSION
#                            (CGO_ENABLED=0; no btrfs/devmapper/zfs snapshotters: they need cgo or libraries)
#   pause, images/pause.tar  tests/cluster/node/pause (Go) in a FROM-scratch image, saved as a docker archive
#                            for `ctr images import` (no registry can be pulled here)
# runc, the CNI plugins, iptables and conntrack come from Debian (tests/tools/install.d/50-node.sh).
# Idempotent: a binary is rebuilt only when it is missing or reports another version; the pause image when its
# source changed. Guarded by the same lock as the control-plane build.
set -euo pipefail

log() { printf '[build-node] %s\n' "$*" >&2; }
# shellcheck source=k8s-lib.sh
source "$(cd "$(dirname "$0")" && pwd)/k8s-lib.sh"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-$(pins CONTAINERD_VERSION)}"
PAUSE_VERSION="${PAUSE_VERSION:-$(pins PAUSE_VERSION)}"
NODE="$CACHE/node-$K8S_VERSION"
PAUSE_IMAGE="localhost/dreamkeeper/pause:$PAUSE_VERSION"
mkdir -p "$NODE/images"
k8s_build_lock

start=$(date +%s)
timings=()
step() {  # step <name> <command...>: run and record its seconds for the STAMP
  local t0=$SECONDS
  "${@:2}"
  timings+=("$1=$((SECONDS - t0))")
}

build_containerd() {
  local pkg=github.com/containerd/containerd/v2 ldf
  ldf="-s -w -X $pkg/version.Version=$CONTAINERD_VERSION -X $pkg/version.Revision=module-$CONTAINERD_VERSION"
  ldf="$ldf -X $pkg/version.Package=$pkg"
  log "go install containerd, containerd-shim-runc-v2, ctr $CONTAINERD_VERSION"
  # `go install pkg@version` builds the module on its own (its own go.mod, no wrapper): GOFLAGS must not say -mod.
  GOFLAGS= GOBIN="$NODE" "$GO" install -trimpath -tags no_btrfs,no_devmapper,no_zfs -ldflags "$ldf" \
    "$pkg/cmd/containerd@$CONTAINERD_VERSION" \
    "$pkg/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" \
    "$pkg/cmd/ctr@$CONTAINERD_VERSION"
}

pause_source_hash() { cat "$here/node/pause/go.mod" "$here/node/pause/main.go" | sha256sum | cut -c1-16; }

build_pause() {
  local ctx
  log "building the pause image $PAUSE_IMAGE"
  (cd "$here/node/pause" && GOFLAGS= "$GO" build -trimpath -ldflags "-s -w" -o "$NODE/pause" .)
  ctx=$(mktemp -d)
  cp "$NODE/pause" "$ctx/pause"
  # 65535 is the uid/gid of Kubernetes' own pause image: the sandbox never runs as root.
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' > "$ctx/Containerfile"
  podman --runtime runc --cgroup-manager cgroupfs build --network none --quiet \
    --label "dreamkeeper.pause-source=$(pause_source_hash)" -t "$PAUSE_IMAGE" -f "$ctx/Containerfile" "$ctx" >/dev/null
  rm -rf "$ctx"
  rm -f "$NODE/images/pause.tar.partial"
  podman save --format docker-archive -o "$NODE/images/pause.tar.partial" "$PAUSE_IMAGE"
  mv "$NODE/images/pause.tar.partial" "$NODE/images/pause.tar"
  echo "$PAUSE_IMAGE $(pause_source_hash)" > "$NODE/images/pause.id"
}

built=0
if have_version "$NODE/kubelet" "Kubernetes $K8S_VERSION" && have_version "$NODE/kube-proxy" "Kubernetes $K8S_VERSION"; then
  log "kubelet and kube-proxy $K8S_VERSION already built in $NODE"
else
  step kubelet+kube-proxy build_k8s_commands "$NODE" kubelet kube-proxy; built=1
fi
if have_version "$NODE/containerd" "$CONTAINERD_VERSION" && [ -x "$NODE/containerd-shim-runc-v2" ] && [ -x "$NODE/ctr" ]; then
  log "containerd $CONTAINERD_VERSION already built in $NODE"
else
  step containerd build_containerd; built=1
fi
if [ -s "$NODE/images/pause.tar" ] && [ "$(cat "$NODE/images/pause.id" 2>/dev/null)" = "$PAUSE_IMAGE $(pause_source_hash)" ]; then
  log "pause image $PAUSE_IMAGE already saved in $NODE/images/pause.tar"
else
  command -v podman >/dev/null || { log "FATAL: podman is needed to build the pause image (tests/tools/install.d/30-podman.sh)"; exit 1; }
  step pause build_pause; built=1
fi

for b in kubelet kube-proxy; do
  have_version "$NODE/$b" "Kubernetes $K8S_VERSION" || { log "FATAL: $NODE/$b does not report $K8S_VERSION"; exit 1; }
done
have_version "$NODE/containerd" "$CONTAINERD_VERSION" || { log "FATAL: $NODE/containerd is not $CONTAINERD_VERSION"; exit 1; }

if [ "$built" = 1 ] || [ ! -f "$NODE/STAMP" ]; then
  {
    echo "k8s_version=$K8S_VERSION"
    echo "containerd_version=$CONTAINERD_VERSION"
    echo "pause_image=$PAUSE_IMAGE"
    echo "go=$("$GO" env GOVERSION)"
    echo "built_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "build_seconds=$(( $(date +%s) - start ))"
    echo "steps=${timings[*]:-}"
  } > "$NODE/STAMP"
fi
log "done in $(( $(date +%s) - start ))s: $NODE"
