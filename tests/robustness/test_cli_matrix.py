"""The CLI's bad-argument matrix (issue 16 findings 2, 3, 6, 7): every bad value, file or directory gets one clear
error and a usage exit code, no traceback, no hang, and nothing is written or created anywhere."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
import typer

from tests.robustness.conftest import invoke, tree

pytestmark = pytest.mark.timeout(120)  # a FIFO read would block forever: fail instead

DEEP = "[" * 100_000 + "]" * 100_000

BAD_FLAGS = [
    ["--retention-days", "true"],
    ["--retention-days", "1.5"],
    ["--retention-days", "-1"],
    ["--retention-days", "999999999"],
    ["--similarity-threshold", "nan"],
    ["--similarity-threshold", "inf"],
    ["--similarity-threshold", "0"],
    ["--similarity-threshold", "1.5"],
    ["--min-interval-hours", "1e10"],
    ["--min-interval-hours", "-inf"],
    ["--batch-size", "1"],
    ["--proposer", "openai", "--model", "m", "--timeout", "inf"],
    ["--proposer", "openai", "--model", "m", "--timeout", "0"],
    ["--proposer", "openai", "--model", "m", "--concurrency", "0"],
    ["--proposer", "nonsense"],
]

BAD_SETTINGS = [
    "[]",
    "1",
    "null",
    '"retention_days"',
    '[["retention_days", 1]]',
    '{"retention_days": true}',
    '{"retention_days": "1"}',
    '{"retention_days": 999999999}',
    '{"retention_days": 1.0}',
    '{"reopen_interval_days": Infinity}',
    '{"reopen_interval_days": NaN}',
    '{"min_interval_hours": 1e400}',
    '{"retention_days": 1, "retention_days": 90}',
    '{"floor": {"importance": true}}',
    '{"floor": {"importance": 0.8, "importance": 9}}',
    '{"floor": []}',
    '{"protected_categories": "user-preferences/**"}',
    '{"protected_categories": [1]}',
    '{"exact_fold": 0}',
    '{"vocabulary_path": ""}',
    '{"no_such_dial": 1}',
    '{"proposer": []}',
    '{"proposer": {"timeout": "1"}}',
    '{"proposer": {"type": "offline", "concurrency": true}}',
    '{"proposer": {"type": "openai", "model": "m", "token_budget": 1e30}}',
    "{",
    DEEP,
]


def _check_refused(result: object, agent: Path, before: dict[str, object]) -> None:
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    assert isinstance(result.exception, SystemExit)  # type: ignore[attr-defined]
    assert tree(agent) == before  # nothing written, .dreamkeeper not even created


@pytest.mark.parametrize("flags", BAD_FLAGS, ids=[" ".join(f) for f in BAD_FLAGS])
def test_bad_flags_are_usage_errors(cli_app: typer.Typer, agent: Path, flags: list[str]) -> None:
    before = tree(agent)
    _check_refused(invoke(cli_app, "dream", agent, *flags), agent, before)


@pytest.mark.parametrize("text", BAD_SETTINGS, ids=[t[:40] for t in BAD_SETTINGS])
def test_bad_settings_are_refused_whole(cli_app: typer.Typer, agent: Path, tmp_path: Path, text: str) -> None:
    """Inline and as a file: nothing is applied (no purge, no write) before the whole object validated."""
    before = tree(agent)
    result = invoke(cli_app, "dream", agent, "--settings-json", text)
    _check_refused(result, agent, before)
    assert "invalid settings" in result.output
    settings = tmp_path / "settings.json"
    settings.write_text(text, encoding="utf-8")
    _check_refused(invoke(cli_app, "dream", agent, "--settings", settings), agent, before)


def test_a_lax_retention_never_purges(cli_app: typer.Typer, agent: Path) -> None:
    """Finding 2's loss: true read as 1 day purged entries archived 82 and 83 days ago. Refused now; the entries
    are still there."""
    archived = next(p for p in sorted((agent / "memory").rglob("*.json")))
    obj = json.loads(archived.read_text())
    obj.update(archivedAt="2026-06-01T00:00:00+00:00", archiveReason="flagged ephemeral by consolidation")
    archived.write_text(json.dumps(obj))
    for value in ("true", '"1"', "1.0"):
        result = invoke(cli_app, "dream", agent, "--settings-json", f'{{"retention_days": {value}}}')
        assert result.exit_code == 2, result.output
    assert archived.exists()


def _special_files(tmp_path: Path) -> dict[str, Path]:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock_path = tmp_path / "socket"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(sock_path))
    sock.close()
    directory = tmp_path / "a-directory"
    directory.mkdir()
    utf16 = tmp_path / "utf16.json"
    utf16.write_bytes('{"retention_days": 90}'.encode("utf-16"))
    big = tmp_path / "big.json"
    with open(big, "wb") as out:
        out.truncate(64 * 1024 * 1024)  # sparse: 64 MiB of NULs, over the settings limit
    return {
        "fifo": fifo,
        "socket": sock_path,
        "dev-zero": Path("/dev/zero"),
        "directory": directory,
        "missing": tmp_path / "missing.json",
        "utf16": utf16,
        "too-large": big,
    }


@pytest.mark.parametrize("kind", ["fifo", "socket", "dev-zero", "directory", "missing", "utf16", "too-large"])
def test_a_settings_file_that_is_not_one_is_refused_without_reading_it(
    cli_app: typer.Typer, agent: Path, tmp_path: Path, kind: str
) -> None:
    before = tree(agent)
    result = invoke(cli_app, "dream", agent, "--settings", _special_files(tmp_path)[kind])
    _check_refused(result, agent, before)


def test_recover_never_creates_a_directory(cli_app: typer.Typer, tmp_path: Path) -> None:
    """Finding 3: `recover /nonexistent` created it."""
    missing = tmp_path / "nonexistent"
    result = invoke(cli_app, "recover", missing)
    assert result.exit_code == 2 and "does not exist" in result.output and not missing.exists()
    (tmp_path / "a-file").write_text("x")
    assert invoke(cli_app, "recover", tmp_path / "a-file").exit_code == 2
    bare = tmp_path / "bare"
    bare.mkdir()
    result = invoke(cli_app, "recover", bare)
    assert result.exit_code == 2 and "no memory directory" in result.output
    assert list(bare.iterdir()) == []


def test_recover_of_an_agent_without_state_creates_nothing(cli_app: typer.Typer, agent: Path) -> None:
    before = tree(agent)
    result = invoke(cli_app, "recover", agent)
    assert result.exit_code == 0 and "nothing to recover" in result.output
    assert tree(agent) == before


@pytest.mark.parametrize("command", ["dream", "recover", "undo"])
def test_a_symlinked_state_dir_is_refused(cli_app: typer.Typer, agent: Path, tmp_path: Path, command: str) -> None:
    """Finding 8: a .dreamkeeper symlink sent state outside the agent dir."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (agent / ".dreamkeeper").symlink_to(outside, target_is_directory=True)
    args = [command, agent] + (["20260101T000000Z-abcdef"] if command == "undo" else [])
    result = invoke(cli_app, *args)
    assert result.exit_code == 1, result.output
    assert "symbolic link" in result.output and "Traceback" not in result.output
    assert list(outside.iterdir()) == []


def test_undo_refuses_what_is_not_a_cycle(cli_app: typer.Typer, agent: Path, tmp_path: Path) -> None:
    before = tree(agent)
    assert invoke(cli_app, "undo", agent, "../../etc").exit_code == 2
    result = invoke(cli_app, "undo", agent, "20260101T000000Z-abcdef")
    assert result.exit_code == 1 and "no dreamkeeper state" in result.output
    assert invoke(cli_app, "undo", tmp_path / "nonexistent", "x").exit_code == 2
    assert tree(agent) == before


@pytest.mark.parametrize(
    "flags",
    [["--retention-days", "999999999999"], ["--retention-days", "-1"], ["--floor-importance", "nan"]],
    ids=lambda f: " ".join(f),
)
def test_memory_purge_bounds(cli_app: typer.Typer, agent: Path, flags: list[str]) -> None:
    before = tree(agent)
    result = invoke(cli_app, "memory", "purge", agent, *flags)
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert tree(agent) == before
