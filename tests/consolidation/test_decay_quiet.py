"""decay.quiet_until: before it, ``plan_decay`` over the same entries plans no write (the quiet memo skips the pass
until then), and it is not much earlier than the first write (else the memo would save nothing). Checked against
``plan_decay`` itself on random corpora and settings: the frugal mode (``min_step`` > 0) and RockBot's (0), the decay
floor, the high-value floor and its reinforcement clause, entries inside and past their grace period."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from dreamkeeper.consolidation.decay import float32, plan_decay, quiet_until
from dreamkeeper.consolidation.settings import DecaySettings
from dreamkeeper.memory import Entry, HighValueFloor, StoredEntry
from tests.parity.test_parity_gating import stored

NOW = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)


def corpus(rng: random.Random, n: int) -> list[StoredEntry]:
    out = []
    for i in range(n):
        created = NOW - timedelta(days=rng.uniform(0, 400))
        updated = created + (NOW - created) * rng.random()
        seen = created + (NOW - created) * rng.random()
        importance = rng.choice([rng.uniform(0, 1.2), 0.8, 0.1, 0.5])
        entry = Entry(
            id=f"e{i}",
            content=f"Fact {i}.",
            category="notes",
            created_at=created,
            updated_at=updated,
            last_seen_at=seen,
            importance_score=importance,
            reinforcement_count=rng.randint(1, 7),
        )
        out.append(stored(entry))
    return out


def settled(live: list[StoredEntry], settings: DecaySettings, floor: HighValueFloor) -> list[StoredEntry]:
    """``live`` after decay's writes at NOW (as a cycle leaves it): what a quiet cycle then finds."""
    for _ in range(10):
        plan = plan_decay(live, settings, floor, NOW)
        if not plan.actions:
            return live
        written = {a.target.id: stored(a.updated) for a in plan.actions}
        live = [written.get(s.id, s) for s in live]
    raise AssertionError("decay did not settle")


def decays(live: list[StoredEntry], settings: DecaySettings, floor: HighValueFloor, at: datetime) -> int:
    return len(plan_decay(live, settings, floor, at).actions)


@pytest.mark.parametrize("seed", range(40))
def test_no_write_is_planned_before_quiet_until(seed: int) -> None:
    rng = random.Random(seed)
    settings = DecaySettings(
        grace_days=rng.choice([0.0, 7.0, 30.0]),
        half_life_days=rng.choice([1.0, 14.0, 45.0, 90.0]),
        floor=rng.choice([0.0, 0.1, 0.3]),
        min_step=rng.choice([0.001, 0.01, 0.05, 0.2]),
    )
    floor = HighValueFloor(importance=rng.choice([0.6, 0.8, 0.95]), reinforcement=rng.choice([3, 5, 8]))
    live = settled(corpus(rng, 60), settings, floor)
    until = quiet_until(live, settings, floor, NOW)
    assert until != NOW  # settled: nothing is due now
    if until is None:
        for days in (1, 100, 10_000):
            assert decays(live, settings, floor, NOW + timedelta(days=days)) == 0
        return
    assert until > NOW
    for fraction in (0.0, 0.5, 0.9, 0.999):
        at = NOW + (until - NOW) * fraction
        assert decays(live, settings, floor, at) == 0, (fraction, until)
    assert decays(live, settings, floor, until - timedelta(seconds=1)) == 0
    # Not much earlier than the first write: the margin is a thousandth of the wait (at most ~11 half-lives for
    # these values) and a minute.
    late = until + timedelta(minutes=2) + timedelta(days=0.0011 * settings.half_life_days * 12)
    assert decays(live, settings, floor, late) >= 1


def test_every_drop_is_a_write_without_min_step() -> None:
    live = corpus(random.Random(1), 40)  # some entries past their grace period: a drop every moment
    settings = DecaySettings(min_step=0.0)
    assert quiet_until(live, settings, HighValueFloor(), NOW) == NOW


@pytest.mark.parametrize("seed", range(24))
def test_rockbots_mode_is_quiet_only_while_every_entry_is_in_its_grace_period(seed: int) -> None:
    """``min_step`` 0: every drop is a write, so the quiet time is the first grace period's end (or an updatedAt
    after it): never later than a write (checked against ``plan_decay`` itself), and ``now`` once an entry above the
    decay floor is past its grace period."""
    rng = random.Random(seed)
    grace = rng.choice([1.0, 7.0, 30.0])
    settings = DecaySettings(
        grace_days=grace,
        half_life_days=rng.choice([1.0, 14.0, 45.0]),
        floor=rng.choice([0.0, 0.1, 0.3]),
        min_step=0.0,
    )
    floor = HighValueFloor()
    live = corpus(rng, 30)
    # Seen lately: within the grace period, or (some seeds) one entry just past it.
    live = [stored(s.entry.evolve(last_seen_at=NOW - timedelta(days=rng.uniform(0, grace * 0.9)))) for s in live]
    if seed % 3 == 0:
        live[0] = stored(live[0].entry.evolve(last_seen_at=NOW - timedelta(days=grace + 0.01), importance_score=0.9))
    live = settled(live, settings, floor)
    until = quiet_until(live, settings, floor, NOW)
    if seed % 3 == 0:
        assert until == NOW  # an entry past its grace period drops at every moment
        assert decays(live, settings, floor, NOW + timedelta(hours=1)) >= 1
        return
    assert until is not None and until > NOW
    for fraction in (0.0, 0.5, 0.999):
        assert decays(live, settings, floor, NOW + (until - NOW) * fraction) == 0, fraction
    assert decays(live, settings, floor, until - timedelta(microseconds=1)) == 0
    # Not later than the first grace period to end among the entries above the decay floor (the others never drop):
    # a day after it, that entry has dropped.
    above = [s for s in live if float32(s.entry.importance_score) > float32(settings.floor)]
    assert above
    first = min(max(s.entry.last_seen_at + timedelta(days=grace), s.entry.updated_at) for s in above)  # type: ignore[operator]
    assert until <= first
    assert decays(live, settings, floor, first + timedelta(days=1)) >= 1


def test_off_or_nothing_to_decay_is_never() -> None:
    live = corpus(random.Random(2), 40)
    assert quiet_until(live, DecaySettings(enabled=False, min_step=0.01), HighValueFloor(), NOW) is None
    floored = [stored(s.entry.evolve(importance_score=0.05)) for s in live]  # all below the decay floor
    assert quiet_until(floored, DecaySettings(min_step=0.01), HighValueFloor(), NOW) is None


@pytest.mark.parametrize("importance", [0.005, 0.3, 1e-30, 1e-40])
def test_an_underflow_to_the_floor_is_a_write_and_is_waited_for(importance: float) -> None:
    """With the decay floor at 0 and an importance under ``min_step``, no drop reaches ``min_step``, but float32
    underflows to 0.0 (the floor) some 150 half-lives on, and plan_decay writes that: quiet_until said "never"
    before (found by tests/consolidation/test_decay_dues.py's random corpora), which would have let the quiet memo
    skip the write for ever. Now it is a time before that write, and within a couple of half-lives of it."""
    settings = DecaySettings(min_step=0.5, floor=0.0, grace_days=0.0, half_life_days=1.0)
    entry = Entry(
        id="tiny",
        content="A tiny fact.",
        category="notes",
        created_at=NOW,
        updated_at=NOW,
        last_seen_at=NOW,
        importance_score=importance,
        reinforcement_count=1,
    )
    live = [stored(entry)]
    until = quiet_until(live, settings, HighValueFloor(), NOW)
    assert until is not None and until > NOW
    low, high = 0.0, 400.0  # days: the first write, by bisection to the second
    assert decays(live, settings, HighValueFloor(), NOW + timedelta(days=high)) == 1
    while high - low > 1 / 86400:
        mid = (low + high) / 2
        low, high = (low, mid) if decays(live, settings, HighValueFloor(), NOW + timedelta(days=mid)) else (mid, high)
    first = NOW + timedelta(days=high)
    assert plan_decay(live, settings, HighValueFloor(), first).actions[0].updated.importance_score == 0.0
    assert until <= first - timedelta(seconds=1)
    assert first - until < timedelta(days=2)
    assert decays(live, settings, HighValueFloor(), until) == 0
