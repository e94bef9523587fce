"""The agent's own deletions are counted apart from ours (issue 16 finding 8): 1,481 of them in one cycle were
counted as hard deletes, and the critical alert would have paged for nothing. `hardDeletes` now counts only entries
this cycle wrote that are gone after it; entries it never wrote that disappeared are `agentDeletes`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from dreamkeeper.consolidation import CycleOptions, CycleSettings, run_cycle
from dreamkeeper.memory import MemoryStore
from dreamkeeper.proposers import ProposerConfig, make_proposer
from tests.robustness.conftest import make_agent, run_dream


def _journal_ids(agent: Path) -> set[str]:
    ids = set()
    for path in (agent / ".dreamkeeper" / "journal").glob("*.jsonl"):
        header = json.loads(path.read_text().splitlines()[0])
        ids |= {step["id"] for step in header["steps"]}
    return ids


def _cycle_deleting(agent: Path, *, ours: int, theirs: int, second: bool) -> object:
    """A cycle during which, once apply is done, the agent deletes ``theirs`` entries the cycle never touched and
    ``ours`` that it wrote (RockBot's DeleteMemory tool: File.Delete of the path). ``second``: a first cycle ran
    before (and reviewed everything), so this one leaves most entries alone."""
    if second:
        run_dream(agent)
        for journal in (agent / ".dreamkeeper" / "journal").glob("*.jsonl"):
            journal.rename(journal.with_name(journal.name + ".first"))  # only this cycle's journals count below
    deleted: list[str] = []

    def progress(stage: str) -> None:
        if stage != "report":
            return
        touched = _journal_ids(agent)
        entries = MemoryStore(agent / "memory").scan().entries
        untouched = [s for s in entries if s.id not in touched]
        written = [s for s in entries if s.id in touched]
        for stored in (*untouched[:theirs], *written[:ours]):
            stored.path.unlink()
            deleted.append(stored.id)

    options = CycleOptions(
        agent_dir=agent, settings=CycleSettings(min_interval_hours=0, archive_cap=1.0), progress=progress
    )
    outcome = asyncio.run(run_cycle(options, make_proposer(ProposerConfig())))
    assert len(deleted) == ours + theirs
    return outcome.report


def test_the_agents_deletions_are_not_hard_deletes(tmp_path: Path) -> None:
    report = _cycle_deleting(make_agent(tmp_path / "agent", size=200), ours=0, theirs=7, second=True)
    assert report.hard_deletes == 0 and report.agent_deletes == 7  # type: ignore[attr-defined]
    assert report.result == "completed"  # type: ignore[attr-defined]


def test_an_entry_this_cycle_wrote_that_is_gone_is_a_hard_delete(tmp_path: Path) -> None:
    """The alert means us: an entry our steps wrote and that is gone after them is counted (whoever removed it,
    the cycle cannot tell; it was ours to keep)."""
    report = _cycle_deleting(make_agent(tmp_path / "agent", size=200), ours=2, theirs=0, second=False)
    assert report.hard_deletes == 2 and report.agent_deletes == 0  # type: ignore[attr-defined]
