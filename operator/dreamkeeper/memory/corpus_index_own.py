"""The corpus index's record of a cycle's own decays (``corpus-index.own``), for the next scan.

A steady cycle decays the same few percent of the corpus every time (RockBot's rule: every drop of an importance is
written), and the next scan found each of those files changed: it read and parsed them all again, a twelfth of a
steady cycle at 100,000 entries. A stat taken just after our own rename cannot vouch for the file (git's racy rule:
corpus_index.py), so the file must still be read; but its parse need not be made again when its bytes are exactly
the ones the cycle wrote. So the cycle keeps, per file its decay wrote last: the entry it wrote and the fingerprint
of the bytes (their sha256). The next scan reads such a file, hashes it as every read does, and when the sha256 and
the size are the ones kept, takes the kept entry instead of parsing the bytes. Any other bytes (the agent wrote,
another process, a restore) are parsed as before.

Why the kept entry stands for a parse of those bytes: they are that entry's own JSON (``Entry.to_json_bytes``), and
an entry's JSON parses back to the same values (what ``Executor.made`` and the report's final scan already rely on;
tests/consolidation/test_kept_decays.py checks a parse of every file kept against the kept entry, value by value and
byte by byte when written again).

The file is a cache like the index: written whole each cycle (a temp file, fsynced, renamed), in the index's own
format and checked the same way (format line, sha256, the memory root, a restricted unpickler, every record's values
checked by ``corpus_index_records.rebuilt``); anything wrong with it costs the reads it would have saved, nothing
else. It holds at most a quarter of the index's records (``OWN_FRACTION``): a cold start that decays the whole corpus
keeps nothing (its next scan reads every file as before; holding every decayed entry to the cycle's end and pickling
them all would cost more memory and time than it saves there).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from dreamkeeper.memory.atomic import read_with_stat
from dreamkeeper.memory.corpus_index_files import write_streamed
from dreamkeeper.memory.corpus_index_records import REDUCERS, Record, UndecodableRecord
from dreamkeeper.memory.files import MiB, UnsafeFileError, read_regular
from dreamkeeper.memory.jsontext import values_at, with_values

if TYPE_CHECKING:
    from dreamkeeper.memory.atomic import Fingerprint
    from dreamkeeper.memory.corpus_index import CorpusIndex
    from dreamkeeper.memory.entry import Entry
    from dreamkeeper.memory.store import MalformedFile, MemoryStore, StoredEntry

log = logging.getLogger(__name__)

OWN_SUFFIX: Final = ".own"
OWN_ID: Final = "own-decays"  # in the base-id place of the index's layout: an index file copied here is refused
OWN_FRACTION: Final = 4
OWN_MIN: Final = 1024  # a small corpus keeps this many at least
OWN_LIMIT: Final = 1024 * MiB
# A kept record's stat key: no file has it (sizes are never negative), so it never matches a file's as a record's
# would; a kept record is only ever looked up by its path after the index's own record missed.
UNSTATED: Final = (-1, -1, -1, -1)


def own_path(index: Path) -> Path:
    return index.with_name(index.name + OWN_SUFFIX)


def load_own(path: Path, root: str) -> dict[str, Record]:
    """The kept decays of ``root``, or none (absent, damaged, another version or root: logged)."""
    from dreamkeeper.memory.corpus_index import _decode  # (it imports this module)

    try:
        data = read_regular(path, OWN_LIMIT, follow_symlinks=False)
    except FileNotFoundError:
        return {}
    except (OSError, UnsafeFileError) as exc:
        log.warning("corpus index's kept decays %s not used (%s): their files are parsed", path, exc)
        return {}
    try:
        kept_root, own_id, records = _decode(data)
    except Exception as exc:  # any damage at all: discarded, never trusted in part
        log.warning("corpus index's kept decays %s discarded (%s): their files are parsed", path, exc)
        return {}
    if kept_root != root or own_id != OWN_ID:
        log.info("corpus index's kept decays %s describe %s (%s), not %s: not used", path, kept_root, own_id, root)
        return {}
    return records


def kept_records(
    writes: Mapping[str, tuple[Entry, Fingerprint, str]],
    records: Mapping[str, Record],
    cap: int,
    keeps_fit: Callable[[Entry], bool] | None = None,
) -> dict[str, Record]:
    """A record per decay write to keep (none when there are more than ``cap``). When the record the scan had for
    its file is of the very bytes the decay decayed (their sha256), each carries that record's content digest (a
    decay changes decay's two values alone, ``Entry.evolve`` of those, which the digest leaves out:
    content_digests.py) and its screen verdict, if fit and ``keeps_fit`` says the decay's values keep it so: the
    next cycle need not digest or screen it again."""
    if len(writes) > cap:
        log.debug("corpus index: %d decays written, more than %d: none kept for the next scan", len(writes), cap)
        return {}
    out: dict[str, Record] = {}
    for name, (entry, fingerprint, decayed) in writes.items():
        before = records.get(name)
        if before is None or before.fingerprint.sha256 != decayed:
            out[name] = Record(UNSTATED, entry, fingerprint)
            continue
        fit = True if before.fit is True and keeps_fit is not None and keeps_fit(entry) else None
        out[name] = Record(UNSTATED, entry, fingerprint, fit, content=before.content)
    return out


def read_kept(
    store: MemoryStore, name: str, kept: Record, plain: bool
) -> tuple[StoredEntry | MalformedFile, os.stat_result | None, bytes | None]:
    """The file at ``name`` (the walk's path string), which the last cycle's decay wrote (``kept``: its record of
    the write), read: the kept entry when the bytes are the ones written (their sha256 and size), else their parse,
    as ``store.read_file_stat`` gives it; and the bytes when it was the kept entry (None: it was not). Those bytes
    are the kept entry's ``to_json_bytes()``: the very bytes the decay wrote from it (``derived_bytes``)."""
    from dreamkeeper.memory.stored import StoredEntry, lazy_named

    try:
        data, fingerprint, st = read_with_stat(name)
    except OSError:
        result, again = store.read_file_stat(Path(name))  # its error, as a read reports it (or the file, if back)
        return result, again, None
    written = kept.fingerprint
    if fingerprint.sha256 == written.sha256 and fingerprint.size == written.size:
        try:
            # Its view serves the whole-corpus stages, as a record read back does (``items``)
            stored = lazy_named(kept, name, fingerprint) if plain else StoredEntry(kept.entry, Path(name), fingerprint)
        except UndecodableRecord as exc:
            log.warning("corpus index's kept decay of %s could not be decoded (%s): the file is parsed", name, exc)
        else:
            kept.fingerprint, kept.stored = fingerprint, stored
            return stored, st, data
    return store.parsed_read(Path(name), data, fingerprint), st, None


def derived_bytes(
    index: CorpusIndex | None, stored: StoredEntry, changes: Sequence[tuple[str, Any, Any]]
) -> bytes | None:
    """The bytes of ``stored``'s entry with ``changes`` made (``jsontext.with_values``: top-level key, its value in
    the entry's JSON, the new value), when the last scan took ``stored`` from a kept decay: its file's bytes are the
    entry's ``to_json_bytes()`` (``read_kept``). None otherwise: the caller encodes the changed entry itself. The
    caller's changes must be all that differs between the two entries' ``to_json_obj()``: a decay's two values, as
    its journal step records them (tests/consolidation/test_decay_bytes.py)."""
    data = _kept_bytes(index, stored)
    return None if data is None else with_values(data, changes)


def kept_values(index: CorpusIndex | None, stored: StoredEntry, keys: Sequence[str]) -> dict[str, Any] | None:
    """The values of ``keys`` in ``stored``'s entry's JSON (``to_json_obj``), read from its file's bytes when the
    last scan took ``stored`` from a kept decay (``jsontext.values_at``); None otherwise, or when the bytes do not
    hold each key once with a scalar (then the caller asks the entry)."""
    data = _kept_bytes(index, stored)
    return None if data is None else values_at(data, keys)


def _kept_bytes(index: CorpusIndex | None, stored: StoredEntry) -> bytes | None:
    """The bytes of ``stored``'s file when the last scan took ``stored`` itself (this very object) from a kept decay."""
    held = None if index is None else index.bases.get(stored.name)
    return held[1] if held is not None and held[0] is stored else None


def save_own(path: Path, root: str, records: dict[str, Record]) -> None:
    """``records`` written whole over ``path`` (logged, never raised: a cache)."""
    from dreamkeeper.memory.corpus_index import code_version  # (it imports this module)

    try:
        path.parent.mkdir(exist_ok=True)
        write_streamed(path, _format(), (code_version(), root, OWN_ID, records), REDUCERS)
    except OSError as exc:
        log.warning("corpus index's kept decays not saved (%s): the next scan parses their files", exc)


def _format() -> bytes:
    from dreamkeeper.memory.corpus_index import FORMAT

    return FORMAT


__all__ = [
    "OWN_FRACTION",
    "OWN_ID",
    "OWN_MIN",
    "OWN_SUFFIX",
    "UNSTATED",
    "derived_bytes",
    "kept_records",
    "kept_values",
    "load_own",
    "own_path",
    "read_kept",
    "save_own",
]
