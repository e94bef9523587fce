"""The report's final-state check: the corpus after apply, as a scan would find it, streamed over the snapshot.

``Writes._final_state`` and ``Writes._read_final`` (writes.py) call these with the cycle's own state (the files its
plans touched, the review stamps it wrote); the end-of-run invariant and the report's live/archived counts are
computed over the ``FinalState`` this gives, and ``final_index`` moves the census's coverage index to it.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import Protocol

from dreamkeeper.consolidation.plan import Plan
from dreamkeeper.coverage import CoverageIndex
from dreamkeeper.memory import Fingerprint, MalformedFile, MemoryStore, ScanResult, StoredEntry, id_key

log = logging.getLogger(__name__)


class FileEntry(Protocol):
    """A file of the walk as ``read_one`` looks at it: an ``os.DirEntry``, or ``_Named`` for a name the kept listings
    gave (no directory entry was made for it)."""

    @property
    def path(self) -> str: ...

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result: ...


@dataclass(frozen=True, slots=True)
class _Named:
    """A file named by the kept listings: its path and its ``lstat`` (a walk's ``DirEntry.stat(follow_symlinks=False)``
    is an ``lstat`` too)."""

    path: str

    def stat(self, *, follow_symlinks: bool = True) -> os.stat_result:
        return os.stat(self.path, follow_symlinks=follow_symlinks)


ReadOne = Callable[[FileEntry, StoredEntry | None], StoredEntry | MalformedFile]


@dataclass
class FinalState:
    """The corpus after apply: every id on disk, live id -> content, and how many entries are archived."""

    ids: set[str] = field(default_factory=set)
    live: dict[str, str] = field(default_factory=dict)
    archived: int = 0
    entries: dict[str, StoredEntry] = field(
        default_factory=dict
    )  # exact id -> the entry (the snapshot's when unchanged)


def final_index(
    census_index: CoverageIndex | None, plan: Plan, live: list[StoredEntry], final: FinalState
) -> CoverageIndex:
    """An index of the live corpus after apply. The census left its index holding the planned corpus; moving it to
    the actual one (conflicts, failed creates, the agent's writes) by the difference gives the same multiset of
    texts, hence the same answers, as indexing every live entry again."""
    actual = final.live
    if census_index is None:
        index = CoverageIndex()
        for text in actual.values():
            index.add(text)
        return index
    leaving = plan.leaving_ids()
    planned = {s.id: s.entry.content for s in live if s.id not in leaving}
    planned.update({m.successor.id: m.successor.content for m in plan.merges})
    for entry_id, text in planned.items():
        if actual.get(entry_id) != text:
            census_index.remove(text)
    for entry_id, text in actual.items():
        if planned.get(entry_id) != text:
            census_index.add(text)
    return census_index


def scan_final(
    store: MemoryStore,
    snapshot: ScanResult,
    touched: set[str],
    read_one: ReadOne,
    *,
    listing: bool = False,
) -> FinalState:
    """What a scan after apply says, streamed: the snapshot is still referenced by the plan, and holding a
    second parsed copy of the corpus doubled peak memory (about 0.6 GiB more at 100k entries). A file still
    the snapshot's (or bearing the stamp this cycle wrote) is not read again: its parse is the snapshot's.

    ``listing``: only the directory listing (names, no ``stat``) and the files this cycle's plans wrote or meant
    to write (``touched``: ``Writes._touched``) are looked at; any other file the snapshot holds is taken as the
    snapshot has it. Only for the cycle whose every write after the snapshot went through ``Writes._executor``
    (``_untracked``), and only while the end-of-run invariant has nothing to charge (``Writes._departures``): then
    what it concludes does not depend on the text of a file this cycle did not write (docs/architecture.md,
    "The final-state check").

    In that mode, when this cycle wrote (or meant to write) no file, the snapshot holds no file it could not take
    (malformed, misfiled, quarantined: each would be read again here), and every directory the snapshot's scan listed
    still has the stat it had before it was listed (``Listing.unchanged``: no name created, removed or renamed since),
    the listing would find exactly the snapshot's files in the scan's order: the state is the snapshot's, built
    from it without listing (``_as_listed``). When it wrote some (a steady cycle's decays), the same state when a
    listing finds exactly the files the snapshot's scan walked and each written file still holds this cycle's
    decay or stamp (``_as_scanned``)."""
    unwritten = listing and not touched and not snapshot.malformed
    if unwritten and snapshot.listing is not None and snapshot.listing.unchanged():
        return _as_listed(snapshot)
    table: dict[str, StoredEntry] | None = None

    def known() -> dict[str, StoredEntry]:
        """Path -> the snapshot's parse, built once if asked for (``_as_scanned`` seldom needs it)."""
        nonlocal table
        if table is None:
            table = {s.name: s for s in chain(snapshot.entries, snapshot.duplicates)}
        return table

    resolved: dict[str, StoredEntry | MalformedFile] = {}
    scanned = listing and not snapshot.malformed and snapshot.names is not None
    if scanned and _as_scanned(store, snapshot, known, touched, read_one, resolved):
        return _as_listed(snapshot)
    final = FinalState()
    first: dict[str, str] = {}  # each (lowered) id's first file, as its path string
    ids, entries, live = final.ids, final.entries, final.live
    # Bound once: this loop runs once per file of the corpus.
    known_get, ids_add, first_setdefault = known().get, ids.add, first.setdefault
    for child in store.iter_file_entries():
        name = child.path
        seen = known_get(name)
        if listing and seen is not None and name not in touched:
            item = seen
        else:
            read = resolved.pop(name, None)
            if read is None:
                read = read_one(child, seen)
            if isinstance(read, MalformedFile):
                continue
            item = read
        entry = item.entry
        entry_id = entry.id
        ids_add(entry_id)
        entries.setdefault(entry_id, item)
        file = item.name
        earlier = first_setdefault(id_key(entry_id), file)  # ids are one case-insensitively (as the scan's)
        if earlier != file:
            log.warning(
                "entry id %s appears in %s and %s; the second is ignored this run (both kept)",
                entry_id,
                earlier,
                file,
            )
            continue
        if entry.is_live:
            live[entry_id] = entry.content
        elif entry.is_archived:
            final.archived += 1
    return final


def _as_scanned(
    store: MemoryStore,
    snapshot: ScanResult,
    known: Callable[[], Mapping[str, StoredEntry]],
    touched: set[str],
    read_one: ReadOne,
    resolved: dict[str, StoredEntry | MalformedFile],
) -> bool:
    """Whether the listing mode's loop would take every file as the snapshot has it: a walk finds exactly the
    files the snapshot's scan walked, in its order (``ScanResult.names``; the snapshot holding no malformed file,
    each is one of its entries or duplicates), and each file this cycle wrote still holds a version whose parse
    the snapshot's stands for (``read_one`` gives back the snapshot's very object: a decay's or a stamp's write,
    which change nothing the report counts). Then ``_as_listed`` builds what the loop would, without its per-file
    work (about a fifth of a steady cycle's report stage at 100,000 entries: 0.48 s against 0.62).

    Streamed, never a list of the walk's directory entries (~30 MB at 100k, at the report stage of a cold cycle
    too): when this is False the loop walks again. The walk takes each directory's names from the corpus index's
    kept listings (``MemoryStore.iter_kept_names``) when the directory's stat says they are still the ones kept
    (``Listing.unchanged``'s argument, per directory: a name created, removed or renamed moves its directory's mtime
    and ctime; git's racy rule for the same tick): a cycle that decayed a handful of entries lists the few directories
    it wrote into (or the agent changed), not all of them. ``resolved``: what ``read_one`` gave for each
    file it was asked about, so that loop does not read (and log) one twice. ``known``: path -> the snapshot's
    parse, asked for only when the snapshot's entries are not the walk's files one for one (duplicates; a list
    changed since its scan)."""
    names, scanned = snapshot.names or [], snapshot.entries
    count, at = len(names), 0
    aligned = not snapshot.duplicates and len(scanned) == count  # then the i-th file's parse is the i-th entry
    for name in store.iter_kept_names():
        if at == count or names[at] != name:
            return False  # a file the agent added, removed or renamed since the scan: the loop looks at each
        at += 1
        if name in touched:
            seen: StoredEntry | None = scanned[at - 1] if aligned else None
            if seen is None or seen.name != name:
                seen = known().get(name)
            found = resolved[name] = read_one(_Named(name), seen)
            if seen is None or found is not seen:
                return False
    return at == count


def _as_listed(snapshot: ScanResult) -> FinalState:
    """What ``scan_final``'s loop makes of a listing that finds exactly the snapshot's entry files in the scan's
    order, none touched: the scan put the first file of each id (case-insensitively) in ``entries`` and every later
    one in ``duplicates``, both in listing order. Every file's exact id is on disk; the first file of an exact id is
    its ``entries`` one if that has it, else its first duplicate; only an id's first file counts as live or
    archived (a later one is ignored this run, as the loop ignores it)."""
    final = FinalState()
    final.ids = {s.entry.id for s in snapshot.duplicates}
    entries = final.entries
    for item in reversed(snapshot.duplicates):  # reversed: the earliest duplicate of an exact id is kept
        entries[item.entry.id] = item
    if snapshot.duplicates:
        firsts = {s.entry.id.lower(): s.path for s in snapshot.entries}
        for item in snapshot.duplicates:
            log.warning(
                "entry id %s appears in %s and %s; the second is ignored this run (both kept)",
                item.entry.id,
                firsts.get(item.entry.id.lower()),
                item.path,
            )
    # One pass over the corpus for the ids, the entries, the live texts and the archived count: three passes and a
    # property call per entry took 0.21 CPU s at 100,000 entries, this one 0.11 (bench/results/micro-s26.md), a
    # third of a steady cycle's report stage there.
    ids_add, live, archived = final.ids.add, final.live, 0
    for item in snapshot.entries:
        entry_id = item.id
        ids_add(entry_id)
        entries[entry_id] = item
        if item.is_archived:  # ``Entry.is_archived``
            archived += 1
        elif item.is_live:  # ``Entry.is_live``
            live[entry_id] = item.content
    final.archived = archived
    return final


# What the final-state check keeps of a review stamp's or a decay's write: its size and mtime (ns), all that
# ``own_version`` looks at. The whole fingerprint (its sha256 in hex) of each of a cold start's ~64,000 stamps at
# 100,000 entries was ~15 MiB held from the apply stage to the cycle's end (bench/results/micro-s35.md section 6).
WriteStat = tuple[int, int]


def write_stat(fingerprint: Fingerprint) -> WriteStat:
    return (fingerprint.size, fingerprint.mtime_ns)


def read_final(
    store: MemoryStore,
    child: FileEntry,
    seen: StoredEntry | None,
    own: Mapping[str, WriteStat | StoredEntry],
) -> StoredEntry | MalformedFile:
    """One file of the final-state scan: the snapshot's parse when the file is unchanged since it; this cycle's own
    last write of it when it is still exactly that (``own``: path -> the entry a create, update or archive wrote, or
    the size and mtime of a review stamp or a decay, which change only what the report does not count); otherwise
    read again."""
    record = own.get(child.path)
    if seen is not None or record is not None:
        try:
            # ``os.lstat``, not ``DirEntry.stat``: the same system call, but a directory entry keeps the result it
            # gave for as long as its directory's sorted listing lives, and one directory holds ~45,000 files of a
            # 100k corpus: ~24 MiB of the final-state scan's transient (bench/results/micro-s35.md).
            st = os.lstat(child.path)
        except OSError:
            st = None
        if st is not None:
            found = own_version(st, seen, seen.fingerprint if seen is not None else None, record)
            if found is not None:
                return found
    result = store.read_file(Path(child.path))
    if isinstance(result, MalformedFile):
        log.warning("skipping malformed memory file %s: %s (left untouched)", result.path, result.error)
    return result


def own_version(
    st: os.stat_result,
    seen: StoredEntry | None,
    before: Fingerprint | None,
    record: WriteStat | StoredEntry | None,
) -> StoredEntry | None:
    """Which known version of a file ``st`` says it holds, without reading it: the snapshot's (``before``, parsed
    as ``seen``) or this cycle's last write (``record``: the entry it wrote, or a stamp's or decay's size and mtime:
    ``WriteStat``); None when it is neither, or could be either.

    Size and mtime (ns) are what a write leaves behind, and a cycle's own write is the newest thing it knows of the
    file: the report counts and the invariant's departures only look at an entry's id, content, live state and the
    cycle tags of its archive, and every later write of the cycle is guarded by the full fingerprint (the sha256
    is checked again before a file is replaced), so a version mistaken here can miscount a report, never lose or
    overwrite anything. A stamp or a decay (``record`` a bare fingerprint) changes none of what is counted: the
    snapshot's parse stands for it. A file whose size and mtime match two different versions (two writes in one clock
    tick, one size) is read."""
    key = (st.st_size, st.st_mtime_ns)
    unchanged = before is not None and (before.size, before.mtime_ns) == key
    made = record if isinstance(record, StoredEntry) else None
    written = write_stat(made.fingerprint) if made is not None else record if isinstance(record, tuple) else None
    # A regular file: a symlink or FIFO put in its place is no write of ours, whatever its size and mtime say.
    ours = written is not None and written == key and stat.S_ISREG(st.st_mode)
    if ours and unchanged:
        # The same version twice (the snapshot already holds this cycle's write: the fold's), or a stamp: the
        # snapshot's parse. Two versions that differ (same size, same tick): unknown which is there.
        return seen if made is None or made.fingerprint == before else None
    if unchanged:
        return seen
    if ours:
        return made if made is not None else seen
    return None


__all__ = ["FinalState", "WriteStat", "final_index", "own_version", "read_final", "scan_final", "write_stat"]
