"""Which live entries a cycle folds, decays and offers: ``scope: corpus`` (all of them, the default) or ``scope:
rockbot`` (RockBot's snapshot).

RockBot's consolidation pass reads ``SearchAsync(new MemorySearchCriteria(MaxResults: 1000))`` (DreamService.cs
@05346ff0): with no query, FileMemoryStore (@8a7e360e) returns the live, non-superseded entries ordered by
``LastSeenAt`` descending, the first 1,000. Its fold, its decay and its offer act on those alone; its near-duplicate
clusters are found over every live entry, but only snapshot entries can be offered. Above 1,000 entries the
entries seen longest ago are never folded, never decayed (so they keep their importance, and with it the
high-value floor's protection) and never offered.

``corpus`` acts on every live entry: an entry not seen for 30 days decays wherever it sits, and may fall under
the floor (and so become prunable) where RockBot would have kept it above. ``rockbot`` reproduces RockBot's
snapshot exactly, ties in ``lastSeenAt`` broken by id (RockBot's order among equal times is the order it happened
to load its files in).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from dreamkeeper.memory import StoredEntry

Scope = Literal["corpus", "rockbot"]
ROCKBOT_SNAPSHOT = 1000  # SearchAsync(MaxResults: 1000)


def scoped(live: Sequence[StoredEntry], scope: Scope, limit: int = ROCKBOT_SNAPSHOT) -> list[StoredEntry]:
    """The entries of ``live`` the scope acts on, in ``live``'s order."""
    if scope == "corpus" or len(live) <= limit:
        return list(live)
    newest = sorted(live, key=lambda s: (-s.entry.seen_at.timestamp(), s.id))[:limit]
    chosen = {s.id for s in newest}
    return [s for s in live if s.id in chosen]


def scope_ids(live: Sequence[StoredEntry], scope: Scope, limit: int = ROCKBOT_SNAPSHOT) -> frozenset[str] | None:
    """The ids in scope, or None when every live entry is."""
    if scope == "corpus" or len(live) <= limit:
        return None
    return frozenset(s.id for s in scoped(live, scope, limit))


__all__ = ["ROCKBOT_SNAPSHOT", "Scope", "scope_ids", "scoped"]
