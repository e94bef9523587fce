"""The corpus index: what the last scan parsed, kept beside the cycle's state, so a scan parses only what changed.

A steady cycle (nothing written since the last one) used to read and parse every entry file; the physical limit is
one ``lstat`` per file. Git solves the same problem with its index: a cached stat record per path (size, mtime,
ctime, inode), trusted while the file's stat still matches it. This is that, for entry files: per path, the stat
record of the version that was read, the parsed ``Entry`` and the ``Fingerprint`` (sha256 of the bytes read), and,
once a cycle asked for it, the entry's content digest (content_digests.py) and when decay next has anything to do
about it (entry_dues.py). The scan stats each file; a file whose record matches is not opened, its parse is the
index's; any other is read.

Why it is safe (it is a cache: deleting, truncating, corrupting it, or changing files behind it costs a full read,
never a wrong decision):

* A record is used only when size, mtime_ns, ctime_ns and the inode all match the file's ``lstat``. An edit that
  keeps the size and puts the mtime back (``os.utime``) still moves ctime, which no user call can set; a file
  replaced by a rename has another inode.
* Git's "racily clean" rule: a file modified in the same timestamp tick as it was read would keep its stat. So a
  record is trusted only when the file's mtime and ctime are older than the scan that read it by ``RACY_WINDOW_NS``
  (2 s: the coarsest timestamps of a filesystem we may sit on, FAT's 2 s, included; a kernel's timestamp clock lags
  ``time_ns`` by under a tick). A racy file is read again by the next scan, until it is older than that.
* The file is checked as a whole: a magic line with the format version, the sha256 of the payload, the memory
  root it describes. Anything else (truncated, corrupt, another version or root) is discarded with a log line.
* The payload is a pickle (a parsed entry restores in about a tenth of what parsing its file costs). It lives on
  the agent's volume, so it is loaded by an unpickler that can build only the few classes an index holds
  (``corpus_index_files.ALLOWED``): a planted file can at worst make the index disagree with the files, which the
  stat check and, before any write, the fingerprint check (``atomic.check_unchanged`` re-hashes the file) catch.
  A record is a tuple of flat values (``corpus_index_records._flat``), checked value by value by
  ``corpus_index_records.rebuilt``: the entry's view (id, content, live/archived, hold and restore flags, archive
  time) and its other values as one pickled blob, decoded by the same restricted unpickler only when a stage reads
  the entry (a steady cycle decodes none), and rebuilt by ``entry_state.restored_fields`` as the parser builds one,
  which refuses containers of the wrong kind; a decoded entry must give the record's view back. A blob that cannot
  be decoded (only a planted index holds one: the file is checked whole) is a cache miss: the file is read
  (``stored.LazyStored``).
* Writing it touches nothing but ``.dreamkeeper/corpus-index`` and its log: after the cycle's own writes, the
  records that changed since the file was loaded (a steady cycle's decay rewrites a few percent of the entries) are
  appended to ``corpus-index.log`` as one frame (a magic, the length, the sha256, a pickle of the base's id and the
  changed and removed records), fsynced; the whole index is rewritten (streamed to a temp file beside it, fsynced,
  renamed over it: ``atomic.py``'s order) only when the log has grown past a third of the records, or is damaged.
  A frame is applied only whole and only to the base it was made against (its id): a torn last frame (a crash
  mid-append) and everything after it is ignored, and then the records it held are merely stale, which the stat
  check already catches (a changed file's record never matches it). A failure to write is logged and changes
  nothing else.

Malformed, misfiled and unreadable files are never cached: each scan reads them again. The files the last cycle's
decay wrote are read again, and their parse taken from the decays it kept when the bytes are the ones it wrote
(corpus_index_own.py).
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import stat
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from dreamkeeper.memory.content_digests import content_generation, derived_generation
from dreamkeeper.memory.corpus_index_files import FRAME_HEAD, FRAME_MAGIC, append_frame, open_log, write_streamed
from dreamkeeper.memory.corpus_index_files import RestrictedUnpickler as _Unpickler
from dreamkeeper.memory.corpus_index_own import (
    OWN_FRACTION,
    OWN_MIN,
    kept_records,
    load_own,
    own_path,
    read_kept,
    save_own,
)
from dreamkeeper.memory.corpus_index_records import REDUCERS as _REDUCERS
from dreamkeeper.memory.corpus_index_records import Record, StatKey, stat_key
from dreamkeeper.memory.corpus_index_records import rebuilt as _rebuilt
from dreamkeeper.memory.entry_dues import note_dues, pending
from dreamkeeper.memory.files import MiB, UnsafeFileError, read_regular
from dreamkeeper.memory.lock import STATE_DIR

if TYPE_CHECKING:
    from dreamkeeper.memory.atomic import Fingerprint
    from dreamkeeper.memory.entry import Entry
    from dreamkeeper.memory.listing import Listing
    from dreamkeeper.memory.store import MalformedFile, MemoryStore, StoredEntry

log = logging.getLogger(__name__)

INDEX_NAME: Final = "corpus-index"
FORMAT: Final = b"dreamkeeper-corpus-index 10\n"  # the version: a reader of another version discards the file
LOG_SUFFIX: Final = ".log"
COMPACT_FRACTION: Final = 3  # the log is folded into a new base once it holds more than a third of the records
INDEX_LIMIT: Final = 4096 * MiB
RACY_WINDOW_NS: Final = 2_000_000_000
_now_ns = time.time_ns  # the scan's clock (a test moves it to play "a later cycle")


def code_version() -> str:
    """What decides a record's meaning: the entry parser and the screen. Another version of either (an upgrade)
    and the index is discarded, never read with rules it was not made by."""
    digest = hashlib.sha256(FORMAT)
    here = Path(__file__).resolve().parent
    # entry_values: the fast path's checks; entry_state: how an index's entries are rebuilt
    # content_digests: how a record's content digest is made
    names = (
        "entry.py",
        "entry_values.py",
        "entry_state.py",
        "corpus_index_records.py",
        "store.py",
        "walk.py",
        "content_digests.py",
    )
    parser = tuple(here / name for name in names)
    for source in (*parser, here.parent / "consolidation" / "quarantine.py"):
        try:
            digest.update(source.read_bytes())
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()


def index_path(agent_dir: Path) -> Path:
    return agent_dir / STATE_DIR / INDEX_NAME


def open_corpus_index(agent_dir: Path, root: Path) -> CorpusIndex:
    """The index of ``root`` kept in ``agent_dir``'s state directory (loaded by the first scan)."""
    return CorpusIndex(index_path(agent_dir), root)


class CorpusIndex:
    """The records of one memory root: loaded from the state directory, consulted and refreshed by each scan,
    saved at the end of the cycle."""

    def __init__(self, path: Path, root: Path) -> None:
        self.path = path
        self.root = str(root)
        self._old: dict[str, Record] = {}
        self._stamp = 0  # time_ns before the scan whose records ``_new`` holds
        self._new: dict[str, Record] = {}
        self.loaded = False
        # Called once a scan is done, before the collector is back on (the cycle freezes the parsed corpus out of
        # its reach there: else the first collection walks all of it, a sixth of a 100k-entry scan's CPU).
        self.on_scanned: Callable[[], None] | None = None
        self._changed = False  # the last scan read a file, or a record was learnt, since the load
        self._tried = False  # loaded on the first scan (under the cycle's lock), once
        self._disk: dict[str, Record] = {}  # the records as the files on disk say (base + log)
        self._base_id = ""  # the id of the base on disk ("" : none usable)
        self._logged = 0  # records in the log's frames for that base
        self._log_clean = True  # the log read to its end without damage
        self._dirty: set[str] = set()  # paths whose record changed in place (a screen verdict) since the load
        # Paths a scan gave a record read from its file (or a kept decay) since the last save or load: every path
        # whose record may not be the one on disk is here, so a save need not compare all of them (``save``).
        self._fresh: set[str] = set()
        self.appended = False  # the last save appended to the log (tests, benchmarks)
        # The loaded index's identity (its base's checksum and its applied frames'), and whether every scan since
        # the load found the files exactly as its records say: ``generation`` (below).
        self._loaded_generation: str | None = None
        self._generation: str | None = None
        self._exact = False
        self.hits = 0
        self.reads = 0
        from dreamkeeper.memory.listing_cache import LISTING_SUFFIX, ListingCache  # (it imports this module)

        # The names each directory held (listing_cache.py): a steady scan stats every file, lists no directory.
        self.listings = ListingCache(path.with_name(path.name + LISTING_SUFFIX), self.root, code_version())
        self.digests_kept = 0  # content digests taken from the records (tests, benchmarks)
        self.digests_made = 0  # content digests made
        self.names: list[str] | None = None  # the files the last scan walked, in its order (``ScanResult.names``)
        # The last cycle's decays (corpus_index_own.py): path -> the entry written and the fingerprint of its bytes,
        # taken by a scan that finds those very bytes; and what this cycle keeps for the next (``remember``).
        self._own: dict[str, Record] = {}
        self._own_next: dict[str, Record] | None = None
        self.own_taken = 0  # files of the last scan whose bytes were a kept decay's: not parsed (tests, benchmarks)
        self.bases: dict[str, tuple[StoredEntry | MalformedFile, bytes]] = {}  # those files' bytes (``derived_bytes``)

    @property
    def log_path(self) -> Path:
        return self.path.with_name(self.path.name + LOG_SUFFIX)

    @property
    def own_path(self) -> Path:
        return own_path(self.path)

    @property
    def generation(self) -> str | None:
        """The identity of the corpus the last scan found, when it is the one the loaded index describes: every
        scan since the load found each file's stat as its record says (so, by the stat rule above, its bytes), and
        no file more or less; None otherwise (a file read, added or gone, a racy file, no usable index), or once
        this index wrote itself (a save that changed the file or its log: the next load has another identity).

        Two scans with one generation found the same files with the same bytes, hence the same parse in the same
        order (the scan's order is the sorted names'): a stage whose answer depends on the corpus and on what it
        names besides may keep that answer under the generation (consolidation/quiet.py, cluster_cache.py)."""
        return self._generation if self._exact else None

    def content_generation(self, entries: Iterable[StoredEntry]) -> str:
        """The content generation of ``entries`` (content_digests.py): an entry the last scan took from a record by
        the digest its record holds (made once, then kept with the record), any other digested from its fields."""
        dirty = len(self._dirty)
        generation, kept, made = content_generation(entries, self._new, self._dirty)
        self.digests_kept, self.digests_made = self.digests_kept + kept, self.digests_made + made
        self._changed = self._changed or len(self._dirty) != dirty  # a record given its digest: saved with it
        return generation

    def derived_generation(
        self, entries: Sequence[StoredEntry], base: Sequence[StoredEntry], generation: str
    ) -> str | None:
        """``content_digests.derived_generation``: ``base``'s generation for the list decay made of it."""
        return derived_generation(entries, base, generation)

    # ---- loading and saving -----------------------------------------------------------------------------

    def load(self) -> None:
        """The saved records, if the file is whole and describes this root; otherwise none (a full read)."""
        self._old = {}
        self._own = load_own(self.own_path, self.root)  # a cache of its own: used even when the index is not
        try:
            data = read_regular(self.path, INDEX_LIMIT, follow_symlinks=False)
        except FileNotFoundError:
            return
        except (OSError, UnsafeFileError) as exc:
            log.warning("corpus index %s not used (%s): this scan reads every file", self.path, exc)
            return
        try:
            root, base_id, records = _decode(data)
        except Exception as exc:  # any damage at all: discarded, never trusted in part
            log.warning("corpus index %s discarded (%s): this scan reads every file", self.path, exc)
            return
        if root != self.root:
            log.info("corpus index %s describes %s, not %s: not used", self.path, root, self.root)
            return
        self._base_id = base_id
        identity = hashlib.sha256(data[len(FORMAT) : data.find(b"\n", len(FORMAT))])
        self._read_log(records, identity)
        self._old = records
        self._disk = dict(records)
        self._fresh = set()
        self.loaded = True
        self._loaded_generation, self._exact = identity.hexdigest(), True

    def _read_log(self, records: dict[str, Record], identity: Any) -> None:
        """Apply the log's frames made against this base, in order, to ``records``; stop at the first damaged one.
        ``identity`` (a sha256) is fed the checksum of each frame applied."""
        self._logged, self._log_clean = 0, True
        try:
            data = read_regular(self.log_path, INDEX_LIMIT, follow_symlinks=False)
        except FileNotFoundError:
            return
        except (OSError, UnsafeFileError) as exc:
            log.warning("corpus index log %s not used (%s)", self.log_path, exc)
            self._log_clean = False
            return
        view = memoryview(data)
        offset = 0
        while offset < len(view):
            try:
                base_id, changes, digest, offset = _frame(view, offset)
            except Exception as exc:  # a torn or damaged frame: it and what follows are ignored (merely stale)
                log.warning(
                    "corpus index log %s: frame at byte %d ignored with the rest (%s)", self.log_path, offset, exc
                )
                self._log_clean = False
                return
            if base_id != self._base_id:
                continue  # made against an earlier base (left by a compaction): superseded
            identity.update(digest)
            for name, record in changes.items():
                if record is None:
                    records.pop(name, None)
                else:
                    records[name] = record
            self._logged += len(changes)

    def save(self) -> None:
        """The records of the last scan, atomically; a failure is logged (the next scan reads every file). Not
        rewritten when the last scan read nothing and learnt nothing: the file on disk already says it all."""
        self.listings.save()  # a cache of its own: written when the last scan's listings differ from the file's
        self._save_own()
        if not self._stamp or (self.loaded and not self._changed):
            return
        try:
            st = os.lstat(self.path)
            if not stat.S_ISREG(st.st_mode):
                log.warning("corpus index not saved: %s is not a regular file (left as it is)", self.path)
                return
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("corpus index not saved (%s)", exc)
            return
        new = self._new
        self.appended = False
        try:
            self.path.parent.mkdir(exist_ok=True)
            if self.loaded and self._base_id and self._log_clean:
                disk, fresh = self._disk, self._fresh
                # Only the fresh paths can hold another record than the disk's (a steady cycle: its decays' files,
                # of 100,000); every other is the very record loaded. A path on disk the scan did not keep (a file
                # gone, a record forgotten) is a removal: there is one when fewer paths than the disk's are kept.
                changes: dict[str, Record | None] = {
                    name: new[name] for name in fresh if name in new and disk.get(name) is not new[name]
                }
                changes.update((name, new[name]) for name in self._dirty if name in new)
                if len(new) - sum(1 for name in fresh if name in new and name not in disk) != len(disk):
                    changes.update((name, None) for name in disk.keys() - new.keys())
                if (self._logged + len(changes)) * COMPACT_FRACTION <= len(new) and self._appended(changes):
                    return
            self._exact = False  # rewritten: the next load has another identity
            base_id = uuid.uuid4().hex
            write_streamed(self.path, FORMAT, (code_version(), self.root, base_id, new), _REDUCERS)
            # The old log's frames name the old base: ignored from now on; emptied so they are not read again.
            try:
                fd = open_log(self.log_path, 0)
                try:
                    os.ftruncate(fd, 0)
                finally:
                    os.close(fd)
            except FileNotFoundError:
                pass
            except OSError as exc:  # its frames are ignored all the same (another base's)
                log.warning("corpus index log %s not emptied (%s)", self.log_path, exc)
            self._base_id, self._logged, self._log_clean = base_id, 0, True
            self._disk, self._dirty, self._fresh, self.loaded = dict(new), set(), set(), True
        except OSError as exc:  # a full disk, say: a cache; the next scan reads every file
            log.warning("corpus index not saved (%s); the next cycle reads every file", exc)

    def _appended(self, changes: dict[str, Record | None]) -> bool:
        """``changes`` appended to the log; False if it could not be (the whole index is rewritten instead)."""
        if changes:
            try:
                append_frame(self.log_path, (self._base_id, changes), _REDUCERS)
            except OSError as exc:
                log.warning(
                    "corpus index log %s not appended to (%s); the index is rewritten whole", self.log_path, exc
                )
                return False
            self._logged += len(changes)
            self.appended = True
            self._exact = False  # the log grew: the next load has another identity
        disk = self._disk  # now the scan's records: the changes applied (not a copy of 100,000 records)
        for name, record in changes.items():
            if record is None:
                disk.pop(name, None)
            else:
                disk[name] = record
        self._dirty, self._fresh = set(), set()
        return True

    @property
    def keep_cap(self) -> int:
        """How many decays a cycle may keep for the next scan (corpus_index_own.py: a quarter of the records)."""
        return max(OWN_MIN, len(self._new) // OWN_FRACTION)

    def remember(
        self, writes: Mapping[str, tuple[Entry, Fingerprint, str]], keeps_fit: Callable[[Entry], bool] | None = None
    ) -> None:
        """Keep what this cycle's decays wrote (path -> the entry, the fingerprint of the write and the sha256 of
        the bytes it decayed) for the next scan (corpus_index_own.py), in place of what the last cycle kept; saved
        by ``save``. ``keeps_fit``: whether a decay's copy of an entry the screen found fit is fit too."""
        self._own_next = kept_records(writes, self._new, self.keep_cap, keeps_fit)

    def _save_own(self) -> None:
        """The kept decays written when ``remember`` was called and there is anything to write or to replace."""
        own, self._own_next = self._own_next, None
        if own is not None and (own or self._own or os.path.lexists(self.own_path)):
            save_own(self.own_path, self.root, own)
            self._own = {}  # what they replaced is no longer on disk: a later scan of this process parses those files

    def forget(self, paths: Iterable[str]) -> None:
        """Drop the records of files written since the last scan (the cycle's own writes: a steady cycle's decay
        rewrites the same few percent of the corpus every time). Their stat no longer matches, so they could only
        ever miss; saved, each cycle appended them to the log again, and every few cycles the log passed a third of
        the records and the whole index was rewritten (a tenth of a steady cycle at 10,000 entries). Dropped, a
        steady cycle's save has nothing to write. A cache still: a record dropped by mistake costs one read."""
        for name in paths:
            record = self._new.get(name)
            if record is None:
                continue
            del self._new[name]  # ``_old`` is the same dict after a scan: a later scan reads the file again
            self._dirty.discard(name)
            self._exact = False
            if name in self._disk:
                self._changed = True  # the record on disk is removed by the next save

    # ---- when a stage next has anything to do about an entry (entry_dues.py) -----------------------------

    def pending(
        self, entries: Iterable[StoredEntry], key: str, at: int
    ) -> tuple[list[StoredEntry], list[StoredEntry], int | None]:
        """``entry_dues.pending`` over the last scan's records."""
        return pending(entries, self._new, key, at)

    def note_dues(self, dues: Sequence[tuple[StoredEntry, int]], key: str) -> int:
        """``entry_dues.note_dues``: the records given a due are saved with it."""
        kept = note_dues(dues, self._new, self._dirty, key)
        self._changed = self._changed or bool(kept)
        return kept

    # ---- the screen's verdicts (consolidation/quarantine.py) ---------------------------------------------

    def known_fit(self, stored: StoredEntry) -> bool:
        """Whether the screen already found this very parse fit (an unchanged file's, taken from the index): the
        current record of its file says so and holds this very entry (by identity). The record's own flag, not a
        set of the fit entries' ids beside the records (one more int and set slot per entry: ~7 MB at 100k)."""
        record = self._new.get(stored.name)
        return record is not None and record.fit is True and _holds(record, stored)

    def unscreened(self, entries: Iterable[StoredEntry]) -> list[StoredEntry]:
        """The entries ``known_fit`` does not vouch for, in order (its test, one loop: it runs over the corpus)."""
        get = self._new.get
        out: list[StoredEntry] = []
        for stored in entries:
            record = get(stored.name)
            # ``_holds`` with its common case first, inline: this runs once per entry of the corpus
            if record is None or record.fit is not True or (record.stored is not stored and not _holds(record, stored)):
                out.append(stored)
        return out

    def note_fit(self, fit: Iterable[StoredEntry]) -> None:
        for stored in fit:
            name = stored.name
            record = self._new.get(name)
            if record is not None and record.fit is not True and _holds(record, stored):
                record.fit = True
                self._dirty.add(name)
                self._changed = True

    # ---- scanning -----------------------------------------------------------------------------------------

    def items(self, store: MemoryStore, listing: Listing | None = None) -> Iterator[StoredEntry | MalformedFile]:
        """``store.iter_entries()`` with each unchanged file's parse taken from the index (``listing``: as there),
        and each unchanged directory's names from the kept listings (listing_cache.py)."""
        from dreamkeeper.memory.listing import Listing
        from dreamkeeper.memory.store import log_malformed
        from dreamkeeper.memory.stored import SETTERS as STORED_SETTERS
        from dreamkeeper.memory.stored import StoredEntry, lazy_named

        if not self._tried:
            self._tried = True
            self.load()
        old = self._old
        stamp = _now_ns()
        trusted_before = stamp - RACY_WINDOW_NS
        new: dict[str, Record] = {}
        hits = reads = own_taken = 0
        fresh: list[str] = []  # paths given a record read from their file or a kept decay (``_fresh``)
        own = self._own
        bases = self.bases = {}
        malformed: list[tuple[str, StatKey]] = []  # never cached; read again by every scan
        lstat = os.lstat
        new_object = object.__new__
        set_entry, set_name, set_fingerprint, set_path = STORED_SETTERS
        # Listed first, then stat'ed (every stat still after its directory's listing): one tight loop per file, not
        # a generator resumed per file within it (this loop runs 100k times in a steady cycle).
        names = list(store.iter_file_names(listing if listing is not None else Listing(), self.listings))
        self.names = names
        # A StoredEntry is named by the walk's string when it is the one pathlib formats for that path (every root
        # but "." itself, whose "./x" is pathlib's "x"): else made from a Path, as a file read is.
        plain = os.path.join(str(store.root), "x") == str(store.root / "x")
        for name in names:
            record = old.get(name)
            if record is not None:
                try:
                    now = lstat(name)
                    key: StatKey | None = (now.st_size, now.st_mtime_ns, now.st_ctime_ns, now.st_ino)  # ``stat_key``
                except OSError:
                    key = None
                if key == record.key:
                    new[name] = record
                    hits += 1
                    stored = record.stored
                    if stored is None and plain and not record.decoded:
                        # Read back and not decoded: its view serves the whole-corpus stages (corpus_index_records)
                        stored = record.stored = lazy_named(record, name, record.fingerprint)
                    elif stored is None and plain:
                        # ``StoredEntry.named``, inline: the path kept as the walk's string (stored.py)
                        stored = record.stored = new_object(StoredEntry)
                        set_entry(stored, record.entry)
                        set_name(stored, name)
                        set_fingerprint(stored, record.fingerprint)
                        set_path(stored, None)
                    elif stored is None:
                        stored = record.stored = StoredEntry(record.entry, Path(name), record.fingerprint)
                    yield stored
                    continue
            reads += 1
            kept = own.get(name) if own else None
            if kept is None:
                result, st = store.read_file_stat(Path(name))
            else:
                result, st, took = read_kept(store, name, kept, plain)
                if took is not None:
                    own_taken += 1
                    bases[name] = (result, took)
                    if st is not None and max(st.st_mtime_ns, st.st_ctime_ns) < trusted_before:
                        kept.key = stat_key(st)  # from now on an ordinary record of the file, as a read's is
                        new[name] = kept
                        fresh.append(name)
                    yield result
                    continue
            if isinstance(result, StoredEntry):
                if st is not None and max(st.st_mtime_ns, st.st_ctime_ns) < trusted_before:
                    new[name] = Record(stat_key(st), result.entry, result.fingerprint, None, result)
                    fresh.append(name)
                yield result
            else:
                if st is not None:
                    malformed.append((name, stat_key(st)))
                log_malformed(result)
                yield result
        self.hits, self.reads, self.own_taken = hits, reads, own_taken
        self._fresh.update(fresh)
        # The newest records are the next scan's baseline (a cycle scans again after it wrote).
        self._changed = self._changed or bool(self.reads) or len(new) != len(old)
        # Exact: every file had its record and every record its file; a malformed file (read each time, never
        # cached) is named with its stat in the generation instead. Once not exact, not again until a load.
        self._exact = self._exact and self.reads == len(malformed) and self.hits == len(old)
        self._generation = self._loaded_generation
        if malformed and self._generation is not None:
            self._generation = hashlib.sha256(f"{self._generation}{malformed!r}".encode()).hexdigest()
        self._old = self._new = new
        self._stamp = stamp
        if self.on_scanned is not None:
            self.on_scanned()
        log.debug(
            "corpus index: %d file(s) from the index, %d read; %d directorie(s) from the kept listings, %d listed",
            self.hits,
            self.reads,
            self.listings.used,
            self.listings.listed,
        )


def _holds(record: Record, stored: StoredEntry) -> bool:
    """Whether ``record`` holds ``stored``'s very parse: it is the record's own scan entry (which decodes nothing), or
    the two share the entry object."""
    return record.stored is stored or (record.decoded and record.entry is stored.entry)


def _decode(data: bytes) -> tuple[str, str, dict[str, Record]]:
    if not data.startswith(FORMAT):
        raise ValueError("not a corpus index of this version")
    # The payload is hashed and unpickled in place: slices of it were two more copies of the file alive while its
    # records were being built (~96 MB more at the peak of a steady cycle at 100k entries).
    end = data.find(b"\n", len(FORMAT))
    if end < 0 or hashlib.sha256(memoryview(data)[end + 1 :]).hexdigest().encode("ascii") != data[len(FORMAT) : end]:
        raise ValueError("its checksum does not match (truncated or damaged)")
    stream = io.BytesIO(data)  # shares the bytes object's buffer until written to (never)
    stream.seek(end + 1)
    loaded = _Unpickler(stream).load()
    if not (isinstance(loaded, tuple) and len(loaded) == 4 and isinstance(loaded[1], str)):
        raise ValueError("unexpected content")
    version, root, base_id, records = loaded
    if version != code_version():
        raise ValueError("made by another version of the entry parser or the screen")
    if not isinstance(base_id, str) or not base_id:
        raise ValueError("unexpected base id")
    if not isinstance(records, dict):
        raise ValueError("unexpected records")
    _rebuilt(records, removals=False)
    return root, base_id, records


def _frame(view: memoryview, offset: int) -> tuple[str, dict[str, Record | None], bytes, int]:
    """The log frame at ``offset``: (base id, changes, its checksum, offset of the next frame); raises on any
    damage."""
    end_head = offset + FRAME_HEAD.size
    if end_head > len(view):
        raise ValueError("torn frame header")
    magic, length, digest = FRAME_HEAD.unpack(view[offset:end_head])
    if magic != FRAME_MAGIC:
        raise ValueError("not a frame")
    end = end_head + length
    if end > len(view):
        raise ValueError("torn frame")
    payload = view[end_head:end]
    if hashlib.sha256(payload).digest() != digest:
        raise ValueError("its checksum does not match")
    loaded = _Unpickler(io.BytesIO(payload)).load()
    if not (isinstance(loaded, tuple) and len(loaded) == 2 and isinstance(loaded[0], str)):
        raise ValueError("unexpected frame")
    base_id, changes = loaded
    if not isinstance(changes, dict):
        raise ValueError("unexpected frame records")
    _rebuilt(changes, removals=True)
    return base_id, changes, digest, end


__all__ = [
    "FORMAT",
    "INDEX_NAME",
    "LOG_SUFFIX",
    "RACY_WINDOW_NS",
    "CorpusIndex",
    "Record",
    "index_path",
    "open_corpus_index",
    "stat_key",
]
