#!/usr/bin/env bash
# kind with the podman provider and a node image built here (README.md, "kind"), since no registry can be pulled:
#   $CACHE/k8s/kind-$KIND_VERSION/{kind,crictl,kubeadm,kubectl}
#       kind and crictl by `go install` of their modules; kubeadm and kubectl through the control plane's wrapper
#   localhost/dreamkeeper/kind-node:$K8S_VERSION-r$RECIPE   the node image (podman), assembled without a registry:
#       Debian bookworm (the debootstrap base of build-base-image.sh) + systemd and the node's Debian packages in a
#       chroot; kind's own node files (images/base/files of the kind module); containerd 2.x, kubelet, kubeadm,
#       kubectl, crictl built here; the control-plane images (kube-apiserver, -controller-manager, -scheduler,
#       kube-proxy, etcd, pause) built here from the same binaries and pre-loaded into the node's containerd
#       (--no-unpack, as `kind build node-image` does); a bridge CNI instead of kindnetd (whose image cannot be
#       pulled or built from a served module).
#   This machine's limits (no CAP_SYS_RESOURCE: no negative oom_score_adj, no raising a hard rlimit; cgroup v1)
#   are handled in the image: containerd's unit without OOMScoreAdjust/Limit*, CRI restrict_oom_score_adj, the
#   kubelet with --fail-cgroupv1=false.
# Idempotent: binaries by version, the image by its recipe tag. Needs root (chroot), podman, build-node.sh first.
set -euo pipefail

log() { printf '[build-kind] %s\n' "$*" >&2; }
# shellcheck source=k8s-lib.sh
source "$(cd "$(dirname "$0")" && pwd)/k8s-lib.sh"
KIND_VERSION="${KIND_VERSION:-$(pins KIND_VERSION)}"
CRICTL_VERSION="${CRICTL_VERSION:-$(pins CRICTL_VERSION)}"
PAUSE_VERSION="$(pins PAUSE_VERSION)"
RECIPE=3   # bump when the image recipe below changes
KIND_BIN="$CACHE/kind-$KIND_VERSION"
NODE_BIN="$CACHE/node-$K8S_VERSION"
CP_BIN="$CACHE/bin-$K8S_VERSION"
NODE_IMAGE="localhost/dreamkeeper/kind-node:$K8S_VERSION-r$RECIPE"
IMAGES_CACHE="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}/images"
DEBIAN_BASE=localhost/debian-base:bookworm   # build-base-image.sh's debootstrap minbase
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
mkdir -p "$KIND_BIN"
k8s_build_lock
start=$(date +%s)

# ---- binaries ---------------------------------------------------------------------------------------------------
output_has() {  # output_has <expected substring> <command...>: captured first (see have_version)
  local want="$1" out; shift
  out=$("$@" 2>/dev/null) && grep -qF -- "$want" <<<"$out"
}
if output_has "kind $KIND_VERSION " "$KIND_BIN/kind" version; then
  log "kind $KIND_VERSION already built"
else
  log "go install sigs.k8s.io/kind@$KIND_VERSION"
  GOFLAGS= GOBIN="$KIND_BIN" "$GO" install -trimpath -ldflags "-s -w" "sigs.k8s.io/kind@$KIND_VERSION"
fi
if output_has "crictl version $CRICTL_VERSION" "$KIND_BIN/crictl" --version; then
  log "crictl $CRICTL_VERSION already built"
else
  log "go install sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  GOFLAGS= GOBIN="$KIND_BIN" "$GO" install -trimpath \
    -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
fi
if output_has "$K8S_VERSION" "$KIND_BIN/kubeadm" version -o short \
  && output_has "Client Version: $K8S_VERSION" "$KIND_BIN/kubectl" version --client; then
  log "kubeadm and kubectl $K8S_VERSION already built"
else
  build_k8s_commands "$KIND_BIN" kubeadm kubectl
fi
coredns_version="$("$KIND_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null | grep /coredns: | cut -d: -f2 || true)"
if [ -n "$coredns_version" ] && output_has "CoreDNS-${coredns_version#v}" "$KIND_BIN/coredns" -version; then
  log "coredns $coredns_version already built"
elif [ -n "$coredns_version" ]; then
  log "go install github.com/coredns/coredns@$coredns_version (kubeadm's DNS addon)"
  GOFLAGS= GOBIN="$KIND_BIN" "$GO" install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@$coredns_version"
fi
KIND_SRC="$(GOFLAGS= "$GO" mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"

# ---- the node image ----------------------------------------------------------------------------------------------
if podman image exists "$NODE_IMAGE" && [ "${DREAMKEEPER_REBUILD_KIND_IMAGE:-0}" != 1 ]; then
  log "node image $NODE_IMAGE present"
  log "done in $(( $(date +%s) - start ))s"
  exit 0
fi
for b in "$NODE_BIN/kubelet" "$NODE_BIN/kube-proxy" "$NODE_BIN/containerd" "$CP_BIN/kube-apiserver" "$CP_BIN/etcd"; do
  [ -x "$b" ] || { log "FATAL: $b missing: run build-control-plane.sh and build-node.sh first (make tools)"; exit 1; }
done
podman image exists "$DEBIAN_BASE" || bash "$here/../tools/build-base-image.sh" >&2

work="$(mktemp -d "$CACHE/kind-build.XXXXXX")"
cleanup_work() {
  [ -n "${ctrd_pid:-}" ] && kill "$ctrd_pid" 2>/dev/null && wait "$ctrd_pid" 2>/dev/null
  for m in $(awk -v w="$work" 'index($5, w)==1 {print $5}' /proc/self/mountinfo | sort -r); do umount -l "$m" || true; done
  rm -rf "$work"
}
trap cleanup_work EXIT
in_root() {  # in_root <rootfs> <script>: a shell in the chroot with the host's network (Debian's mirror)
  chroot "$1" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DEBIAN_FRONTEND=noninteractive /bin/sh -ec "$2"
}
rootfs_with() {  # rootfs_with <dir> <packages...>: the debootstrap base plus Debian packages
  local dir="$1"; shift
  local box
  mkdir -p "$dir" "$IMAGES_CACHE/debs"
  box="$("${PODMAN[@]}" create "$DEBIAN_BASE" /bin/true)"   # the base image's files, whatever cache made it
  "${PODMAN[@]}" export "$box" | tar -C "$dir" -xf -
  "${PODMAN[@]}" rm "$box" >/dev/null
  cp /etc/resolv.conf "$dir/etc/resolv.conf"
  mkdir -p "$dir/var/cache/apt/archives"
  mount --bind "$IMAGES_CACHE/debs" "$dir/var/cache/apt/archives"   # downloaded .debs are kept between builds
  in_root "$dir" "apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends $* >/dev/null"
  umount "$dir/var/cache/apt/archives"
  rm -rf "$dir"/var/lib/apt/lists/*
  : > "$dir/etc/resolv.conf"
}

# 1. The control-plane images: the binaries on Debian with iptables/conntrack (kube-proxy needs them).
log "building the component images"
rootfs_with "$work/k8s-base" iptables conntrack ca-certificates
tar -C "$work/k8s-base" --numeric-owner -cf "$work/k8s-base.tar" .
"${PODMAN[@]}" import --quiet --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  "$work/k8s-base.tar" localhost/dreamkeeper/k8s-base:bookworm >/dev/null
etcd_tag="$("$KIND_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null | grep /etcd: | cut -d: -f2)"
pause_tag="$("$KIND_BIN/kubeadm" config images list --kubernetes-version "$K8S_VERSION" 2>/dev/null | grep /pause: | cut -d: -f2)"
images=()
component_image() {  # component_image <name> <binary> <ref>
  local ctx="$work/ctx-$1"
  mkdir -p "$ctx"
  cp "$2" "$ctx/$1"
  printf 'FROM localhost/dreamkeeper/k8s-base:bookworm\nCOPY %s /usr/local/bin/%s\n' "$1" "$1" > "$ctx/Containerfile"
  "${PODMAN[@]}" build --network none --quiet -t "$3" -f "$ctx/Containerfile" "$ctx" >/dev/null
  images+=("$3")
}
for c in kube-apiserver kube-controller-manager kube-scheduler; do
  component_image "$c" "$CP_BIN/$c" "registry.k8s.io/$c:$K8S_VERSION"
done
component_image kube-proxy "$NODE_BIN/kube-proxy" "registry.k8s.io/kube-proxy:$K8S_VERSION"
component_image etcd "$CP_BIN/etcd" "registry.k8s.io/etcd:$etcd_tag"
# CoreDNS as its own image runs it: /coredns as the entrypoint, the nonroot user (port 53 is allowed to it in the pod:
# containerd's CRI sets ip_unprivileged_port_start=0).
mkdir -p "$work/ctx-coredns"
cp "$KIND_BIN/coredns" "$work/ctx-coredns/coredns"
printf 'FROM localhost/dreamkeeper/k8s-base:bookworm\nCOPY coredns /coredns\nUSER 65532:65532\nENTRYPOINT ["/coredns"]\n' \
  > "$work/ctx-coredns/Containerfile"
"${PODMAN[@]}" build --network none --quiet -t "registry.k8s.io/coredns/coredns:$coredns_version" \
  -f "$work/ctx-coredns/Containerfile" "$work/ctx-coredns" >/dev/null
images+=("registry.k8s.io/coredns/coredns:$coredns_version")
# The sandbox image under the two names kubeadm and kind's containerd config use.
"${PODMAN[@]}" tag "localhost/dreamkeeper/pause:$PAUSE_VERSION" "registry.k8s.io/pause:$pause_tag" "registry.k8s.io/pause:3.10"
images+=("registry.k8s.io/pause:$pause_tag" "registry.k8s.io/pause:3.10")
podman save --format docker-archive -m -o "$work/images.tar" "${images[@]}" >&2
# They live on in the node image only: out of the shared podman store (~0.8 GB).
podman rmi "${images[@]}" localhost/dreamkeeper/k8s-base:bookworm >/dev/null 2>&1 || true

# 2. The node's root filesystem, as kind's images/base/Dockerfile makes it.
log "assembling the node root filesystem"
root="$work/rootfs"
rootfs_with "$root" systemd systemd-sysv dbus conntrack iptables nftables iproute2 ethtool util-linux mount kmod \
  libseccomp2 pigz e2fsprogs bash ca-certificates curl jq procps runc containernetworking-plugins
files="$KIND_SRC/images/base/files"
install -m 0755 "$files"/usr/local/bin/* "$root/usr/local/bin/"
mkdir -p "$root/kind/bin" "$root/LICENSES"
cp -r "$files/kind/." "$root/kind/"; chmod -R u+rwX,go+rX,go-w "$root/kind"; chmod 0755 "$root/kind/bin"/*
install -m 0644 "$files/etc/crictl.yaml" "$root/etc/"
mkdir -p "$root/etc/containerd" "$root/etc/systemd/system/kubelet.service.d"
install -m 0644 "$files"/etc/containerd/* "$root/etc/containerd/"
install -m 0644 "$files"/etc/default/* "$root/etc/default/"
install -m 0644 "$files"/etc/sysctl.d/* "$root/etc/sysctl.d/"
install -m 0644 "$files"/etc/systemd/system/*.service "$files"/etc/systemd/system/*.slice "$root/etc/systemd/system/"
install -m 0644 "$files"/etc/systemd/system/kubelet.service.d/* "$root/etc/systemd/system/kubelet.service.d/"
in_root "$root" '
  find /lib/systemd/system/sysinit.target.wants/ -name "systemd-tmpfiles-setup.service" -delete
  rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* \
    /lib/systemd/system/local-fs.target.wants/* /lib/systemd/system/sockets.target.wants/*udev* \
    /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
  echo "ReadKMsg=no" >> /etc/systemd/journald.conf
  systemctl enable kubelet.service containerd.service undo-mount-hacks.service
  systemctl mask systemd-binfmt.service
  mkdir -p /etc/kubernetes/manifests /opt/cni/bin'
for b in containerd containerd-shim-runc-v2 ctr; do install -m 0755 "$NODE_BIN/$b" "$root/usr/local/bin/"; done
install -m 0755 "$KIND_BIN/crictl" "$root/usr/local/bin/"
install -m 0755 "$NODE_BIN/kubelet" "$KIND_BIN/kubeadm" "$KIND_BIN/kubectl" "$root/usr/bin/"
for p in bridge host-local loopback portmap ptp; do cp /usr/lib/cni/$p "$root/opt/cni/bin/" 2>/dev/null || cp "$root/usr/lib/cni/$p" "$root/opt/cni/bin/"; done
echo "$K8S_VERSION" > "$root/kind/version"
# This machine refuses a negative oom_score_adj and raising a hard rlimit (no CAP_SYS_RESOURCE, also not in a
# privileged container): containerd's unit would fail with 214/OOM_ADJUST or 205/LIMITS.
sed -i -e '/^OOMScoreAdjust=/d' -e '/^LimitNOFILE=/d' -e '/^LimitNPROC=/d' -e '/^LimitCORE=/d' \
  "$root/etc/systemd/system/containerd.service"
sed -i 's/restrict_oom_score_adj = false/restrict_oom_score_adj = true/' "$root/etc/containerd/config.toml"
# Kubernetes 1.36 refuses cgroup v1 unless told otherwise (flags win over kind's generated config file).
sed -i 's|^KUBELET_EXTRA_ARGS=.*|KUBELET_EXTRA_ARGS=--runtime-cgroups=/system.slice/containerd.service --fail-cgroupv1=false|' \
  "$root/etc/default/kubelet"
# containerd's base OCI spec, as the Dockerfile makes it with `ctr oci spec | jq ...`.
"$NODE_BIN/ctr" oci spec | "$PY" -c '
import json, sys
spec = json.load(sys.stdin)
spec.setdefault("hooks", {}).setdefault("createContainer", []).append({"path": "/kind/bin/mount-product-files.sh"})
spec["process"].pop("rlimits", None)
json.dump(spec, sys.stdout, indent=2)' > "$root/etc/containerd/cri-base.json"
# Pod network: a bridge on the node (kindnetd's image cannot be had here); kind applies this no-op manifest
# instead of its default CNI manifest.
mkdir -p "$root/etc/cni/net.d" "$root/kind/manifests"
cat > "$root/etc/cni/net.d/10-dreamkeeper-bridge.conflist" <<'JSON'
{"cniVersion": "1.0.0", "name": "kind-bridge", "plugins": [
  {"type": "bridge", "bridge": "kind0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
JSON
cat > "$root/kind/manifests/default-cni.yaml" <<'YAML'
# The node's CNI is a static bridge (/etc/cni/net.d/10-dreamkeeper-bridge.conflist): nothing to deploy.
apiVersion: v1
kind: ConfigMap
metadata: {name: dreamkeeper-node-cni, namespace: kube-system}
data: {cni: "bridge 10.244.0.0/24 on kind0, from the node image (no kindnetd)"}
YAML

# 3. The images into the node's containerd, as `kind build node-image` does (content only, pinned).
log "pre-loading the component images into the node's containerd"
cat > "$work/containerd.toml" <<TOML
version = 3
root = '$root/var/lib/containerd'
state = '$work/containerd-state'
[grpc]
  address = '$work/c.sock'
[plugins.'io.containerd.nri.v1.nri']
  disable = true
TOML
"$NODE_BIN/containerd" --config "$work/containerd.toml" >"$work/containerd.log" 2>&1 &
ctrd_pid=$!
for _ in $(seq 1 60); do "$NODE_BIN/ctr" --address "$work/c.sock" version >/dev/null 2>&1 && break; sleep 0.5; done
"$NODE_BIN/ctr" --address "$work/c.sock" -n k8s.io images import --label=io.cri-containerd.pinned=pinned \
  --all-platforms --no-unpack --digests "$work/images.tar" >&2
"$NODE_BIN/ctr" --address "$work/c.sock" -n k8s.io images ls -q >&2
kill "$ctrd_pid"; wait "$ctrd_pid" 2>/dev/null || true; ctrd_pid=""

# 4. The image.
log "importing $NODE_IMAGE"
tar -C "$root" --numeric-owner -cf "$work/node.tar" .
# The image this replaces (a rebuild, an older recipe): ~1 GB each, never needed again.
for old in $(podman images --format '{{.Repository}}:{{.Tag}}' localhost/dreamkeeper/kind-node); do
  podman rmi "$old" >/dev/null 2>&1 || log "could not remove $old (a container still uses it?)"
done
"${PODMAN[@]}" import --quiet --change 'ENV container=docker' --change 'STOPSIGNAL SIGRTMIN+3' \
  --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' \
  --change "LABEL dreamkeeper.kind-node-recipe=$RECIPE" "$work/node.tar" "$NODE_IMAGE" >/dev/null
log "done in $(( $(date +%s) - start ))s: $NODE_IMAGE ($(podman image inspect --format '{{.Size}}' "$NODE_IMAGE") bytes)"
