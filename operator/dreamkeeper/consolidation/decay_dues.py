"""Importance decay planned over the entries whose time has come, by the due each corpus-index record keeps
(memory/entry_dues.py; issue 27).

In the frugal mode (``min_step`` > 0) an entry is written once it has fallen by ``min_step`` since its last write,
reached the decay floor or left the high-value floor; the earliest time that can happen is a function of the entry
and the settings alone (``decay._Due``, the very arithmetic ``quiet_until`` rests on). A cycle an hour after the
last one used to ask all of a 100,000-entry corpus (0.21-0.38 CPU s) to write five to nine of them; it now asks the
entries whose due has come and those whose due it does not know yet (a file read again: new, edited, rewritten),
then keeps the dues it worked out for the next cycle.

With ``min_step`` 0 (RockBot's own way: every drop a write) an entry past its grace period is due every cycle, but
one still inside it (seen in the last ``grace_days``) is not due before its grace ends, nor one at the decay floor
ever: ``_Due`` gives exactly that (a target of the importance itself: no wait), so the same dues leave those out.
Until session 31 this mode kept none and asked the whole live corpus every cycle (the decay stage 0.017 against
0.003 CPU s in the frugal mode at 10,000 entries, 0.218 at 100,000: bench/results/scale-steady-s31-*-hourly.md).

Why the plan is the one the whole corpus gives (tests/consolidation/test_decay_dues.py checks it against
``plan_decay`` over every entry, cycle after cycle, on random corpora, settings and clocks):

* An entry is left out only when its record holds a due under this key greater than now. The key is the digest of
  every setting the due depends on and of this module's and decay.py's sources; the due is that entry's
  ``_Due``, floored to a whole second and made one second earlier, and ``plan_decay`` plans nothing for the entry
  before its ``_Due`` (``test_decay_quiet.py``: not before ``quiet_until``, their least).
* The record holds the very parse the scan gave (``record.stored is stored``), so the due is the entry's own; a
  copy a stage made (the exact-duplicate fold's) has none and is looked at.
* ``plan_decay``'s decisions are per entry (the clock and settings are the same for all), so leaving out entries
  that plan nothing changes nothing else: the actions of the rest, in order, and which of them leave the floor.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from dreamkeeper.consolidation.decay import DecayPlan, _Due, plan_decay, quiet_until
from dreamkeeper.consolidation.settings import DecaySettings
from dreamkeeper.memory import NEVER, CorpusIndex, HighValueFloor, StoredEntry

Until = Callable[[], datetime | None]  # ``quiet_until`` over the whole list, worked out only if asked


@functools.cache
def _code() -> str:
    """The sources the dues are worked out by: another version of either (an upgrade) and every due is new."""
    digest = hashlib.sha256(b"dreamkeeper decay dues 1")
    here = Path(__file__).resolve().parent
    for source in (here / "decay.py", here / "decay_dues.py"):
        try:
            digest.update(source.read_bytes())
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()


def due_key(settings: DecaySettings, floor: HighValueFloor) -> str | None:
    """The key dues are kept under for these settings (``min_step`` among them); None when decay is off."""
    if not settings.active:
        return None
    values = [settings.model_dump(mode="json"), floor.model_dump(mode="json"), _code()]
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


def due_seconds(earliest: datetime | None) -> int:
    """A ``_Due`` as kept: whole POSIX seconds, floored and one second earlier; ``NEVER`` for None."""
    return NEVER if earliest is None else math.floor(earliest.timestamp()) - 1


def plan_decay_due(
    live: Sequence[StoredEntry],
    settings: DecaySettings,
    floor: HighValueFloor,
    now: datetime,
    index: CorpusIndex | None,
) -> tuple[DecayPlan, Until]:
    """``plan_decay(live, ...)``, asking only the entries due by the dues ``index`` keeps (and keeping the dues it
    works out); with it, ``quiet_until(live, ...)`` as a call (the caller asks it only when nothing was planned)."""
    key = due_key(settings, floor) if index is not None else None
    due: _Due | None = None
    if key is not None:
        try:
            due = _Due(settings, floor)
        except OverflowError:
            due = None  # settings beyond float32: nothing sensible to wait for, every entry asked
    if index is None or key is None or due is None:
        return plan_decay(live, settings, floor, now), lambda: quiet_until(live, settings, floor, now)
    at = math.floor(now.timestamp())
    look, unknown, soonest = index.pending(live, key, at)
    plan = plan_decay(look, settings, floor, now)
    written = {id(action.target) for action in plan.actions}  # rewritten: their records go (``forget``)
    worked = [(stored, due_seconds(due(stored.entry))) for stored in unknown if id(stored) not in written]
    index.note_dues(worked, key)

    def until() -> datetime | None:
        # The least due of all: the left-out entries' (``soonest``), the ones worked out now; an entry looked at for
        # a due kept and come is due now (``quiet_until``'s "now", made as early).
        if len(look) > len(unknown):
            return now
        least = min([soonest if soonest is not None else NEVER, *(seconds for _, seconds in worked)])
        if least <= at:
            return now
        return None if least >= NEVER else datetime.fromtimestamp(least, UTC)

    return plan, until


__all__ = ["due_key", "due_seconds", "plan_decay_due"]
