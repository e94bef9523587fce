"""The corpus index as a test condition (memory/corpus_index.py): a suite marked with
``pytest.mark.usefixtures("corpus_index_mode")`` runs once per state the index can be in when a cycle starts, and
must decide the same in each:

* ``cold``: no index (deleted before every load): every file is read;
* ``warm``: an index of exactly the files as they are (made just before the load, the racy rule waived: as if it
  had been written long ago and nothing had changed since): nothing is read;
* ``stale``: an index of the files as they are, then made stale: a third of the records true (used), a third
  with another file's parse and the ctime moved (edited behind it: read again), a third missing (added behind
  it), and a record of a file that does not exist (removed behind it);
* ``corrupt``: that warm index with a byte flipped in the middle: discarded, every file is read.

The kept directory listings (memory/listing_cache.py) are put in the same state: none when ``cold``; the tree as it
is (racy rule waived) when ``warm``; that with every other directory's stat moved when ``stale`` (listed); that
with a byte flipped when ``corrupt`` (discarded: every directory listed).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamkeeper.memory import MemoryStore, StoredEntry
from dreamkeeper.memory.corpus_index import RACY_WINDOW_NS, CorpusIndex, Record, stat_key
from dreamkeeper.memory.listing import Listing
from dreamkeeper.memory.listing_cache import ListingCache

MODES = ("cold", "warm", "stale", "corrupt")


def _prewarm(index: CorpusIndex) -> dict[str, Record]:
    store = MemoryStore(Path(index.root))
    records: dict[str, Record] = {}
    for child in store.iter_file_entries():
        result, st = store.read_file_stat(Path(child.path))
        if isinstance(result, StoredEntry) and st is not None:
            records[child.path] = Record(stat_key(st), result.entry, result.fingerprint)
    return records


def _write(index: CorpusIndex, records: dict[str, Record]) -> None:
    writer = CorpusIndex(index.path, Path(index.root))
    writer._new = records  # written by the module's own save
    writer._stamp = 1
    writer._changed = True
    writer.save()


def _stale(records: dict[str, Record]) -> dict[str, Record]:
    names = sorted(records)
    entries = [records[n].entry for n in names]
    lying: dict[str, Record] = {}
    for position, name in enumerate(names):
        if position % 3 == 0:
            lying[name] = records[name]  # unchanged since: used
            continue
        if position % 3 == 2:
            continue  # added behind the index
        size, mtime, ctime, ino = records[name].key
        other = entries[(position + 1) % len(entries)]
        lying[name] = Record((size, mtime, ctime + 1, ino), other, records[name].fingerprint)
    if names:
        first = records[names[0]]
        lying[names[0] + ".gone.json"] = Record(first.key, first.entry, first.fingerprint)  # removed behind it
    return lying


def apply_mode(index: CorpusIndex, mode: str) -> bool:
    """Prepare the index file for ``mode``; whether one was written."""
    index.path.unlink(missing_ok=True)
    if mode == "cold" or not Path(index.root).is_dir():
        return False
    records = _prewarm(index)
    if not records:
        return False
    _write(index, _stale(records) if mode == "stale" else records)
    if mode == "corrupt" and index.path.is_file():
        data = index.path.read_bytes()
        middle = len(data) // 2
        index.path.write_bytes(data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1 :])
    return True


def _write_listing(index: CorpusIndex, stale: bool) -> None:
    """The kept listings of the tree as it is, as if listed long ago (the racy rule waived); ``stale``: every other
    directory's kept stat moved (its names are not used: it is listed)."""
    cache = ListingCache(index.listings.path, index.root, index.listings.version)
    cache.begin()
    long_ago = Listing(started_ns=time.time_ns() + RACY_WINDOW_NS + 1_000_000_000)
    for _ in MemoryStore(Path(index.root)).iter_file_names(long_ago, cache):
        pass
    if stale:
        for position, (directory, ((mtime, ctime, ino), files, subdirs, hidden)) in enumerate(cache._seen.items()):
            if position % 2 == 0:
                cache._seen[directory] = ((mtime, ctime + 1, ino), files, subdirs, hidden)
    cache.save()


@pytest.fixture(params=MODES)
def corpus_index_mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    mode: str = request.param
    load = CorpusIndex.load

    def prepared_load(self: CorpusIndex) -> None:
        # The prepared file is put back as the product left it once loaded: a test comparing the agent's tree (a
        # dry run writes nothing) sees only what the cycle wrote.
        paths = (self.path, self.log_path, self.listings.path)
        saved = {path: path.read_bytes() if path.is_file() else None for path in paths}
        written = apply_mode(self, mode)
        try:
            load(self)
            # The mode is real: a warm or stale index is taken, a corrupt one refused.
            assert self.loaded == (written and mode in ("warm", "stale")), (mode, written, self.loaded)
            # The kept listings (listing_cache.py) in the same state; loaded now, while the file is so.
            kept = self.listings.path
            kept.unlink(missing_ok=True)
            if mode != "cold" and Path(self.root).is_dir():
                _write_listing(self, stale=mode == "stale")
                if mode == "corrupt" and kept.is_file():
                    data = kept.read_bytes()
                    middle = len(data) // 2
                    kept.write_bytes(data[:middle] + bytes([data[middle] ^ 0x5A]) + data[middle + 1 :])
            self.listings._tried = False  # (re)loaded from the file as prepared
            self.listings.begin()
            # Real as well: a warm listing is taken (every directory), a stale one in part, a corrupt one refused.
            taken = len(self.listings._saved)
            assert (taken > 0) == (mode in ("warm", "stale") and Path(self.root).is_dir()), (mode, taken)
        finally:
            for path, before in saved.items():
                if before is None:
                    path.unlink(missing_ok=True)
                else:
                    path.write_bytes(before)

    monkeypatch.setattr(CorpusIndex, "load", prepared_load)
    yield mode
