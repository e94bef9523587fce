"""The entries a cycle wrote itself, kept for the next scan so it need not parse them again (issue 27).

A steady cycle with RockBot's decay (``decay.min_step`` 0: every drop written) rewrites the ~6% of a settled corpus
past its grace period, every cycle. The corpus index cannot vouch for those files at the next scan (their stat is
the new one, and it was taken inside the racy window, if at all), so the next scan reads each of them again, and
parsed each of them again: most of what reading a file costs. Kept here, per path: the entry the cycle wrote and
the sha256 and size of the bytes it wrote. The next scan still reads every such file and hashes what it read (as
any read does: the fingerprint); only when that is exactly the hash and size written here does it take the kept
entry instead of parsing the bytes. Nothing is trusted from a stat: the agent writing the file meanwhile, in the
same second or not, gives other bytes, and those are parsed.

Why the kept entry is what parsing those bytes gives: ``kept_form`` says (the same keys, values, unknown keys and
raw spellings; only a decay field that changed loses the raw text the file had, as a parse of the new bytes does),
and gives up (the file is parsed) for what it cannot tell, such as a file without createdAt, which a parse gives a
fresh default. tests/memory/test_own_writes.py puts the kept form beside the parse over hostile spellings (.NET's
7-digit timestamps, PascalCase, unknown keys, nulls, integer importance) and the bundled sample.

A cache like the corpus index it sits beside (``corpus-index.own``): the file is checked whole (a magic line, the
payload's sha256, the memory root and the code version the corpus index is keyed by), loaded by the corpus index's
restricted unpickler, and rewritten by each save with the last cycle's writes only (a few percent of the corpus,
never a growing log). Deleting, truncating or corrupting it costs one parse per file, never a decision."""

from __future__ import annotations

import io
import logging
import pickle
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Final

from dreamkeeper.memory.checked_files import checked_payload, write_checked
from dreamkeeper.memory.content_digests import DECAY_FIELDS
from dreamkeeper.memory.entry import Entry, _Origin, _reparse, _set
from dreamkeeper.memory.files import MiB, UnsafeFileError, read_regular

if TYPE_CHECKING:
    from dreamkeeper.memory.atomic import Fingerprint
    from dreamkeeper.memory.corpus_index import Record

log = logging.getLogger(__name__)

OWN_SUFFIX: Final = ".own"  # beside the corpus index: corpus-index.own
FORMAT: Final = b"dreamkeeper-own-writes 1\n"
OWN_LIMIT: Final = 1024 * MiB
_NO_STAT: Final = (-1, -1, -1, -1)  # a kept write's record never matches a file's stat: it is verified by content

# What the scan compares and takes: (sha256 of the bytes written, their size, the entry written)
Known = tuple[str, int, Entry]


def kept_form(entry: Entry) -> Entry | None:
    """``entry`` as parsing its own bytes gives it back, for an entry a decay wrote (only importance and updatedAt
    changed: content_digests.DECAY_FIELDS); None when that cannot be told without parsing.

    What a parse of ``entry.to_json_bytes()`` gives: the same keys in the same order (so the same shape and
    fields-set, when the entry's fields-set is its shape's, i.e. it set no field its file lacked); the same values
    (each is written as its own JSON form, or as the raw text it was read from, which reads back as that value);
    the same unknown keys and values (written as they are); and, kept raw, exactly the raw texts that were written
    (a raw text is kept because it is not what ``format_timestamp`` or ``repr`` would write, and it still is not).
    So the origin differs in one way only: a decay field that changed is written in its own form, no longer the raw
    text the file had, and the parse keeps nothing for it. A file without createdAt is given a default at each
    parse (no kept form)."""
    origin = getattr(entry, "_origin", None)
    if origin is None or origin.created_default is not None:
        return None
    shape = origin.shape
    if entry.__pydantic_fields_set__ is not shape.fields_set and entry.__pydantic_fields_set__ != shape.fields_set:
        return None
    extra = entry.__pydantic_extra__
    unknown = {shape.keys[at] for at in shape.unknown}
    if (set(extra) if extra else set()) != unknown:
        return None  # an unknown key added or dropped: other keys than the shape's
    if not origin.kept:
        return entry
    fields = entry.__dict__
    kept: list[object] = []
    for at, raw in origin.kept_values().items():
        name = shape.names[at]
        if name is None:
            kept += (at, extra[shape.keys[at]] if extra else raw)  # written as the entry holds it
        elif name not in DECAY_FIELDS or fields[name] == _reparse(name, raw):
            kept += (at, raw)  # written raw: unchanged (a decay changes nothing else)
    if len(kept) == len(origin.kept):
        return entry
    form = Entry.__new__(Entry)
    for slot in ("__dict__", "__pydantic_extra__", "__pydantic_fields_set__", "__pydantic_private__"):
        _set(form, slot, getattr(entry, slot))
    _set(form, "_origin", _Origin(shape, tuple(kept)) if kept else shape.plain)
    return form


class OwnWrites:
    """The kept writes of one memory root: loaded with the corpus index, looked up by its scan, replaced by each save
    with what the cycle wrote."""

    def __init__(self, path: Path, root: str, version: str) -> None:
        self.path = path
        self.root = root
        self.version = version
        self._kept: dict[str, Record] = {}
        self._saved_any = False  # the file on disk holds writes (so an empty set must replace it)
        self._next: dict[str, Record] | None = None  # what the next save writes (``keep``)
        self.taken = 0  # files the last scan took from here instead of parsing (tests, benchmarks)

    def load(self) -> None:
        self._kept = self._load()
        self._saved_any = bool(self._kept)

    def known(self, name: str) -> Known | None:
        record = self._kept.get(name)
        if record is None:
            return None
        return record.fingerprint.sha256, record.fingerprint.size, record.entry

    def digest(self, name: str) -> bytes | None:
        """The content digest kept with ``name``'s write, if one was known."""
        record = self._kept.get(name)
        return None if record is None else record.content

    def keep(self, written: Mapping[str, tuple[Entry, Fingerprint]], digests: Mapping[str, bytes]) -> None:
        """What this cycle wrote (path -> the entry and the fingerprint of the bytes): the ones with a kept form are
        kept by the next save, and only they (the last cycle's writes replace the earlier cycle's). ``digests``:
        path -> the entry's content digest (content_digests.py), where one is known (decay does not change it)."""
        from dreamkeeper.memory.corpus_index import Record

        kept = ((name, kept_form(entry), fingerprint) for name, (entry, fingerprint) in written.items())
        self._next = {
            name: Record(_NO_STAT, form, fingerprint, None, None, digests.get(name))
            for name, form, fingerprint in kept
            if form is not None
        }

    def save(self) -> None:
        """The kept writes, when a cycle said what it wrote (``keep``); an empty set empties a file that held some."""
        kept, self._next = self._next, None
        if kept is None or (not kept and not self._saved_any):
            return
        payload = pickle.dumps((self.version, self.root, kept), protocol=pickle.HIGHEST_PROTOCOL)
        if write_checked(self.path, FORMAT, payload, "own writes", "the next scan parses the files this cycle wrote"):
            self._saved_any = bool(kept)

    def _load(self) -> dict[str, Record]:
        try:
            data = read_regular(self.path, OWN_LIMIT, follow_symlinks=False)
        except FileNotFoundError:
            return {}
        except (OSError, UnsafeFileError) as exc:
            log.warning("own writes %s not used (%s): this scan parses every file it reads", self.path, exc)
            return {}
        try:
            return self._decoded(data)
        except Exception as exc:  # any damage at all: discarded, never trusted in part
            log.warning("own writes %s discarded (%s): this scan parses every file it reads", self.path, exc)
            return {}

    def _decoded(self, data: bytes) -> dict[str, Record]:
        from dreamkeeper.memory.corpus_index import Record, _Unpickler

        loaded = _Unpickler(io.BytesIO(checked_payload(data, FORMAT, "own writes"))).load()
        if not (isinstance(loaded, tuple) and len(loaded) == 3):
            raise ValueError("unexpected content")
        version, root, kept = loaded
        if version != self.version:
            raise ValueError("made by another version of the entry parser or the screen")
        if root != self.root:
            raise ValueError(f"describes {root!r}, not {self.root!r}")
        if not isinstance(kept, dict) or not all(isinstance(k, str) and isinstance(v, Record) for k, v in kept.items()):
            raise ValueError("unexpected records")
        return kept


__all__ = ["FORMAT", "OWN_SUFFIX", "Known", "OwnWrites", "kept_form"]
