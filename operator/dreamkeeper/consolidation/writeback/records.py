"""The write-back index: per entry, what dreamkeeper's cycles changed of it, kept so that a later cycle recognises
an agent's stale cached copy of it. A cache of the journals (``ingest.py`` folds them in), kept in the state dir.

Per entry id a ``Record``:

* ``layers``: the in-place changes cycles made to it, in order (review/decline stamps, an exact-duplicate fold's
  counters, stale changes carried into it). Each has a **marker**, the bookkeeping metadata values it wrote: a
  copy carrying a layer's marker descends from that layer (a caching agent keeps what it loaded), a copy missing
  the newest marker was written from a cache older than it and lost what the missing layers did.
* ``archived``: the archive a cycle made (merge source, fold copy, ephemeral prune): the content's review hash and
  counters as they were archived (what the successor received), and, per lineage of the agent's cache, the last
  stale copy whose changes were carried (so each change is carried once, however often the agent writes it back).

Compact on disk (a cold start stamps every entry: 100k records): a record is ``[h, layers, archived]``, a layer is
``[journal ref, marker template ref, changes?]``, and markers are shared templates with the review hash and the
journal's time as placeholders. Only the records a cycle looks at are decoded.
"""

from __future__ import annotations

import gc
import itertools
import json
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from dreamkeeper.consolidation.baseline import Counters
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    LARGE_STATE_LIMIT,
    STALE_COPY_OF,
    Entry,
    StateFileError,
    StoredEntry,
    id_key,
    loads_json,
    read_state_file,
    replace_state_streamed,
    state_dir,
)

log = logging.getLogger(__name__)

INDEX_FILE = "writeback-index.json"
VERSION = 2  # 2: stamp markers hold only the values a stamp changed (an index of 1 is rebuilt from the journals)
_H, _T = "#h", "#t"  # marker placeholders: the record's review hash, the layer's journal time


@dataclass(slots=True)
class Layer:
    journal: str
    marker: dict[str, str]
    rc: int = 0  # reinforcement added in place
    tags: tuple[str, ...] = ()  # tags added
    filled: dict[str, str] = field(default_factory=dict)  # non-bookkeeping metadata filled in
    created: str | None = None  # createdAt lowered to
    seen: str | None = None  # lastSeenAt raised to
    importance: float | None = None  # importanceScore raised to

    def changes(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.rc:
            out["rc"] = self.rc
        if self.tags:
            out["tags"] = list(self.tags)
        if self.filled:
            out["filled"] = self.filled
        for key in ("created", "seen", "importance"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out

    @classmethod
    def of(cls, journal: str, marker: dict[str, str], changes: dict[str, Any] | None) -> Layer:
        c = changes or {}
        return cls(
            journal=journal,
            marker=marker,
            rc=int(c.get("rc", 0)),
            tags=tuple(c.get("tags") or ()),
            filled=dict(c.get("filled") or {}),
            created=c.get("created"),
            seen=c.get("seen"),
            importance=c.get("importance"),
        )


@dataclass(slots=True)
class Archived:
    journal: str  # the journal that first archived it (its undo restores the stale copies archived again too)
    reason: str
    successor: str | None
    kind: str  # merged | folded | ephemeral
    image: Counters  # as archived: what its successor received
    carried: dict[str, tuple[str, Counters]] = field(default_factory=dict)  # lineage -> (repair journal, copy)

    def to_json(self) -> list[Any]:
        carried = {lineage: [j, c.to_json()] for lineage, (j, c) in self.carried.items()}
        return [self.journal, self.reason, self.successor, self.kind, self.image.to_json(), carried]

    @classmethod
    def from_json(cls, data: list[Any]) -> Archived:
        journal, reason, successor, kind, image, carried = data
        return cls(
            journal=str(journal),
            reason=str(reason),
            successor=successor,
            kind=str(kind),
            image=Counters.from_json(image),
            carried={str(lineage): (str(j), Counters.from_json(c)) for lineage, (j, c) in carried.items()},
        )


@dataclass(slots=True)
class Record:
    h: str | None = None  # review hash of the content every image of it had (dreamkeeper never edits content)
    layers: list[Layer] = field(default_factory=list)
    archived: Archived | None = None

    @property
    def empty(self) -> bool:
        return not self.layers and self.archived is None

    def lineage(self, metadata: dict[str, str] | None) -> int:
        """How many layers a copy with this metadata descends from: the newest layer whose marker it carries
        (markers can be overwritten by later ones, so the search goes from the newest down)."""
        meta = metadata or {}
        for index in range(len(self.layers) - 1, -1, -1):
            marker = self.layers[index].marker
            if all(meta.get(k) == v for k, v in marker.items()):
                return index + 1
        return 0

    def lineage_key(self, depth: int) -> str:
        return self.layers[depth - 1].journal if depth else ""


class WriteBackIndex:
    """Records by lowercased entry id (RockBot's ids are case-insensitive), plus the journals folded in."""

    def __init__(self) -> None:
        self.journals: dict[str, str] = {}  # journal id -> its created_at, for every journal folded in
        self.undone: set[str] = set()
        self.reversals_offset = 0
        self.changed = False
        self._refs: dict[int, str] = {}  # journal ref -> journal id (on disk)
        self._ref_of: dict[str, int] = {}
        self._templates: dict[int, dict[str, str]] = {}  # marker template ref -> encoded marker
        self._template_of: dict[tuple[tuple[str, str], ...], int] = {}
        self._raw: dict[str, list[Any]] = {}  # records not decoded yet
        self._expected: dict[tuple[int, int], tuple[tuple[str, ...], list[str], int]] = {}
        self._records: dict[str, Record] = {}  # decoded (and possibly changed) records
        self._items: dict[tuple[int, int], tuple[int, int]] = {}  # shared stored layers (``add_layer``)

    # ---- records ---------------------------------------------------------------------------------------------

    def __contains__(self, entry_id: str) -> bool:
        key = entry_id.lower()
        return key in self._records or key in self._raw

    def __len__(self) -> int:
        return len(self._records) + len(self._raw)

    def keys(self) -> Iterator[str]:
        yield from self._records
        yield from self._raw

    def get(self, entry_id: str) -> Record | None:
        key = entry_id.lower()
        record = self._records.get(key)
        if record is None and key in self._raw:
            record = self._decode(self._raw.pop(key))
            self._records[key] = record
        return record

    def edit(self, entry_id: str) -> Record:
        """The record to change (created if absent); the index is saved after."""
        self.changed = True
        record = self.get(entry_id)
        if record is None:
            record = self._records[id_key(entry_id)] = Record()
        return record

    def add_layer(self, entry_id: str, h: str | None, layer: Layer, limit: int) -> None:
        """A layer on top of an entry's record (its newest ``limit`` kept). Appended to the stored form when the
        record is not decoded (a cold start stamps every entry of the corpus: no object per entry)."""
        if not layer.marker:
            return  # no marker, no way to tell a copy that has it from one that has not: nothing to re-apply
        self.changed = True
        key = id_key(entry_id)  # the entry's own string when lower case (a cold start stamps every entry)
        raw = self._raw.get(key)
        if key not in self._records and (raw is None or raw[0] == h or h is None) and (raw is None or len(raw) == 2):
            h = h if raw is None or h is not None else raw[0]
            at = self.journals.get(layer.journal)
            encoded = {k: (_H if v == h else _T if v == at else v) for k, v in layer.marker.items()}
            refs = (self._ref(layer.journal), self._template(encoded))
            item: Sequence[Any]
            if layer.rc or layer.tags or layer.filled or layer.created or layer.seen or layer.importance is not None:
                item = [*refs, layer.changes()]
            else:
                # A layer of a journal and template alone (every stamp of a cold start) is the same for each entry:
                # one tuple, shared (a stored layer is only ever read; JSON writes a tuple as a list).
                item = self._items.setdefault(refs, refs)
            if raw is None:
                self._raw[key] = [h, [item]]
            else:
                raw[1].append(item)
                del raw[1][:-limit]
            return
        record = self.edit(entry_id)
        record.h = h or record.h
        record.layers.append(layer)
        del record.layers[:-limit]

    def drop(self, entry_id: str) -> None:
        key = entry_id.lower()
        if self._records.pop(key, None) is not None or self._raw.pop(key, None) is not None:
            self.changed = True

    def quick(self, entry_id: str, entry: Entry) -> bool | None:
        """The fast path, run on every file of the snapshot: None when the entry has no record, True when there is
        nothing to repair (a file that carries the newest layer's marker, or an archived one), False when the record
        must be looked at. Undecoded records are answered from their stored form."""
        key = entry_id.lower()
        raw = self._raw.get(key)
        if raw is None:
            record = self._records.get(key)
            if record is None:
                return None
            if record.archived is not None:
                return _still_our_archive(entry)
            return entry.archived_at is not None or record.lineage(entry.metadata) == len(record.layers)
        if len(raw) > 2:  # archived by a cycle: still ours, or live again, or archived by the agent since?
            return _still_our_archive(entry)
        layers = raw[1]
        if entry.archived_at is not None or not layers:
            return True
        meta = entry.metadata
        if meta is None:
            return False
        newest = layers[-1]
        keys, values, hashed = self._expected.get((newest[0], newest[1])) or self._expect(newest[0], newest[1])
        got = list(map(meta.get, keys))
        if hashed >= 0:
            if got[hashed] != raw[0]:
                return False
            got[hashed] = _H
        return got == values

    def to_look_at(self, stored: Iterable[StoredEntry]) -> list[StoredEntry]:
        """The files ``quick`` does not clear (False): ``quick`` for a whole corpus, with the common case (a stamped
        file still carrying its newest marker, or no record at all) inline, compared in C (``map``, list ``==``)."""
        raw_records, decoded, expected_of = self._raw, self._records, self._expected
        out = []
        for item in stored:
            key = item.id.lower()
            raw = raw_records.get(key)
            if raw is None and key not in decoded:
                continue  # no record: nothing to look at (and an entry read back from the corpus index stays undecoded)
            entry = item.entry
            if raw is not None and len(raw) == 2 and raw[1] and entry.archived_at is None:
                meta = entry.metadata
                if meta is None:
                    out.append(item)
                    continue
                newest = raw[1][-1]
                keys, values, hashed = expected_of.get((newest[0], newest[1])) or self._expect(newest[0], newest[1])
                got = list(map(meta.get, keys))
                if hashed >= 0:
                    if got[hashed] != raw[0]:
                        out.append(item)
                        continue
                    got[hashed] = _H
                if got != values:
                    out.append(item)
                continue
            if self.quick(entry.id, entry) is False:
                out.append(item)
        return out

    def _expect(self, jref: int, tref: int) -> tuple[tuple[str, ...], list[str], int]:
        """A marker template with the journal's time filled in, as (keys, values, where the record's hash goes or
        -1), memoised: the fast path compares every live file of the corpus with one."""
        journal = self._refs.get(jref)
        at = self.journals.get(journal, "") if journal is not None else ""
        template = self._templates[tref] if journal is not None else {"": "never matches"}
        keys = tuple(template)
        values = [at if v == _T else v for v in template.values()]
        expected = (keys, values, values.index(_H) if _H in values else -1)
        self._expected[(jref, tref)] = expected
        return expected

    # ---- (de)coding ------------------------------------------------------------------------------------------

    def _decode(self, raw: list[Any]) -> Record:
        h, layers, archived = raw[0], raw[1], raw[2] if len(raw) > 2 else None
        record = Record(h=h)
        for item in layers:
            journal = self._refs.get(int(item[0]))
            if journal is None:
                continue  # its journal expired
            at = self.journals.get(journal, "")
            marker = {k: (h if v == _H else at if v == _T else v) for k, v in self._templates[int(item[1])].items()}
            record.layers.append(Layer.of(journal, marker, item[2] if len(item) > 2 else None))
        if archived is not None:
            record.archived = Archived.from_json(archived)
        return record

    def _encode(self, record: Record) -> list[Any]:
        layers = []
        for layer in record.layers:
            at = self.journals.get(layer.journal)
            encoded = {k: (_H if v == record.h else _T if v == at else v) for k, v in sorted(layer.marker.items())}
            item: list[Any] = [self._ref(layer.journal), self._template(encoded)]
            if changes := layer.changes():
                item.append(changes)
            layers.append(item)
        out: list[Any] = [record.h, layers]
        if record.archived is not None:
            out.append(record.archived.to_json())
        return out

    def _ref(self, journal: str) -> int:
        """A journal's number in the stored form; numbers are never reused (stored layers keep theirs)."""
        ref = self._ref_of.get(journal)
        if ref is None:
            ref = max(self._refs, default=-1) + 1  # a few journals a cycle
            self._refs[ref] = journal
            self._ref_of[journal] = ref
        return ref

    def _template(self, encoded: dict[str, str]) -> int:
        key = tuple(sorted(encoded.items()))  # a handful of keys
        ref = self._template_of.get(key)
        if ref is None:
            ref = len(self._templates)  # templates are never removed while the index is loaded: numbers stay free
            while ref in self._templates:
                ref += 1
            self._templates[ref] = encoded
            self._template_of[key] = ref
        return ref

    # ---- the file --------------------------------------------------------------------------------------------

    @classmethod
    def load(cls, agent_dir: Path) -> WriteBackIndex:
        """The index as saved, or an empty one (then every journal in the window is folded in again)."""
        index = cls()
        path = index_path(agent_dir)
        collecting = gc.isenabled()
        gc.disable()  # a hundred thousand small lists, all long-lived: nothing for the collector to find
        try:
            # Bounded, and only a regular file (a FIFO here hung the cycle holding the lock, issue 22): anything
            # else is a StateFileError, which stops the command before it writes.
            raw = read_state_file(path, LARGE_STATE_LIMIT)
            if raw is None:
                return cls()
            data = loads_json(raw)
            if data.get("version") != VERSION:
                raise ValueError(f"version {data.get('version')!r}")
            index.journals = {str(k): str(v) for k, v in data["journals"].items()}
            index.undone = {str(j) for j in data.get("undone") or ()}
            index.reversals_offset = int(data.get("reversalsOffset") or 0)
            index._refs = {int(k): str(v) for k, v in data["refs"].items()}
            index._ref_of = {v: k for k, v in index._refs.items()}
            index._templates = {int(k): dict(v) for k, v in data["templates"].items()}
            index._template_of = {tuple(sorted(v.items())): k for k, v in index._templates.items()}
            index._raw = data["records"]
        except FileNotFoundError:
            return cls()
        except StateFileError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("%s unreadable (%s); rebuilding it from the journals", path, exc)
            return cls()
        finally:
            if collecting:
                gc.enable()
        return index

    def save(self, agent_dir: Path) -> None:
        if not self.changed:
            return
        collecting = gc.isenabled()
        gc.disable()  # as for loading: many small, long-lived, acyclic objects
        try:
            replace_state_streamed(index_path(agent_dir), self._serialised())
        finally:
            if collecting:
                gc.enable()
        self.changed = False

    def _serialised(self) -> Iterator[bytes]:
        """The index as compact JSON, in pieces of ``CHUNK_RECORDS`` records: joined, the text of 100,000 records
        (~13 MB), its bytes and a copy of the records dict were 47 MB of a cold cycle's peak at 100k entries, on top
        of the records themselves (bench/results/micro-s35.md). The records come first: encoding a decoded one may
        name a journal or a marker template for the first time, and only those some record uses are written."""
        used_refs: set[int] = set()
        used_templates: set[int] = set()
        yield b'{"version":' + str(VERSION).encode("ascii") + b',"records":{'
        first = True
        for chunk in _chunked(self._encoded_records(), CHUNK_RECORDS):
            for raw in chunk.values():
                for item in raw[1]:
                    used_refs.add(item[0])
                    used_templates.add(item[1])
            text = json.dumps(chunk, separators=(",", ":"))[1:-1]  # the members, without the braces
            yield (text if first else "," + text).encode("utf-8")
            first = False
        rest = {
            "journals": self.journals,
            "undone": sorted(self.undone),
            "reversalsOffset": self.reversals_offset,
            "refs": {str(k): v for k, v in self._refs.items() if k in used_refs},
            "templates": {str(k): v for k, v in self._templates.items() if k in used_templates},
        }
        yield b"}," + json.dumps(rest, separators=(",", ":"))[1:].encode("utf-8")

    def _encoded_records(self) -> Iterator[tuple[str, list[Any]]]:
        """Every record in its stored form: the undecoded as they are, then the decoded that hold anything."""
        yield from self._raw.items()
        for key, record in self._records.items():
            if not record.empty:
                yield key, self._encode(record)

    def oldest_journal(self) -> datetime | None:
        """When the oldest journal the index holds was made (``expire`` forgets it once the window passes it)."""
        return min((_parse(at) for at in self.journals.values()), default=None)

    def expire(self, cutoff: datetime) -> None:
        """Forget journals older than ``cutoff`` (the retention window) and what only they recorded."""
        old = {j for j, at in self.journals.items() if _parse(at) < cutoff}
        if not old:
            return
        for journal in old:
            del self.journals[journal]
        self.undone -= old
        self.forget_journals(old)
        self._refs = {k: v for k, v in self._refs.items() if v not in old}
        self._ref_of = {v: k for k, v in self._refs.items()}
        self._expected.clear()

    def forget_journals(self, journals: set[str]) -> None:
        """Everything these journals recorded, out of every record (a record left with nothing is dropped)."""
        self.changed = True
        for key in list(self.keys()):
            record = self.get(key)
            assert record is not None
            record.layers = [layer for layer in record.layers if layer.journal not in journals]
            if record.archived is not None:
                if record.archived.journal in journals:
                    record.archived = None
                else:
                    record.archived.carried = {
                        lineage: jc for lineage, jc in record.archived.carried.items() if jc[0] not in journals
                    }
            if record.empty:
                self.drop(key)


CHUNK_RECORDS = 4096  # records per piece of a saved index (~0.5 MB of text)


def _chunked(items: Iterator[tuple[str, list[Any]]], size: int) -> Iterator[dict[str, list[Any]]]:
    while chunk := dict(itertools.islice(items, size)):
        yield chunk


def _still_our_archive(entry: Entry) -> bool:
    meta = entry.metadata or {}
    return entry.archived_at is not None and (ARCHIVED_BY_CYCLE in meta or STALE_COPY_OF in meta)


def index_path(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / INDEX_FILE


def _parse(at: str) -> datetime:
    return datetime.fromisoformat(at)
