"""Importance decay, as RockBot's consolidation pass does it (``RunImportanceDecayPassAsync``, DreamService.cs,
MarimerLLC/rockbot@05346ff0; vectors from ImportanceDecayTests.cs @20512da1).

For each live entry, after the exact-duplicate fold and before gating:

    days since seen   = now - lastSeenAt                   (grace runs from the last sighting)
    skip if           days since seen < grace, or importance <= floor
    elapsed           = min(days since seen - grace, max(0, now - (updatedAt or createdAt)))
    skip if           elapsed <= 0
    importance        = max(floor, importance * 0.5 ** (elapsed / half-life))      in float32, as RockBot
    write             importance and updatedAt = now, if it went down (by ``min_step`` at least, when set: below)

``updatedAt = now`` is the anchor that makes it calendar-time invariant (one pass over 10 days equals twenty over
half a day each), and what RockBot writes too: a corpus can move between the two engines without decaying twice.
Nothing else changes, so review stamps (content fingerprints) stay valid. Writes go through the journal like every
other cycle write, each one guarded by the fingerprint read at snapshot, and ``undo`` puts importance and updatedAt
back. An entry that decay takes below the high-value floor is counted, and stays protected from pruning for the
rest of that cycle (RockBot's prune check reads the pre-decay snapshot too).

RockBot writes every decaying entry on every pass, and so does dreamkeeper by default (``min_step`` 0). With a
positive ``min_step`` (the frugal mode) an entry is written once it has fallen that much since its last write, or
when it reaches the decay floor or leaves the high-value floor: the anchor (updatedAt) stays until then, so the
value written is the one RockBot's passes would have reached, minus float32 rounding — several times fewer writes
(and fsyncs) a cycle on a mature corpus, with what is on disk lagging by less than ``min_step``.
"""

from __future__ import annotations

import contextlib
import math
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from dreamkeeper.consolidation.plan import DecayAction
from dreamkeeper.consolidation.settings import DecaySettings
from dreamkeeper.memory import Entry, HighValueFloor, StoredEntry, shortest_float32

_DAY = timedelta(days=1)
_F32 = struct.Struct("f")
_HALF_SUBNORMAL = 2.0**-150  # half the least positive float32: a product under it rounds to 0.0


def _to_float32(value: float) -> float:
    """``float(np.float32(value))`` without numpy's per-scalar cost (a steady cycle asks this of every live entry
    past its grace period): the C cast to float, round to nearest even, as numpy's. A finite value beyond float32's
    range raises OverflowError (numpy makes it inf)."""
    return float(_F32.unpack(_F32.pack(value))[0])


def float32(value: float) -> float:
    """``value`` as the float32 RockBot holds, written with the fewest digits that read back as that float32
    (``float(str(np.float32(value)))``, without numpy: memory/float32.py)."""
    return shortest_float32(value)


def decayed_importance(entry: Entry, settings: DecaySettings, now: datetime) -> float | None:
    """The importance decay gives ``entry`` now, or None when it keeps its own (RockBot's skips, in its order)."""
    if not settings.active:
        return None
    return _Decayer(settings, now)(entry)


class _Decayer:
    """``decayed_importance`` for one settings and one ``now``: what depends on them alone (the floor and half-life in
    float32, the grace period) worked out once instead of once per entry (a steady cycle asks it of every live entry;
    the per-settings part was a third of it). The one implementation: ``decayed_importance`` calls it too."""

    __slots__ = ("floor", "grace", "half_life", "now", "settings")

    def __init__(self, settings: DecaySettings, now: datetime) -> None:
        self.settings, self.now, self.grace = settings, now, settings.grace_days
        # Beyond float32 (the settings' bounds keep them well inside): None, and the per-entry path fails as it did.
        self.floor: float | None = None
        self.half_life: float | None = None
        with contextlib.suppress(OverflowError):
            self.floor = _to_float32(settings.floor)
        with contextlib.suppress(OverflowError):
            self.half_life = _to_float32(settings.half_life_days)

    def __call__(self, entry: Entry) -> float | None:
        now = self.now
        since_seen = (now - (entry.last_seen_at or entry.created_at)) / _DAY  # Entry.seen_at, inline
        if since_seen < self.grace:
            return None  # first: most entries of a live corpus stop here, before any float32 arithmetic
        # float32 arithmetic as RockBot's (C# float) and numpy's, in Python floats: a product of two float32 values
        # is exact in a double (24 + 24 significant bits), so rounding it once to float32 is the correctly rounded
        # float32 product (tests/consolidation/test_decay.py checks every step against numpy's, bit for bit).
        floor = self.floor
        try:
            if floor is None:
                floor = _to_float32(self.settings.floor)  # raises, as it did per entry
            importance = _to_float32(entry.importance_score)
        except OverflowError:  # beyond float32 (never screened in): numpy's inf, which never decays (or is no decay)
            return None
        if not importance > floor:  # also NaN-safe
            return None
        last_touch = entry.updated_at or entry.created_at
        since_touch = max(0.0, (now - last_touch) / _DAY)
        elapsed = min(since_seen - self.grace, since_touch)
        if elapsed <= 0:
            return None
        half_life = self.half_life if self.half_life is not None else _to_float32(self.settings.half_life_days)
        factor = _to_float32(0.5 ** (elapsed / half_life))
        lowered = max(floor, _to_float32(importance * factor))
        if not lowered < importance:
            return None
        return float32(float(lowered))


@dataclass(frozen=True)
class DecayPlan:
    actions: tuple[DecayAction, ...] = ()
    left_floor: frozenset[str] = frozenset()  # ids the high-value floor protected before decay and not after


def plan_decay(live: Sequence[StoredEntry], settings: DecaySettings, floor: HighValueFloor, now: datetime) -> DecayPlan:
    """What decay changes in ``live`` this cycle."""
    if not settings.active:
        return DecayPlan()
    actions: list[DecayAction] = []
    left: set[str] = set()
    decayed = _Decayer(settings, now)
    decay_floor, min_step = float32(settings.floor), settings.min_step  # once, not once per decayed entry
    for stored in live:
        entry = stored.entry
        importance = decayed(entry)
        if importance is None:
            continue
        updated = entry.evolve(importance_score=importance, updated_at=now)
        leaves_floor = floor.protects(entry) and not floor.protects(updated)
        at_floor = importance <= decay_floor
        if entry.importance_score - importance < min_step and not (leaves_floor or at_floor):
            continue  # not yet worth a write: the anchor stays, so the next cycle decays from it exactly
        actions.append(DecayAction(stored, updated))
        if leaves_floor:
            left.add(stored.id)
    return DecayPlan(tuple(actions), frozenset(left))


class _Due:
    """When ``plan_decay`` could first plan a write of an entry: the earliest time at which it, decaying from its own
    anchor, could fall by ``min_step`` (with ``min_step`` 0, any drop: its grace period's end, or its updatedAt if
    later), reach the decay floor or leave the high-value floor;
    made earlier than the exact arithmetic says by a thousandth of the wait and a minute (float32 rounding moves a
    crossing by about a second per 45-day half-life). A function of the entry and the settings alone, not of the
    clock: ``quiet_until`` takes the least over a corpus, the corpus index keeps it per entry (``plan_decay_due``).
    Raises OverflowError for settings beyond float32 (nothing sensible to wait for)."""

    __slots__ = ("decay_floor", "floor", "half_life", "settings", "threshold")

    def __init__(self, settings: DecaySettings, floor: HighValueFloor) -> None:
        self.settings, self.floor = settings, floor
        self.decay_floor = _to_float32(settings.floor)
        self.half_life = _to_float32(settings.half_life_days)
        self.threshold = _to_float32(floor.importance)

    def __call__(self, entry: Entry) -> datetime | None:
        """The entry's earliest write; None when it can never be written (it never decays)."""
        settings = self.settings
        try:
            importance = _to_float32(entry.importance_score)
        except OverflowError:
            return None  # beyond float32: never decays (``_Decayer``)
        if not importance > self.decay_floor:
            return None  # at or below the floor (or NaN): never decays
        targets = [entry.importance_score - settings.min_step, self.decay_floor]
        if importance >= self.threshold and entry.reinforcement_count < self.floor.reinforcement:
            targets.append(self.threshold)  # leaves the high-value floor once below it
        # Raised by what float32 rounding can take off the decayed value: a write needs the float32 product at or
        # under the target, and the factor and the product are each rounded by half a unit (relative 2**-24 for a
        # normal float32, absolute 2**-150 for a subnormal: the factor is one past ~126 half-lives). So a target of
        # 0 is not "never": with the decay floor at 0 and an importance under ``min_step``, the product underflows
        # to 0.0, the floor, about 150 half-lives on, and that is a write.
        target = (max(targets) + (1.0 + importance) * _HALF_SUBNORMAL) * (1.0 + 2.0**-23)
        wait = self.half_life * math.log2(importance / target) if target < importance else 0.0
        wait = max(0.0, wait * 0.999 - 1 / 1440)
        seen = entry.last_seen_at or entry.created_at
        touched = entry.updated_at or entry.created_at
        try:
            return max(seen + timedelta(days=settings.grace_days + wait), touched + timedelta(days=wait))
        except OverflowError:
            return None  # past the calendar's end: never


def quiet_until(
    live: Sequence[StoredEntry], settings: DecaySettings, floor: HighValueFloor, now: datetime
) -> datetime | None:
    """A time before which ``plan_decay`` over this very ``live`` plans no write (quiet.py keeps it): the least of
    its entries' earliest writes (``_Due``). ``now`` itself when an entry may be written at once (with ``min_step``
    0, any entry past its grace period and above the decay floor); None when no entry can decay."""
    if not settings.active:
        return None
    try:
        due = _Due(settings, floor)
    except OverflowError:
        return now  # nothing sensible to wait for: plan every cycle
    until: datetime | None = None
    for stored in live:
        earliest = due(stored.entry)
        if earliest is None:
            continue
        if earliest <= now:
            return now
        until = earliest if until is None else min(until, earliest)
    return until


__all__ = ["DecayPlan", "decayed_importance", "float32", "plan_decay", "quiet_until"]
