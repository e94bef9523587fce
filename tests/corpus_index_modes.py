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

The kept directory listings (memory/listing_cache.py) are as earlier cycles of the test left them, except
``cold`` (none) and ``corrupt`` (a byte flipped: discarded, every directory listed).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dreamkeeper.memory import MemoryStore, StoredEntry
from dreamkeeper.memory.corpus_index import CorpusIndex, Record, stat_key

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
            # The kept listings (listing_cache.py) as the last cycle left them, but none when cold and a damaged
            # file when corrupt (discarded: every directory listed); loaded now, while the file is so.
            kept = self.listings.path
            if mode == "cold":
                kept.unlink(missing_ok=True)
            elif mode == "corrupt" and kept.is_file():
                data = kept.read_bytes()
                kept.write_bytes(
                    data[: len(data) // 2] + bytes([data[len(data) // 2] ^ 0x5A]) + data[len(data) // 2 + 1 :]
                )
            self.listings.begin()
        finally:
            for path, before in saved.items():
                if before is None:
                    path.unlink(missing_ok=True)
                else:
                    path.write_bytes(before)

    monkeypatch.setattr(CorpusIndex, "load", prepared_load)
    yield mode
