"""Our own state files are read only as bounded regular files (issue 22, finding 5): a FIFO at the write-back index,
the reversals log or a held plan hung the cycle forever holding the lock; a symlink to /dev/zero there was a
MemoryError traceback. Now: one clear error naming the file, nothing changed, the lock released."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
import typer

from dreamkeeper.memory import CycleLock
from tests.robustness.conftest import invoke, make_agent, run_dream, tree

pytestmark = pytest.mark.timeout(120)  # the finding was a hang: fail instead of waiting forever

STATE_FILES = ["writeback-index.json", "reversals.jsonl", "holds/pending.json", "ledger.json"]
KINDS = ["fifo", "dev-zero", "directory", "device"]


def _plant(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.is_dir():
        path.rmdir()
    else:
        path.unlink(missing_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    else:
        try:
            os.mknod(path, 0o644 | stat.S_IFCHR, os.makedev(1, 5))  # /dev/zero's numbers
        except PermissionError:
            path.symlink_to("/dev/zero")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("name", STATE_FILES)
def test_a_state_file_that_is_no_regular_file_is_one_clear_error(
    cli_app: typer.Typer, tmp_path: Path, name: str, kind: str
) -> None:
    agent = make_agent(tmp_path / "agent", size=60)
    run_dream(agent)  # a history: journals, the index, the ledger
    _plant(agent / ".dreamkeeper" / name, kind)
    memory = tree(agent / "memory")
    result = invoke(cli_app, "dream", agent, "--force")
    assert result.exit_code == 1, result.output
    assert name.rsplit("/", 1)[-1] in result.output and "not a regular file" in result.output
    assert "nothing was changed" in result.output
    assert "Traceback" not in result.output and "MemoryError" not in result.output
    assert tree(agent / "memory") == memory
    with CycleLock(agent, "probe"):  # released
        pass


@pytest.mark.parametrize("command", ["undo", "restore", "purge", "recover"])
def test_every_command_that_writes_refuses_a_fifo_reversals_log(
    cli_app: typer.Typer, tmp_path: Path, command: str
) -> None:
    agent = make_agent(tmp_path / "agent", size=60)
    report = run_dream(agent).report  # type: ignore[attr-defined]
    _plant(agent / ".dreamkeeper" / "reversals.jsonl", "fifo")
    memory = tree(agent / "memory")
    archived = next(p for p in (agent / "memory").rglob("*.json") if '"archivedAt": "' in p.read_text())
    args = {
        "undo": ["undo", agent, report.cycle_id],
        "restore": ["memory", "restore", agent, archived.stem],
        "purge": ["memory", "purge", agent, "--retention-days", "1", "--yes"],
        "recover": ["recover", agent],
    }[command]
    result = invoke(cli_app, *args)
    assert result.exit_code == 1, result.output
    assert "reversals.jsonl" in result.output and "a FIFO, not a regular file" in result.output
    assert tree(agent / "memory") == memory
    with CycleLock(agent, "probe"):
        pass
