#!/usr/bin/env bash
# Builds the project image with podman and tags it localhost/dreamkeeper:dev.
#
# Cache-aware: the image is also tagged localhost/dreamkeeper:src-<hash>, where <hash> covers the
# Dockerfile, .dockerignore, pyproject.toml, README/LICENSE, every file under operator/ and the base
# image's id; when that tag exists nothing is built. Dependencies are installed offline from a wheelhouse
# that `pip download` fills on the host (keyed by pyproject.toml and the base image's Python/libc/arch,
# cached under $DREAMKEEPER_CACHE/wheelhouse), and the build runs with --network none.
#
# stdout: the image reference (localhost/dreamkeeper:src-<hash>), nothing else. Logs and the image size go
# to stderr. Env: BASE_IMAGE (default localhost/python-base:3.11-bookworm, built on demand),
# DREAMKEEPER_IMAGE_REPO (default localhost/dreamkeeper), DREAMKEEPER_REBUILD_IMAGE=1 to build anyway,
# PYTHON (the host interpreter whose pip downloads wheels; default the repo's .venv, else python3).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
IMAGE_REPO="${DREAMKEEPER_IMAGE_REPO:-localhost/dreamkeeper}"
DEFAULT_BASE=localhost/python-base:3.11-bookworm
BASE_IMAGE="${BASE_IMAGE:-$DEFAULT_BASE}"
cache="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}"
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
# The default rlimits podman asks runc for exceed what this kernel lets the container raise.
ULIMITS=(--ulimit nofile=1024:1024 --ulimit nproc=1024:1024)
if [ -z "${PYTHON:-}" ]; then
  if [ -x "$repo/.venv/bin/python" ]; then PYTHON="$repo/.venv/bin/python"; else PYTHON=python3; fi
fi

log() { echo "build-image: $*" >&2; }

mkdir -p "$cache"
exec 9>"$cache/.build-image.lock"
flock 9

if [ "$BASE_IMAGE" = "$DEFAULT_BASE" ]; then
  bash "$here/build-base-image.sh" >&2
elif ! podman image exists "$BASE_IMAGE"; then
  log "base image $BASE_IMAGE is not in local storage (no registry can be pulled here)"
  exit 1
fi

cd "$repo"
inputs=(Dockerfile .dockerignore pyproject.toml)
for f in README.md LICENSE; do [ -f "$f" ] && inputs+=("$f"); done
mapfile -t sources < <(find operator -type f -not -path '*/__pycache__/*' -not -name '*.py[cod]' \
  -not -path '*.egg-info/*' | LC_ALL=C sort)
base_id="$(podman image inspect --format '{{.Id}}' "$BASE_IMAGE")"
hash="$({
  printf 'base %s %s\n' "$BASE_IMAGE" "$base_id"
  sha256sum -- "${inputs[@]}" "${sources[@]}"
} | sha256sum | cut -c1-16)"
tag="$IMAGE_REPO:src-$hash"

report_size() {
  local bytes
  bytes="$(podman image inspect --format '{{.Size}}' "$tag")"
  log "$tag: $bytes bytes ($((bytes / 1000000)) MB)"
}

if [ "${DREAMKEEPER_REBUILD_IMAGE:-0}" != 1 ] && podman image exists "$tag"; then
  podman tag "$tag" "$IMAGE_REPO:dev"
  log "up to date: $tag"
  report_size
  echo "$tag"
  exit 0
fi

# The wheelhouse must match the interpreter, libc and architecture of the base, not of the host.
read -r py_tag glibc arch < <("${PODMAN[@]}" run --rm --network none "${ULIMITS[@]}" "$BASE_IMAGE" python3 -c \
  'import platform, sys; v = platform.libc_ver()[1].replace(".", "_"); print(f"{sys.version_info[0]}{sys.version_info[1]} {v} {platform.machine()}")')
wheel_key="$({ cat pyproject.toml; echo "cp$py_tag manylinux_${glibc}_$arch"; } | sha256sum | cut -c1-16)"
wheelhouse="$cache/wheelhouse/$wheel_key"
if [ ! -d "$wheelhouse" ]; then
  log "downloading wheels for cp$py_tag manylinux_${glibc}_$arch into $wheelhouse"
  mkdir -p "$cache/wheelhouse"
  partial="$(mktemp -d "$wheelhouse.partial.XXXXXX")"
  trap 'rm -rf "$partial"' EXIT
  # pip does not expand a manylinux_2_X tag to the older glibc versions it is compatible with: list them.
  platforms=(--platform "linux_$arch" --platform "manylinux1_$arch" --platform "manylinux2010_$arch" --platform "manylinux2014_$arch")
  for ((minor = 5; minor <= ${glibc#2_}; minor++)); do platforms+=(--platform "manylinux_2_${minor}_$arch"); done
  # Runtime dependencies and the build backend (pip builds the project in an isolated env offline).
  "$PYTHON" -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join(d["project"]["dependencies"] + d["build-system"]["requires"]))' >"$partial/requirements.txt"
  "$PYTHON" -m pip download --quiet --disable-pip-version-check --only-binary=:all: \
    --implementation cp --python-version "$py_tag" --abi "cp$py_tag" \
    "${platforms[@]}" \
    --dest "$partial" -r "$partial/requirements.txt" >&2
  rm "$partial/requirements.txt"
  mv "$partial" "$wheelhouse"
  trap - EXIT
  # Older wheelhouses belong to older pyproject.toml versions; keep the three newest.
  find "$cache/wheelhouse" -mindepth 1 -maxdepth 1 -type d -not -name '*.partial.*' -printf '%T@ %p\n' |
    sort -rn | tail -n +4 | cut -d' ' -f2- | xargs -r rm -rf
fi

# A private copy of the context: other work in the tree may change while podman reads it.
context="$(mktemp -d "$cache/context.XXXXXX")"
trap 'rm -rf "$context"' EXIT
cp -- "${inputs[@]}" "$context/"
tar -cf - "${sources[@]}" | tar -C "$context" -xf -
cp -al "$wheelhouse" "$context/.wheelhouse" 2>/dev/null || cp -a "$wheelhouse" "$context/.wheelhouse"

log "building $tag from $BASE_IMAGE (offline)"
t0=$SECONDS
"${PODMAN[@]}" build --network none --layers "${ULIMITS[@]}" \
  --build-arg BASE_IMAGE="$BASE_IMAGE" \
  -t "$tag" -t "$IMAGE_REPO:dev" -f "$context/Dockerfile" "$context" >&2
log "built in $((SECONDS - t0)) s"
report_size

# Keep the three newest source tags; older ones only pin stale layers.
podman image ls --sort created --format '{{.Repository}}:{{.Tag}}' "$IMAGE_REPO" |
  grep -F ":src-" | grep -vxF "$tag" | tail -n +3 | xargs -r -n1 podman untag >&2 2>/dev/null || true
echo "$tag"
