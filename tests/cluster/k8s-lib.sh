# Shared by build-control-plane.sh and build-node.sh (sourced, not run): the pins, the cache layout, the Go
# environment, and the wrapper module through which every k8s.io/kubernetes binary is built (see README.md).
# The caller sets `log` first. Building Kubernetes binaries takes the lock $CACHE/.k8s-build.lock, so two
# worktrees never regenerate the wrapper module or write the same binary at once.

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pins() { awk -F= -v k="$1" '$1==k{print $2}' "$here/versions.env"; }   # the pins live in versions.env
K8S_VERSION="${K8S_VERSION:-$(pins K8S_VERSION)}"
CACHE="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}/k8s"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
PY="${PYTHON:-python3}"

# Go state lives inside the cache too, so the whole footprint is one directory (and can be measured/removed).
export GOWORK=off GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOMODCACHE="${GOMODCACHE_OVERRIDE:-$CACHE/go/mod}" GOCACHE="${GOCACHE_OVERRIDE:-$CACHE/go/build}"
mkdir -p "$GOMODCACHE" "$GOCACHE"

k8s_build_lock() {  # one builder of Kubernetes binaries at a time on this machine (fd 9 stays open until exit)
  exec 9>"$CACHE/.k8s-build.lock"
  if ! flock -n 9; then
    log "waiting for another build of Kubernetes binaries (lock $CACHE/.k8s-build.lock)"
    flock 9
  fi
}

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

k8s_wrapper_dir() { echo "$CACHE/wrap-k8s-$K8S_VERSION"; }

k8s_wrapper_current() {  # the wrapper module exists and requires the pinned k8s.io/kubernetes
  local w; w=$(k8s_wrapper_dir)
  [ -f "$w/go.mod" ] && grep -qx "require k8s.io/kubernetes $K8S_VERSION" "$w/go.mod"
}

write_k8s_wrapper() {  # (re)generate the wrapper module: require k8s.io/kubernetes, replace its staging modules
  local w up goline mods staging_v m v
  w=$(k8s_wrapper_dir)
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
}

k8s_ldflags() {  # the version stamps hack/lib/version.sh would set (the proxy does not tell the commit)
  local minor ldf p
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  ldf="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldf="$ldf -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor"
    ldf="$ldf -X $p.gitTreeState=clean -X $p.buildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    ldf="$ldf -X $p.gitCommit=module-$K8S_VERSION"
  done
  echo "$ldf"
}

build_k8s_commands() {  # build_k8s_commands <out dir> <cmd name>...: k8s.io/kubernetes/cmd/<name> through the wrapper
  local out="$1" ldf pkgs=() c
  shift
  for c in "$@"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  k8s_wrapper_current || (write_k8s_wrapper)
  ldf=$(k8s_ldflags)
  mkdir -p "$out"
  log "building $* $K8S_VERSION into $out"
  (cd "$(k8s_wrapper_dir)" && "$GO" build -trimpath -ldflags "$ldf" -o "$out/" "${pkgs[@]}")
}
