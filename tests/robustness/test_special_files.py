"""Special files and sizes (issue 16 finding 6): a FIFO, socket or device anywhere the cycle reads is refused
without being opened; sizes are bounded before reading; the cycle ends with a clear result and releases its lock."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

import pytest
import typer

from dreamkeeper.memory import CycleLock, MemoryStore
from tests.robustness.conftest import invoke, make_agent, run_dream

pytestmark = pytest.mark.timeout(120)  # the finding was a hang: fail instead of waiting forever


def _fifo(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    return path


def _socket(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(path))
    sock.close()
    return path


def _char_device(path: Path) -> Path:
    """A character device (1, 3: /dev/null's numbers) where root may make one; a FIFO otherwise."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        os.mkfifo(path)
    return path


@pytest.mark.parametrize("vocabulary", ["fifo", "dev-zero", "socket", "directory"])
def test_a_vocabulary_that_is_no_file_falls_back_without_reading(tmp_path: Path, vocabulary: str) -> None:
    agent = make_agent(tmp_path / "agent")
    path = agent / "merge-coverage-vocabulary.json"
    if vocabulary == "fifo":
        _fifo(path)
    elif vocabulary == "socket":
        _socket(path)
    elif vocabulary == "directory":
        path.mkdir()
    settings = {"vocabulary_path": "/dev/zero"} if vocabulary == "dev-zero" else {}
    report = run_dream(agent, **settings).report  # type: ignore[attr-defined]
    assert report.result == "completed" and report.vocabulary_fallback == 1
    assert any("not a regular file" in note or "is a " in note for note in report.notes), report.notes


def test_a_fifo_directive_is_ignored_and_the_lock_released(tmp_path: Path) -> None:
    """With dream.md a FIFO, the cycle blocked after applying its fold, holding the lock forever."""
    agent = make_agent(tmp_path / "agent")
    _fifo(agent / "dream.md")
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.result == "completed" and report.folded > 0
    with CycleLock(agent, "probe"):  # free again
        pass


def test_special_files_in_the_memory_tree_are_never_opened(cli_app: typer.Typer, tmp_path: Path) -> None:
    agent = make_agent(tmp_path / "agent")
    memory = agent / "memory"
    specials = [
        _fifo(memory / "notes" / "fifo00000001.json"),
        _socket(memory / "notes" / "sock00000001.json"),
        _char_device(memory / "people" / "device000001.json"),
        _fifo(memory / ".embeddings" / "fifo00000001.bin"),
    ]
    embedding = next(iter(sorted((memory / ".embeddings").glob("*.bin"))))
    embedding.unlink()
    _fifo(embedding)  # the embedding of a real entry, as a FIFO
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.result == "completed"
    for args in (["memory", "stats", agent], ["memory", "list", agent], ["recover", agent]):
        assert invoke(cli_app, *args).exit_code == 0
    assert all(not p.is_file() and os.path.lexists(p) for p in specials)


def test_an_oversized_entry_is_refused_before_reading(tmp_path: Path) -> None:
    agent = make_agent(tmp_path / "agent")
    big = agent / "memory" / "notes" / "huge00000001.json"
    big.parent.mkdir(exist_ok=True)
    with open(big, "wb") as out:
        out.truncate(9 * 1024 * 1024)  # sparse: nothing to read, but over the 8 MiB limit
    (item,) = [m for m in MemoryStore(agent / "memory").scan().malformed if m.path == big]
    assert item.kind == "unreadable" and "limit" in item.error
    assert run_dream(agent).report.result == "completed"  # type: ignore[attr-defined]
    assert big.stat().st_size == 9 * 1024 * 1024


def test_a_fifo_at_the_lock_holder_file_does_not_hang(tmp_path: Path) -> None:
    """The lock replaces its holder file as it takes the lock; the other state files: test_state_files.py."""
    agent = make_agent(tmp_path / "agent")
    _fifo(agent / ".dreamkeeper" / "lock.json")
    outcome = run_dream(agent)
    assert outcome.report.result == "completed"  # type: ignore[attr-defined]


def test_a_fifo_or_device_among_the_agents_directives_and_feedback_does_not_hang(tmp_path: Path) -> None:
    """memory-rules.md and feedback/**/*.jsonl are read every cycle (RockBot's directives and signals)."""
    agent = make_agent(tmp_path / "agent")
    _fifo(agent / "memory-rules.md")
    _fifo(agent / "feedback" / "session-1.jsonl")
    (agent / "feedback" / "zero.jsonl").symlink_to("/dev/zero")
    long_line = agent / "feedback" / "long.jsonl"
    long_line.write_bytes(b"x" * (200 * 1024) + b"\n")  # one line over the line limit, then nothing
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.result == "completed"
