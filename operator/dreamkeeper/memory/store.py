"""The file store: RockBot's one-JSON-file-per-entry layout, with an archive tier and no entry cap.

Invariants:
* every write is durable and atomic (:mod:`dreamkeeper.memory.atomic`);
* every mutation names the fingerprint the caller read and is refused if the file changed since (the agent keeps
  writing while a cycle runs);
* archive hides, never deletes; :meth:`MemoryStore.purge` is the only code path that deletes an entry file;
* a malformed file is reported and left exactly as it is; so is a *misfiled* one (an entry whose id or category is
  not a path, or does not match where the file is): it is quarantined at scan time, so no write ever targets it;
* a special file, a symlink or an oversized file is never read (``memory.files``).
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from dreamkeeper.memory.atomic import (
    CONFLICT_SUFFIX,
    MUST_NOT_EXIST,
    Fingerprint,
    read_with_stat,
    replace_file,
    unlink_durably,
)
from dreamkeeper.memory.corpus_index import CorpusIndex
from dreamkeeper.memory.embedding_files import EMBEDDING_FILE_LIMIT as EMBEDDING_FILE_LIMIT
from dreamkeeper.memory.embedding_files import EmbeddingFiles
from dreamkeeper.memory.entry import (
    ARCHIVED_BY_CYCLE,
    RESTORED_BY_HAND,
    STALE_COPY_OF,
    Entry,
    as_aware,
    format_timestamp,
    unheld,
    utcnow,
)
from dreamkeeper.memory.errors import (
    ConflictError,
    DuplicateIdError,
    EntryNotFoundError,
    InvalidCategoryError,
    InvalidIdError,
)
from dreamkeeper.memory.float32 import to_float32
from dreamkeeper.memory.leftovers import SweepListing, SweepReport, sweep
from dreamkeeper.memory.listing import Listing
from dreamkeeper.memory.listing_cache import ListingCache
from dreamkeeper.memory.paths import (
    EMBEDDINGS_DIR,
    ID_PATTERN,
    category_of_path,
    embedding_file_name,
    ensure_inside,
    entry_location,
    entry_path,
    id_key,
    validate_category,
    validate_id,
)
from dreamkeeper.memory.purging import PURGING_SUFFIX, purge_file, unpark
from dreamkeeper.memory.redaction import shown
from dreamkeeper.memory.stored import StoredEntry as StoredEntry
from dreamkeeper.memory.walk import walk_entries, walk_names

log = logging.getLogger(__name__)


class HighValueFloor(BaseModel):
    """Entries at or above the floor are never pruned standalone and never purged. Strict (a boolean or a string is
    no bound) and bounded, as the DreamSchedule's ``floor`` is."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    importance: float = Field(default=0.80, ge=0.0, le=2.0)
    reinforcement: int = Field(default=5, ge=0, le=2**31 - 1)  # RockBot's int

    def protects(self, entry: Entry) -> bool:
        # In float32, as RockBot compares them (``IsProtectedFromPruning``: ``float ImportanceScore >= float
        # PruningProtectionImportance``, DreamService.cs / DreamOptions.cs @05346ff0): a file saying 0.7999999999
        # holds the float32 0.8, which the floor protects there, and must here too, or the two engines disagree
        # about what may be pruned or purged.
        importance = to_float32(entry.importance_score) >= to_float32(self.importance)
        return importance or entry.reinforcement_count >= self.reinforcement

    def describe(self, entry: Entry) -> str:
        return f"importance={entry.importance_score:.2f}, reinforced={entry.reinforcement_count}x"


MalformedKind = Literal["malformed", "misfiled", "unreadable"]


@dataclass(frozen=True, slots=True)
class MalformedFile:
    """A file under the memory root that is not an entry dreamkeeper may touch; reported, never modified.

    ``misfiled``: a valid entry whose file is not where its id and category say (RockBot reads it by its id, so
    the agent still sees it, but a rewrite would land elsewhere). ``unreadable``: not a regular file, too large,
    or no permission."""

    path: Path
    error: str
    kind: MalformedKind = "malformed"


@dataclass
class ScanResult:
    entries: list[StoredEntry] = field(default_factory=list)
    malformed: list[MalformedFile] = field(default_factory=list)
    duplicates: list[StoredEntry] = field(default_factory=list)
    index: CorpusIndex | None = field(default=None, repr=False, compare=False)  # the scan's (corpus_index.py)
    generation: str | None = field(default=None, compare=False)  # ``CorpusIndex.generation``; a result made anew: None
    # The directories the scan listed, each with its stat before it was listed (listing.py); a result made anew: None
    listing: Listing | None = field(default=None, repr=False, compare=False)
    # Every file the scan's walk found (malformed ones too), as path strings in its order; None for a result made
    # anew or a scan without the corpus index (which lists them first). final_state.py compares a later walk to it.
    names: list[str] | None = field(default=None, repr=False, compare=False)

    @property
    def live(self) -> list[StoredEntry]:
        return [s for s in self.entries if s.entry.is_live]

    @property
    def archived(self) -> list[StoredEntry]:
        return [s for s in self.entries if s.entry.is_archived]


@dataclass
class PurgeReport:
    purged: list[Entry] = field(default_factory=list)
    kept_above_floor: list[Entry] = field(default_factory=list)
    kept_by_rule: list[tuple[Entry, str]] = field(default_factory=list)  # kept by the caller's rule, and why
    not_due: int = 0
    conflicts: int = 0
    dry_run: bool = False


# A purge's extra rule, from a layer above the store (the last-record rule needs the coverage package): given the
# entries that are due and below the floor, the ids to keep after all, each with the reason.
KeepRule = Callable[[Sequence[StoredEntry]], Mapping[str, str]]


def entry_summary(entry: Entry) -> str:
    return (
        f"{entry.id} ({entry.category or 'uncategorized'}, importance={entry.importance_score:.2f}, "
        f"reinforced={entry.reinforcement_count}x)"
    )


class MemoryStore(EmbeddingFiles):
    """The memory directory of one agent (``AGENT_DIR/memory`` by default)."""

    def __init__(self, root: Path, corpus_index: CorpusIndex | None = None) -> None:
        self.root = Path(root)
        self.corpus_index = corpus_index  # the parse of unchanged files, kept between cycles (corpus_index.py)
        self._index: dict[str, str] | None = None  # each id's (lowered) file, as its path string
        # lowercased id -> its first entry; -> every (exact id, file), for ids two files claim (a list each: 13 MB/100k)
        self._files: tuple[dict[str, StoredEntry], dict[str, list[tuple[str, Path]]]] | None = None
        self._inside: set[Path] = set()  # directories whose resolved path was checked to be inside the root
        self._category_dirs: dict[str | None, str] = {}  # category -> its directory, validated (``_rewrite_path``)
        self._embeddings_dir = os.path.join(self.root, EMBEDDINGS_DIR)
        self._categories: dict[str | None, tuple[str, tuple[str, ...]] | str] = {}  # category -> where, or why not

    # ---- reading -------------------------------------------------------------------------------------

    def iter_files(self, listing: Listing | None = None) -> Iterator[Path]:
        """Every entry file, depth-first in name order; hidden files/dirs (temps, .embeddings) are skipped."""
        for child in self.iter_file_entries(listing):
            yield Path(child.path)

    def iter_file_entries(self, listing: Listing | None = None) -> Iterator[os.DirEntry[str]]:
        """``iter_files`` as directory entries: for callers that only stat most files (no Path per file).
        ``listing``: each directory's stat is recorded in it just before the directory is listed (listing.py)."""
        return walk_entries(self.root, listing)

    def iter_file_names(self, listing: Listing, cache: ListingCache) -> Iterator[str]:
        """``iter_file_entries``' files, as path strings in the same order, each directory's names taken from
        ``cache`` when its stat says they are the ones kept there (listing_cache.py), else listed (and kept)."""
        return walk_names(self.root, listing, cache)

    def iter_kept_names(self) -> Iterator[str]:
        """The walk's files as path strings, in its order: each directory's names from the corpus index's kept
        listings when the directory still has the stat they were kept with (``iter_file_names``: listing.py's
        argument, per directory), the others listed; without a corpus index, every directory listed."""
        index = self.corpus_index
        if index is None:
            return (child.path for child in self.iter_file_entries())
        return self.iter_file_names(Listing(), index.listings)

    def read_file(self, path: Path) -> StoredEntry | MalformedFile:
        return self.read_file_stat(path)[0]

    def read_file_stat(self, path: Path) -> tuple[StoredEntry | MalformedFile, os.stat_result | None]:
        """``read_file``, with the ``fstat`` of the version read (the corpus index records it)."""
        try:
            data, fingerprint, st = read_with_stat(path)
        except OSError as exc:
            return MalformedFile(path, f"unreadable: {exc.strerror or exc}", "unreadable"), None
        return self._parsed(path, data, fingerprint), st

    def parsed_read(self, path: Path, data: bytes, fingerprint: Fingerprint) -> StoredEntry | MalformedFile:
        """The entry of the bytes ``data`` read from ``path`` (with their ``fingerprint``), or why it is none: what
        ``read_file`` gives for them."""
        return self._parsed(path, data, fingerprint)

    def _parsed(self, path: Path, data: bytes, fingerprint: Fingerprint) -> StoredEntry | MalformedFile:
        try:
            entry = Entry.from_json_bytes(data)
        except (UnicodeDecodeError, ValueError) as exc:
            return MalformedFile(path, _one_line(exc))
        misfiled = self._misfiled(path, entry)
        if misfiled is not None:
            return MalformedFile(path, misfiled, "misfiled")
        return StoredEntry(entry, path, fingerprint)

    def _misfiled(self, path: Path, entry: Entry) -> str | None:
        """Why ``entry`` may not be written at ``path``, if it may not: every write of an entry goes to the one
        path its id and category name, so a file anywhere else (a case-only difference, a category that is not its
        folder, an id or category that is no path) must never reach a write."""
        place = self._place(entry.category)
        if isinstance(place, str):
            return f"misfiled: {place}"
        directory, segments = place
        # The common case, cheaply: the scan builds paths from the root's string, so a well-filed entry's path is
        # exactly this string (no Path objects per entry; a scan reads 100k of them).
        if str(path) == directory + entry.id + ".json" and ID_PATTERN.fullmatch(entry.id) and ".." not in entry.id:
            return None
        try:
            validate_id(entry.id)
        except InvalidIdError:
            return f"misfiled: its id {entry.id!r} is not a file name (1-128 of [A-Za-z0-9_.-], no '..')"
        expected = PurePosixPath(*segments, f"{entry.id}.json")
        try:
            actual = PurePosixPath(path.relative_to(self.root).as_posix())
        except ValueError:
            try:
                actual = PurePosixPath(path.resolve().relative_to(self.root.resolve()).as_posix())
            except ValueError:
                return f"misfiled: {path} is outside the memory root {self.root}"
        if actual != expected:
            return f"misfiled: id {entry.id!r} in category {entry.category!r} belongs at {expected}, not {actual}"
        return None

    def _place(self, category: str | None) -> tuple[str, tuple[str, ...]] | str:
        """Where a category's entries live (the directory as a string ending in "/", and its segments), or why the
        category is no path. Memoised: a corpus has a handful of categories."""
        known = self._categories.get(category)
        if known is None:
            try:
                validate_category(category)
                segments = () if category is None else tuple(category.split("/"))
                known = (os.path.join(str(self.root), *segments, ""), segments)
            except InvalidCategoryError:
                known = f"its category {category!r} is not a path ('/'-joined [A-Za-z0-9_-]+ segments)"
            if len(self._categories) < 4096:
                self._categories[category] = known
        return known

    def iter_entries(
        self, include_archived: bool = True, listing: Listing | None = None
    ) -> Iterator[StoredEntry | MalformedFile]:
        """Streams every file, no cap. Malformed and misfiled files are yielded (and logged), never touched."""
        for path in self.iter_files(listing):
            result = self.read_file(path)
            if isinstance(result, MalformedFile):
                log_malformed(result)
                yield result
            elif include_archived or result.entry.is_live:
                yield result

    def scan(self) -> ScanResult:
        # Parsing allocates only long-lived, acyclic objects: the cyclic collector would walk the growing corpus
        # again and again for nothing (about a sixth of the scan's CPU at 100k entries). Reference counting is
        # unaffected, and anything cyclic made meanwhile is collected once the collector is back on.
        collecting = gc.isenabled()
        gc.disable()
        try:
            return self._scan()
        finally:
            if collecting:
                gc.enable()

    def _scan(self) -> ScanResult:
        result = ScanResult(listing=Listing())
        index: dict[str, str] = {}
        first: dict[str, StoredEntry] = {}
        twins: dict[str, list[tuple[str, Path]]] = {}
        listing = result.listing
        items = (
            self.iter_entries(listing=listing) if self.corpus_index is None else self.corpus_index.items(self, listing)
        )
        entries = result.entries
        for item in items:
            if isinstance(item, MalformedFile):
                result.malformed.append(item)
                continue
            key = id_key(item.id)  # the id's own string when lower case: these dicts live all cycle
            if key in index:
                twins.setdefault(key, [(first[key].id, first[key].path)]).append((item.id, item.path))
                # Two files claim one id: neither is trusted for mutation, both are kept.
                log.warning(
                    "entry id %s appears in %s and %s; the second is ignored this run (both kept)",
                    item.id,
                    index[key],
                    item.path,
                )
                result.duplicates.append(item)
                continue
            index[key] = item.name  # its string: a Path per entry is made only when asked for (stored.py)
            first[key] = item
            entries.append(item)
        self._index = index
        self._files = (first, twins)
        result.index, result.generation = self.corpus_index, getattr(self.corpus_index, "generation", None)
        result.names = getattr(self.corpus_index, "names", None)
        return result

    def _lookup(self, entry_id: str) -> Path | None:
        """The file of ``entry_id`` as the filesystem stores ids: the exact id first (``case01`` and ``CASE01`` are
        two entries on Linux, issue 22); otherwise the one entry whose id equals it ignoring case (RockBot's ids
        are case-insensitive). Several such entries and no exact one: ``DuplicateIdError`` (nothing is guessed)."""
        for attempt in range(2):
            if self._files is None or attempt:
                self.scan()  # the agent may have written since the index was built
            assert self._files is not None
            first, twins, key = *self._files, entry_id.lower()
            named = twins.get(key) or ([(first[key].id, first[key].path)] if key in first else [])
            exact = [path for found, path in named if found == entry_id]
            if len(named) > 1 and not exact:
                raise DuplicateIdError(entry_id, [path for _, path in named])
            path = exact[0] if exact else named[0][1] if named else None
            if path is not None and path.exists():
                return path
        return None

    def get(self, entry_id: str) -> StoredEntry | None:
        """By id, archived entries included (``_lookup``: the exact id first, then the one case-insensitive match)."""
        validate_id(entry_id)
        path = self._lookup(entry_id)
        if path is None:
            return None
        result = self.read_file(path)
        if isinstance(result, MalformedFile):
            log.warning("memory file %s is malformed: %s (left untouched)", result.path, result.error)
            return None
        return result

    def require(self, entry_id: str) -> StoredEntry:
        stored = self.get(entry_id)
        if stored is None:
            raise EntryNotFoundError(entry_id)
        return stored

    # ---- writing -------------------------------------------------------------------------------------

    def save(self, entry: Entry, expected: Fingerprint | None) -> StoredEntry:
        """Write an entry. ``expected=None`` creates (refusing if a file with that name appears)."""
        return self._save(entry, expected, entry_path(self.root, entry.id, entry.category))

    def _save(self, entry: Entry, expected: Fingerprint | None, path: Path) -> StoredEntry:
        """``save`` with the entry's path already computed by ``entry_path`` (it resolves symlinks: not free)."""
        if expected is None and self._index is None:
            # A create must not give an id a second file in another category: know every id first.
            self.scan()
        # Creates only: a rewrite goes to the file's own path (``_rewrite_path``), and a case twin (``case01`` beside
        # ``CASE01``) is another entry of its own on a case-sensitive volume.
        existing = self._index.get(entry.id.lower()) if self._index is not None and expected is None else None
        if existing is not None and existing != str(path) and os.path.exists(existing):
            raise InvalidCategoryError(
                entry.category or "", f"entry {entry.id} lives at {existing}; moving entries is not supported"
            )
        data = entry.to_json_bytes()
        fingerprint = replace_file(path, data, expected)
        if self._index is not None:
            self._index[entry.id.lower()] = str(path)
        # Parsed from the bytes we wrote (not re-read: the agent may already have written again, and the next
        # mutation must then conflict rather than silently adopt the agent's version).
        return StoredEntry(Entry.from_json_bytes(data), path, fingerprint)

    def create(self, entry: Entry) -> StoredEntry:
        return self.save(entry, MUST_NOT_EXIST)

    def update(self, stored: StoredEntry, entry: Entry) -> StoredEntry:
        if entry.id != stored.id:
            raise ValueError(f"update of {stored.id} given entry {entry.id}")
        return self._save(entry, stored.fingerprint, self._rewrite_path(stored, entry))

    def _rewrite_path(self, stored: StoredEntry, entry: Entry) -> Path:
        """Where a rewrite of ``stored`` goes: its own file, which must be where its id and category say.

        Same checks as ``entry_path``, with the symlink-resolving containment check done once per directory
        (a rewrite replaces the file itself, never a symlink's target, so the file name needs no resolving)."""
        directory = self._category_dirs.get(entry.category)
        if directory is not None:
            # The category's directory was validated and checked inside the root by an earlier rewrite: the id is
            # all that is left to check, and the file is where they say when the names match (a bulk rewrite of a
            # cold start's decays spent more on building and comparing paths than on encoding the entry).
            validate_id(entry.id)
            if stored.name == os.path.join(directory, f"{entry.id}.json"):  # ``name`` is ``str(path)``
                return stored.passing_path()
        path = entry_location(self.root, entry.id, entry.category)
        if stored.path != path:
            raise InvalidCategoryError(entry.category or "", f"entry {entry.id} cannot move from {stored.path}")
        if path.parent not in self._inside:
            ensure_inside(self.root, path.parent)
            self._inside.add(path.parent)
        self._category_dirs[entry.category] = str(path.parent)
        return path

    def rewrite(
        self, stored: StoredEntry, entry: Entry, *, sync_directory: bool = True, data: bytes | None = None
    ) -> Fingerprint:
        """Replace an entry's file with a new version of the same entry (same id and category), guarded by the
        fingerprint it was read with; returns the new fingerprint.

        The bulk path for bookkeeping (review stamps, archives): the written bytes are not parsed back.
        ``sync_directory=False`` leaves the directory fsync to a caller that batches it (see ``replace_file``);
        ``data``: ``entry.to_json_bytes()``, when the caller has it (corpus_index_own.py ``derived_bytes``).
        """
        if entry.id != stored.id or entry.category != stored.entry.category:
            raise ValueError(f"rewrite of {stored.id} may not change its id or category")
        path = self._rewrite_path(stored, entry)
        data = entry.to_json_bytes() if data is None else data
        return replace_file(path, data, stored.fingerprint, sync_directory=sync_directory)

    def archive(
        self,
        stored: StoredEntry,
        reason: str,
        now: datetime | None = None,
        cycle_id: str | None = None,
        *,
        parse_back: bool = True,
        sync_directory: bool = True,
    ) -> StoredEntry:
        """Hide an entry from live listing, keeping it on disk and retrievable by id.

        Idempotent: an already archived entry keeps its first reason and time. ``parse_back=False`` (bulk callers
        that drop the result) returns the entry object that was written instead of parsing the written bytes;
        with it, ``sync_directory=False`` leaves the directory fsync to a caller that batches it (``replace_file``).
        """
        if stored.entry.is_archived:
            return stored
        now = now or utcnow()
        entry = stored.entry.evolve(archived_at=now, archive_reason=reason)
        if cycle_id:
            entry = entry.with_meta(**{ARCHIVED_BY_CYCLE: cycle_id})
        if parse_back:
            result = self.update(stored, entry)
        else:  # named by the string it was read under: its Path made only if asked for (``passing_path``)
            result = StoredEntry.named(entry, stored.name, self.rewrite(stored, entry, sync_directory=sync_directory))
        log.info("Archived memory entry %s — %s: %s", entry_summary(entry), reason, shown(entry.content))
        return result

    def restore(self, stored: StoredEntry, *, by_hand: datetime | None = None) -> StoredEntry:
        """Bring an archived entry back to live. Returns it unchanged when it was not archived. ``by_hand``: a person
        restored it (``memory restore``), then: marked so, it is never offered for merging or pruning again."""
        if not stored.entry.is_archived:
            return stored
        # Held by the purge (its importance lifted to RockBot's floor while archived): its own importance comes back.
        entry = unheld(stored.entry).evolve(archived_at=None, archive_reason=None)
        entry = entry.with_meta(**{ARCHIVED_BY_CYCLE: None, STALE_COPY_OF: None})
        if by_hand is not None:
            entry = entry.with_meta(**{RESTORED_BY_HAND: format_timestamp(by_hand)})
        result = self.update(stored, entry)
        log.info(
            "Restored memory entry %s (was archived %s — %s): %s",
            entry_summary(entry),
            stored.entry.archived_at.isoformat() if stored.entry.archived_at else "?",
            stored.entry.archive_reason,
            shown(entry.content),
        )
        return result

    def purge(
        self,
        retention: timedelta | None,
        floor: HighValueFloor,
        now: datetime | None = None,
        dry_run: bool = False,
        entries: list[StoredEntry] | None = None,
        keep: KeepRule | None = None,
    ) -> PurgeReport:
        """Hard-delete entries archived longer than ``retention`` — the only deleting path in dreamkeeper.

        ``retention`` None or zero keeps everything forever. Entries above the high-value floor are never purged,
        nor those ``keep`` names (asked once, with every entry that would otherwise go).
        """
        report = PurgeReport(dry_run=dry_run)
        if retention is None or retention <= timedelta(0):
            return report
        now = now or utcnow()
        cutoff = now - retention
        candidates = entries if entries is not None else self.scan().entries
        due: list[StoredEntry] = []
        for stored in candidates:
            archived_at = stored.archived_at
            if archived_at is None:
                continue
            # Strictly before the cutoff, as RockBot's purge (``ArchivedAt < cutoff``, FileMemoryStore @8a7e360e) and
            # its audit (``archivedAt + retention < now``, MemoryAuditAnalyzer @26053e10) both count it.
            if as_aware(archived_at) >= cutoff:
                report.not_due += 1
                continue
            entry = stored.entry
            if floor.protects(entry):
                report.kept_above_floor.append(entry)
                continue
            due.append(stored)
        kept = keep(due) if keep is not None and due else {}
        for stored in due:
            entry = stored.entry
            if stored.id in kept:
                report.kept_by_rule.append((entry, kept[stored.id]))
                log.info(
                    "purge kept archived memory entry %s — %s: %s",
                    entry_summary(entry),
                    kept[stored.id],
                    shown(entry.content),
                )
                continue
            if dry_run:
                log.info(
                    "dry run: would purge archived memory entry %s — archived %s (%s): %s",
                    entry_summary(entry),
                    entry.archived_at.isoformat() if entry.archived_at else "?",
                    entry.archive_reason,
                    shown(entry.content),
                )
                report.purged.append(entry)
                continue
            try:
                self._purge_one(stored)
            except ConflictError as exc:
                log.warning("not purging %s: %s", entry.id, exc)
                report.conflicts += 1
                continue
            report.purged.append(entry)
        if not dry_run:
            log.info(
                "archive purge — %d purged, %d kept above the high-value floor, %d kept as last records "
                "(archived over %d days ago)",
                len(report.purged),
                len(report.kept_above_floor),
                len(report.kept_by_rule),
                retention.days,
            )
        return report

    def _purge_one(self, stored: StoredEntry) -> None:
        ensure_inside(self.root, stored.path)
        entry = stored.entry
        # Parked and verified through a kept descriptor, re-checked after the name is gone (``purging.py``): a
        # version the agent wrote, even in place through a descriptor it held, is put back instead of deleted.
        purge_file(stored.path, stored.fingerprint)
        embedding = self.root / EMBEDDINGS_DIR / embedding_file_name(entry.id)
        if embedding.exists():
            unlink_durably(embedding)
        if self._index is not None:
            self._index.pop(entry.id.lower(), None)
        log.info(
            "Purged archived memory entry %s — archived %s (%s): %s",
            entry_summary(entry),
            entry.archived_at.isoformat() if entry.archived_at else "?",
            entry.archive_reason,
            shown(entry.content),
        )

    # ---- housekeeping --------------------------------------------------------------------------------

    def category_of(self, path: Path) -> str | None:
        return category_of_path(self.root, path)

    def sweep(self, listed: SweepListing | None = None) -> SweepReport:
        """Clean what a killed cycle of ours left in the memory tree (the caller holds the cycle lock): our temp
        files go, a version we displaced is kept as a conflict copy, and an entry a killed purge had parked goes back
        under its name (a later purge decides again). The agent's own files are never touched. ``listed``: the
        corpus index's kept listings (``ListingCache.for_sweep``): a directory they vouch for is not listed, one
        they list is kept for the scan."""
        report = sweep(self.root, skip=frozenset({EMBEDDINGS_DIR}), collect=(PURGING_SUFFIX,), listed=listed)
        for parked in report.collected:
            original = parked.with_name(parked.name[1:].removesuffix(PURGING_SUFFIX).rsplit(".", 1)[0])
            try:
                if unpark(parked, original):
                    log.warning("an interrupted purge had parked %s; it is back under its name", original)
                    report.restored.append(original)
                    continue
                kept = parked.with_name(parked.name.removesuffix(PURGING_SUFFIX) + CONFLICT_SUFFIX)
                os.rename(parked, kept)  # renamed only, to be reported with the other conflict copies
            except OSError as exc:
                log.warning("could not put back %s, parked by an interrupted purge: %s", original, exc)
                continue
            report.kept.append(kept)
            report.conflict_copies.append(kept)
        if report.removed:
            log.info("removed %d temp file(s) left by an interrupted write of ours", len(report.removed))
        for copy in report.conflict_copies:
            log.warning("conflict copy kept: %s (a version of the agent's we displaced; compare and remove it)", copy)
        return report


def log_malformed(item: MalformedFile) -> None:
    if item.kind == "misfiled":
        log.warning("quarantined memory file %s: %s (left untouched; never written)", item.path, item.error)
    else:
        log.warning("skipping malformed memory file %s: %s (left untouched)", item.path, item.error)


def _one_line(exc: BaseException) -> str:
    text = str(exc).replace("\n", "; ")
    return text if len(text) <= 300 else text[:297] + "..."
