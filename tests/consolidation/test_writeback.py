"""Stale write-back repair: an agent that loaded its index before a cycle writes its cached copies back (RockBot's
``FileMemoryStore``, imitated by ``tests/agents/caching_agent.py``); the next cycle recognises each stale copy from
the journals, archives it again or writes the lost stamps/counters again, and carries the agent's own changes into
the successor exactly once."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation import writes as writes_module
from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, recover, run_cycle
from dreamkeeper.consolidation.journal import Journal, journal_dir
from dreamkeeper.consolidation.proposal import Batch, ProposalRequest
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.undo import undo_cycle
from dreamkeeper.consolidation.writeback import index_path
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    CARRIED_AT,
    DECLINED_AT,
    DECLINED_COUNT,
    FOLDED_FROM,
    REASON_EPHEMERAL,
    REVIEWED_AT,
    REVIEWED_HASH,
    STALE_COPY_OF,
    MemoryStore,
    StoredEntry,
    note_restored,
    review_hash,
)
from dreamkeeper.proposers import ScriptedProposer
from tests.agents.caching_agent import Store, dotnet_time
from tests.consolidation.corpus import ASK_EVERY_CLUSTER, BASE_TIME, Seed, write_corpus

REPO = Path(__file__).resolve().parents[2]
MILO = [
    Seed("m1", "Rocky has a dog named Milo.", "people", 0.6, 3, age_days=30),
    Seed("m2", "Rocky has a Sheltie named Milo.", "people", 0.5, 2, age_days=20),
    Seed("k1", "The home lab NAS is a Synology DS920+.", "project-context", 0.5, 1),
    Seed("n1", "Scratch note: lunch was fine.", "observations", 0.1, 1),
]
MERGED = "Rocky has a dog — a Sheltie named Milo."
MERGE = {"toSave": [{"content": MERGED, "sourceIds": ["m1", "m2"]}], "toDelete": ["m1", "m2"]}
NOTHING: dict[str, Any] = {"toSave": [], "toDelete": []}


class CachingAgent:
    """RockBot's store as ``tests/agents/caching_agent.py`` imitates it: the index loaded once, every write the
    whole cached record (reinforce: rc + 1, lastSeenAt now; extend: content appended)."""

    def __init__(self, agent_dir: Path, mode: str = "atomic") -> None:
        self.store = Store(agent_dir / "memory", mode)
        self.store.load()

    def reinforce(self, entry_id: str, *, tags: tuple[str, ...] = (), metadata: dict[str, str] | None = None) -> None:
        cached = self.store.index[entry_id.casefold()]
        entry = dict(cached.entry)
        entry["tags"] = list(entry["tags"]) + [t for t in tags if t not in entry["tags"]]
        if metadata:
            entry["metadata"] = {**metadata, **(entry["metadata"] or {})}  # existing keys win (MemoryDeduplicator)
        entry["importanceScore"] = max(float(entry["importanceScore"]), 0.7)
        entry["lastSeenAt"] = dotnet_time(datetime.now(UTC))
        entry["reinforcementCount"] = int(entry["reinforcementCount"]) + 1
        self.store.write(cached, entry, in_place=False)

    def extend(self, entry_id: str, text: str) -> None:
        cached = self.store.index[entry_id.casefold()]
        entry = dict(cached.entry, content=cached.entry["content"].rstrip() + "\n\n" + text)
        entry["updatedAt"] = dotnet_time(datetime.now(UTC))
        self.store.write(cached, entry, in_place=False)

    def archive(self, entry_id: str) -> None:
        """ArchiveAsync: in place, from the cached copy."""
        cached = self.store.index[entry_id.casefold()]
        now = dotnet_time(datetime.now(UTC))
        self.store.write(cached, dict(cached.entry, archivedAt=now, archiveReason="by the agent"), in_place=True)

    def restore(self, entry_id: str) -> None:
        """RestoreAsync: in place, the cached copy with both archive fields null."""
        cached = self.store.index[entry_id.casefold()]
        self.store.write(cached, dict(cached.entry, archivedAt=None, archiveReason=None), in_place=True)


def cycle(agent_dir: Path, reply: Any, hour: int, **settings: Any) -> CycleOutcome:
    options = CycleOptions(
        agent_dir=agent_dir,
        settings=CycleSettings(min_interval_hours=0, **ASK_EVERY_CLUSTER, **settings),
        now=BASE_TIME + timedelta(hours=hour),
    )
    return asyncio.run(run_cycle(options, proposer(reply)))


def proposer(reply: Any) -> ScriptedProposer:
    return ScriptedProposer(reply if callable(reply) else [reply] * 4)


def merge_all(batch: Batch, request: ProposalRequest) -> dict[str, Any]:
    """Everything offered, merged into one text that says all of it (coverage holds by construction)."""
    texts = [o.entry.content for o in batch.entries]
    return {"toSave": [{"content": " ".join(texts), "sourceIds": sorted(batch.ids)}], "toDelete": []}


def entry(agent_dir: Path, entry_id: str) -> StoredEntry:
    return MemoryStore(agent_dir / "memory").require(entry_id)


def successor_of(agent_dir: Path, entry_id: str) -> StoredEntry:
    reason = entry(agent_dir, entry_id).entry.archive_reason or ""
    return entry(agent_dir, reason.rsplit("merged into ", 1)[1])


def live_ids(agent_dir: Path) -> set[str]:
    return {s.id for s in MemoryStore(agent_dir / "memory").scan().live}


@pytest.fixture
def milo(tmp_path: Path) -> Path:
    agent = tmp_path / "agent"
    write_corpus(agent, MILO)
    return agent


# ---- archived, then written back stale ---------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["atomic", "inplace"])
def test_an_archived_entry_written_back_stale_is_archived_again_and_its_increment_carried_once(
    milo: Path, mode: str
) -> None:
    agent = CachingAgent(milo, mode)  # loaded before the cycle, as RockBot is
    first = cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1")
    assert successor.entry.reinforcement_count == 5
    inode = (milo / "memory/people/m1.json").stat().st_ino
    agent.reinforce("m1", tags=("seen-again",), metadata={"source": "chat"})
    assert "m1" in live_ids(milo)  # the cached copy is live again: the stale write-back
    if mode == "inplace":
        assert (milo / "memory/people/m1.json").stat().st_ino == inode  # truncated and rewritten, not renamed

    second = cycle(milo, NOTHING, 1)
    report = second.report
    assert (report.stale_write_backs, report.resurrected, report.reinforcements_carried) == (1, 1, 1)
    m1 = entry(milo, "m1").entry
    assert m1.is_archived and m1.archive_reason == f"stale write-back; merged into {successor.id}"
    assert m1.meta(STALE_COPY_OF) == first.report.cycle_id and m1.reinforcement_count == 4  # the agent's copy kept
    now = entry(milo, successor.id).entry
    assert now.reinforcement_count == 6  # 3 + 2 merged, + the agent's one increment
    assert now.seen_at >= m1.seen_at and "seen-again" in now.tags and now.meta("source") == "chat"
    assert now.importance_score == pytest.approx(0.7)  # raised by the agent: carried
    assert now.meta(CARRIED_AT) and now.content == MERGED

    third = cycle(milo, NOTHING, 2)  # nothing new: nothing carried again
    assert third.report.stale_write_backs == 0 and entry(milo, successor.id).entry.reinforcement_count == 6


def test_written_back_twice_each_increment_is_carried_exactly_once(milo: Path) -> None:
    agent = CachingAgent(milo)
    cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1").id
    agent.reinforce("m1")
    agent.reinforce("m1")  # two writes before a cycle: rc 5 from the cached 3
    assert cycle(milo, NOTHING, 1).report.reinforcements_carried == 2
    assert entry(milo, successor).entry.reinforcement_count == 7
    agent.reinforce("m1")  # the cache now says 5: writes 6 over the archive again
    agent.reinforce("m2")  # and the other source, once
    report = cycle(milo, NOTHING, 2).report
    assert (report.stale_write_backs, report.resurrected, report.reinforcements_carried) == (2, 2, 2)
    assert entry(milo, successor).entry.reinforcement_count == 9  # 5 + 2 + 1 + 1: each increment once
    assert not ({"m1", "m2"} & live_ids(milo))


def test_a_copy_the_agent_really_changed_is_a_new_fact_left_live_and_reviewed_again(milo: Path) -> None:
    agent = CachingAgent(milo)
    cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1").id
    agent.extend("m1", "Milo turned four in May.")
    report = cycle(milo, NOTHING, 1).report
    assert report.stale_write_backs == 0 and report.stale_edits == 1
    m1 = entry(milo, "m1").entry
    assert m1.is_live and m1.content.endswith("Milo turned four in May.")
    assert report.reviewed == 1  # unreviewed (its content no longer matches its stamp): eligible again
    assert entry(milo, successor).entry.reinforcement_count == 5  # nothing carried


# ---- stamped, then written back stale -----------------------------------------------------------------------


def test_a_stamped_entry_written_back_without_its_stamps_gets_them_back_and_keeps_its_increment(milo: Path) -> None:
    agent = CachingAgent(milo)
    first = cycle(milo, NOTHING, 0)
    stamped = entry(milo, "k1").entry
    assert stamped.meta(REVIEWED_HASH)
    agent.reinforce("k1")  # its cache predates the stamp
    assert entry(milo, "k1").entry.meta(REVIEWED_HASH) is None
    second = proposer(NOTHING)
    outcome = asyncio.run(
        run_cycle(
            CycleOptions(
                milo, CycleSettings(min_interval_hours=0, **ASK_EVERY_CLUSTER), now=BASE_TIME + timedelta(hours=1)
            ),
            second,
        )
    )
    assert outcome.report.stale_write_backs == 1 and outcome.report.resurrected == 0
    k1 = entry(milo, "k1").entry
    assert k1.meta(REVIEWED_HASH) == stamped.meta(REVIEWED_HASH)
    assert k1.meta(REVIEWED_AT) == stamped.meta(REVIEWED_AT)  # the first cycle's stamp, not a new review
    assert k1.reinforcement_count == 2 and k1.is_live
    assert second.requests == []  # withheld again: nothing was offered
    assert first.report.reviewed == 4


def test_decline_stamps_a_stale_copy_dropped_are_restored(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    write_corpus(
        agent_dir,
        [
            Seed("c1", "Carl Franklin hosts the .NET Rocks podcast every week.", "people"),
            Seed("c2", "Carl Franklin hosts the .NET Rocks podcast each week.", "people"),
        ],
    )
    agent = CachingAgent(agent_dir)
    first = cycle(agent_dir, NOTHING, 0, similarity_threshold=0.5)
    assert first.report.declined == 1 and entry(agent_dir, "c1").entry.meta(DECLINED_COUNT) == "1"
    agent.reinforce("c1")
    second = cycle(agent_dir, NOTHING, 1, similarity_threshold=0.5)
    assert second.report.stale_write_backs == 1 and second.report.reviewed == 0  # not reopened: still declined
    c1 = entry(agent_dir, "c1").entry
    assert c1.meta(DECLINED_COUNT) == "1" and c1.reinforcement_count == 2


def test_a_stamp_changed_by_hand_to_a_value_no_cycle_wrote_is_left_as_is(tmp_path: Path) -> None:
    """A cache holds what a cycle wrote earlier, or nothing; a decline time no cycle wrote was set on purpose."""
    agent_dir = tmp_path / "agent"
    write_corpus(
        agent_dir,
        [
            Seed("c1", "Carl Franklin hosts the .NET Rocks podcast every week.", "people"),
            Seed("c2", "Carl Franklin hosts the .NET Rocks podcast each week.", "people"),
        ],
    )
    cycle(agent_dir, NOTHING, 0, similarity_threshold=0.5)
    store = MemoryStore(agent_dir / "memory")
    by_hand = "2026-01-02T03:04:05.0000000+00:00"
    c1 = store.require("c1")
    store.update(c1, c1.entry.with_meta(**{DECLINED_AT: by_hand}))
    second = cycle(agent_dir, NOTHING, 1, similarity_threshold=0.5)
    assert second.report.stale_write_backs == 0
    assert entry(agent_dir, "c1").entry.meta(DECLINED_AT) == by_hand


def test_a_stale_copy_of_an_entry_reviewed_before_keeps_the_new_stamps_and_its_increment(tmp_path: Path) -> None:
    """RockBot's own entries carry a review hash already; the cycle re-stamps it unchanged (same content). A cache
    holds that hash too: it says nothing about descending from the new stamp (the sample's 88e1f8a6d7cf lost an
    increment beside a live agent when it did)."""
    agent_dir = tmp_path / "agent"
    carl = "Carl Franklin hosts the .NET Rocks podcast every week."
    earlier = {REVIEWED_HASH: review_hash(carl), REVIEWED_AT: "2026-05-01T00:00:00.0000000+00:00"}
    write_corpus(
        agent_dir,
        [
            Seed("c1", carl, "people", metadata=earlier),
            Seed("c2", "Carl Franklin hosts the .NET Rocks podcast each week.", "people"),
        ],
    )
    agent = CachingAgent(agent_dir)
    first = cycle(agent_dir, NOTHING, 0, similarity_threshold=0.5)
    assert first.report.declined == 1
    stamped = entry(agent_dir, "c1").entry
    assert stamped.meta(REVIEWED_AT) != earlier[REVIEWED_AT] and stamped.meta(DECLINED_COUNT) == "1"
    agent.reinforce("c1")  # its cache: the old review time, no decline stamps
    second = cycle(agent_dir, NOTHING, 1, similarity_threshold=0.5)
    assert second.report.stale_write_backs == 1 and second.report.reviewed == 0
    c1 = entry(agent_dir, "c1").entry
    assert c1.reinforcement_count == 2 and c1.meta(DECLINED_COUNT) == "1"
    assert c1.meta(REVIEWED_AT) == stamped.meta(REVIEWED_AT)


# ---- the fold's archives and ephemeral prunes -------------------------------------------------------------


def test_a_fold_copy_and_its_survivor_written_back_stale(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    text = "The VPN endpoint is vpn.example.net on port 1194."
    write_corpus(
        agent_dir,
        [
            Seed("d1", text, "project-context", 0.5, 2, age_days=30),
            Seed("d2", text, "project-context", 0.6, 3, age_days=10),
            Seed("k1", "The home lab NAS is a Synology DS920+.", "project-context"),
        ],
    )
    agent = CachingAgent(agent_dir)
    first = cycle(agent_dir, NOTHING, 0)
    assert first.report.folded == 1 and entry(agent_dir, "d1").entry.reinforcement_count == 5
    agent.reinforce("d1")  # its cache: before the fold (rc 2, no foldedFrom): the fold's counters vanish
    agent.reinforce("d2")  # the folded copy, live again
    assert entry(agent_dir, "d1").entry.reinforcement_count == 3 and "d2" in live_ids(agent_dir)

    report = cycle(agent_dir, NOTHING, 1).report
    assert report.folded == 0  # not folded a second time (RockBot's inflation: true 3 -> 4)
    assert (report.stale_write_backs, report.resurrected, report.reinforcements_carried) == (2, 1, 1)
    d1 = entry(agent_dir, "d1").entry
    assert d1.reinforcement_count == 7  # 2 + 3 folded + 1 (d1's own increment) + 1 (d2's, carried)
    assert d1.meta(FOLDED_FROM) == "d2" and d1.importance_score == pytest.approx(0.7)
    d2 = entry(agent_dir, "d2").entry
    assert d2.is_archived and d2.archive_reason == "stale write-back; merged into d1"
    assert d2.meta(STALE_COPY_OF) == first.report.cycle_id + "-fold"


def test_an_ephemeral_prune_written_back_stale_is_archived_again_with_the_agents_copy(milo: Path) -> None:
    agent = CachingAgent(milo)
    cycle(milo, {"toSave": [], "toDelete": ["n1"]}, 0)
    assert entry(milo, "n1").entry.archive_reason == REASON_EPHEMERAL
    agent.reinforce("n1")
    report = cycle(milo, NOTHING, 1).report
    assert (report.stale_write_backs, report.resurrected, report.reinforcements_carried) == (1, 1, 0)
    n1 = entry(milo, "n1").entry
    assert n1.is_archived and n1.archive_reason == "stale write-back; " + REASON_EPHEMERAL
    assert n1.reinforcement_count == 2  # the increment is kept, in the archived copy


# ---- successor chains, old paths, many copies ---------------------------------------------------------------


def test_written_back_after_its_successor_was_merged_again_goes_to_the_live_end(tmp_path: Path) -> None:
    agent_dir = tmp_path / "agent"
    write_corpus(agent_dir, MILO[:2])
    agent = CachingAgent(agent_dir)
    cycle(agent_dir, MERGE, 0)
    first_successor = successor_of(agent_dir, "m1")
    write_corpus(agent_dir, [Seed("m3", "Milo was born in Oregon.", "people", 0.5, 4)])
    cycle(agent_dir, merge_all, 1, similarity_threshold=0.1)
    end = successor_of(agent_dir, first_successor.id)
    assert end.entry.reinforcement_count == 9 and end.entry.is_live
    agent.reinforce("m1")
    report = cycle(agent_dir, NOTHING, 2).report
    assert report.resurrected == 1 and report.reinforcements_carried == 1
    assert entry(agent_dir, end.id).entry.reinforcement_count == 10
    assert entry(agent_dir, "m1").entry.archive_reason == f"stale write-back; merged into {end.id}"
    assert entry(agent_dir, first_successor.id).entry.reinforcement_count == 5  # the archived link is untouched


def test_a_stale_copy_at_the_old_path_of_a_recategorised_entry(milo: Path) -> None:
    agent = CachingAgent(milo)
    cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1").id
    # The agent's cache puts m1 under another category (it was moved since it loaded): its write goes there.
    cached = agent.store.index["m1"]
    cached.entry["category"] = "people/old"
    cached.path = agent.store.path_of(cached.entry)
    agent.reinforce("m1")
    old = milo / "memory/people/old/m1.json"
    assert old.exists() and entry(milo, "m1").entry.is_archived  # two files, one id
    report = cycle(milo, NOTHING, 1).report
    assert report.resurrected == 1
    copy = MemoryStore(milo / "memory").read_file(old)
    assert isinstance(copy, StoredEntry) and copy.entry.is_archived  # archived in place, at its own path
    assert entry(milo, successor).entry.reinforcement_count == 6


# ---- reversible, recoverable --------------------------------------------------------------------------------


def test_undo_of_the_repair_puts_the_stale_copy_back_and_takes_the_carry_out(milo: Path) -> None:
    agent = CachingAgent(milo)
    cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1").id
    agent.reinforce("m1")
    repair = cycle(milo, NOTHING, 1)
    result = undo_cycle(milo, milo / "memory", repair.report.cycle_id)
    assert "m1" in result.restored and successor in result.reverted
    assert entry(milo, "m1").entry.is_live and entry(milo, "m1").entry.reinforcement_count == 4
    assert entry(milo, successor).entry.reinforcement_count == 5
    # The next cycle repairs it again, carrying the same increment once.
    assert cycle(milo, NOTHING, 2).report.reinforcements_carried == 1
    assert entry(milo, successor).entry.reinforcement_count == 6


def test_undo_of_the_merging_cycle_after_a_repair_brings_the_stale_copy_back_too(milo: Path) -> None:
    agent = CachingAgent(milo)
    first = cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1").id
    agent.reinforce("m1")
    cycle(milo, NOTHING, 1)
    result = undo_cycle(milo, milo / "memory", first.report.cycle_id)
    assert {"m1", "m2"} <= set(result.restored) and successor in result.archived
    m1 = entry(milo, "m1").entry
    assert m1.is_live and m1.reinforcement_count == 4 and m1.meta(STALE_COPY_OF) is None
    report = cycle(milo, NOTHING, 2).report  # undone: nothing of that cycle is taken for a stale copy
    assert report.stale_write_backs == 0 and {"m1", "m2"} <= live_ids(milo)


def test_an_entry_restored_by_hand_is_never_taken_for_a_stale_copy(milo: Path) -> None:
    cycle(milo, MERGE, 0)
    store = MemoryStore(milo / "memory")
    store.restore(store.require("m1"))
    note_restored(milo, ["m1"])  # what `dreamkeeper memory restore` does
    assert cycle(milo, NOTHING, 1).report.stale_write_backs == 0 and "m1" in live_ids(milo)


def test_the_agent_restoring_or_archiving_an_entry_itself_is_its_decision(milo: Path) -> None:
    early = CachingAgent(milo, "inplace")  # loaded before the cycle
    cycle(milo, MERGE, 0)
    late = CachingAgent(milo)  # loaded after the cycle: it knows the archives
    late.restore("m1")  # RestoreAsync of its cached archived copy: live, with dreamkeeper's archive key kept
    assert entry(milo, "m1").entry.meta(ARCHIVED_BY_CYCLE)
    early.archive("m2")  # ArchiveAsync, in place, of its cached live copy: over dreamkeeper's archive
    early.archive("k1")  # and of an entry a cycle stamped: archived without the stamps, nothing to restore
    report = cycle(milo, NOTHING, 1).report
    assert report.stale_write_backs == 0 and "m1" in live_ids(milo)
    assert entry(milo, "m2").entry.archive_reason == "by the agent" and entry(milo, "k1").entry.is_archived
    early.restore("m2")  # the agent's own archive and restore: its decision, not a stale copy
    assert cycle(milo, NOTHING, 2).report.stale_write_backs == 0 and "m2" in live_ids(milo)


def test_the_index_is_rebuilt_from_the_journals_when_lost(milo: Path) -> None:
    agent = CachingAgent(milo)
    cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1").id
    agent.reinforce("m1")
    cycle(milo, NOTHING, 1)
    agent.reinforce("m1")
    index_path(milo).write_text("{ torn", encoding="utf-8")
    report = cycle(milo, NOTHING, 2).report
    assert report.reinforcements_carried == 1  # measured from the copy the repair already carried
    assert entry(milo, successor).entry.reinforcement_count == 7


def test_a_dry_run_shows_the_repair_and_writes_nothing(milo: Path) -> None:
    agent = CachingAgent(milo)
    cycle(milo, MERGE, 0)
    agent.reinforce("m1")
    before = {p: p.read_bytes() for p in (milo / "memory").rglob("*.json")}
    index = index_path(milo).read_bytes()
    options = CycleOptions(
        milo, CycleSettings(min_interval_hours=0, **ASK_EVERY_CLUSTER), dry_run=True, now=BASE_TIME + timedelta(hours=1)
    )
    outcome = asyncio.run(run_cycle(options, proposer(NOTHING)))
    assert outcome.report.resurrected == 1 and outcome.report.reinforcements_carried == 1
    assert {p: p.read_bytes() for p in (milo / "memory").rglob("*.json")} == before
    assert index_path(milo).read_bytes() == index


# SIGKILL inside the repair's journal, at each step, before and after its outcome line.
CHILD = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from datetime import timedelta
    from pathlib import Path
    from dreamkeeper.consolidation import executor as J
    from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
    from dreamkeeper.consolidation.settings import CycleSettings
    from dreamkeeper.proposers import ScriptedProposer
    from tests.consolidation.corpus import BASE_TIME

    agent, kill_at, phase = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    ran = {"n": 0}
    original = J.Executor._guarded

    def guarded(self, step, run):
        repairing = self.journal.header.cycle_id.endswith("-writeback")
        if repairing and phase == "before" and ran["n"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        outcome = original(self, step, run)
        if repairing and phase == "after" and ran["n"] == kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        ran["n"] += repairing
        return outcome

    J.Executor._guarded = guarded
    settings = CycleSettings(min_interval_hours=0, subsume=False)
    options = CycleOptions(agent, settings, now=BASE_TIME + timedelta(hours=1))
    asyncio.run(run_cycle(options, ScriptedProposer([{"toSave": [], "toDelete": []}] * 4)))
    """
)


@pytest.mark.parametrize("phase", ["before", "after"])
def test_a_repair_killed_at_any_step_is_finished_with_every_increment_counted_once(tmp_path: Path, phase: str) -> None:
    template = tmp_path / "template"
    write_corpus(template, MILO)
    agent = CachingAgent(template)
    cycle(template, MERGE, 0)
    successor = successor_of(template, "m1").id
    agent.reinforce("m1")
    agent.reinforce("m1")
    agent.reinforce("m2")
    for kill_at in range(3):  # the carry into the successor, then the two archives
        agent_dir = tmp_path / f"{phase}-{kill_at}"
        shutil.copytree(template, agent_dir)
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(agent_dir), str(kill_at), phase],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            timeout=120,
        )
        assert done.returncode == -signal.SIGKILL, done.stderr.decode()[-2000:]
        assert recover(agent_dir, agent_dir / "memory")  # the repair's journal, finished
        assert all(Journal.load(p).complete for p in journal_dir(agent_dir).glob("*.jsonl"))
        cycle(agent_dir, NOTHING, 2)
        assert entry(agent_dir, successor).entry.reinforcement_count == 8, (phase, kill_at)  # 5 + 2 + 1
        assert not ({"m1", "m2"} & live_ids(agent_dir))


def test_the_index_stays_small_on_disk(milo: Path) -> None:
    cycle(milo, NOTHING, 0)
    data = json.loads(index_path(milo).read_text())
    assert set(data["records"]) == {"m1", "m2", "k1", "n1"}
    assert len(index_path(milo).read_bytes()) < 1200  # a stamp record is its hash and two small numbers


def test_archives_of_a_journal_written_before_baselines_are_recognised_from_the_archived_file(milo: Path) -> None:
    agent = CachingAgent(milo)
    first = cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1").id
    path = journal_dir(milo) / f"{first.report.cycle_id}.jsonl"
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    for step in header["steps"]:
        step.pop("baseline", None)  # as an older dreamkeeper wrote it
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    index_path(milo).unlink()  # the upgrade: no index yet
    agent.reinforce("m2")  # m1's archive is still as the cycle wrote it; m2's is overwritten first
    report = cycle(milo, NOTHING, 1).report
    assert report.resurrected == 0 and "m2" in live_ids(milo)  # m2's image is gone: it cannot be told from an edit
    agent.reinforce("m1")
    report = cycle(milo, NOTHING, 2).report
    assert report.resurrected == 1 and entry(milo, successor).entry.reinforcement_count == 6


def test_a_source_the_agent_wrote_during_the_cycle_is_archived_by_the_next_one(milo: Path) -> None:
    agent = CachingAgent(milo)

    def write_then_merge(batch: Batch, request: ProposalRequest) -> dict[str, Any]:
        agent.reinforce("m1")  # after the snapshot: the archive of m1 will be refused (conflict)
        return MERGE

    first = cycle(milo, write_then_merge, 0).report
    assert first.conflicts == 1 and first.saved == 1 and "m1" in live_ids(milo)
    successor = successor_of(milo, "m2").id
    assert entry(milo, successor).entry.reinforcement_count == 5  # m1's 3 are in it already
    report = cycle(milo, NOTHING, 1).report
    assert report.resurrected == 1 and report.reinforcements_carried == 1  # not merged (or counted) twice
    assert entry(milo, successor).entry.reinforcement_count == 6 and "m1" not in live_ids(milo)


def test_a_successor_the_agent_loaded_and_wrote_back_stale_keeps_what_was_carried_into_it(milo: Path) -> None:
    old = CachingAgent(milo)
    cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1").id
    old.reinforce("m1")
    restarted = CachingAgent(milo)  # RestartAfter: reloaded after the first cycle (knows the successor, rc 5)
    assert cycle(milo, NOTHING, 1).report.reinforcements_carried == 1  # carried into the successor: rc 6
    restarted.reinforce(successor)  # its cached copy (rc 5) + 1 over the carry
    assert entry(milo, successor).entry.reinforcement_count == 6
    report = cycle(milo, NOTHING, 2).report
    assert report.stale_write_backs == 1 and report.resurrected == 0
    assert entry(milo, successor).entry.reinforcement_count == 7  # 5 + m1's 1 + its own 1


def test_a_stale_copy_written_again_during_its_repair_waits_for_the_next_cycle_and_is_not_folded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_dir = tmp_path / "agent"
    write_corpus(
        agent_dir,
        [
            Seed("s1", "Milo is a Sheltie.", "people", 0.5, 3, age_days=30),
            Seed("s2", "Milo is a Sheltie!", "people", 0.5, 2),
        ],
    )
    agent = CachingAgent(agent_dir)
    merge = {"toSave": [{"content": "Milo is a Sheltie.", "sourceIds": ["s1", "s2"]}], "toDelete": []}
    cycle(agent_dir, merge, 0)  # the successor says exactly what s1 says: s1 live again would be its exact duplicate
    successor = successor_of(agent_dir, "s1").id
    agent.reinforce("s1")
    original = writes_module.Executor

    class AgentWritesFirst(original):  # type: ignore[misc, valid-type]
        def run(self) -> Any:
            if self.journal.header.cycle_id.endswith("-writeback"):
                agent.reinforce("s1")  # between the repair's snapshot and its archive: refused, a conflict
            return super().run()

    monkeypatch.setattr(writes_module, "Executor", AgentWritesFirst)
    report = cycle(agent_dir, NOTHING, 1).report
    assert report.conflicts == 1 and report.resurrected == 0 and report.folded == 0  # not folded in: held back
    assert entry(agent_dir, successor).entry.reinforcement_count == 6  # the first copy's increment, carried
    monkeypatch.setattr(writes_module, "Executor", original)
    report = cycle(agent_dir, NOTHING, 2).report
    assert report.resurrected == 1 and report.reinforcements_carried == 1  # only the second increment
    assert entry(agent_dir, successor).entry.reinforcement_count == 7 and "s1" not in live_ids(agent_dir)


def test_a_fold_copy_written_back_within_the_cycle_is_not_merged_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent_dir = tmp_path / "agent"
    text = "The VPN endpoint is vpn.example.net on port 1194."
    write_corpus(
        agent_dir,
        [
            Seed("d1", text, "project-context", 0.5, 2, age_days=30),
            Seed("d2", text, "project-context", 0.5, 3, age_days=10),
            Seed("k1", "The VPN uses WireGuard since March.", "project-context"),
        ],
    )
    agent = CachingAgent(agent_dir)
    original = writes_module.Executor

    class AgentWritesAfterTheFold(original):  # type: ignore[misc, valid-type]
        def run(self) -> Any:
            tally = super().run()
            if self.journal.header.cycle_id.endswith("-fold"):
                agent.reinforce("d2")  # its cached copy, live again, before the gate looks
            return tally

    monkeypatch.setattr(writes_module, "Executor", AgentWritesAfterTheFold)
    first = cycle(agent_dir, merge_all, 0, similarity_threshold=0.1).report
    monkeypatch.setattr(writes_module, "Executor", original)
    assert first.folded == 1 and first.saved == 1
    successor = successor_of(agent_dir, "d1").id
    assert "d2" in live_ids(agent_dir) and "d2" not in (entry(agent_dir, successor).entry.meta("mergedFrom") or "")
    assert entry(agent_dir, successor).entry.reinforcement_count == 6  # d1 with d2's 3 folded in, and k1
    report = cycle(agent_dir, NOTHING, 1).report
    assert report.resurrected == 1 and report.reinforcements_carried == 1
    assert entry(agent_dir, successor).entry.reinforcement_count == 7 and "d2" not in live_ids(agent_dir)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data["records"].update({"m1": "not a record"}),
        lambda data: data["templates"].clear(),
        lambda data: data["records"]["m1"].append(["wrong", "shape"]),
    ],
)
def test_an_index_that_is_not_what_this_code_wrote_is_rebuilt(milo: Path, damage: Any) -> None:
    agent = CachingAgent(milo)
    cycle(milo, MERGE, 0)
    successor = successor_of(milo, "m1").id
    data = json.loads(index_path(milo).read_text())
    damage(data)
    index_path(milo).write_text(json.dumps(data))
    agent.reinforce("m1")
    agent.reinforce("k1")
    report = cycle(milo, NOTHING, 1).report
    assert (report.stale_write_backs, report.resurrected) == (2, 1)
    assert entry(milo, successor).entry.reinforcement_count == 6


def test_archives_are_watched_for_the_retention_window_only(milo: Path) -> None:
    agent = CachingAgent(milo)
    cycle(milo, MERGE, 0, retention_days=30)
    cycle(milo, NOTHING, 31 * 24, retention_days=30)  # past the window: m1 and m2 purged, their records expired
    data = json.loads(index_path(milo).read_text())
    assert "m1" not in data["records"] and not any(j.startswith("20260901T12") for j in data["journals"])
    agent.reinforce("m1")  # a cache older than the window brings it back: a live entry like any other now
    report = cycle(milo, NOTHING, 31 * 24 + 1, retention_days=30).report
    assert report.stale_write_backs == 0 and "m1" in live_ids(milo)
