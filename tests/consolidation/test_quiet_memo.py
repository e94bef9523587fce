"""The quiet memo (consolidation/quiet.py): a cycle over the very corpus the last one found nothing to fold or
repair in skips those walks, and reports what a walk would have; anything the answer depends on (a file of the
corpus, a journal, the write-back index, the reversals log, the settings, the clock) makes the next cycle walk
again, so a memo never hides an exact duplicate or a stale write-back."""

from __future__ import annotations

import asyncio
import json
import logging
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation import cluster_cache as cc
from dreamkeeper.consolidation import cycle as cycle_module
from dreamkeeper.consolidation import decay_dues, quiet
from dreamkeeper.consolidation import gating as gating_module
from dreamkeeper.consolidation import writes as writes_module
from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.journal import journal_dir
from dreamkeeper.consolidation.quiet import DECAY, FOLD, GATING, REPAIR, QuietMemo, memo_path, repair_state
from dreamkeeper.consolidation.settings import CycleSettings, DecaySettings
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.proposers import OfflineProposer, ScriptedProposer
from tests.agents.caching_agent import Store, dotnet_time
from tests.consolidation.corpus import ASK_EVERY_CLUSTER, BASE_TIME, Seed, write_corpus

LATER_NS = 60 * 1_000_000_000
SEEDS = [
    Seed("m1", "Rocky has a dog named Milo.", "people", 0.6, 3, age_days=30),
    Seed("m2", "Rocky has a Sheltie named Milo.", "people", 0.5, 2, age_days=20),
    Seed("k1", "The home lab NAS is a Synology DS920+.", "project-context", 0.5, 1),
    Seed("n1", "Scratch note: lunch was fine.", "observations", 0.1, 1),
]
MERGE = {"toSave": [{"content": "Rocky has a dog — a Sheltie named Milo.", "sourceIds": ["m1", "m2"]}], "toDelete": []}
NOTHING: dict[str, Any] = {"toSave": [], "toDelete": []}


class Walks:
    """The fold's, the repair's and gating's walks over the corpus, counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.fold = self.repair = self.gating = 0
        plan_folds, plan_from_journals = cycle_module.plan_folds, writes_module.plan_from_journals
        unreviewed_ids = gating_module.unreviewed_ids

        def unreviewed(*args: Any, **kwargs: Any) -> Any:
            self.gating += 1
            return unreviewed_ids(*args, **kwargs)

        monkeypatch.setattr(gating_module, "unreviewed_ids", unreviewed)

        def folds(*args: Any, **kwargs: Any) -> Any:
            self.fold += 1
            return plan_folds(*args, **kwargs)

        def repairs(*args: Any, **kwargs: Any) -> Any:
            self.repair += 1
            return plan_from_journals(*args, **kwargs)

        monkeypatch.setattr(cycle_module, "plan_folds", folds)
        monkeypatch.setattr(writes_module, "plan_from_journals", repairs)

    def reset(self) -> tuple[int, int]:
        """(fold, repair) walks since the last reset; gating's are kept in ``gated``."""
        seen, self.gated = (self.fold, self.repair), self.gating
        self.fold = self.repair = self.gating = 0
        return seen


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The seeds, every clock that keys a cache a minute ahead (the racy rules: files are a minute old)."""
    for module in (ci, cc, quiet):
        real = module.time.time_ns  # type: ignore[attr-defined]
        monkeypatch.setattr(module, "_now_ns", lambda real=real: real() + LATER_NS)
    write_corpus(tmp_path, SEEDS)
    return tmp_path


def run(agent: Path, hour: float, reply: Any = None, **settings: Any) -> CycleOutcome:
    options = CycleOptions(
        agent_dir=agent,
        settings=CycleSettings(min_interval_hours=0, archive_cap=1.0, **ASK_EVERY_CLUSTER, **settings),
        now=BASE_TIME + timedelta(hours=hour),
    )
    proposer = ScriptedProposer([reply] * 4) if reply is not None else OfflineProposer()
    return asyncio.run(run_cycle(options, proposer))


def settle(agent: Path, walks: Walks, start: float = 1.0, **settings: Any) -> CycleOutcome:
    """Cycles an hour apart until one walks neither the fold nor the repair; that cycle's outcome."""
    for step in range(8):
        outcome = run(agent, start + step, NOTHING, **settings)
        if walks.reset() == (0, 0):
            return outcome
    raise AssertionError("the corpus never settled")


def counts(outcome: CycleOutcome) -> dict[str, Any]:
    fields = {"live_entries", "archived_entries", "folded", "stale_write_backs", "stale_edits", "total", "reviewed"}
    return outcome.report.model_dump(include=fields | {"withheld", "conflicts"})


def test_a_quiet_corpus_skips_the_walks_and_reports_the_same(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walks = Walks(monkeypatch)
    run(agent, 0, MERGE)  # a merge: journals, a write-back index to repair against
    assert walks.reset() == (1, 1)
    walked = run(agent, 1, NOTHING)
    assert walks.reset() == (1, 1)
    quiet_one = settle(agent, walks, 2)
    assert walks.gated == 0  # every entry reviewed, no cluster due: not asked again
    assert quiet_one.report.result == "completed"
    assert counts(quiet_one) == counts(walked)
    found = json.loads(memo_path(agent).read_bytes().split(b"\n", 2)[2])["found"]
    # Decay's too, in RockBot's mode (``min_step`` 0): no live entry is past its 30-day grace period yet, so none can
    # drop before the first grace period ends, and that is when the answer runs out.
    assert found.keys() == {FOLD, REPAIR, GATING, DECAY}
    live = [s.entry for s in MemoryStore(agent / "memory").scan().live]
    first_end = min(e.seen_at for e in live) + timedelta(days=DecaySettings().grace_days)
    until = datetime.fromisoformat(found[DECAY]["until"])
    assert first_end - timedelta(seconds=2) <= until <= first_end
    assert until > BASE_TIME + timedelta(hours=3)


# Quiet: nothing written between cycles. Decaying: one entry long past its grace period, rewritten by every cycle's
# decay (RockBot's, ``min_step`` 0): the answers held under the content generation all the same
# (test_quiet_under_decay.py); either way, what is written behind the corpus is found. Both with the corpus index in
# each of its states (tests/corpus_index_modes.py).
OLD = Seed("o1", "The garage door code was changed in March.", "observations", 0.9, 1, age_days=90)


def behind(agent: Path, decaying: bool) -> None:
    if decaying:
        write_corpus(agent, [OLD])
        os.utime(next((agent / "memory").rglob("o1.json")), ns=(0, 0))


@pytest.mark.usefixtures("corpus_index_mode")
@pytest.mark.parametrize("decaying", [False, True], ids=["quiet", "decaying"])
def test_an_exact_duplicate_written_behind_a_quiet_corpus_is_folded(
    agent: Path, monkeypatch: pytest.MonkeyPatch, decaying: bool
) -> None:
    behind(agent, decaying)
    walks = Walks(monkeypatch)
    run(agent, 0, MERGE)
    settle(agent, walks)
    write_corpus(agent, [Seed("k2", "The home lab NAS is a Synology DS920+.", "project-context", 0.5, 1)])
    os.utime(next((agent / "memory").rglob("k2.json")), ns=(0, 0))  # old at once (the racy rule waived)
    outcome = run(agent, 20, NOTHING)
    assert walks.reset() == (1, 1)
    assert outcome.report.folded == 1 and (outcome.report.decayed >= 1) == decaying
    assert MemoryStore(agent / "memory").require("k2").entry.archived_at is not None


@pytest.mark.usefixtures("corpus_index_mode")
@pytest.mark.parametrize("decaying", [False, True], ids=["quiet", "decaying"])
def test_a_stale_write_back_behind_a_quiet_corpus_is_repaired(
    agent: Path, monkeypatch: pytest.MonkeyPatch, decaying: bool
) -> None:
    """RockBot's cached copy of a merged source, written back after quiet cycles (its index was loaded before the
    merge): the corpus changed, the repair walks, the copy is archived again."""
    behind(agent, decaying)
    cached = Store(agent / "memory", "atomic")
    cached.load()
    walks = Walks(monkeypatch)
    run(agent, 0, MERGE)
    settle(agent, walks)
    copy = cached.index["m1"]
    cached.write(copy, dict(copy.entry, lastSeenAt=dotnet_time(datetime.now(UTC))), in_place=False)
    outcome = run(agent, 20, NOTHING)
    assert walks.reset()[1] == 1
    assert outcome.report.stale_write_backs == 1
    assert MemoryStore(agent / "memory").require("m1").entry.archived_at is not None


@pytest.mark.parametrize("change", ["journal", "writeback-index", "reversals", "settings", "clock"])
def test_what_the_repair_reads_besides_the_corpus_makes_it_walk(
    agent: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    walks = Walks(monkeypatch)
    run(agent, 0, MERGE)
    settle(agent, walks)
    state = agent / ".dreamkeeper"
    hour: float = 20
    settings: dict[str, Any] = {}
    if change == "journal":
        journal = sorted(journal_dir(agent).glob("*.jsonl"))[0]
        (journal_dir(agent) / "20991231T000000Z-ffffffff.jsonl").write_bytes(journal.read_bytes())
    elif change == "writeback-index":
        (state / "writeback-index.json").unlink()
    elif change == "reversals":
        (state / "reversals.jsonl").write_text("", encoding="utf-8")
    elif change == "settings":
        settings = {"retention_days": 45}
    else:
        hour = 24 * 120  # the merge's journal has left the retention window (90 days): the index forgets it
    if change in ("journal", "reversals"):
        for path in [*journal_dir(agent).iterdir(), *state.iterdir()]:
            if path.is_file():
                os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns - LATER_NS))  # old at once
    run(agent, hour, NOTHING, **settings)
    assert walks.reset()[1] == 1


def test_a_dry_run_reads_the_memo_and_never_writes_it(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    walks = Walks(monkeypatch)
    run(agent, 0, MERGE)
    settle(agent, walks)
    memo = memo_path(agent)
    before = memo.read_bytes(), memo.stat().st_mtime_ns
    memo.unlink()
    options = CycleOptions(agent_dir=agent, settings=CycleSettings(archive_cap=1.0), dry_run=True, force=True,
                           now=BASE_TIME + timedelta(hours=30))  # fmt: skip
    asyncio.run(run_cycle(options, OfflineProposer()))
    assert not memo.exists()
    assert before[0]


def test_the_memo_keeps_an_answer_for_one_generation_state_settings_and_time(tmp_path: Path) -> None:
    (tmp_path / ".dreamkeeper").mkdir()
    settings, now = CycleSettings(), BASE_TIME
    memo = QuietMemo(tmp_path, settings)
    memo.found_nothing(FOLD, "C1")
    memo.found_nothing(REPAIR, "C2", {"index": "R1"}, now + timedelta(days=1))
    memo.save("G1")

    def fresh(s: CycleSettings = settings) -> QuietMemo:
        return QuietMemo(tmp_path, s)

    assert fresh().unchanged(FOLD, "C1", now) and fresh().unchanged(REPAIR, "C2", now, {"index": "R1"})
    assert not fresh().unchanged(REPAIR, "C2", now, {"index": "R2"})
    assert not fresh().unchanged(REPAIR, "C2", now, None)
    assert not fresh().unchanged(REPAIR, "C1", now, {"index": "R1"})  # another stage's corpus
    assert not fresh().unchanged(REPAIR, "C2", now + timedelta(days=1), {"index": "R1"})
    assert not fresh().unchanged(FOLD, "C2", now)
    assert not fresh(CycleSettings(exact_fold=False)).unchanged(FOLD, "C1", now)
    assert not fresh().unchanged(FOLD, None, now)  # no generation: nothing is known of the corpus


def test_a_files_generations_answers_are_saved_only_for_the_generation_the_next_load_sees(tmp_path: Path) -> None:
    """A content generation's answer holds for that content whatever the cycle wrote; an answer kept under the
    corpus index's generation (decay's), and which content generations that corpus has, only if the next load sees
    the very files the stages saw."""
    (tmp_path / ".dreamkeeper").mkdir()
    memo = QuietMemo(tmp_path, CycleSettings())
    memo.found_nothing(DECAY, "G1", files=True)
    memo.learn_contents("G1", "live", "C1")
    memo.save(None)  # the cycle wrote (the corpus index wrote itself): the next load is another corpus
    memo.save("G2")
    assert not memo_path(tmp_path).exists()
    memo.found_nothing(FOLD, "C1")
    memo.save("G2")
    fresh = QuietMemo(tmp_path, CycleSettings())
    assert fresh.unchanged(FOLD, "C1", BASE_TIME)
    assert not fresh.unchanged(DECAY, "G1", BASE_TIME) and fresh.contents("G1") == {}
    memo.save("G1")
    fresh = QuietMemo(tmp_path, CycleSettings())
    assert fresh.unchanged(DECAY, "G1", BASE_TIME) and fresh.contents("G1") == {"live": "C1"}
    assert fresh.unchanged(FOLD, "C1", BASE_TIME) and fresh.contents("G2") == {}
    fresh.learn_contents("G1", "scan", "C9")  # learnt this cycle, beside what was saved for the same files
    assert fresh.contents("G1") == {"live": "C1", "scan": "C9"}


@pytest.mark.parametrize("damage", ["truncated", "flipped", "not-json", "bad-answer", "naive-time", "directory"])
def test_a_damaged_memo_is_discarded(tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / ".dreamkeeper").mkdir()
    memo = QuietMemo(tmp_path, CycleSettings())
    memo.found_nothing(FOLD, "C1")
    memo.save("G1")
    path = memo_path(tmp_path)
    data = path.read_bytes()
    head, _digest, payload = data.split(b"\n", 2)
    if damage == "truncated":
        path.write_bytes(data[:-5])
    elif damage == "flipped":
        path.write_bytes(data[:-3] + bytes([data[-3] ^ 0x01]) + data[-2:])
    elif damage in ("not-json", "bad-answer", "naive-time"):
        import hashlib

        until = b'"until":"soon"' if damage == "bad-answer" else b'"until":"2026-09-01T12:00:00"'
        body = b"{not json" if damage == "not-json" else payload.replace(b'"until":null', until)
        path.write_bytes(head + b"\n" + hashlib.sha256(body).hexdigest().encode() + b"\n" + body)
    else:
        path.unlink()
        path.mkdir()
    with caplog.at_level(logging.WARNING):
        assert not QuietMemo(tmp_path, CycleSettings()).unchanged(FOLD, "C1", BASE_TIME)
    assert "quiet memo" in caplog.text


def test_a_racy_state_file_keeps_no_answer(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (agent / ".dreamkeeper").mkdir(exist_ok=True)
    reversals = agent / ".dreamkeeper" / "reversals.jsonl"
    reversals.write_text("", encoding="utf-8")
    assert repair_state(agent) is not None  # a minute later: trusted
    monkeypatch.setattr(quiet, "_now_ns", quiet.time.time_ns)  # type: ignore[attr-defined]
    assert repair_state(agent) is None  # just written: it could change again without its stat changing


def test_a_declined_cluster_is_offered_again_when_due(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model declined to merge a1 and a2 (a decline stamp: reopened in 7 days). Quiet cycles skip gating's
    walk until then; the first cycle past it offers the cluster again."""
    pair = {
        "a1": "Ingrid Ferreira prefers the Signal messenger for quick questions.",
        "a2": "For quick questions, Ingrid Ferreira prefers the Signal messenger!",
    }
    write_corpus(agent, [Seed(i, text, "people") for i, text in pair.items()])
    for path in (agent / "memory").rglob("a*.json"):
        os.utime(path, ns=(0, 0))  # old at once (the racy rule waived)
    walks = Walks(monkeypatch)
    still = {"decay": DecaySettings(enabled=False)}  # m1 is past its grace: its decay would change the corpus
    first = run(agent, 0, NOTHING, **still)
    assert first.gating is not None and ("a1", "a2") in [c.ids for c in first.gating.clusters]
    settle(agent, walks, **still)
    quiet_one = run(agent, 30, NOTHING, **still)
    assert walks.reset() == (0, 0) and walks.gated == 0
    assert quiet_one.gating is not None and not quiet_one.gating.clusters
    due = run(agent, 24 * 8, NOTHING, **still)
    assert walks.gating == 1  # past the decline's reopen time: asked again
    assert due.gating is not None and ("a1", "a2") in [c.ids for c in due.gating.reopened]


def test_frugal_decay_is_skipped_until_a_write_is_due(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``min_step``, a quiet corpus's decay pass is skipped until the first entry could fall that far
    (decay.quiet_until); the first cycle past that time writes it."""
    frugal = {"decay": DecaySettings(min_step=0.05)}
    planned: list[int] = []
    plan_decay = decay_dues.plan_decay

    def counted(*args: Any, **kwargs: Any) -> Any:
        plan = plan_decay(*args, **kwargs)
        planned.append(len(plan.actions))
        return plan

    monkeypatch.setattr(decay_dues, "plan_decay", counted)
    walks = Walks(monkeypatch)
    run(agent, 0, MERGE, **frugal)
    settle(agent, walks, **frugal)
    planned.clear()
    quiet_one = run(agent, 12, NOTHING, **frugal)
    assert planned == [] and quiet_one.report.decayed == 0
    memo = json.loads(memo_path(agent).read_bytes().split(b"\n", 2)[2])["found"]
    until = datetime.fromisoformat(memo["decay"]["until"])
    # When the first write is due, found by asking plan_decay itself hour by hour (not from the memo).
    live = MemoryStore(agent / "memory").scan().live
    first = next(h for h in range(12, 24 * 400) if plan_decay(live, frugal["decay"], CycleSettings().floor,
                                                                BASE_TIME + timedelta(hours=h)).actions)  # fmt: skip
    margin = timedelta(hours=first * 0.002 + 1)  # quiet_until's: a thousandth of the wait and a minute, and the step
    assert BASE_TIME + timedelta(hours=first) - margin <= until < BASE_TIME + timedelta(hours=first)
    before = run(agent, first - 1.5, NOTHING, **frugal)
    assert planned == [] and before.report.decayed == 0
    after = run(agent, first, NOTHING, **frugal)
    assert planned and planned[-1] >= 1 and after.report.decayed >= 1
