"""Deferral: when a cycle has only a little to show, wait for more instead of paying the fixed cost of a request.

Every request repeats the system directive (hundreds of tokens), so a cycle that offers one new near-duplicate
pair pays mostly for the directive. Holding a small offer back costs nothing in safety — deferred entries are not
stamped reviewed, so gating offers them again next cycle together with whatever arrived since — and only delays a
merge by at most ``max_wait``. The decision is stateless: it reads the entries' own timestamps and review stamps,
so it needs no memory between cycles (each cycle may be a fresh process).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from dreamkeeper.consolidation import ProposalRequest
from dreamkeeper.memory import REVIEWED_HASH, Entry, review_hash
from dreamkeeper.proposers.prompts import shown_groups


@dataclass(frozen=True, slots=True)
class OfferLoad:
    entries: int  # entries the requests would show
    oldest_change: datetime | None  # when the longest-waiting new or changed shown entry was written
    reopened: bool  # a settled cluster the engine made due again is among them


def _unreviewed(entry: Entry) -> bool:
    stamp = entry.meta(REVIEWED_HASH)
    return stamp is None or stamp.upper() != review_hash(entry.content)


def changed_at(entry: Entry) -> datetime:
    """When an unreviewed entry started waiting, as early as its fields allow: ``updatedAt`` alone would restart the
    wait whenever importance decay rewrites an old entry (it sets ``updatedAt = now``, as RockBot's does), and an
    offer of old entries could then be deferred until they reach the decay floor. Earlier only sends sooner."""
    return min(entry.updated_at or entry.created_at, entry.seen_at)


def measure(request: ProposalRequest, singletons: bool) -> OfferLoad:
    entries = 0
    oldest: datetime | None = None
    reopened = False
    for batch in request.batches:
        by_id = {o.entry.id: o.entry for o in batch.entries}
        for group in shown_groups(batch, singletons):
            reopened |= group.reopened
            for entry_id in group.ids:
                entry = by_id.get(entry_id)
                if entry is None:
                    continue
                entries += 1
                if _unreviewed(entry):
                    oldest = changed_at(entry) if oldest is None else min(oldest, changed_at(entry))
    return OfferLoad(entries, oldest, reopened)


def defer_reason(load: OfferLoad, now: datetime, min_entries: int, max_wait: timedelta) -> str | None:
    """Why this cycle's offer is held back, or None to send it."""
    if min_entries <= 0 or load.entries == 0 or load.entries >= min_entries or load.reopened:
        return None
    if load.oldest_change is not None and now - load.oldest_change >= max_wait:
        return None
    return (
        f"{load.entries} entr(ies) to show, fewer than {min_entries}: deferred to a later cycle (at most "
        f"{max_wait.total_seconds() / 3600:g} h after the oldest change); they stay unreviewed until then"
    )
