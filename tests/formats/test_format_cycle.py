"""Whole cycles through the format seam (``CycleOptions.format``): ingest, the engine, render, under one lock."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.proposal import Batch, ProposalRequest
from dreamkeeper.formats import PROFILES, get_format, units_root
from dreamkeeper.formats import records as rec
from dreamkeeper.formats.check import consistency
from dreamkeeper.memory import REVIEWED_AT, MemoryStore
from dreamkeeper.proposers import ScriptedProposer
from tests.agents.format_cycle import dream
from tests.formats.helpers import NOW, openclaw_agent

# Run with the corpus index cold, warm, stale and corrupt: the same decisions each time (tests/corpus_index_modes.py).
pytestmark = pytest.mark.usefixtures("corpus_index_mode")


def _tree(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _problems(agent: Path, name: str) -> list[str]:
    return consistency(agent, PROFILES[name], MemoryStore(units_root(agent))).problems


def test_identical_bullets_under_one_heading_fold_into_one_and_keep_their_identity(tmp_path: Path) -> None:
    """Found by the year simulation: the engine's fold fills a survivor's missing metadata from its copies, so a
    survivor whose ordinal was left implicit (#1) took its removed copy's (#2), and the next ingest took the unit for
    one the agent removed and made it a new one."""
    agent = openclaw_agent(tmp_path)
    memory = agent / "workspace" / "MEMORY.md"
    facts = [f"- Room {n} is booked for the offsite on 2026-12-{10 + n} (ref OFF-{n}{n})." for n in range(4)]
    memory.write_text(memory.read_text() + "\n## Offsite\n\n" + "".join(f"{f}\n" for f in facts))
    nothing = ScriptedProposer(lambda batch, request: {"toSave": [], "toDelete": []})
    dream(agent, "openclaw", now=NOW, proposer=nothing)
    memory.write_text(memory.read_text() + "".join(f"{f}\n" for f in facts))  # the agent wrote them again, later
    second = dream(agent, "openclaw", now=NOW + timedelta(hours=12), proposer=nothing)
    assert second.report.folded == 4 and second.report.units_taken_out == 4  # the later copies, the older survive
    for fact in facts:
        assert memory.read_text().count(fact + "\n") == 1
    assert _problems(agent, "openclaw") == []
    third = dream(agent, "openclaw", now=NOW + timedelta(hours=24), proposer=nothing)
    assert (third.report.units_ingested, third.report.units_kept_for_agent) == (0, 0)


def test_promotions_from_daily_notes_share_one_heading(tmp_path: Path) -> None:
    """Found by the year simulation: the promotion heading, created under the file's title, was not found again by
    its own path, and every cycle added another one."""
    agent = openclaw_agent(tmp_path)
    days = agent / "workspace" / "memory"
    (days / "2026-11-28.md").write_text("# 2026-11-28\n\n- Lisbon office opened on 2026-11-02 (lease LIS-44).\n")
    (days / "2026-11-27.md").write_text("# 2026-11-27\n\n- Lisbon office opened 2026-11-02, lease LIS-44.\n")
    dream(agent, "openclaw", now=NOW)
    (days / "2026-11-26.md").write_text("# 2026-11-26\n\n- Ana Souza joined on 2026-10-01 (badge B-771).\n")
    (days / "2026-11-25.md").write_text("# 2026-11-25\n\n- Ana Souza joined 2026-10-01, badge B-771.\n")
    dream(agent, "openclaw", now=NOW + timedelta(hours=12))
    text = (agent / "workspace" / "MEMORY.md").read_text()
    assert text.count("## Consolidated from daily notes") == 1
    assert "LIS-44" in text and "B-771" in text
    assert _problems(agent, "openclaw") == []


def test_a_dry_run_writes_nothing_not_even_the_records(tmp_path: Path) -> None:
    agent = openclaw_agent(tmp_path)
    dream(agent, "openclaw", now=NOW)
    (agent / "workspace" / "MEMORY.md").write_text(
        (agent / "workspace" / "MEMORY.md").read_text() + "\n- Franklin Oduya prefers Slack; phone +1 386-299-4605.\n"
    )
    before = _tree(agent)
    import asyncio

    from dreamkeeper.consolidation import CycleOptions, CycleSettings, run_cycle
    from tests.agents.format_cycle import SETTINGS, joiner

    options = CycleOptions(
        agent_dir=agent,
        settings=CycleSettings.model_validate(SETTINGS),
        dry_run=True,
        force=True,
        format=get_format("openclaw"),
    )
    outcome = asyncio.run(run_cycle(options, joiner()))
    assert outcome.report.result == "dry-run"
    assert outcome.plan is not None and outcome.plan.merges, "the unit the agent just wrote was planned on"
    assert _tree(agent) == before


def test_the_purge_never_deletes_the_record_of_a_unit_still_in_a_daily_note(tmp_path: Path) -> None:
    """Found by the year simulation: consolidated daily-note units stay in their append-only notes; purging their
    records past retention made the next ingest take them for new units, every retention period."""
    agent = openclaw_agent(tmp_path)
    first = dream(agent, "openclaw", now=NOW, settings={"retention_days": 1})
    assert first.report.folded + first.report.archived_with_replacement > 0
    consolidated = [
        s.entry.id
        for s in MemoryStore(units_root(agent)).scan().entries
        if s.entry.is_archived and s.entry.category == "daily" and rec.placement_of(s.entry) == rec.IN_FILE
    ]
    assert consolidated
    later = dream(agent, "openclaw", now=NOW + timedelta(days=30), settings={"retention_days": 1})
    assert later.report.units_ingested == 0
    store = MemoryStore(units_root(agent))
    for record_id in consolidated:
        assert store.get(record_id) is not None
    assert _problems(agent, "openclaw") == []


def test_rockbot_is_the_default_format_and_its_store_is_its_memory_folder(tmp_path: Path) -> None:
    from dreamkeeper.consolidation import CycleOptions

    options = CycleOptions(agent_dir=tmp_path)
    assert options.memory_format.name == "rockbot" and options.memory_root == tmp_path / "memory"
    markdown = CycleOptions(agent_dir=tmp_path, format=get_format("hermes"))
    assert markdown.memory_root == tmp_path / ".dreamkeeper" / "units"


def test_a_cycle_says_when_openclaws_own_dreaming_is_on(tmp_path: Path) -> None:
    agent = openclaw_agent(tmp_path)  # no openclaw.json: OpenClaw's default, dreaming on
    on = dream(agent, "openclaw", now=NOW)
    assert any("openclaw's own consolidation is on" in note for note in on.report.notes)
    (agent / "openclaw.json").write_text(
        '{"plugins": {"entries": {"memory-core": {"config": {"dreaming": {"enabled": false}}}}}}'
    )
    off = dream(agent, "openclaw", now=NOW + timedelta(hours=12))
    assert not any("own consolidation" in note for note in off.report.notes)


def test_review_stamps_live_in_the_unit_records_and_keep_a_reviewed_unit_from_being_asked_again(
    tmp_path: Path,
) -> None:
    """Markdown has no metadata slot: the engine's review stamp is kept on the unit's record (outside every file the
    agent reads), the agent's files stay byte for byte, and the stamp holds across the next ingest (identity is
    stable), so the model is not asked about the same units again."""
    agent = openclaw_agent(tmp_path)
    workspace = agent / "workspace"
    before = _tree(workspace)
    asked: list[set[str]] = []

    def nothing(batch: Batch, request: ProposalRequest) -> dict[str, Any]:
        asked.append({o.entry.content for o in batch.entries})
        return {"toSave": [], "toDelete": []}

    first = dream(agent, "openclaw", now=NOW, proposer=ScriptedProposer(nothing))
    assert first.report.reviewed > 0 and asked
    assert _tree(workspace) == before  # no stamp, no comment, nothing of ours in the agent's files
    stamped = [s for s in MemoryStore(units_root(agent)).scan().live if s.entry.meta(REVIEWED_AT)]
    assert len(stamped) == first.report.reviewed
    assert all(REVIEWED_AT not in p.read_text() for p in workspace.rglob("*.md"))
    asked.clear()
    second = dream(agent, "openclaw", now=NOW + timedelta(hours=12), proposer=ScriptedProposer(nothing))
    assert second.report.units_ingested == 0 and second.report.units_kept_for_agent == 0
    offered: set[str] = set().union(*asked)
    again = {s.entry.content for s in stamped} & offered
    assert again == set(), f"reviewed units offered again: {again}"
    assert _tree(workspace) == before
    assert not (agent / "dream-pass-ledger.json").exists()  # RockBot's ledger is RockBot's: not in another agent's dir
