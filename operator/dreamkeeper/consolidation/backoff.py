"""Back-off for entries whose batch got an unusable reply (#18 finding 5).

An unusable reply stamps nothing reviewed, so gating offered the same batch again every cycle at full cost (10.5k
tokens a cycle, 0 usable, for a small model that never answers in shape). The entries of a batch the model
answered unusably (unparseable, cut off twice, refused, or naming no offered id) get a stamp of their own:
the content's hash, when, and how many times in a row. From the second time on the entry is held back, 1 → 2 → 4
... days (``unusable_backoff_days``, doubling, at most ``reopen_max_interval_days``, the declines' cap), then
offered again like a declined cluster reopens. A request that failed or was never sent stamps nothing (the
model never saw the entry). Reversible: a changed content, a usable reply or a review clears it; it never
touches content.

Kept apart from the decline stamps (``stamps.review_stamps``, RockBot's semantics) on purpose: its own keys,
its own arithmetic.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from dreamkeeper.consolidation.plan import StampAction
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import UNUSABLE_AT, UNUSABLE_COUNT, UNUSABLE_HASH, StoredEntry, format_timestamp, review_hash

MAX_DOUBLINGS = 16  # a count read from disk may be anything: the shift is clamped, never overflows


def unusable_count(stored: StoredEntry) -> int:
    """How many unusable replies in a row this content got (0 when unstamped, changed since, or unreadable)."""
    stamp = stored.entry.meta(UNUSABLE_HASH)
    if stamp is None or stamp.upper() != review_hash(stored.entry.content):
        return 0
    try:
        return max(1, int(stored.entry.meta(UNUSABLE_COUNT) or "1"))
    except ValueError:
        return 1


def _parse(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else None


def held_until(stored: StoredEntry, settings: CycleSettings) -> datetime | None:
    """When the back-off of an entry ends, or None when it is not held (first time, disabled, no stamp)."""
    count = unusable_count(stored)
    base = timedelta(days=settings.unusable_backoff_days)
    at = _parse(stored.entry.meta(UNUSABLE_AT))
    if count < 2 or base <= timedelta(0) or at is None:
        return None
    wait = base * (1 << min(count - 2, MAX_DOUBLINGS))
    return at + min(wait, max(base, timedelta(days=settings.reopen_max_interval_days)))


def is_held(stored: StoredEntry, settings: CycleSettings, now: datetime) -> bool:
    until = held_until(stored, settings)
    return until is not None and now < until


def unusable_stamp(stored: StoredEntry, now: datetime) -> dict[str, str | None]:
    """The stamp for one more unusable reply to this entry's batch."""
    return {
        UNUSABLE_HASH: review_hash(stored.entry.content),
        UNUSABLE_AT: format_timestamp(now),
        UNUSABLE_COUNT: str(min(unusable_count(stored), 1 << MAX_DOUBLINGS) + 1),
    }


def cleared(stored: StoredEntry) -> dict[str, str | None]:
    """The keys that end a back-off (None removes a key), when the entry carries any."""
    metadata = stored.entry.metadata or {}
    return {key: None for key in (UNUSABLE_HASH, UNUSABLE_AT, UNUSABLE_COUNT) if key in metadata}


def backoff_stamps(eligible: Sequence[StoredEntry], ids: frozenset[str], now: datetime) -> list[StampAction]:
    """Back-off stamps for the entries ``ids`` names (offered in a batch the model answered unusably)."""
    return [StampAction(stored, unusable_stamp(stored, now)) for stored in eligible if stored.id in ids]
