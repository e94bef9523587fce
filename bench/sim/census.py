"""The simulation's own census of one command (a cycle, an undo, a restore, or one SIGKILLed midway): what left the
live corpus, read from disk by this code alone, never from the engine's reports, journals or invariant.

Its definitions are the issue's (22, Build 1): a specific is lost when an entry live before the command said it,
that entry is not live after it with the same text, no live entry says it after, and no documented ephemeral prune
(``flagged ephemeral by consolidation``) of the command carried it; an entry live before is orphaned when it is
archived after with a merged-into chain that ends in no live entry (an undone successor reaches a live one through
its ``mergedFrom`` sources). In the simulation nothing but dreamkeeper removes entries, so every departure is the
command's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from dreamkeeper.coverage import DEFAULT_VOCABULARY, CoverageIndex, Inventory, extract_specifics
from dreamkeeper.memory import MERGED_FROM, REASON_EPHEMERAL, MemoryStore, StoredEntry, successor_in

MAX_HOPS = 64


def disk(store: MemoryStore) -> dict[str, StoredEntry]:
    """Every entry on disk, by exact id."""
    scan = store.scan()
    out: dict[str, StoredEntry] = {}
    for stored in (*scan.entries, *scan.duplicates):
        out.setdefault(stored.id, stored)
    return out


@dataclass
class CommandCensus:
    command: str
    lost: list[str] = field(default_factory=list)
    orphaned: list[str] = field(default_factory=list)
    departed: int = 0


def census(command: str, before: Mapping[str, StoredEntry], after: Mapping[str, StoredEntry]) -> CommandCensus:
    result = CommandCensus(command)
    live_after = {i: s for i, s in after.items() if s.entry.is_live}
    departed = [
        (then, after.get(i))
        for i, then in before.items()
        if then.entry.is_live
        and not ((now := live_after.get(i)) is not None and now.entry.content == then.entry.content)
    ]
    result.departed = len(departed)
    if not departed:
        return result
    charged = [(t, n) for t, n in departed if not (n is not None and n.entry.archive_reason == REASON_EPHEMERAL)]
    allowed = [t.entry.content for t, n in departed if n is not None and n.entry.archive_reason == REASON_EPHEMERAL]
    index: CoverageIndex | None = None
    excused: CoverageIndex | None = None
    lost: dict[tuple[str, str], str] = {}
    for then, now in charged:
        if now is None or not _reachable(now, after, live_after):
            result.orphaned.append(then.id)
        end = _end(now, after, live_after)
        own = Inventory.of(end.entry.content) if end is not None else None  # a text covering alone covers jointly
        for specific in extract_specifics(then.entry.content, then.entry.category, DEFAULT_VOCABULARY):
            key = (specific.kind, specific.key)
            if key in lost or (own is not None and own.covers(specific)):
                continue
            if index is None:
                index = _index(s.entry.content for s in live_after.values())
                excused = _index(allowed)
            assert excused is not None
            if not index.covers(specific) and not excused.covers(specific):
                lost[key] = specific.text
    result.lost = sorted(lost.values())
    return result


def _reachable(now: StoredEntry, after: Mapping[str, StoredEntry], live: Mapping[str, StoredEntry]) -> bool:
    if now.entry.is_live:
        return True
    if successor_in(now.entry.archive_reason) is None:
        sources = [s for s in (now.entry.meta(MERGED_FROM) or "").split(",") if s]
        return any(_chain_live(after.get(s), after, live) for s in sources)
    return _chain_live(now, after, live)


def _chain_live(current: StoredEntry | None, after: Mapping[str, StoredEntry], live: Mapping[str, StoredEntry]) -> bool:
    return _end(current, after, live) is not None


def _end(
    current: StoredEntry | None, after: Mapping[str, StoredEntry], live: Mapping[str, StoredEntry]
) -> StoredEntry | None:
    """The live entry a merged-into chain ends in, if it does."""
    seen: set[str] = set()
    while current is not None and len(seen) < MAX_HOPS:
        if current.entry.is_live:
            return current
        successor = successor_in(current.entry.archive_reason)
        if successor is None or successor in seen:
            return None
        seen.add(successor)
        current = live.get(successor) or after.get(successor)
    return None


def _index(texts: object) -> CoverageIndex:
    index = CoverageIndex()
    for text in texts:  # type: ignore[attr-defined]
        index.add(text)
    return index
