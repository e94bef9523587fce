"""An independent census for the robustness tests: what the live corpus says, read from disk by the tests' own code
(never the engine's reports or journals), and which archived entries no longer reach a live one."""

from __future__ import annotations

from pathlib import Path

from dreamkeeper.coverage import DEFAULT_VOCABULARY, CoverageIndex, extract_specifics
from dreamkeeper.memory import REASON_EPHEMERAL, MemoryStore, StoredEntry, successor_in


def live_texts(agent: Path) -> dict[str, tuple[str, str | None]]:
    """Live entry id -> (content, category), as on disk now."""
    return {s.id: (s.entry.content, s.entry.category) for s in _all(agent) if s.entry.is_live}


def lost_since(before: dict[str, tuple[str, str | None]], agent: Path) -> list[str]:
    """Specifics of the ``before`` live corpus that no live entry says now (union coverage, as the engine's census),
    apart from those an ephemeral prune took (the only removal the policy allows)."""
    entries = _all(agent)
    now = CoverageIndex()
    for stored in entries:
        if stored.entry.is_live:
            now.add(stored.entry.content)
    pruned = CoverageIndex()
    for stored in entries:
        if stored.entry.is_archived and stored.entry.archive_reason == REASON_EPHEMERAL:
            pruned.add(stored.entry.content)
    lost: dict[tuple[str, str], str] = {}
    for content, category in before.values():
        for specific in extract_specifics(content, category, DEFAULT_VOCABULARY):
            if not now.covers(specific) and not pruned.covers(specific):
                lost.setdefault((specific.kind, specific.key), specific.text)
    return sorted(lost.values())


def orphans(agent: Path, ids: set[str] | None = None) -> list[str]:
    """Archived entries (of ``ids``, when given) archived as "merged into X" whose chain ends in no live entry."""
    entries = {s.id: s for s in _all(agent)}
    out = []
    for stored in entries.values():
        if ids is not None and stored.id not in ids:
            continue
        if not stored.entry.is_archived or successor_in(stored.entry.archive_reason) is None:
            continue
        current: StoredEntry | None = stored
        seen: set[str] = set()
        while current is not None and current.entry.is_archived:
            successor = successor_in(current.entry.archive_reason)
            if successor is None or successor in seen:
                current = None
                break
            seen.add(successor)
            current = entries.get(successor)
        if current is None:
            out.append(stored.id)
    return sorted(out)


def _all(agent: Path) -> list[StoredEntry]:
    scan = MemoryStore(agent / "memory").scan()
    return [*scan.entries, *scan.duplicates]
