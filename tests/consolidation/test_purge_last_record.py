"""The purge keeps last records (issue 15 item 8): an archived entry past retention is hard-deleted only when every
specific it holds is still said by a live entry, or it holds none. The cycle's purge and ``dreamkeeper memory
purge`` apply the same rule; ``memory list --archived`` says why each archived entry stays."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.memory_cli import register as register_list_and_purge
from dreamkeeper.consolidation.purge import LastRecords
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.coverage import CoverageIndex, Vocabulary, extract_specifics
from dreamkeeper.memory import Entry, MemoryStore
from dreamkeeper.memory.cli import register
from dreamkeeper.proposers import ScriptedProposer
from tests.coverage.test_properties import ATOMS
from tests.parity import rockbot_files

# Run with the corpus index cold, warm, stale and corrupt: the same decisions each time (tests/corpus_index_modes.py).
pytestmark = pytest.mark.usefixtures("corpus_index_mode")

# The real clock, to the second: ``memory purge`` and ``memory list`` read it (a CLI has no other), so the ages
# must be counted from it. A fixed date here made "young" (archived 10 days before it) due 90 days later, the day CI
# ran: the tests went off like a time bomb on 2026-12-03.
NOW = rockbot_files.datetime.now(rockbot_files.UTC).replace(microsecond=0)
SEED_LOSS = "Trish Roberts runs PWOP Productions in Las Vegas."


def archived(root: Path, entry_id: str, content: str, days: float = 120, **fields: Any) -> None:
    obj = rockbot_files.entry(entry_id, content, createdAt=NOW - timedelta(days=days + 30), **fields)
    obj["archivedAt"] = NOW - timedelta(days=days)
    obj["archiveReason"] = "flagged ephemeral by consolidation"
    rockbot_files.write(root, obj)


def live(root: Path, entry_id: str, content: str) -> None:
    rockbot_files.write(root, rockbot_files.entry(entry_id, content, createdAt=NOW - timedelta(days=3)))


@pytest.fixture
def agent(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    archived(root, "trish", SEED_LOSS)  # the seed's loss: said nowhere else
    archived(root, "allen", "Allen Conway works at Xebia.")  # still said by a live entry
    archived(root, "plain", "lunch was fine today.")  # no specifics at all
    archived(root, "taxes", "Estimated taxes are due 2026-09-10 for Marimer LLC.")  # a date said differently
    archived(root, "young", "Matt and Lacey join the call.", days=10)  # not due
    live(root, "allen2", "Allen Conway is a Principal Consultant at Xebia.")
    live(root, "taxes2", "Marimer LLC pays estimated taxes on September 10, 2026.")
    return tmp_path


def run(agent: Path) -> Any:
    options = CycleOptions(agent_dir=agent, settings=CycleSettings(min_interval_hours=0), now=NOW)
    return asyncio.run(run_cycle(options, ScriptedProposer(lambda b, r: {"toDelete": [], "toSave": []})))


def test_the_cycle_purges_only_entries_whose_specifics_are_still_live(
    agent: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="dreamkeeper")
    report = run(agent).report
    store = MemoryStore(agent / "memory")
    assert store.get("allen") is None and store.get("plain") is None and store.get("taxes") is None
    assert store.require("trish").entry.is_archived and store.require("young").entry.is_archived
    assert (report.purged, report.purge_kept_last_record, report.hard_deletes) == (3, 1, 0)
    kept = next(
        r.getMessage() for r in caplog.records if r.getMessage().startswith("purge kept archived memory entry trish")
    )
    assert "last record of Trish, Roberts, PWOP, Productions, Las, Vegas" in kept and SEED_LOSS in kept
    assert any(
        "3 purged, 0 kept above the high-value floor, 1 kept as last records" in r.getMessage() for r in caplog.records
    )


def test_a_last_record_goes_once_a_live_entry_says_it_again(agent: Path) -> None:
    run(agent)
    live(agent / "memory", "trish2", "Trish Roberts of PWOP Productions lives in Las Vegas.")
    report = run(agent).report
    assert report.purged == 1 and MemoryStore(agent / "memory").get("trish") is None


def app() -> typer.Typer:
    root = typer.Typer(pretty_exceptions_enable=False)
    register(root)
    register_list_and_purge(root)
    return root


def test_memory_purge_applies_the_same_rule(agent: Path) -> None:
    result = CliRunner().invoke(app(), ["memory", "purge", str(agent), "--yes", "--json"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert sorted(e["id"] for e in report["purged"]) == ["allen", "plain", "taxes"]
    assert report["keptLastRecord"] == [
        {"id": "trish", "reason": "last record of Trish, Roberts, PWOP, Productions, Las, Vegas"}
    ]
    text = CliRunner().invoke(app(), ["memory", "purge", str(agent)], catch_exceptions=False).stdout
    assert "kept trish" in text and "1 as last records" in text


def test_memory_list_archived_shows_what_purge_would_do_and_why(agent: Path) -> None:
    result = CliRunner().invoke(app(), ["memory", "list", str(agent), "--archived", "--json"], catch_exceptions=False)
    rows = {row["id"]: (row["purge"], row["purgeReason"]) for row in json.loads(result.stdout)}
    assert rows["trish"] == ("kept", "last record of Trish, Roberts, PWOP, Productions, Las, Vegas")
    assert rows["allen"] == ("due", "every specific is still said by a live entry")
    assert rows["young"][0] == "not due" and rows["young"][1].startswith("purge from ")
    table = CliRunner().invoke(app(), ["memory", "list", str(agent), "--archived"], catch_exceptions=False)
    assert "kept: last" in table.stdout and "record of" in table.stdout  # wrapped in a narrow terminal


def test_a_specific_only_said_jointly_keeps_the_entry() -> None:
    """Sound, never exact: a month name credited only by dates in two different live texts counts as absent."""
    rule = LastRecords(["The launch was moved to 2026-08-19."], Vocabulary())
    assert rule.missing(Entry(id="a", content="The launch is on August 19, 2026.")) == []
    joint = LastRecords(["Invoices go out on the 19th.", "The board meets in August 2026."], Vocabulary())
    assert joint.missing(Entry(id="b", content="Invoices go out on August 19, 2026.")) != []


texts = st.lists(st.lists(st.sampled_from(ATOMS), min_size=1, max_size=6).map(" ".join), min_size=0, max_size=6)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(live_texts=texts, candidate=st.lists(st.sampled_from(ATOMS), min_size=1, max_size=6).map(" ".join))
def test_the_rule_never_lets_a_last_record_go(live_texts: list[str], candidate: str) -> None:
    """Whenever the rule lets an entry go, the whole live corpus (the census's index) says every one of its
    specifics: the rule is sound, whatever the texts."""
    vocabulary = Vocabulary()
    rule = LastRecords(live_texts, vocabulary)
    entry = Entry(id="c", content=candidate)
    if rule.missing(entry):
        return
    index = CoverageIndex()
    for text in live_texts:
        index.add(text)
    assert all(index.covers(s) for s in extract_specifics(candidate, None, vocabulary))
