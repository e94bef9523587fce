"""decay_dues.plan_decay_due: importance decay planned over the entries whose due (kept in their corpus-index records,
memory/entry_dues.py) has come gives the very plan ``plan_decay`` gives over every entry, cycle after cycle, on
random corpora, settings and clocks, with the agent reinforcing entries between cycles and the index saved and
loaded again each time (a new process); dues are kept only under their key and only for the parse a record holds;
in RockBot's own mode (``min_step`` 0) too, where they leave out the entries inside their grace period and those at
the decay floor. And through real cycles, in both modes: an agent whose cycles use the index writes exactly what the
same agent without an index writes."""

from __future__ import annotations

import math
import random
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation import decay_dues
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.decay import plan_decay, quiet_until
from dreamkeeper.consolidation.decay_dues import due_key, plan_decay_due
from dreamkeeper.consolidation.settings import CycleSettings, DecaySettings
from dreamkeeper.memory import NEVER, Entry, HighValueFloor, MemoryStore, StoredEntry, open_corpus_index
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.proposers import OfflineProposer
from tests.consolidation.test_decay_quiet import NOW

LATER_NS = 60 * 1_000_000_000  # the index's clock a minute on: every file written here is past the racy window


@pytest.fixture(autouse=True)
def _later(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ci.time.time_ns
    monkeypatch.setattr(ci, "_now_ns", lambda: real() + LATER_NS)


def _random_entry(rng: random.Random, i: int, at: datetime) -> Entry:
    created = at - timedelta(days=rng.uniform(0, 400))
    return Entry(
        id=f"e{i:03d}",
        content=f"Fact {i} about the Portland office.",
        category=rng.choice(["notes", "people/family"]),
        created_at=created,
        updated_at=created + (at - created) * rng.random(),
        last_seen_at=created + (at - created) * rng.random(),
        importance_score=rng.choice([rng.uniform(0, 1.2), 0.8, 0.1, 0.5, 0.95]),
        reinforcement_count=rng.randint(1, 7),
    )


def _scan(agent: Path) -> tuple[MemoryStore, list[StoredEntry]]:
    """A new process's view: the index loaded from disk, the corpus scanned through it."""
    store = MemoryStore(agent / "memory", open_corpus_index(agent, agent / "memory"))
    return store, store.scan().live


def _settings(rng: random.Random, rockbot: bool = False) -> tuple[DecaySettings, HighValueFloor]:
    """Random settings; ``rockbot``: RockBot's mode (``min_step`` 0), with a grace period (else every entry above the
    floor is due every cycle, and nothing is left out to check)."""
    settings = DecaySettings(
        grace_days=rng.choice([7.0, 30.0] if rockbot else [0.0, 7.0, 30.0]),
        half_life_days=rng.choice([1.0, 14.0, 45.0, 90.0]),
        floor=rng.choice([0.0, 0.1, 0.3]),
        min_step=0.0 if rockbot else rng.choice([0.001, 0.01, 0.05, 0.2]),
    )
    return settings, HighValueFloor(importance=rng.choice([0.6, 0.8, 0.95]), reinforcement=rng.choice([3, 5, 8]))


def _as_compared(plan: Any) -> tuple[list[tuple[str, Entry]], frozenset[str]]:
    return [(action.target.id, action.updated) for action in plan.actions], plan.left_floor


@pytest.mark.parametrize("rockbot", [False, True], ids=["frugal", "rockbot"])
@pytest.mark.parametrize("seed", range(16))
def test_the_plan_over_the_due_entries_is_the_plan_over_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int, rockbot: bool
) -> None:
    rng = random.Random(seed)
    settings, floor = _settings(rng, rockbot)
    agent = tmp_path / "agent"
    store = MemoryStore(agent / "memory")
    for i in range(80):
        entry = _random_entry(rng, i, NOW)
        if rockbot and i % 5 == 0:  # seen just now: inside its grace period for the next cycles (else, in this mode,
            entry = entry.evolve(last_seen_at=NOW)  # the few an agent reinforces may be all there are)
        store.create(entry)
    asked: list[int] = []
    real_plan = decay_dues.plan_decay
    monkeypatch.setattr(decay_dues, "plan_decay", lambda live, *a: asked.append(len(live)) or real_plan(live, *a))
    now, left_out = NOW, 0
    for step in range(10):
        store, live = _scan(agent)
        full = plan_decay(live, settings, floor, now)
        asked.clear()
        planned, until = plan_decay_due(live, settings, floor, now, store.corpus_index)
        assert _as_compared(planned) == _as_compared(full), (seed, step)
        left_out += len(live) - asked[0]
        if not full.actions:
            kept, exact = until(), quiet_until(live, settings, floor, now)
            if exact is None or exact == now:
                assert kept == exact, (kept, exact)
            else:  # made as early as a whole second and one more: never later
                assert kept == now or (kept is not None and exact - timedelta(seconds=2) <= kept <= exact)
        for action in full.actions:  # what the cycle writes
            store.rewrite(action.target, action.updated)
        by_id = {s.id: s for s in live if not any(a.target is s for a in full.actions)}
        for entry_id in rng.sample(sorted(by_id), min(3, len(by_id))):  # the agent sees and reinforces a few
            seen = by_id[entry_id]
            store.rewrite(seen, seen.entry.evolve(last_seen_at=now, importance_score=rng.uniform(0.2, 1.0)))
        assert store.corpus_index is not None
        store.corpus_index.save()
        now += timedelta(hours=rng.choice([1, 6, 24, 24 * 7, 24 * 30]))
    assert left_out > 0  # the dues were used: some cycle left entries out


def _scanned_agent(tmp_path: Path, entries: int) -> tuple[Path, MemoryStore, list[StoredEntry]]:
    """An agent holding ``entries`` random entries, scanned once through its corpus index."""
    agent = tmp_path / "agent"
    store = MemoryStore(agent / "memory")
    for i in range(entries):
        store.create(_random_entry(random.Random(i), i, NOW))
    return (agent, *_scan(agent))


def test_dues_are_kept_under_their_key_and_for_the_very_parse(tmp_path: Path) -> None:
    agent, store, live = _scanned_agent(tmp_path, 6)
    index = store.corpus_index
    assert index is not None
    assert index.note_dues([(s, 100 + n) for n, s in enumerate(live)], "key-a") == len(live)
    look, unknown, soonest = index.pending(live, "key-b", 0)
    assert look == unknown == live and soonest is None  # another key's dues: none known
    look, unknown, soonest = index.pending(live, "key-a", 102)
    assert look == live[:3] and unknown == [] and soonest == 103
    copy = StoredEntry(live[0].entry.evolve(importance_score=0.01), live[0].path, live[0].fingerprint)
    assert index.note_dues([(copy, 5)], "key-a") == 0  # not the parse the record holds
    assert index.pending([copy], "key-a", 0) == ([copy], [copy], None)
    with pytest.raises(TypeError, match="whole seconds"):
        index.note_dues([(live[0], 1.5)], "key-a")  # type: ignore[list-item]
    index.save()

    store, again = _scan(agent)  # saved with the records, loaded by a new process
    assert store.corpus_index is not None
    assert store.corpus_index.pending(again, "key-a", 99) == ([], [], 100)
    store.rewrite(again[1], again[1].entry.evolve(last_seen_at=NOW))  # the agent's write: its record goes
    store, third = _scan(agent)
    assert store.corpus_index is not None
    assert store.corpus_index.pending(third, "key-a", 99) == ([third[1]], [third[1]], 100)


def test_an_entry_that_never_decays_is_never_due(tmp_path: Path) -> None:
    agent = tmp_path / "agent"
    MemoryStore(agent / "memory").create(_random_entry(random.Random(0), 0, NOW).evolve(importance_score=0.05))
    store, live = _scan(agent)
    settings = DecaySettings(min_step=0.01, floor=0.1)
    plan, until = plan_decay_due(live, settings, HighValueFloor(), NOW, store.corpus_index)
    assert plan.actions == () and until() is None
    assert store.corpus_index is not None
    key = due_key(settings, HighValueFloor())
    assert key is not None
    assert store.corpus_index.pending(live, key, NEVER - 1) == ([], [], NEVER)


def test_rockbots_own_mode_leaves_out_the_entries_in_their_grace_period(tmp_path: Path) -> None:
    """``min_step`` 0: every entry past its grace period is asked every cycle; one inside it, or at the decay floor,
    is not asked again until its grace ends (it plans nothing before: ``plan_decay`` decides the same)."""
    agent = tmp_path / "agent"
    store = MemoryStore(agent / "memory")
    for i in range(30):
        entry = _random_entry(random.Random(i), i, NOW)
        if i % 3 == 0:  # seen yesterday: inside a 30-day grace period
            entry = entry.evolve(last_seen_at=NOW - timedelta(days=1), importance_score=0.7)
        elif i % 3 == 1:  # past it, above the floor: drops every cycle
            entry = entry.evolve(last_seen_at=NOW - timedelta(days=60), importance_score=0.7)
        else:  # at the decay floor: never drops
            entry = entry.evolve(last_seen_at=NOW - timedelta(days=60), importance_score=0.1)
        store.create(entry)
    store, live = _scan(agent)
    settings, floor = DecaySettings(min_step=0.0, grace_days=30.0, floor=0.1), HighValueFloor()
    key = due_key(settings, floor)
    assert key is not None and key != due_key(DecaySettings(min_step=0.01, grace_days=30.0, floor=0.1), floor)
    plan, _ = plan_decay_due(live, settings, floor, NOW, store.corpus_index)
    assert _as_compared(plan) == _as_compared(plan_decay(live, settings, floor, NOW))
    assert sorted(action.target.id for action in plan.actions) == [f"e{i:03d}" for i in range(1, 30, 3)]
    assert store.corpus_index is not None
    store.corpus_index.save()

    store, again = _scan(agent)  # a new process, an hour on: nothing was written, the dues were kept
    assert store.corpus_index is not None
    at = NOW + timedelta(hours=1)
    look, unknown, soonest = store.corpus_index.pending(again, key, math.floor(at.timestamp()))
    # Asked again: those past their grace period (planned for a write, so no due was kept for them); the others were
    # left out, the soonest due being the grace period that ends first.
    past_grace = [f"e{i:03d}" for i in range(1, 30, 3)]
    assert sorted(s.id for s in look) == sorted(s.id for s in unknown) == past_grace
    grace_ends = NOW - timedelta(days=1) + timedelta(days=30)
    assert soonest == math.floor(grace_ends.timestamp()) - 1  # the first grace period's end, a second early
    planned, _ = plan_decay_due(again, settings, floor, at, store.corpus_index)
    assert _as_compared(planned) == _as_compared(plan_decay(again, settings, floor, at))
    assert due_key(DecaySettings(enabled=False, min_step=0.0), floor) is None
    # Any setting the dues depend on is in the key.
    keys = {
        due_key(DecaySettings(min_step=0.01), floor),
        due_key(DecaySettings(min_step=0.02), floor),
        due_key(DecaySettings(min_step=0.01, half_life_days=30.0), floor),
        due_key(DecaySettings(min_step=0.01, grace_days=3.0), floor),
        due_key(DecaySettings(min_step=0.01, floor=0.2), floor),
        due_key(DecaySettings(min_step=0.01), HighValueFloor(importance=0.7)),
        due_key(DecaySettings(min_step=0.01), HighValueFloor(reinforcement=9)),
        due_key(DecaySettings(min_step=0.0), floor),
    }
    assert len(keys) == 8


def _decay_state(agent: Path) -> dict[str, tuple[float, datetime | None]]:
    store = MemoryStore(agent / "memory")
    return {s.id: (s.entry.importance_score, s.entry.updated_at) for s in store.scan().entries}


@pytest.mark.parametrize("min_step", [0.01, 0.0], ids=["frugal", "rockbot"])
def test_real_cycles_with_the_index_write_what_cycles_without_it_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, min_step: float
) -> None:
    """Two copies of one agent, cycles a day, a week, a month apart: the copy whose cycles keep the corpus index (and
    its dues) and the copy whose cycles read every file decay the same entries to the same values."""
    from bench.sim.world import write_synthetic_corpus

    settings = CycleSettings(archive_cap=1.0, decay=DecaySettings(min_step=min_step))
    kept, cold = tmp_path / "kept", tmp_path / "cold"
    write_synthetic_corpus(kept / "memory", 300, 7)
    start = datetime.now(UTC)
    asked: list[int] = []
    real_plan = decay_dues.plan_decay
    monkeypatch.setattr(decay_dues, "plan_decay", lambda live, *a: asked.append(len(live)) or real_plan(live, *a))

    def cycle(agent: Path, at: datetime, index: bool) -> int:
        options = CycleOptions(agent_dir=agent, settings=settings, force=True, now=at, corpus_index=index)
        outcome = run_cycle_sync(options)
        assert outcome.report.result == "completed", outcome.report
        return outcome.report.decayed

    for _ in range(3):  # settled: the cold start's merges, archives and stamps done
        cycle(kept, start, True)
    shutil.copytree(kept, cold, symlinks=True)
    decayed = 0
    for days in (1, 2, 9, 40, 41, 41.5, 100):
        at = start + timedelta(days=days)
        asked.clear()
        with_index = cycle(kept, at, True)
        looked = asked[-1] if asked else 0
        without = cycle(cold, at, False)
        assert with_index == without, days
        assert _decay_state(kept) == _decay_state(cold), days
        decayed += with_index
        live = sum(1 for s in MemoryStore(kept / "memory").scan().entries if s.entry.is_live)
        assert looked < live, (days, looked, live)  # the index's dues left entries out
    assert decayed > 0


def run_cycle_sync(options: CycleOptions) -> Any:
    import asyncio

    return asyncio.run(run_cycle(options, OfflineProposer()))
