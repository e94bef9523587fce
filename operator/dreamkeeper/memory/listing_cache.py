"""The names each directory of the corpus held when it was last listed, kept between cycles beside the corpus index,
so a steady scan stats every file but lists no directory whose stat says its names are the same (issue 27).

A steady cycle's scan at 100,000 entries spent a third of its file loop listing directories: a ``DirEntry`` per
name, sorting each directory's names, testing each one's type, when the same names in the same order came back
every time. The argument is listing.py's (the end-of-run check already relies on it): creating, removing or
renaming a name in a directory moves the directory's mtime and ctime (POSIX), a replaced directory has another
inode, and git's racy rule covers a change in the same timestamp tick. So, per directory: its stat taken just
before it was listed, and the names the listing gave (the entry files, the sub-directories, in the scan's order).
A later scan that finds the directory with that very stat takes the names from here; every file is still
``lstat``'ed by the corpus index (a file rewritten in place keeps its directory's stat, never its own).

A cache, like the corpus index:

* Kept only for a directory whose mtime and ctime were older than the start of the scan that listed it by
  ``RACY_WINDOW_NS``; used only when the directory's ``lstat`` (mtime, ctime, inode) equals the kept one; any other
  directory is listed, and what its listing gave is kept for the next scan.
* The file is checked whole (a magic line with the format, the sha256 of the payload, the memory root and the code
  that filters names: the store's and the index's); anything else is discarded with a log line: every directory
  is listed. It is loaded by an unpickler that can build no class at all (strings, ints, tuples and a dict).
* Written (atomically, ``checked_files.write_checked``) only when the last scan's names differ from the file's.
* It lives in the agent's state directory: whoever can write there can also write the memory directory itself (a
  planted file could hide a file from the scan, as deleting it would; it cannot make the cycle write anything the
  fingerprint checks would not catch).
"""

from __future__ import annotations

import io
import logging
import os
import pickle
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

from dreamkeeper.memory.checked_files import checked_payload, write_checked
from dreamkeeper.memory.corpus_index import RACY_WINDOW_NS
from dreamkeeper.memory.files import MiB, UnsafeFileError, read_regular
from dreamkeeper.memory.listing import DirRecord, Listing

log = logging.getLogger(__name__)

LISTING_SUFFIX: Final = ".dirs"  # beside the corpus index: corpus-index.dirs
FORMAT: Final = b"dreamkeeper-corpus-listing 2\n"
LISTING_LIMIT: Final = 1024 * MiB

# (stat of the directory before it was listed, the entry files' names, the sub-directories' names, whether it held
# any hidden name), in the scan's order: the files as the scan yields them, the sub-directories as it descends.
DirNames = tuple[DirRecord, tuple[str, ...], tuple[str, ...], bool]


class _NoClasses(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"{module}.{name}: a corpus listing holds no objects")


class ListingCache:
    """The kept listings of one memory root: loaded on the first scan, consulted and refreshed by each, saved with
    the corpus index."""

    def __init__(self, path: Path, root: str, version: str) -> None:
        self.path = path
        self.root = root
        self.version = version  # the code that decides which names a listing keeps (corpus_index.code_version)
        self._saved: dict[str, DirNames] = {}  # the kept listings: the file's, and what the sweep listed since
        self._disk: dict[str, DirNames] = {}  # what the file says (written again only when a scan saw otherwise)
        self._seen: dict[str, DirNames] = {}
        self._complete = False  # the last scan ran to its end (a scan given up half-way is not kept)
        self._tried = False
        self.used = 0  # directories of the last scan named from here (tests, benchmarks)
        self.listed = 0  # directories of the last scan listed

    def begin(self) -> None:
        self._loaded()
        self._seen, self._complete = {}, False
        self.used = self.listed = 0

    def _loaded(self) -> dict[str, DirNames]:
        if not self._tried:
            self._tried = True
            self._saved = self._load()
            self._disk = dict(self._saved)
        return self._saved

    def clean_subdirs(self, directory: str) -> tuple[str, ...] | None:
        """For the sweep of leftovers (leftovers.py): the sub-directories' names of ``directory`` when it still has
        the stat it was kept with and held no hidden name then (so none now: every name of ours there is hidden);
        None: it must be listed. Read-only: the scan's own use of the kept listings is not counted."""
        kept = self._loaded().get(directory)
        if kept is None or kept[3]:
            return None
        try:
            st = os.lstat(directory)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode) or (st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != kept[0]:
            return None
        return kept[2]

    def for_sweep(self, directory: str) -> tuple[Sequence[str], list[os.DirEntry[str]]] | None:
        """For the sweep of leftovers (leftovers.py): ``directory``'s sub-directories' names and its hidden entries
        (every name of ours is hidden). None hidden when the kept listing vouches for it (``clean_subdirs``); else
        listed (``walk.list_directory``: None when it cannot be), and the listing kept for this cycle's scan, under
        the stat taken before it and the racy rule, as the scan keeps its own: it is the listing the scan would make,
        made a moment earlier under the same cycle lock, and used only if the directory's stat has not moved since.
        A directory the last cycle wrote into is so listed once a cycle, not twice (a listing of the largest of the
        100,000-entry bench corpus, 47,000 names, costs 57-81 ms: bench/results/micro-s28.md)."""
        from dreamkeeper.memory.walk import list_directory  # (it imports this module)

        subdirs = self.clean_subdirs(directory)
        if subdirs is not None:
            return subdirs, []
        listing, hidden = Listing(), list[os.DirEntry[str]]()
        listed = list_directory(directory, listing, hidden)
        if listed is None:
            return None
        files, paths, _ = listed
        prefix = directory if directory.endswith(os.sep) else directory + os.sep
        names = tuple(path[len(prefix) :] for path in paths)
        record = listing.directories.get(directory)
        if record is not None and _keepable(record, listing):
            self._loaded()[directory] = (record, tuple(child.name for child in files), names, bool(hidden))
        return names, hidden

    def known(self, directory: str, listing: Listing | None) -> DirNames | None:
        """The kept names of ``directory`` if it still has the stat they were kept with (recorded in ``listing`` as
        the stat before its listing: it is this scan's listing of it); None: it must be listed."""
        kept = self._saved.get(directory)
        if kept is None:
            return None
        try:
            st = os.lstat(directory)
        except OSError:
            return None
        now: DirRecord = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        if not stat.S_ISDIR(st.st_mode) or now != kept[0]:
            return None
        if listing is not None:
            listing.directories[directory] = now
        self._seen[directory] = kept
        self.used += 1
        return kept

    def learn(self, directory: str, listing: Listing, files: list[str], subdirs: list[str], hidden: bool) -> None:
        """``directory`` was listed, its stat recorded in ``listing`` just before: kept if not racy."""
        self.listed += 1
        record = listing.directories.get(directory)
        if record is not None and _keepable(record, listing):
            self._seen[directory] = (record, tuple(files), tuple(subdirs), hidden)

    def finished(self) -> None:
        self._complete = True

    def save(self) -> None:
        """The last scan's listings, if it ran to its end and they differ from the file's (logged on failure)."""
        if not self._complete or self._seen == self._disk:
            return
        payload = pickle.dumps((self.version, self.root, self._seen), protocol=pickle.HIGHEST_PROTOCOL)
        if write_checked(self.path, FORMAT, payload, "corpus listing", "the next scan lists every directory"):
            self._saved, self._disk = self._seen, dict(self._seen)

    def _load(self) -> dict[str, DirNames]:
        try:
            data = read_regular(self.path, LISTING_LIMIT, follow_symlinks=False)
        except FileNotFoundError:
            return {}
        except (OSError, UnsafeFileError) as exc:
            log.warning("corpus listing %s not used (%s): this scan lists every directory", self.path, exc)
            return {}
        try:
            return self._decoded(data)
        except Exception as exc:  # any damage at all: discarded, never trusted in part
            log.warning("corpus listing %s discarded (%s): this scan lists every directory", self.path, exc)
            return {}

    def _decoded(self, data: bytes) -> dict[str, DirNames]:
        loaded = _NoClasses(io.BytesIO(checked_payload(data, FORMAT, "corpus listing"))).load()
        if not (isinstance(loaded, tuple) and len(loaded) == 3):
            raise ValueError("unexpected content")
        version, root, kept = loaded
        if version != self.version:
            raise ValueError("made by another version of the store's listing rules")
        if root != self.root:
            raise ValueError(f"describes {root!r}, not {self.root!r}")
        if not isinstance(kept, dict) or not all(_is_dir_names(k, v) for k, v in kept.items()):
            raise ValueError("unexpected listings")
        return kept


def _keepable(record: DirRecord, listing: Listing) -> bool:
    """Whether a listing of a directory with this stat (taken just before it) may be kept: not racy (its mtime and
    ctime older than the listing's start by ``RACY_WINDOW_NS``), and stat'ed and listed (not listing.py's
    ``_UNUSABLE``)."""
    return max(record[0], record[1]) < listing.started_ns - RACY_WINDOW_NS and min(record) >= 0


def _is_dir_names(directory: object, value: object) -> bool:
    if not isinstance(directory, str) or not (isinstance(value, tuple) and len(value) == 4):
        return False
    record, files, subdirs, hidden = value
    return (
        type(hidden) is bool
        and isinstance(record, tuple)
        and len(record) == 3
        and all(type(x) is int for x in record)
        and _plain_names(files)
        and _plain_names(subdirs)
    )


def _plain_names(names: object) -> bool:
    """What scandir gives and a listing keeps: strings, never empty, never hidden (so never "." or ".."), never a
    separator or a NUL. Tested on the names joined by NUL (C loops, not a Python call per name: 100k per load)."""
    if type(names) is not tuple:
        return False
    if not names:
        return True
    try:
        joined = "\0".join(names)
    except TypeError:
        return False
    return (
        bool(joined)
        and joined.count("\0") == len(names) - 1  # no name holds a NUL
        and os.sep not in joined
        and "\0\0" not in joined  # no empty name inside
        and not joined.startswith((".", "\0"))  # the first is neither hidden nor empty
        and not joined.endswith("\0")  # nor the last empty
        and "\0." not in joined  # no later one hidden
    )


__all__ = ["FORMAT", "LISTING_SUFFIX", "DirNames", "ListingCache"]
