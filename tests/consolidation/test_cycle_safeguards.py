"""Regression tests for every failure the seed describes, through a whole cycle with a scripted proposer."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.report import read_report
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import REASON_EPHEMERAL, MemoryStore, review_hash
from dreamkeeper.memory.entry import MERGED_FROM, REVIEWED_HASH, UNUSABLE_AT, UNUSABLE_COUNT, UNUSABLE_HASH
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, entry_files, write_corpus

# Run with the corpus index cold, warm, stale and corrupt: the same decisions each time (tests/corpus_index_modes.py).
pytestmark = pytest.mark.usefixtures("corpus_index_mode")

ROCKFORD = (
    "Rocky Lhotka also appears in travel and calendar data as Rockford Duane Lhotka. "
    "Connected accounts include marimer-work, lhotka.net and xebia."
)
ROCKFORD_LOSSY = (
    "Rocky's connected communications infrastructure includes the accounts marimer-work, lhotka.net and xebia."
)


def cycle(agent_dir: Path, proposer: ScriptedProposer, **settings: Any) -> CycleOutcome:
    options = CycleOptions(
        agent_dir=agent_dir,
        settings=CycleSettings(min_interval_hours=0, **settings),
        now=BASE_TIME,
    )
    return asyncio.run(run_cycle(options, proposer))


def live_ids(store: MemoryStore) -> set[str]:
    return {s.id for s in store.scan().live}


def test_rejected_merge_sources_listed_in_to_delete_stay_live(tmp_path: Path) -> None:
    # The #506 shape: dream.md tells the model to list every source in toDelete too.
    store = write_corpus(
        tmp_path,
        [
            Seed("s1", "Allen Conway is a Xebia collaborator."),
            Seed("s2", "Allen Conway uses accountId rockyl."),
        ],
    )
    proposer = ScriptedProposer(
        [
            {
                "toSave": [{"content": "Allen Conway uses accountId rockyl", "sourceIds": ["s1", "s2"]}],
                "toDelete": ["s1", "s2"],
            }
        ]
    )
    outcome = cycle(tmp_path, proposer)
    assert outcome.report.rejected == 1
    assert outcome.report.archived == 0 and outcome.report.ephemeral == 0
    assert live_ids(store) == {"s1", "s2"}
    assert outcome.report.rejections[0].missing == ["Xebia"]


def test_rockford_duane_merge_rejected_and_sources_kept(tmp_path: Path) -> None:
    store = write_corpus(
        tmp_path,
        [
            Seed("identity", ROCKFORD, "user-preferences/identity", importance=0.99, reinforcement=73),
            Seed("accounts", "Rocky uses the accounts marimer-work and xebia.", "user-preferences/identity"),
        ],
    )
    proposer = ScriptedProposer(
        [{"toSave": [{"content": ROCKFORD_LOSSY, "sourceIds": ["identity", "accounts"]}], "toDelete": ["identity"]}]
    )
    outcome = cycle(tmp_path, proposer)
    rejection = outcome.report.rejections[0]
    assert {"Rockford", "Duane"} <= set(rejection.missing)
    assert live_ids(store) == {"identity", "accounts"}
    assert outcome.report.saved == 0


def test_blank_merge_shields_its_sources_from_to_delete(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, [Seed("a", "Trish Roberts runs PWOP Productions."), Seed("b", "Trish likes jazz.")])
    proposer = ScriptedProposer([{"toSave": [{"content": "   ", "sourceIds": ["a", "b"]}], "toDelete": ["a", "b"]}])
    outcome = cycle(tmp_path, proposer)
    assert live_ids(store) == {"a", "b"}
    assert outcome.report.ephemeral == 0 and outcome.report.saved == 0


def test_high_value_entries_are_never_pruned(tmp_path: Path) -> None:
    store = write_corpus(
        tmp_path,
        [
            Seed(
                "selfmodel",
                "The agent self-model notes routing to the Balanced tier.",
                "agent-knowledge/self-model",
                0.99,
                214,
            ),
            Seed(
                "routing", "Routing anti-pattern: escalate only after tool failure.", "anti-patterns/routing", 0.3, 106
            ),
            Seed("infra", "Infrastructure runs on Longhorn volumes.", "agent-knowledge/infrastructure", 0.99, 80),
            Seed("noise", "The weather was mild today.", "observations", 0.2, 1),
        ],
    )
    proposer = ScriptedProposer([{"toDelete": ["selfmodel", "routing", "infra", "noise"]}])
    outcome = cycle(tmp_path, proposer)
    assert live_ids(store) == {"selfmodel", "routing", "infra"}
    assert outcome.report.protected == 3
    assert outcome.report.ephemeral == 1
    archived = store.require("noise").entry
    assert archived.archive_reason == REASON_EPHEMERAL


def test_protected_category_is_never_pruned(tmp_path: Path) -> None:
    store = write_corpus(
        tmp_path,
        [
            Seed("pref", "Prefers short answers.", "user-preferences/style", 0.1, 1),
            Seed("pref2", "Likes tea.", "user-preferences", 0.1, 1),
        ],
    )
    outcome = cycle(tmp_path, ScriptedProposer([{"toDelete": ["pref", "pref2"]}]))
    assert live_ids(store) == {"pref", "pref2"}
    assert outcome.report.protected == 2


def test_invented_and_unoffered_ids_resolve_to_nothing(tmp_path: Path) -> None:
    reviewed = {REVIEWED_HASH: ""}  # placeholder, replaced below with a valid stamp
    store = write_corpus(
        tmp_path,
        [Seed("new1", "Trish Roberts booked Las Vegas."), Seed("new2", "The BlazorHol class is in Atlanta.")],
    )
    # An entry reviewed and unchanged, with no duplicate siblings, is withheld: naming it must do nothing.
    text = "Tripit holds the Las Vegas itinerary."
    reviewed[REVIEWED_HASH] = review_hash(text)
    write_corpus(tmp_path, [Seed("old", text, "travel", metadata=reviewed)])
    proposer = ScriptedProposer(
        [
            {
                "toDelete": ["old", "ghost-id", "../etc/passwd", "new2"],
                "toSave": [{"content": "Invented merge about Duane", "sourceIds": ["ghost", "old"]}],
            }
        ]
    )
    outcome = cycle(tmp_path, proposer)
    offered = {o.entry.id for b in proposer.requests[0].batches for o in b.entries}
    assert "old" not in offered
    assert "old" in live_ids(store)
    assert outcome.report.saved == 0
    assert entry_files(tmp_path) == {"new1", "new2", "old"}
    # Only new2, which was offered, was a prune to judge; the census keeps it (the last mention of BlazorHol).
    assert [(p.id, p.census) for p in outcome.report.protections] == [("new2", ["BlazorHol", "Atlanta"])]
    assert (outcome.report.ephemeral, outcome.report.prunes_refused) == (0, 1)


def test_good_merge_saves_successor_first_with_arithmetic_and_provenance(tmp_path: Path) -> None:
    store = write_corpus(
        tmp_path,
        [
            Seed("m1", "Rocky has a dog named Milo.", "people", 0.6, 3, age_days=30),
            Seed("m2", "Rocky has a Sheltie named Milo.", "people", 0.7, 2, age_days=5),
        ],
    )
    merged = "Rocky has a dog — a Sheltie named Milo."
    outcome = cycle(
        tmp_path,
        ScriptedProposer(
            [{"toSave": [{"content": merged, "sourceIds": ["m1", "m2"], "importance": 0.1}], "toDelete": ["m1", "m2"]}]
        ),
    )
    assert outcome.report.saved == 1 and outcome.report.archived_with_replacement == 2
    live = store.scan().live
    assert len(live) == 1
    successor = live[0].entry
    assert successor.content == merged
    assert successor.reinforcement_count == 5
    assert successor.importance_score == pytest.approx(0.7)  # the model may raise, never lower
    assert successor.created_at == min(store.require("m1").entry.created_at, store.require("m2").entry.created_at)
    assert successor.meta(MERGED_FROM) == "m1,m2"
    assert successor.meta(REVIEWED_HASH)  # merged outputs are stamped reviewed
    for source in ("m1", "m2"):
        archived = store.require(source).entry
        assert archived.archive_reason == f"merged into {successor.id}"
    report = read_report(tmp_path, outcome.report.cycle_id)
    assert report.hard_deletes == 0 and report.specifics_lost == 0


def test_archive_logs_content_at_info(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_corpus(
        tmp_path,
        [Seed("x", "Scratch note about lunch.", "observations", 0.1), Seed("y", "Other note.", "observations")],
    )
    # Name the logger: another test may have raised the "dreamkeeper" logger's level (benchmarks do).
    with caplog.at_level(logging.INFO, logger="dreamkeeper"):
        cycle(tmp_path, ScriptedProposer([{"toDelete": ["x"]}]))
    assert any(
        "Archived memory entry x" in r.message and "Scratch note about lunch." in r.message for r in caplog.records
    )


def test_unusable_reply_changes_nothing_and_stamps_only_its_backoff(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, [Seed("a", "Alpha fact about Zulu."), Seed("b", "Beta fact about Mike.")])
    before = {s.id: s.entry for s in store.scan().live}
    outcome = cycle(tmp_path, ScriptedProposer(["{ this is not json"]))
    assert outcome.report.invalid_replies == 1 and outcome.report.backed_off == 2
    assert live_ids(store) == {"a", "b"}
    for stored in store.scan().live:
        entry = stored.entry
        assert entry.content == before[stored.id].content and entry.meta(REVIEWED_HASH) is None
        assert entry.metadata == {UNUSABLE_HASH: review_hash(entry.content), UNUSABLE_AT: ANY, UNUSABLE_COUNT: "1"}


def test_second_cycle_withholds_reviewed_entries(tmp_path: Path) -> None:
    write_corpus(tmp_path, [Seed("a", "Alpha fact about Zulu."), Seed("b", "Beta fact about Mike.")])
    cycle(tmp_path, ScriptedProposer([{}]))
    second = ScriptedProposer([{}])
    outcome = cycle(tmp_path, second)
    assert outcome.report.reviewed == 0 and outcome.report.withheld == 2
    assert second.requests == []


def test_dry_run_writes_nothing(tmp_path: Path) -> None:
    write_corpus(tmp_path, [Seed("a", "Alpha note."), Seed("b", "Beta note.")])
    snapshot = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    options = CycleOptions(
        agent_dir=tmp_path, settings=CycleSettings(min_interval_hours=0), dry_run=True, now=BASE_TIME
    )
    outcome = asyncio.run(run_cycle(options, ScriptedProposer([{"toDelete": ["a"]}])))
    assert outcome.report.result == "dry-run" and outcome.report.ephemeral == 1
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == snapshot


def test_minimum_interval_skips_a_second_cycle(tmp_path: Path) -> None:
    write_corpus(tmp_path, [Seed("a", "Alpha note."), Seed("b", "Beta note.")])
    options = CycleOptions(agent_dir=tmp_path, settings=CycleSettings(), now=BASE_TIME)
    first = asyncio.run(run_cycle(options, ScriptedProposer([{}])))
    assert first.report.result == "completed"
    second = asyncio.run(run_cycle(CycleOptions(agent_dir=tmp_path, now=BASE_TIME), ScriptedProposer([{}])))
    assert second.report.result == "skipped" and "minimum interval" in (second.report.skip_reason or "")


def test_report_json_has_every_documented_field(tmp_path: Path) -> None:
    write_corpus(tmp_path, [Seed("a", "Alpha note."), Seed("b", "Beta note.")])
    outcome = cycle(tmp_path, ScriptedProposer([{}]))
    data = json.loads((tmp_path / ".dreamkeeper" / "cycles" / f"{outcome.report.cycle_id}.json").read_text())
    expected = (
        "cycleId",
        "startedAt",
        "finishedAt",
        "total",
        "reviewed",
        "withheld",
        "folded",
        "saved",
        "archived",
        "archivedWithReplacement",
        "ephemeral",
        "rejected",
        "repaired",
        "protected",
        "conflicts",
        "hardDeletes",
        "purged",
        "liveEntries",
        "archivedEntries",
        "specificsLost",
        "vocabularyFallback",
        "llmCalls",
        "inputTokens",
        "outputTokens",
    )
    for key in expected:
        assert key in data, key


def test_clustering_failure_degrades_to_unreviewed_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dreamkeeper.consolidation import gating
    from dreamkeeper.consolidation.clustering import ClusteringError
    from dreamkeeper.memory import review_hash

    def broken(*args: object, **kwargs: object) -> list[object]:
        raise ClusteringError("index corrupted")

    reviewed_text = "Allen Conway works at Xebia."
    write_corpus(
        tmp_path,
        [
            Seed("fresh1", "Allen Conway works at Xebia as a consultant."),
            Seed("fresh2", "Trish Roberts runs PWOP Productions."),
            Seed("settled", reviewed_text, metadata={REVIEWED_HASH: review_hash(reviewed_text)}),
        ],
    )
    monkeypatch.setattr(gating, "find_clusters", broken)
    proposer = ScriptedProposer([{}])
    outcome = cycle(tmp_path, proposer)
    assert outcome.report.clustering_degraded
    request = proposer.requests[0]
    assert request.degraded
    offered = {o.entry.id for b in request.batches for o in b.entries}
    assert offered == {"fresh1", "fresh2"}  # never widened to the whole corpus


def test_minimum_interval_follows_the_cycle_clock(tmp_path: Path) -> None:
    write_corpus(tmp_path, [Seed("a", "Alpha note."), Seed("b", "Beta note.")])
    for hours, expected in ((0, "completed"), (3, "skipped"), (7, "completed")):
        options = CycleOptions(agent_dir=tmp_path, now=BASE_TIME + timedelta(hours=hours))
        outcome = asyncio.run(run_cycle(options, ScriptedProposer([{}])))
        assert outcome.report.result == expected, hours


class FailingProposer(ScriptedProposer):
    async def propose(self, request: Any) -> Any:
        raise RuntimeError("model server went away")


def test_a_failed_cycle_reports_what_the_stages_before_the_failure_did(tmp_path: Path) -> None:
    store = write_corpus(
        tmp_path,
        [
            Seed("old", "a scratch note from last year."),  # no specifics: the purge may take it
            Seed("twin1", "Trish Roberts runs PWOP Productions.", age_days=20),
            Seed("twin2", "Trish Roberts runs PWOP Productions."),
            Seed("other", "Allen Conway works at Xebia."),
        ],
    )
    store.archive(store.require("old"), "flagged ephemeral by consolidation", now=BASE_TIME - timedelta(days=400))
    with pytest.raises(RuntimeError, match="model server went away"):
        cycle(tmp_path, FailingProposer([]))
    (path,) = (tmp_path / ".dreamkeeper" / "cycles").glob("*.json")
    report = read_report(tmp_path, path.stem)
    assert report.result == "failed" and report.error == "RuntimeError: model server went away"
    # Purge, snapshot and fold finished (and wrote: the folded copy is archived, and counted so); the gate
    # counted; nothing was applied.
    assert (report.purged, report.total, report.folded, report.archived) == (1, 3, 1, 1)
    assert report.reviewed == 2 and report.saved == 0 and report.live_entries == 0
    assert report.finished_at is not None
    assert {s.id for s in store.scan().live} == {"twin1", "other"}
