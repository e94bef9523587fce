"""A steady cycle's state files. The corpus index (memory/corpus_index.py, ``CorpusIndex.forget``): the files a
cycle writes after its scan (decay's rewrites, every cycle) are not saved in the index with the stat of the version
it read, so a run of steady cycles leaves the index and its log as they are, and the next scan still reads exactly
those files. The write-back index (writeback/): nothing of a decay journal is folded in, so a cycle that only
decayed leaves it as it is (it was loaded and rewritten whole to add the journal's id)."""

from __future__ import annotations

import asyncio
import shutil
from datetime import timedelta
from pathlib import Path

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.writeback import index_path as writeback_index_path
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.memory.corpus_index_own import load_own
from dreamkeeper.proposers import OfflineProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus

DAY_NS = 86_400 * 1_000_000_000
# Old enough to decay (past the 30-day grace) on every cycle; distinct texts, so no cluster is offered.
TEXTS = [
    "Allen Conway works at Xebia in Amsterdam.",
    "The staging cluster runs in eu-west-3 since 2024-05-02.",
    "Trish prefers concise notes about Kubernetes 1.36.",
    "Invoices go to billing@example.org before the 5th.",
    "The Raspberry Pi in the garage logs humidity hourly.",
    "Grandma's birthday is on 12 March; she likes tulips.",
]
SEEDS = [Seed(f"old{i}", text, importance=0.6, age_days=90) for i, text in enumerate(TEXTS)]
SEEDS += [Seed(f"new{i}", f"{text} (noted {i})", category="people", age_days=2) for i, text in enumerate(TEXTS)]


def full_ids(agent_dir: Path) -> set[str]:
    return {s.id for s in MemoryStore(agent_dir / "memory").scan().entries}


def cycle(agent_dir: Path, day: int) -> CycleOutcome:
    settings = CycleSettings(min_interval_hours=0)
    options = CycleOptions(agent_dir=agent_dir, settings=settings, now=BASE_TIME + timedelta(days=day))
    return asyncio.run(run_cycle(options, OfflineProposer()))


def test_steady_cycles_leave_the_index_alone_and_read_only_what_decay_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = tmp_path / "agent"
    write_corpus(agent, SEEDS)
    real = ci.time.time_ns
    clock = {"day": 0}
    # Each cycle a day later for the index's racy rule too (files written by the last cycle are trusted).
    monkeypatch.setattr(ci, "_now_ns", lambda: real() + (clock["day"] + 1) * DAY_NS)
    index_file = ci.index_path(agent)
    writeback_file = writeback_index_path(agent)
    log_file = index_file.with_name(index_file.name + ci.LOG_SUFFIX)
    sizes, decayed = [], []
    for day in range(5):
        clock["day"] = day
        outcome = cycle(agent, day)
        assert outcome.report.result == "completed"
        decayed.append(outcome.report.decayed)
        state = (index_file.read_bytes(), log_file.read_bytes() if log_file.exists() else b"")
        sizes.append((*state, writeback_file.read_bytes(), writeback_file.stat().st_mtime_ns))
    # From the third cycle on nothing new is said: the decayed files' records were dropped (their stat changed
    # after the scan), the rest are unchanged. Before, each cycle appended six records to the log.
    assert sizes[2] == sizes[3] == sizes[4] and min(decayed[2:]) > 0
    clock["day"] = 5
    index = ci.open_corpus_index(agent, agent / "memory")
    indexed = {s.id: s.entry for s in MemoryStore(agent / "memory", index).scan().entries}
    # What the last decay wrote is read; the rest comes from the index.
    assert index.reads == decayed[-1] and index.hits == len(full_ids(agent)) - decayed[-1]
    full = {s.id: s.entry for s in MemoryStore(agent / "memory").scan().entries}
    assert indexed == full


# Inside their grace period and like no other entry: a steady cycle neither decays nor offers them, so the index
# serves them cycle after cycle.
QUIET = [
    Seed(f"quiet{i}", text, category="people", age_days=2)
    for i, text in enumerate(
        [
            "The cat is called Miso and sleeps on the router.",
            "Dentist appointment reminders go out two days ahead.",
            "Sam's allergy list: peanuts, latex, penicillin.",
            "The VPN gateway is reachable as vpn.example.net.",
            "Quarterly reports are due on the 15th of January, April, July and October.",
            "Alex collects vinyl records from the 1970s.",
        ]
    )
]


def test_a_steady_cycle_decodes_no_entry_from_the_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 27: a record read back keeps its entry's view and its other values as a blob, decoded only when a stage
    reads the entry (memory/corpus_index_records.py). A steady cycle's whole-corpus stages read the views alone, and
    the entries it decays were rewritten by the last cycle (read again, not decoded): no record is decoded, and the
    cycle reports what a cycle without the index reports."""
    from dreamkeeper.consolidation import cluster_cache, quiet
    from dreamkeeper.memory import corpus_index_records as records
    from dreamkeeper.memory.stored import LazyStored

    agent = tmp_path / "agent"
    write_corpus(agent, SEEDS[: len(TEXTS)] + QUIET)
    clock = {"day": 0}
    # Every clock that keys a cache a day per cycle ahead (their racy rules: the last cycle's files are trusted).
    for module in (ci, cluster_cache, quiet):
        real = module.time.time_ns  # type: ignore[attr-defined]
        monkeypatch.setattr(module, "_now_ns", lambda real=real: real() + (clock["day"] + 1) * DAY_NS)
    decoded: list[str] = []
    decode = records._decoded

    def counted(record: records.Record) -> object:
        decoded.append(str(record.view_id))
        return decode(record)

    monkeypatch.setattr(records, "_decoded", counted)

    def hourly(at: int) -> CycleOutcome:  # cycles an hour apart; the index's clock a day apart (its racy rule)
        clock["day"] = at
        settings = CycleSettings(min_interval_hours=0)
        options = CycleOptions(agent_dir=agent, settings=settings, now=BASE_TIME + timedelta(hours=at))
        return asyncio.run(run_cycle(options, OfflineProposer()))

    for at in range(4):  # settle: the index holds every file the cycles did not write
        assert hourly(at).report.result == "completed"
    decoded.clear()
    clock["day"] = 4
    index = ci.open_corpus_index(agent, agent / "memory")
    scanned = MemoryStore(agent / "memory", index).scan().entries
    lazy = [s for s in scanned if isinstance(s, LazyStored)]
    # Every file taken from the index is a view over its record; so is every file the last cycle's decay wrote
    # (memory/corpus_index_own.py): its bytes are the ones written, and the entry kept for them is taken.
    kept = {str(r.view_id) for r in load_own(index.own_path, str(agent / "memory")).values()}
    assert len(lazy) == index.hits + index.own_taken and index.hits > 0
    assert index.own_taken == index.reads == len(kept) > 0
    assert not decoded
    twin = tmp_path / "twin"  # the same corpus without the index, for the report
    shutil.copytree(agent, twin, symlinks=True)
    outcome = hourly(4)
    assert outcome.report.result == "completed" and outcome.report.decayed > 0
    # Nothing the steady cycle did built an entry from an index record; the entries it decays again are the kept
    # decays' (their files were not parsed), each decoded once.
    assert sorted(decoded) == sorted(kept)
    options = CycleOptions(
        agent_dir=twin,
        settings=CycleSettings(min_interval_hours=0),
        now=BASE_TIME + timedelta(hours=4),
        corpus_index=False,
    )
    plain = asyncio.run(run_cycle(options, OfflineProposer()))
    from dreamkeeper.consolidation.counts import CycleCounts

    assert plain.report.result == outcome.report.result
    assert plain.report.lost_specifics == outcome.report.lost_specifics == []
    for field in CycleCounts.model_fields:
        assert getattr(outcome.report, field) == getattr(plain.report, field), field
