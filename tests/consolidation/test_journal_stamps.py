"""Review stamps are written in batches from the cycle's snapshot; the agent's writes still win."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from dreamkeeper.consolidation import executor as executor_module
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.executor import Executor
from dreamkeeper.consolidation.journal import Journal, incomplete_journals
from dreamkeeper.consolidation.journal_steps import write_journal
from dreamkeeper.consolidation.plan import Plan, StampAction
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory.atomic import current_fingerprint
from dreamkeeper.memory.entry import REVIEWED_HASH
from dreamkeeper.proposers import OfflineProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus

SEEDS = [Seed(f"e{i}", f"Fact number {i} about Rockford.", "people" if i % 2 else "projects") for i in range(7)]


def stamp_plan(store: MemoryStore) -> Plan:
    scan = store.scan()
    stamps = [StampAction(s, {REVIEWED_HASH: f"hash-{s.id}"}) for s in sorted(scan.entries, key=lambda s: s.id)]
    return Plan(stamps=stamps)


def run(agent: Path, store: MemoryStore, plan: Plan, cycle_id: str, snapshot: bool) -> Executor:
    journal = write_journal(agent, cycle_id, plan, store, BASE_TIME)
    known = {str(a.target.path): a.target for a in plan.stamps} if snapshot else None
    executor = Executor(store, journal, BASE_TIME, known)
    executor.run()
    return executor


def outcome_lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()[1:] if '"step"' in line]


@pytest.mark.parametrize("snapshot", [True, False])
def test_stamps_land_in_batches_with_every_outcome_journaled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, snapshot: bool
) -> None:
    monkeypatch.setattr(executor_module, "STAMP_BATCH", 3)
    store = write_corpus(tmp_path, SEEDS)
    plan = stamp_plan(store)
    executor = run(tmp_path, store, plan, "c1", snapshot)

    assert executor.tally.stamped == len(SEEDS)
    (journal_path,) = (tmp_path / ".dreamkeeper" / "journal").glob("*.jsonl")
    lines = outcome_lines(journal_path)
    assert sorted(int(str(line["step"])) for line in lines) == list(range(len(SEEDS)))
    assert {line["outcome"] for line in lines} == {"done"}
    assert Journal.load(journal_path).complete
    for action in plan.stamps:
        after = store.require(action.target.id)
        assert after.entry.meta(REVIEWED_HASH) == f"hash-{action.target.id}"
        assert after.entry.content == action.target.entry.content
        # The fingerprint the executor reports is the file's: the report's final scan relies on it.
        assert executor.written[str(action.target.path)] == current_fingerprint(after.path)


def test_same_bytes_from_snapshot_and_from_disk(tmp_path: Path) -> None:
    bytes_of: dict[bool, dict[str, bytes]] = {}
    for snapshot in (True, False):
        agent = tmp_path / str(snapshot)
        store = write_corpus(agent, SEEDS)
        run(agent, store, stamp_plan(store), "c1", snapshot)
        bytes_of[snapshot] = {p.name: p.read_bytes() for p in (agent / "memory").rglob("*.json")}
    assert bytes_of[True] == bytes_of[False]


@pytest.mark.parametrize("snapshot", [True, False])
def test_agent_write_after_snapshot_is_kept_and_stamp_is_stale(tmp_path: Path, snapshot: bool) -> None:
    store = write_corpus(tmp_path, SEEDS)
    plan = stamp_plan(store)
    raced = plan.stamps[2].target
    agent_bytes = raced.path.read_bytes().replace(b"Fact number", b"Agent rewrote fact")
    raced.path.write_bytes(agent_bytes)

    executor = run(tmp_path, store, plan, "c1", snapshot)

    assert raced.path.read_bytes() == agent_bytes  # the agent's write is intact
    assert executor.tally.stamped == len(SEEDS) - 1
    assert str(raced.path) not in executor.written
    (journal_path,) = (tmp_path / ".dreamkeeper" / "journal").glob("*.jsonl")
    outcomes = {int(str(line["step"])): line["outcome"] for line in outcome_lines(journal_path)}
    assert outcomes[2] == "stale"


def test_cycle_outcome_repr_stays_short_however_large_the_plan(tmp_path: Path) -> None:
    """asyncio.run() reprs its finished main task with the result: the outcome must not walk the whole corpus."""
    write_corpus(tmp_path, [Seed(f"d{i}", f"Rockford owns host nas-0{i % 3} at 10.0.0.{i}.") for i in range(40)])
    options = CycleOptions(agent_dir=tmp_path, settings=CycleSettings(min_interval_hours=0), now=BASE_TIME)
    outcome = asyncio.run(run_cycle(options, OfflineProposer()))
    assert outcome.plan is not None and outcome.plan.stamps  # a plan that names every entry
    text = repr(outcome)
    assert outcome.report.cycle_id in text
    assert "Rockford" not in text and len(text) < 300


def test_incomplete_journals_reads_tails_and_still_finds_unfinished_ones(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, SEEDS)
    done = run(tmp_path, store, stamp_plan(store), "c-done", snapshot=True).journal.path
    unfinished = write_journal(tmp_path, "c-open", stamp_plan(store), store, BASE_TIME)
    unfinished.record(0, "done")
    torn = write_journal(tmp_path, "c-torn", stamp_plan(store), store, BASE_TIME)
    with open(torn.path, "a", encoding="utf-8") as handle:
        handle.write('{"kind": "complete", "at": "2026-')  # a crash mid-append of the last line

    assert sorted(p.name for p in incomplete_journals(tmp_path)) == sorted([unfinished.path.name, torn.path.name])
    assert Journal.load(done).complete
