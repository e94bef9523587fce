"""Undo meets the stale write-back repair and recovery (issue 22, findings 1 and 2): an undo is announced before its
first write, so an undo that did not finish is neither redone by the next cycle's repair nor by its recovery; it is
resumed, and nothing live is orphaned. Every assertion on loss uses the tests' own census (``census.py``)."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import typer

from dreamkeeper.consolidation.journal import journal_dir
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory import atomic as atomic_module
from tests.robustness.census import live_texts, lost_since, orphans
from tests.robustness.conftest import Killed, invoke, make_agent, run_dream, tree

REPO = Path(__file__).resolve().parents[2]

# The child undoes a cycle and SIGKILLs itself (as an eviction or the OOM killer would) as it is about to write its
# n-th restore (a guarded write of a file that is archived now): some merges are undone by then (sources restored,
# successors archived), the rest not.
UNDO_CHILD = textwrap.dedent(
    """
    import json, os, signal, sys
    from pathlib import Path
    from dreamkeeper.consolidation.undo import undo_cycle
    from dreamkeeper.memory import CycleLock, atomic

    agent, cycle, nth = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    seen = [0]

    def hook(at, path):
        if at == "checked" and json.loads(path.read_text()).get("archivedAt"):
            seen[0] += 1
            if seen[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)

    with atomic.write_seam(hook), CycleLock(agent, "undo"):
        undo_cycle(agent, agent / "memory", cycle)
    sys.exit("the undo ended before the chosen write")
    """
)


def _undo_killed(agent: Path, cycle_id: str, nth: int) -> None:
    killed = subprocess.run(
        [sys.executable, "-c", UNDO_CHILD, str(agent), cycle_id, str(nth)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]


def _first_cycle(
    tmp_path: Path, size: int = 300, **settings: Any
) -> tuple[Path, dict[str, tuple[str, str | None]], Any]:
    agent = make_agent(tmp_path / "agent", size=size)
    before = live_texts(agent)
    report = run_dream(agent, **settings).report  # type: ignore[attr-defined]
    assert report.result == "completed" and report.saved > 10 and report.archived > 20
    return agent, before, report


def test_an_undo_killed_midway_is_not_redone_by_the_next_repair(tmp_path: Path) -> None:
    """Finding 1: SIGKILL mid-undo; the next cycle's repair archived the restored sources again as "stale
    write-back; merged into X" with every X archived by the undo: 57 live facts orphaned, report saying 0."""
    agent, before, first = _first_cycle(tmp_path)
    _undo_killed(agent, first.cycle_id, 40)
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.resurrected == 0  # nothing the undo brought back was taken for a stale copy
    assert orphans(agent) == []
    assert lost_since(before, agent) == [] and report.specifics_lost == 0
    assert report.result == "completed", report.error
    assert any(n.startswith(f"finished the interrupted undo of cycle {first.cycle_id}") for n in report.notes)


def test_undo_again_finishes_an_undo_that_was_killed(cli_app: typer.Typer, tmp_path: Path) -> None:
    agent, before, first = _first_cycle(tmp_path)
    _undo_killed(agent, first.cycle_id, 40)
    result = invoke(cli_app, "undo", agent, first.cycle_id)
    assert result.exit_code == 0, result.output
    assert live_texts(agent) == before  # the corpus reads as before the cycle
    assert "resumed and finished the undo of" in result.output
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.resurrected == 0 and orphans(agent) == [] and lost_since(before, agent) == []


def test_an_undo_whose_reversals_log_cannot_be_written_changes_nothing(cli_app: typer.Typer, tmp_path: Path) -> None:
    """Finding 1: with reversals.jsonl unwritable, undo restored the sources, then failed with a bare
    "[Errno 21] Is a directory", and the next cycle's repair archived them again."""
    agent, before, first = _first_cycle(tmp_path)
    log = agent / ".dreamkeeper" / "reversals.jsonl"
    shutil.rmtree(log, ignore_errors=True)
    log.unlink(missing_ok=True)
    log.mkdir()
    memory_before = tree(agent / "memory")
    result = invoke(cli_app, "undo", agent, first.cycle_id)
    assert result.exit_code == 1
    assert "reversals.jsonl" in result.output and "a directory, not a regular file" in result.output
    assert "Errno" not in result.output and "Traceback" not in result.output
    assert tree(agent / "memory") == memory_before  # nothing restored, nothing archived
    log.rmdir()
    report = run_dream(agent).report  # type: ignore[attr-defined]
    assert report.result == "completed" and orphans(agent) == []
    assert lost_since(before, agent) == []


def _killed_mid_apply(agent: Path, after_plan_writes: int, **settings: Any) -> str:
    """A cycle killed at its n-th guarded write of the plan (its merges' archives), after its fold: its journal left
    unfinished. Returns the cycle id."""
    journals = journal_dir(agent)
    seen = [0]

    def hook(stage: str, path: Path) -> None:
        if stage != "checked":
            return
        plan = [p for p in journals.glob("*.jsonl") if not p.stem.endswith(("-fold", "-decay", "-writeback"))]
        if plan:
            seen[0] += 1
            if seen[0] == after_plan_writes:
                raise Killed

    with atomic_module.write_seam(hook), contextlib.suppress(Killed):
        run_dream(agent, **settings)
    assert seen[0] == after_plan_writes, "the cycle never reached the chosen write of its plan"
    (plan,) = [p for p in journals.glob("*.jsonl") if not p.stem.endswith(("-fold", "-decay", "-writeback"))]
    return plan.stem


def test_undo_of_a_cycle_killed_mid_apply_is_never_finished_by_the_next_recovery(
    cli_app: typer.Typer, tmp_path: Path
) -> None:
    """Finding 2: undo (exit 0) of a cycle killed mid-apply; the next cycle's recovery then finished the undone
    journal, archiving sources "merged into" the successors the undo had archived (decay off, as with new
    sources inside the grace period)."""
    settings = {"decay": {"enabled": False}}
    agent = make_agent(tmp_path / "agent", size=300)
    before = live_texts(agent)
    cycle_id = _killed_mid_apply(agent, 12, **settings)
    result = invoke(cli_app, "undo", agent, cycle_id, "--json")
    assert result.exit_code == 0, result.output
    report = run_dream(agent, **settings).report  # type: ignore[attr-defined]
    assert report.result == "completed", report.error
    assert not any(n.startswith(f"finished interrupted cycle {cycle_id}") for n in report.notes), report.notes
    journal = (journal_dir(agent) / f"{cycle_id}.jsonl").read_text().splitlines()
    assert json.loads(journal[-2]) == {"kind": "undone", "at": json.loads(journal[-2])["at"]}  # closed, undone
    undone = {s.id for s in MemoryStore(agent / "memory").scan().entries if s.entry.meta("dreamkeeperArchivedByCycle")
              == f"undo-{cycle_id}"}  # fmt: skip
    assert undone, "the undo archived no successor: the test would prove nothing"
    for stored in MemoryStore(agent / "memory").scan().archived:
        assert stored.entry.archive_reason not in {f"merged into {i}" for i in undone}, stored.id
    assert orphans(agent) == [] and lost_since(before, agent) == []
