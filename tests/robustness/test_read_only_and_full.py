"""A read-only or full disk (issue 16 finding 7): one clear error, a `failed` result, a non-zero exit, and nothing
half applied that recovery cannot finish once the disk takes writes again.

The tests run as root in CI, for whom permission bits mean nothing: the permission cases run the cycle with the
effective uid of nobody (``as_nobody``), the read-only volume is a read-only bind mount, the full disk a tiny tmpfs
(both need mount rights) or, everywhere, the write path failing with ENOSPC after a number of writes."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from dreamkeeper.consolidation.journal import incomplete_journals
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory import atomic as atomic_module
from tests.robustness.conftest import as_nobody, give_to_nobody, invoke, make_agent, tree, warm_up


def _live_ids(agent: Path) -> set[str]:
    return {s.id for s in MemoryStore(agent / "memory").scan().live}


def _all_ids(agent: Path) -> set[str]:
    return {s.id for s in MemoryStore(agent / "memory").scan().entries}


def _one_clear_error(output: str) -> None:
    assert "Traceback" not in output and "During handling" not in output, output
    assert "error:" in output or "failed:" in output, output


def _report(agent: Path) -> dict[str, Any]:
    # The newest: cycle ids sort by the second they started in, then by a random suffix.
    path = max((agent / ".dreamkeeper" / "cycles").glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    return dict(json.loads(path.read_text()))


def _chmod_tree(root: Path, mode: int) -> None:
    for directory, subdirs, _ in os.walk(root):
        for name in [".", *subdirs]:
            os.chmod(Path(directory, name), mode)


def test_a_read_only_memory_tree_fails_the_cycle(cli_app: typer.Typer, reachable_dir: Path) -> None:
    """Every write refused (EACCES): the cycle used to report `completed`, exit 0."""
    # Links by shared specifics off: with them the writable re-run merges six paraphrases (all right) and the
    # blast radius holds the 60-entry agent's plan for approval; this test is about the failed writes and the re-run.
    similarity_only = ("--settings-json", '{"specifics_links": 0.0}')
    warm_up(cli_app, reachable_dir)
    agent = make_agent(reachable_dir / "agent")
    give_to_nobody(agent)
    memory_before = tree(agent / "memory")
    _chmod_tree(agent / "memory", 0o555)
    try:
        with as_nobody():
            result = invoke(cli_app, "dream", agent, *similarity_only)
    finally:
        _chmod_tree(agent / "memory", 0o755)
    assert result.exit_code == 1, result.output
    _one_clear_error(result.output)
    report = _report(agent)
    assert report["result"] == "failed" and report["writeFailures"] > 0
    assert "could not be written" in report["error"]
    assert tree(agent / "memory") == memory_before  # nothing half applied
    assert list(incomplete_journals(agent)) == []  # the failed steps are recorded: nothing wedged
    with as_nobody():
        again = invoke(cli_app, "dream", agent, *similarity_only)
    assert again.exit_code == 0, again.output
    assert _report(agent)["result"] == "completed", _report(agent)["error"]


def test_a_read_only_state_directory_is_one_clear_error(cli_app: typer.Typer, reachable_dir: Path) -> None:
    warm_up(cli_app, reachable_dir)
    agent = make_agent(reachable_dir / "agent")
    (agent / ".dreamkeeper").mkdir()
    give_to_nobody(agent)
    os.chmod(agent / ".dreamkeeper", 0o555)
    before = tree(agent)
    try:
        with as_nobody():
            results = [invoke(cli_app, *args) for args in (["dream", agent], ["recover", agent])]
        after = tree(agent)
    finally:
        os.chmod(agent / ".dreamkeeper", 0o755)
    for result in results:
        assert result.exit_code == 1, result.output
        _one_clear_error(result.output)
        assert ".dreamkeeper" in result.output
    assert after == before


@pytest.fixture
def read_only_memory(tmp_path: Path) -> Iterator[Path]:
    """An agent whose memory directory is a read-only bind mount of itself (EROFS, as a read-only volume)."""
    agent = make_agent(tmp_path / "agent")
    memory = agent / "memory"
    if subprocess.run(["mount", "--bind", str(memory), str(memory)], capture_output=True).returncode != 0:
        pytest.skip("no mount rights here: test_a_read_only_memory_tree_fails_the_cycle covers it by permissions")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(memory), str(memory)], check=True)
        yield agent
    finally:
        subprocess.run(["umount", str(memory)], check=True)


def test_a_read_only_volume_fails_clearly_and_recovery_finishes_later(
    cli_app: typer.Typer, read_only_memory: Path
) -> None:
    agent = read_only_memory
    ids = _all_ids(agent)
    memory_before = tree(agent / "memory")
    result = invoke(cli_app, "dream", agent)
    assert result.exit_code == 1, result.output
    _one_clear_error(result.output)
    assert "Read-only file system" in result.output
    assert _report(agent)["result"] == "failed"
    assert tree(agent / "memory") == memory_before
    subprocess.run(["mount", "-o", "remount,bind,rw", str(agent / "memory"), str(agent / "memory")], check=True)
    assert list(incomplete_journals(agent))  # stopped, to be finished: a volume-wide error does not skip steps
    done = invoke(cli_app, "recover", agent)
    assert done.exit_code == 0, done.output
    assert list(incomplete_journals(agent)) == [] and _all_ids(agent) >= ids


@pytest.fixture
def disk_full_after(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Every temp file write fails with ENOSPC once ``n`` have succeeded (the write path of a full disk)."""
    original = atomic_module._write_temp

    def arm(n: int) -> None:
        left = [n]

        def write_temp(path: Path, data: bytes, old: os.stat_result | None = None) -> Any:
            if left[0] <= 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
            left[0] -= 1
            return original(path, data, old)

        monkeypatch.setattr(atomic_module, "_write_temp", write_temp)

    arm.undo = lambda: monkeypatch.setattr(atomic_module, "_write_temp", original)  # type: ignore[attr-defined]
    return arm


@pytest.mark.parametrize("after", [3, 25, 60])
def test_a_full_disk_stops_the_cycle_and_recovery_finishes_it(
    cli_app: typer.Typer, tmp_path: Path, disk_full_after: Any, after: int
) -> None:
    """ENOSPC at the n-th write (inside the fold, the merges, the stamps): one clear line and no chained
    traceback (the report cannot be written either), and once space is back the journal is finished: no entry
    lost, no source archived without its successor."""
    agent = make_agent(tmp_path / "agent", size=120)
    ids = _all_ids(agent)
    disk_full_after(after)
    result = invoke(cli_app, "dream", agent)
    disk_full_after.undo()
    assert result.exit_code == 1, result.output
    _one_clear_error(result.output)
    assert "No space left on device" in result.output
    done = invoke(cli_app, "recover", agent)
    assert done.exit_code == 0, done.output
    assert list(incomplete_journals(agent)) == []
    assert _all_ids(agent) >= ids
    for stored in MemoryStore(agent / "memory").scan().archived:
        reason = stored.entry.archive_reason or ""
        if reason.startswith("merged into "):
            assert reason.removeprefix("merged into ") in _all_ids(agent), reason  # its successor exists
    again = invoke(cli_app, "dream", agent, "--force")
    assert again.exit_code == 0, again.output
