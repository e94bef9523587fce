"""The end-of-run invariant: no command that writes may leave a live fact unreachable, whatever its stages counted.

Issue 22: an undo that did not finish, then the next cycle's stale write-back repair, orphaned 57 live facts, and
every report said ``specificsLost: 0``: each stage's own bookkeeping looked only at what that stage meant to do.
This module looks at what happened. Every command that writes (a cycle with all its stages, ``undo``,
``recover``, ``restore``, ``purge``) takes a ``Census`` of the live corpus it read before its first write, and at
its end ``judge`` compares it with the corpus as it is then:

* **departed**: every entry live before that is not live now with the same text. Each is the run's own doing
  (archived with one of the run's tags, or deleted by its purge) or not (the agent archived, edited or deleted it
  meanwhile: its decision, never counted against the run);
* **allowed**: the run's documented ephemeral prunes (``flagged ephemeral by consolidation``), which may take a
  specific out of the live corpus (the report's ``ephemeralSpecifics``);
* **specifics lost**: specifics of the run's other departures that no live entry says now, and that no allowed
  departure carried either;
* **orphaned**: the run's other departures whose ``merged into`` chain does not end in a live entry (an undone
  successor is reachable through its ``mergedFrom`` sources).

The census is a function of the entries a run already scanned (nothing is read again to take it), and the check
costs nothing when nothing departed; it extracts specifics only of the run's own departures, and asks a coverage
index of the final live corpus only about specifics the departure's own successor does not carry (a caller that
already holds such an index hands it over).

A run that still holds what it did reverses its losses before it ends (``reverse``): the entries it archived that
carried a lost specific, or are orphaned, are brought back (announced in the reversals log first, so the stale
write-back repair never takes them for stale copies). Whatever is found is reported with the ids, counted, and makes
the command's exit non-zero.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.coverage import CoverageIndex, Inventory, Specific, Vocabulary, extract_specifics, known_inventory
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    MERGED_FROM,
    REASON_EPHEMERAL,
    REASON_STALE_WRITE_BACK,
    ConflictError,
    MemoryStore,
    MemoryStoreError,
    StoredEntry,
    note_restored,
    shown,
    shown_all,
    successor_in,
)

log = logging.getLogger(__name__)

MAX_HOPS = 64  # a merged-into chain is one cycle's merge per hop
NOTED_IDS = 20  # ids named in one note; the rest are counted

Fate = Literal["archived", "gone", "edited"]


@dataclass(frozen=True, slots=True)
class Census:
    """The live corpus a run read before its first write: exact id -> the entry as scanned (references to the scan's
    own objects: taking it copies nothing)."""

    live: Mapping[str, StoredEntry]

    @classmethod
    def of(cls, entries: Iterable[StoredEntry]) -> Census:
        # ``by_id`` of the live ones, in one loop (taken of the whole corpus every cycle): the first file of an id wins.
        live: dict[str, StoredEntry] = {}
        for stored in entries:
            if stored.is_live:
                live.setdefault(stored.id, stored)
        return cls(live)


@dataclass(frozen=True, slots=True)
class Departure:
    """An entry live before the run and not live now with the same text."""

    before: StoredEntry
    now: StoredEntry | None  # None: gone from disk
    fate: Fate
    ours: bool  # the run archived (or purged) it
    allowed: bool  # the run's documented ephemeral prune

    @property
    def id(self) -> str:
        return self.before.id


@dataclass
class Verdict:
    """What the invariant found: specifics no live entry says any more (first spelling each), the departures that
    carried them, orphaned entries, and the departures the run may bring back."""

    lost: list[str] = field(default_factory=list)
    carriers: list[str] = field(default_factory=list)  # the run's departures holding a lost specific
    orphaned: list[str] = field(default_factory=list)
    departed: int = 0
    ours: int = 0

    @property
    def clean(self) -> bool:
        return not self.lost and not self.orphaned

    def reversible(self, store_ids: Collection[str] | None = None) -> list[str]:
        """Ids to bring back: the run's departures that carried a lost specific or are orphaned."""
        wanted = dict.fromkeys([*self.carriers, *self.orphaned])
        return [i for i in wanted if store_ids is None or i in store_ids]

    def notes(self, what: str) -> list[str]:
        notes = []
        if self.lost:
            notes.append(
                f"end-of-run invariant: {len(self.lost)} specific(s) no live entry says any more after this {what}: "
                f"{shown_all(self.lost)} (carried by {_listed(self.carriers)})"
            )
        if self.orphaned:
            notes.append(
                f"end-of-run invariant: {len(self.orphaned)} entr(ies) live before this {what} reach no live entry "
                f"now (their merged-into chain ends in an archived or missing one): {_listed(self.orphaned)}"
            )
        return notes


def _listed(ids: list[str]) -> str:
    head = ", ".join(ids[:NOTED_IDS])
    return head + (f" and {len(ids) - NOTED_IDS} more" if len(ids) > NOTED_IDS else "")


RunTags = Callable[[str | None], bool]
"""Whether an archive tag (``dreamkeeperArchivedByCycle``) is one of this run's."""


def tags_in(tags: Collection[str]) -> RunTags:
    return lambda tag: tag is not None and tag in tags


def departures(
    before: Census,
    after: Mapping[str, StoredEntry],
    ours: RunTags,
    purged: Collection[str] = (),
) -> list[Departure]:
    """Every entry live in ``before`` and not live in ``after`` (exact id -> entry now) with the same text."""
    out: list[Departure] = []
    for entry_id, then in before.live.items():
        now = after.get(entry_id)
        if now is then and then.is_live:
            continue  # the very entry the census took (a final state built from its scan): still live, same text
        if now is not None and now.is_live and now.content == then.content:
            continue
        if now is None:
            # Purge is the only path of ours that deletes; anything else gone was the agent's own deletion.
            out.append(Departure(then, None, "gone", entry_id in purged, False))
        elif now.entry.is_live or now.entry.content != then.entry.content:
            out.append(Departure(then, now, "edited", False, False))  # dreamkeeper never edits an entry's text
        else:
            tagged = ours(now.entry.meta(ARCHIVED_BY_CYCLE))
            reason = now.entry.archive_reason or ""
            allowed = tagged and reason.removeprefix(REASON_STALE_WRITE_BACK) == REASON_EPHEMERAL
            out.append(Departure(then, now, "archived", tagged, allowed))
    return out


def judge(
    before: Census,
    after: Mapping[str, StoredEntry],
    ours: RunTags,
    vocabulary: Vocabulary,
    *,
    purged: Collection[str] = (),
    index: Callable[[], CoverageIndex] | None = None,
    departed: list[Departure] | None = None,
) -> Verdict:
    """The invariant over one run (see the module's docstring). ``after`` maps every exact id on disk now to its
    entry; ``index`` gives a coverage index of the live texts of ``after`` (built here when not given).
    ``departed``: ``departures(before, after, ours, purged)`` when the caller has it already (a walk of the whole
    census, not done twice over the same arguments)."""
    gone = departures(before, after, ours, purged) if departed is None else departed
    verdict = Verdict(departed=len(gone), ours=sum(1 for d in gone if d.ours))
    charged = [d for d in gone if d.ours and not d.allowed]
    if not charged:
        return verdict
    live = {i: s for i, s in after.items() if s.entry.is_live}
    excused = _Excused([d.before.entry.content for d in gone if not d.ours or d.allowed])
    final: CoverageIndex | None = None
    lost: dict[tuple[str, str], str] = {}
    carriers: dict[str, None] = {}
    inventories: dict[str, Inventory] = {}  # a successor's, once however many sources it replaced
    for departure in charged:
        end = _chain_end(departure, after, live)
        if departure.fate == "gone" or (end is None and not _sources_live(departure, after, live)):
            verdict.orphaned.append(departure.id)
        entry = departure.before.entry
        if end is not None and end.entry.content == entry.content:
            continue  # an exact duplicate folded into a live survivor: its text is live, word for word
        successor = None
        if end is not None:
            successor = inventories.get(end.id)
            if successor is None:
                # Validation and the census built the inventory of nearly every successor's text already: shared by
                # the exact text it was built from (the text on disk now, whatever the plan wrote), read only.
                text = end.entry.content
                successor = known_inventory(text)
                if successor is None:
                    successor = Inventory.of(text)
                inventories[end.id] = successor
        for specific in extract_specifics(entry.content, entry.category, vocabulary):
            key = (specific.kind, specific.key)
            if key in lost:
                carriers[departure.id] = None
                continue
            if successor is not None and successor.covers(specific):
                continue
            if final is None:
                final = index() if index is not None else _index_of(live.values())
            if final.covers(specific) or excused.covers(specific):
                continue
            lost[key] = specific.text
            carriers[departure.id] = None
    verdict.lost = list(lost.values())
    verdict.carriers = list(carriers)
    if not verdict.clean:
        log.error(
            "end-of-run invariant: %d specific(s) lost (%s), %d entr(ies) orphaned (%s)",
            len(verdict.lost),
            shown_all(verdict.lost),
            len(verdict.orphaned),
            ", ".join(verdict.orphaned[:NOTED_IDS]),
        )
    return verdict


class _Excused:
    """Texts whose departure was not the run's fault (the agent's own, or an allowed prune): a specific they carried
    is not charged to the run even when it left the live corpus."""

    def __init__(self, texts: list[str]) -> None:
        self._texts = texts
        self._index: CoverageIndex | None = None

    def covers(self, specific: Specific) -> bool:
        if not self._texts:
            return False
        if self._index is None:
            self._index = _index_of_texts(self._texts)
        return self._index.covers(specific)


def _chain_end(
    departure: Departure, after: Mapping[str, StoredEntry], live: Mapping[str, StoredEntry]
) -> StoredEntry | None:
    """The live entry the departure's ``merged into`` chain ends in, if it does."""
    return _live_end(departure.now, after, live)


def _live_end(
    current: StoredEntry | None, after: Mapping[str, StoredEntry], live: Mapping[str, StoredEntry]
) -> StoredEntry | None:
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


def _sources_live(departure: Departure, after: Mapping[str, StoredEntry], live: Mapping[str, StoredEntry]) -> bool:
    """An undone successor (archived by an undo, no successor of its own) is reachable through its sources: one of
    them live, or merged since into a live entry."""
    if departure.now is None or successor_in(departure.now.entry.archive_reason) is not None:
        return False
    sources = [s for s in (departure.now.entry.meta(MERGED_FROM) or "").split(",") if s]
    return any(_live_end(after.get(s), after, live) is not None for s in sources)


def _index_of(entries: Iterable[StoredEntry]) -> CoverageIndex:
    return _index_of_texts(s.entry.content for s in entries)


def _index_of_texts(texts: Iterable[str]) -> CoverageIndex:
    index = CoverageIndex()
    for text in texts:
        index.add(text)
    return index


@dataclass
class Reversed:
    """What ``reverse`` brought back, and what it could not."""

    restored: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def notes(self) -> list[str]:
        notes = []
        if self.restored:
            notes.append(f"end-of-run invariant: brought back {len(self.restored)}: {_listed(self.restored)}")
        if self.failed:
            notes.append(f"end-of-run invariant: could not bring back {len(self.failed)}: {_listed(self.failed)}")
        return notes


def reverse(agent_dir: Path, store: MemoryStore, verdict: Verdict, after: Mapping[str, StoredEntry]) -> Reversed:
    """Bring back the run's own archives that the invariant charged (the caller holds the cycle lock). Each is
    announced in the reversals log first (the stale write-back repair must not archive it again); each restore is
    guarded by the fingerprint the final scan read (an entry the agent wrote since is left as it is)."""
    done = Reversed()
    wanted = [i for i in verdict.reversible() if (s := after.get(i)) is not None and s.entry.is_archived]
    if not wanted:
        return done
    try:
        note_restored(agent_dir, wanted)
    except (MemoryStoreError, OSError) as exc:
        log.error("end-of-run invariant: cannot announce the restores (%s); nothing brought back", exc)
        done.failed += wanted
        return done
    for entry_id in wanted:
        stored = after[entry_id]
        try:
            store.restore(stored)
        except (ConflictError, MemoryStoreError, OSError) as exc:
            log.error("end-of-run invariant: could not bring back %s: %s", entry_id, exc)
            done.failed.append(entry_id)
            continue
        log.warning(
            "end-of-run invariant: brought back %s (it carried what no live entry says any more): %s",
            entry_id,
            shown(stored.entry.content),
        )
        done.restored.append(entry_id)
    return done


@dataclass
class EndCheck:
    """The invariant over one run: what it found, what it brought back, and what is still lost after that."""

    found: Verdict = field(default_factory=Verdict)
    reversed: Reversed = field(default_factory=Reversed)
    verdict: Verdict = field(default_factory=Verdict)  # after the reversal
    what: str = "run"

    @property
    def counts(self) -> CycleCounts:
        return CycleCounts(
            specifics_lost=len(self.verdict.lost),
            orphaned=len(self.verdict.orphaned),
            losses_reversed=len(self.reversed.restored),
        )

    @property
    def notes(self) -> tuple[str, ...]:
        notes = [*self.found.notes(self.what), *self.reversed.notes()]
        if self.reversed.restored and not self.verdict.clean:
            notes += [f"after bringing back: {note}" for note in self.verdict.notes(self.what)]
        return tuple(notes)

    @property
    def broken(self) -> bool:
        return not self.found.clean


def end_check(
    agent_dir: Path,
    store: MemoryStore,
    before: Census,
    after: Mapping[str, StoredEntry],
    ours: RunTags,
    vocabulary: Vocabulary,
    *,
    purged: Collection[str] = (),
    index: Callable[[], CoverageIndex] | None = None,
    what: str = "run",
    departed: list[Departure] | None = None,
) -> EndCheck:
    """``judge``, then ``reverse`` what it charged, then ``judge`` again over the corpus as the reversal left it.
    ``departed``: as for ``judge``, the departures over these very arguments."""
    found = judge(before, after, ours, vocabulary, purged=purged, index=index, departed=departed)
    if found.clean:
        return EndCheck(found, Reversed(), found, what)
    brought = reverse(agent_dir, store, found, after)
    final = judge(before, scan_map(store), ours, vocabulary, purged=purged) if brought.restored else found
    return EndCheck(found, brought, final, what)


def invariant_error(counts: CycleCounts) -> str | None:
    """The error a run reports when its end-of-run invariant found a loss (reversed or not), or None."""
    if not (counts.specifics_lost or counts.orphaned or counts.losses_reversed):
        return None
    return (
        f"end-of-run invariant: {counts.specifics_lost} specific(s) lost, {counts.orphaned} entr(ies) orphaned, "
        f"{counts.losses_reversed} archive(s) brought back (a stage archived what it must not; see the notes)"
    )


def by_id(entries: Iterable[StoredEntry]) -> dict[str, StoredEntry]:
    """Entries by exact id (``case01`` and ``CASE01`` are two entries on a case-sensitive filesystem); the first of
    two files of one exact id wins, as in the scan."""
    out: dict[str, StoredEntry] = {}
    for stored in entries:
        out.setdefault(stored.id, stored)
    return out


def scan_map(store: MemoryStore) -> dict[str, StoredEntry]:
    """Every entry on disk now, by exact id."""
    scan = store.scan()
    return by_id([*scan.entries, *scan.duplicates])


__all__ = [
    "Census",
    "Departure",
    "EndCheck",
    "Reversed",
    "RunTags",
    "Verdict",
    "by_id",
    "departures",
    "end_check",
    "invariant_error",
    "judge",
    "reverse",
    "scan_map",
    "tags_in",
]
