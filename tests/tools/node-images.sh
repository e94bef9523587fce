#!/usr/bin/env bash
# The images the real test node's pods run, as docker archives for `ctr images import` (no registry can be
# pulled here; containerd does not read podman's storage):
#   project  the project image (build-image.sh: operator, cycle Jobs, the vocabulary init container)
#   agent    the caching agent (tests/agents/caching_agent.py, stdlib only) on the same Python base: the agent
#            Deployment a DreamSchedule with `agent: Stop` coordinates with
#   pause    the sandbox image (tests/cluster/build-node.sh)
# stdout: one line per image, "<role> <image ref> <archive path>"; logs go to stderr. Each archive is named by the
# image's content-addressed tag, so a warm run saves nothing; the three newest archives of each role are kept.
# Guarded by a lock in the cache (tests and `make tools` may run it at once).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cache="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}"
k8s_version="$(awk -F= '$1=="K8S_VERSION"{print $2}' "$repo/tests/cluster/versions.env")"
out="$cache/k8s/node-images"
PODMAN=(podman --runtime runc --cgroup-manager cgroupfs)
AGENT_REPO=localhost/dreamkeeper/caching-agent
BASE_IMAGE=localhost/python-base:3.11-bookworm
log() { echo "node-images: $*" >&2; }

mkdir -p "$out"
exec 8>"$out/.lock"
flock 8

save() {  # save <role> <image ref>: the archive of that image (made once), printed as "<role> <ref> <path>"
  local role="$1" ref="$2" path
  path="$out/$role-${ref##*:}.tar"
  if [ ! -s "$path" ]; then
    log "saving $ref to $path"
    rm -f "$path.partial"
    podman save --format docker-archive -o "$path.partial" "$ref" >&2
    mv "$path.partial" "$path"
    # Older archives belong to older sources: keep the three newest of this role.
    find "$out" -maxdepth 1 -name "$role-*.tar" -printf '%T@ %p\n' | sort -rn | tail -n +4 | cut -d' ' -f2- |
      xargs -r rm -f
  fi
  echo "$role $ref $path"
}

project="$(bash "$here/build-image.sh")"   # also builds the Python base image when it is missing
save project "$project"

# The caching agent: its module and the two package markers, nothing else of the repo.
files=(tests/__init__.py tests/agents/__init__.py tests/agents/caching_agent.py)
containerfile='FROM '"$BASE_IMAGE"'
COPY tests/ /opt/agent/tests/
ENV PYTHONPATH=/opt/agent PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
# The agent user of the tests (the Deployment sets the same runAsUser; numeric, for runAsNonRoot).
USER 1000:1000
ENTRYPOINT ["python3", "-m", "tests.agents.caching_agent"]
'
base_id="$(podman image inspect --format '{{.Id}}' "$BASE_IMAGE")"
hash="$({ echo "$base_id"; echo "$containerfile"; (cd "$repo" && sha256sum -- "${files[@]}"); } | sha256sum | cut -c1-16)"
agent="$AGENT_REPO:src-$hash"
if ! podman image exists "$agent"; then
  ctx="$(mktemp -d)"
  (cd "$repo" && tar -cf - "${files[@]}") | tar -C "$ctx" -xf -
  printf '%s' "$containerfile" > "$ctx/Containerfile"
  log "building $agent"
  "${PODMAN[@]}" build --network none --quiet -t "$agent" -f "$ctx/Containerfile" "$ctx" >&2
  rm -rf "$ctx"
fi
save agent "$agent"

pause_tar="$cache/k8s/node-$k8s_version/images/pause.tar"
pause_id="$cache/k8s/node-$k8s_version/images/pause.id"
[ -s "$pause_tar" ] && [ -s "$pause_id" ] || { log "FATAL: no pause image; run tests/cluster/build-node.sh (make tools)"; exit 1; }
echo "pause $(cut -d' ' -f1 "$pause_id") $pause_tar"
