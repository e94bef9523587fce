"""The corpus index's record encoding (``Entry.__reduce__``, ``entry_state.restored``, ``corpus_index._flat`` and
``_rebuilt``): an
entry restored from an index is the parsed entry in every field and every behaviour, entries sharing a shape stay
independent, and a planted index in this format builds nothing else and costs a full read."""

from __future__ import annotations

import hashlib
import io
import os
import pickle
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamkeeper.memory import MemoryStore, StoredEntry, entry_state
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.memory import corpus_index_records as records_module
from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.memory.content_digests import entry_digest
from dreamkeeper.memory.corpus_index import FORMAT, Record, index_path
from dreamkeeper.memory.corpus_index_files import append_frame
from dreamkeeper.memory.entry import _FIELD_NAMES, Entry
from dreamkeeper.memory.errors import ConflictError
from dreamkeeper.memory.scan_objects import child_path
from dreamkeeper.memory.stored import lazy_named
from tests.memory.conftest import rockbot_entry, write_raw
from tests.memory.test_corpus_index import later, scan
from tests.memory.test_entry_parse import files

SHA = "0" * 64


def records_through_index(*entries: Entry) -> list[Record]:
    """The entries' records as an index holds them: pickled together (one memo, as a saved index), loaded by the
    index's own restricted unpickler, not decoded yet."""
    records = {
        f"/m/{at}.json": Record((10, 20, 30, at), entry, Fingerprint(SHA, 10, 20), None)
        for at, entry in enumerate(entries)
    }
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = ci._REDUCERS  # type: ignore[misc]
    pickler.dump(records)
    loaded = ci._Unpickler(io.BytesIO(buffer.getvalue())).load()
    ci._rebuilt(loaded, removals=False)
    return [loaded[name] for name in records]


def through_index(*entries: Entry) -> list[Entry]:
    """The entries as an index holds them, decoded."""
    return [record.entry for record in records_through_index(*entries)]


VIEW = ("id", "is_live", "is_archived", "content", "archived_at", "held", "restored_by_hand")


def view(stored: StoredEntry) -> dict[str, Any]:
    return {name: getattr(stored, name) for name in VIEW}


def everything(entry: Entry) -> tuple[Any, ...]:
    """All an entry is and does: its fields (with their types), pydantic's extra, fields-set and private state,
    how it was read (shape, kept raw values, createdAt default), its dumps and the bytes it writes."""
    origin = getattr(entry, "_origin", None)
    how_read = None
    if origin is not None:
        shape = origin.shape
        how_read = (shape.keys, shape.names, shape.position, shape.unknown, shape.fields_set)
        how_read += (origin.kept, origin.created_default)
    return (
        entry.__dict__,
        list(entry.__dict__),
        {name: type(value) for name, value in entry.__dict__.items()},
        entry.__pydantic_extra__,
        entry.__pydantic_fields_set__,
        entry.__pydantic_private__,
        how_read,
        entry.model_dump(),
        entry.model_dump(mode="json", by_alias=True, exclude_unset=True),
        entry.to_json_bytes(),
        entry.to_json_obj(only=frozenset({"importancescore", "metadata"})),
    )


@settings(max_examples=300, deadline=None)
@given(files(), st.integers(0, 3))
def test_an_entry_from_the_index_is_the_parsed_entry(obj: dict[str, Any], change: int) -> None:
    try:
        parsed = Entry.from_json_obj(obj)
    except ValueError:
        return
    # As read, and as a cycle changes it (decay, a stamp, an archive): the index holds both kinds.
    if change == 1:
        parsed = parsed.evolve(importance_score=0.123)
    elif change == 2:
        parsed = parsed.with_meta(consolidationReviewedHash="ABC")
    elif change == 3:
        parsed = parsed.evolve(archived_at=datetime(2026, 1, 2, tzinfo=UTC), archive_reason="merged")
    (restored,) = through_index(parsed)
    assert restored == parsed
    assert everything(restored) == everything(parsed)
    assert everything(restored.evolve(importance_score=0.5)) == everything(parsed.evolve(importance_score=0.5))


@settings(max_examples=300, deadline=None)
@given(files(), st.integers(0, 5))
def test_an_index_records_view_is_its_entrys_and_decodes_nothing(obj: dict[str, Any], change: int) -> None:
    """What the whole-corpus stages read of a record read back (corpus_index_records.py: its view) is what they would
    read of the parsed entry, for every kind of entry the index holds; reading it decodes nothing, and the entry
    decoded afterwards is the parsed one, equal to a scan's entry."""
    try:
        parsed = Entry.from_json_obj(obj)
    except ValueError:
        return
    at = datetime(2026, 1, 2, tzinfo=UTC)
    if change == 1:
        parsed = parsed.evolve(archived_at=at, archive_reason="merged into x")
    elif change == 2:
        parsed = parsed.evolve(superseded_by="successor1")
    elif change == 3:
        parsed = parsed.with_meta(dreamkeeperHeldImportance="0.9", dreamkeeperHeldFor="chain")
    elif change == 4:
        parsed = parsed.with_meta(dreamkeeperRestoredAt="2026-01-03T00:00:00+00:00")
    elif change == 5:
        parsed = parsed.evolve(metadata={})
    (record,) = records_through_index(parsed)
    lazy = lazy_named(record, "/m/0.json", record.fingerprint)
    eager = StoredEntry.named(parsed, "/m/0.json", record.fingerprint)
    assert view(lazy) == view(eager)
    assert not record.decoded
    assert lazy == eager and eager == lazy
    assert record.decoded and everything(lazy.entry) == everything(parsed)


def test_an_entry_built_in_code_restores_too() -> None:
    made = Entry(id="made1", content="built, never read", tags=["a"], metadata={"k": "v"})
    (restored,) = through_index(made)
    assert everything(restored) == everything(made)
    assert getattr(restored, "_origin", "missing") is None


def test_entries_sharing_a_shape_stay_independent() -> None:
    """Parsed entries of one spelling share a fields-set (and an origin); restored, they still do, and a change to
    one never shows in another."""
    a_parsed = Entry.from_json_obj(rockbot_entry("aaaa1111", tags=["x"], metadata={"k": "v"}))
    b_parsed = Entry.from_json_obj(rockbot_entry("bbbb2222", tags=["x"], metadata={"k": "v"}))
    assert a_parsed.__pydantic_fields_set__ is b_parsed.__pydantic_fields_set__
    a, b = through_index(a_parsed, b_parsed)
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__  # shared as parsed ones are (memory)
    before = everything(b)
    set_before = set(b.__pydantic_fields_set__)

    a.archive_reason = "by hand"  # a field the file did not have: a's fields-set grows, b's must not
    a.surprise = "an unknown field"  # pydantic's extra: a's own
    a.tags.append("y")
    assert a.metadata is not None
    a.metadata["k"] = "changed"

    assert "archive_reason" in a.__pydantic_fields_set__ and "surprise" in a.__pydantic_fields_set__
    assert b.__pydantic_fields_set__ == set_before
    assert everything(b) == before
    assert b.tags == ["x"] and b.metadata == {"k": "v"}
    assert everything(b.evolve(importance_score=0.2)) == everything(b_parsed.evolve(importance_score=0.2))


def test_how_an_entry_was_read_comes_back_as_the_parser_made_it() -> None:
    """Format 9 writes an entry's origin as three flat values: the shape's shared origin comes back as that very
    object (shared, as the parser shares it), an origin with kept values or a createdAt default as its own, equal
    in every slot, and an entry built in code as none."""
    created = datetime(2026, 3, 1, 8, 15, 2, 123456, tzinfo=UTC)
    written = Entry(id="dddd4444", content="Rose lives in Portland.", created_at=created).to_json_bytes()
    plain_a = Entry.from_json_bytes(written)  # a file as dreamkeeper writes one: nothing to keep
    plain_b = Entry.from_json_bytes(written.replace(b"dddd4444", b"eeee5555"))
    kept = Entry.from_json_obj(rockbot_entry("ffff6666"))
    no_created = {k: v for k, v in rockbot_entry("abab7777").items() if k != "createdAt"}
    defaulted = Entry.from_json_obj(no_created)
    made = Entry(id="made2", content="built in code")
    assert plain_a._origin is plain_a._origin.shape.plain  # the parser's common case, shared
    assert kept._origin.kept and defaulted._origin.created_default is not None
    restored = through_index(plain_a, plain_b, kept, defaulted, made)
    assert restored[0]._origin is restored[0]._origin.shape.plain
    assert restored[0]._origin is restored[1]._origin  # one shared origin, as parsed
    for before, after in zip((plain_a, plain_b, kept, defaulted, made), restored, strict=True):
        assert everything(after) == everything(before)
    assert restored[2]._origin is not restored[2]._origin.shape.plain
    assert restored[2]._origin.kept == kept._origin.kept
    assert restored[3]._origin.created_default == defaulted._origin.created_default
    assert getattr(restored[4], "_origin", "missing") is None


def test_the_pickled_state_is_checked() -> None:
    """``entry_state.restored`` refuses containers of the wrong kind (a planted index may hold anything)."""
    good = Entry.from_json_obj(rockbot_entry("cccc3333"))
    _, (values, extra, fields_set, origin) = good.__reduce__()
    assert entry_state.restored(values, extra, fields_set, origin) == good
    bad_states = [
        (list(values), extra, fields_set, origin),
        (values[:-1], extra, fields_set, origin),
        (values, ["x"], fields_set, origin),
        (values, extra, list(fields_set), origin),
        (values, extra, fields_set, {"shape": 1}),
    ]
    for state in bad_states:
        with pytest.raises(ValueError, match="not an entry's pickled state"):
            entry_state.restored(*state)
    # Format 5's form: the entry's own __dict__, exactly the model's fields in the model's order.
    fields = dict(zip(_FIELD_NAMES, values, strict=True))
    assert entry_state.restored_fields(dict(fields), extra, fields_set, origin) == good
    bad_fields = [
        (list(values), extra, fields_set, origin),
        (dict(reversed(fields.items())), extra, fields_set, origin),
        ({**fields, "surprise": 1}, extra, fields_set, origin),
        ({k: v for k, v in fields.items() if k != "content"}, extra, fields_set, origin),
        (fields, ["x"], fields_set, origin),
        (fields, extra, frozenset(fields_set), origin),
        (fields, extra, fields_set, ("a", "tuple")),
    ]
    for state in bad_fields:
        with pytest.raises(ValueError, match="not an entry's pickled state"):
            entry_state.restored_fields(*state)


def _shape_without_plain(shape: Any) -> Any:
    """A shape as a planted index could build one (the unpickler may build shapes): its shared origin replaced."""
    planted = object.__new__(type(shape))
    for name in type(shape).__slots__:
        setattr(planted, name, getattr(shape, name))
    planted.plain = ("not", "an origin")
    return planted


class _Planted:
    """Pickles as ``(function, args)``: what a hostile index would hold."""

    def __init__(self, function: Any, args: tuple[Any, ...]) -> None:
        self.function, self.args = function, args

    def __reduce__(self) -> tuple[Any, ...]:
        return (self.function, self.args)


def _plant(agent: Path, records: dict[str, Any]) -> None:
    payload = pickle.dumps((ci.code_version(), str(agent / "memory"), "planted-base", records), protocol=5)
    index_path(agent).write_bytes(FORMAT + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def _record_args(
    path: Path,
    values: Any,
    state: tuple[Any, Any, Any] | None = None,
    content: Any = None,
    fit: Any = None,
    due: tuple[Any, Any] = (None, 0),
    view: tuple[Any, Any, Any, Any] | None = None,
) -> tuple[Any, ...]:
    """A record's flat values as ``_flat`` writes them (format 10: the stat key; the entry's view; its shape and
    fields-set; a blob pickling its values (without the id and the content), extra, kept raw values and createdAt
    default; its fingerprint, fit, content digest, then its due's key and time) for the file at ``path``. ``values``:
    what the blob holds as the values. ``state``: (extra, fields-set, origin), the origin an ``_Origin`` (flattened
    here) or already its three values. ``view``: (id, content, flags, archived at), the file's entry1's if None."""
    st = os.lstat(path)
    extra, fields_set, origin = state if state is not None else (None, set(), None)
    shape, kept, created = origin if type(origin) is tuple else records_module._origin_flat(origin)
    blob = pickle.dumps((values, extra, kept, created), protocol=5)
    key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    view = view if view is not None else _VIEW
    return (*key, *view, shape, fields_set, blob, SHA, st.st_size, st.st_mtime_ns, fit, content, *due)


_VIEW: Any = None  # entry1's view (set by the test that plants it)


def _blob_values(entry: Entry) -> tuple[Any, ...]:
    """An entry's values as a record's blob holds them: in the model's order, the id and the content left out."""
    values = [entry.__dict__[name] for name in _FIELD_NAMES]
    values[_FIELD_NAMES.index("id")] = values[_FIELD_NAMES.index("content")] = None
    return tuple(values)


# Refused when the index is loaded (the record's own values): the whole index is discarded, every file read.
_AT_LOAD = (
    "due-key-not-str",
    "due-not-int",
    "format-7-record",
    "format-9-record",
    "short-digest",
    "digest-not-bytes",
    "not-an-origin",
    "origin-not-a-shape",
    "origin-shape-without-plain",
    "restored-call",
    "not-a-tuple",
    "short-record",
    "float-size",
    "fit-not-bool",
    "sha-not-str",
    "format-6-call",
    "view-id-not-str",
    "view-flags-out-of-range",
    "view-live-and-archived",
    "view-archived-without-time",
    "fields-set-not-a-set",
)

# Refused when a stage reads the entry (the blob's values, or a view its entry does not give back): that file is
# read instead.
_AT_DECODE = (
    "planted",
    "generic-entry",
    "list-values",
    "short-values",
    "reordered-values",
    "extra-value",
    "id-in-the-blob",
    "origin-kept-not-a-tuple",
    "origin-kept-odd",
    "origin-created-not-a-time",
    "origin-kept-without-shape",
    "origin-created-on-shared",
    "evil-call",
    "view-flags-lie",
    "stamp-bytes-garbage",
    "stamp-bytes-no-month",
)


@pytest.mark.parametrize(
    "planted", ["control", "control-with-digest", "control-with-due", "control-compact-stamps", *_AT_LOAD, *_AT_DECODE]
)
def test_a_planted_index_in_this_format_costs_a_full_read(
    agent: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, planted: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Records whose stat keys match the files (the strongest plant): still nothing but the allowed functions is
    called. A record whose own values are wrong is refused when the index loads, and the whole index is discarded
    (every file read). A record whose blob holds a malformed entry state (decoded only when a stage reads the entry)
    is refused then: that file is read instead, with a warning, and the scan is the same. The control: the same
    record with the entry's true state is taken."""
    global _VIEW
    later(monkeypatch)
    first, _ = scan(agent)
    path = next((agent / "memory").rglob("entry1.json"))
    parsed = MemoryStore(agent / "memory").read_file(path)
    assert isinstance(parsed, StoredEntry)
    _, (values, extra, fields_set, origin) = parsed.entry.__reduce__()  # the file's own parse
    blob_values = _blob_values(parsed.entry)
    _VIEW = records_module.view_of(parsed.entry)
    state = (extra, fields_set, origin)
    marker = tmp_path / "ran"
    record: Any
    if planted == "control":
        record = _record_args(path, blob_values, state)
    elif planted == "control-with-digest":
        record = _record_args(path, blob_values, state, entry_digest(parsed.entry))
    elif planted == "control-with-due":
        record = _record_args(path, blob_values, state, due=("a-key", 1_900_000_000))
    elif planted.startswith(("control-compact", "stamp-bytes")):
        # A UTC timestamp as ``_flat`` writes it: its datetime's own ten bytes; anything else there is refused.
        at = _FIELD_NAMES.index("updated_at")
        stamp = blob_values[at]
        assert type(stamp) is datetime and stamp.tzinfo is UTC
        compact = {
            "control-compact-stamps": stamp.__reduce__()[1][0],
            "stamp-bytes-garbage": b"garbage",
            "stamp-bytes-no-month": b"\x07\xea\x0d" + bytes(7),
        }[planted]
        record = _record_args(path, (*blob_values[:at], compact, *blob_values[at + 1 :]), state)
    elif planted == "due-key-not-str":  # a due's key is a string or none (entry_dues.py)
        record = _record_args(path, blob_values, state, due=(b"a-key", 1_900_000_000))
    elif planted == "due-not-int":
        record = _record_args(path, blob_values, state, due=("a-key", 1.9e9))
    elif planted == "format-7-record":  # no due: format 7's records are refused whole
        record = _record_args(path, blob_values, state)[:-2]
    elif planted == "format-9-record":  # the entry's __dict__ inline, no view, no blob: 17 values
        fields = dict(zip(_FIELD_NAMES, values, strict=True))
        flat = _record_args(path, blob_values, state)
        record = (*flat[:4], fields, extra, fields_set, *records_module._origin_flat(origin), *flat[11:])
    elif planted == "short-digest":  # a record's content digest is 16 bytes or none (content_digests.py)
        record = _record_args(path, blob_values, state, entry_digest(parsed.entry)[:15])
    elif planted == "digest-not-bytes":
        record = _record_args(path, blob_values, state, entry_digest(parsed.entry).hex())
    elif planted == "generic-entry":  # pydantic's own state path, which an index never holds
        record = _record_args(path, _Planted(Entry, ()), state)
    elif planted == "list-values":
        record = _record_args(path, list(blob_values), state)
    elif planted == "short-values":
        record = _record_args(path, blob_values[:3], state)
    elif planted == "reordered-values":
        record = _record_args(path, tuple(reversed(blob_values)), state)
    elif planted == "extra-value":
        record = _record_args(path, (*blob_values, "x"), state)
    elif planted == "id-in-the-blob":  # the id belongs to the view alone
        record = _record_args(path, tuple(values), state)
    elif planted == "not-an-origin":
        record = _record_args(path, blob_values, (extra, fields_set, ("a", "tuple", None)))
    elif planted.startswith("origin-"):  # how the entry was read, its three values planted one by one
        shape, kept, created = records_module._origin_flat(origin)
        assert shape is not None and kept is not None  # a RockBot file keeps its 7-digit timestamps
        how_read = {
            "origin-not-a-shape": ({"keys": shape.keys}, kept, created),
            "origin-kept-not-a-tuple": (shape, list(kept), created),
            "origin-kept-odd": (shape, kept[:-1], created),
            "origin-created-not-a-time": (shape, kept, "2026-01-01T00:00:00Z"),
            "origin-kept-without-shape": (None, kept, created),
            "origin-created-on-shared": (shape, None, datetime(2026, 1, 1, tzinfo=UTC)),
            "origin-shape-without-plain": (_shape_without_plain(shape), kept, created),
        }[planted]
        record = _record_args(path, blob_values, (extra, fields_set, how_read))
    elif planted == "restored-call":  # format 4's entry call: no longer something an index may call
        record = _Planted(entry_state.restored, (values, extra, fields_set, origin))
    elif planted == "not-a-tuple":  # eighteen values, but a string of them: unpacks, and is no record
        record = "abcdefghijklmnopqr"
    elif planted == "short-record":
        record = _record_args(path, blob_values, state)[:-1]
    elif planted == "float-size":
        record = (float(os.lstat(path).st_size), *_record_args(path, blob_values, state)[1:])
    elif planted == "fit-not-bool":
        record = _record_args(path, blob_values, state, fit=1)
    elif planted == "sha-not-str":
        flat = _record_args(path, blob_values, state)
        record = (*flat[:11], SHA.encode(), *flat[12:])
    elif planted == "format-6-call":  # format 6's record function: gone, and nothing an index may call
        record = _Planted(ci.Record, _record_args(path, blob_values, state))
    elif planted == "view-id-not-str":
        record = _record_args(path, blob_values, state, view=(b"entry1", *_VIEW[1:]))
    elif planted == "view-flags-out-of-range":
        record = _record_args(path, blob_values, state, view=(*_VIEW[:2], 16, _VIEW[3]))
    elif planted == "view-live-and-archived":
        record = _record_args(path, blob_values, state, view=(*_VIEW[:2], 3, datetime(2026, 1, 1, tzinfo=UTC)))
    elif planted == "view-archived-without-time":
        record = _record_args(path, blob_values, state, view=(*_VIEW[:2], records_module.ARCHIVED, None))
    elif planted == "view-flags-lie":  # restored by hand, says the view; not so, says the entry: refused at decode
        record = _record_args(path, blob_values, state, view=(*_VIEW[:2], _VIEW[2] | records_module.RESTORED, None))
    elif planted == "fields-set-not-a-set":
        record = _record_args(path, blob_values, (extra, list(fields_set), origin))
    else:
        record = _record_args(path, _Planted(os.system, (f"touch {marker}",)), state)
    _plant(agent, {str(path): record})
    caplog.set_level("WARNING")
    seen, index = scan(agent)
    assert not marker.exists()
    assert seen == first  # compares every entry: a record whose blob is refused gives the file's own parse
    assert not marker.exists()
    refused_at_decode = planted in _AT_DECODE
    # The control's record is entry1's true parse: taken (the other two files have none); one refused at load: all
    # read; one refused at decode: taken by the scan, its file read when its entry was.
    assert (index.hits, index.reads) == ((0, 3) if planted in _AT_LOAD else (1, 2))
    undecodable = [r for r in caplog.records if "could not be decoded" in r.getMessage()]
    assert len(undecodable) == (1 if refused_at_decode else 0)
    if planted == "control-with-due":  # loaded with the record, under its key only
        stored = index._new[str(path)].stored
        assert stored is not None
        assert index.pending([stored], "a-key", 0) == ([], [], 1_900_000_000)
        assert index.pending([stored], "b-key", 0) == ([stored], [stored], None)


def test_a_planted_log_frame_in_this_format_is_ignored(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame appended to a good base, its record refused when the log is read (its view's flags): the frame (and
    any after it) is ignored, and the base still serves every file."""
    later(monkeypatch)
    first, index = scan(agent)
    path = next((agent / "memory").rglob("entry2.json"))
    parsed = MemoryStore(agent / "memory").read_file(path)
    assert isinstance(parsed, StoredEntry)
    bad = _record_args(path, [1, 2], view=(*records_module.view_of(parsed.entry)[:2], 99, None))  # flags out of range
    append_frame(index.log_path, (index._base_id, {str(path): bad}), ci._REDUCERS)
    seen, index = scan(agent)
    assert seen == first
    assert index.loaded and (index.hits, index.reads) == (3, 0)  # the base's record of entry2 still matches


def test_scan_paths_are_their_normal_strings(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan sets each path's string from scandir's (``scan_objects.child_path``): it must be the
    string pathlib itself formats from the path's parts, for every entry of a warm scan."""
    later(monkeypatch)
    root = agent / "memory"
    write_raw(root, rockbot_entry("deep1", category="a/b/c"), category="a/b/c")
    scan(agent)
    index = ci.open_corpus_index(agent, root)
    result = MemoryStore(root, index).scan()
    assert index.hits == 4
    for stored in result.entries:
        assert str(stored.path) == str(Path(*stored.path.parts))
        assert stored.path == Path(str(stored.path))
    weird = child_path({}, "rel//dir/./x.json".replace("//", "/"))
    assert str(weird) == str(Path("rel/dir/./x.json"))  # "." is dropped by pathlib: not set from the name


def test_an_undecodable_record_of_a_file_edited_after_the_scan_reads_it_and_refuses_writes(
    agent: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A planted record whose blob cannot be decoded, for a file the agent edits after the scan: reading the entry
    gives the file's own parse now (logged), and a write to it is refused, as the scan's fingerprint says other bytes
    (the agent's edit is never overwritten)."""
    later(monkeypatch)
    scan(agent)
    path = next((agent / "memory").rglob("entry1.json"))
    parsed = MemoryStore(agent / "memory").read_file(path)
    assert isinstance(parsed, StoredEntry)
    _, (_, extra, fields_set, origin) = parsed.entry.__reduce__()
    good = _record_args(
        path, _blob_values(parsed.entry), (extra, fields_set, origin), view=records_module.view_of(parsed.entry)
    )
    fp = parsed.fingerprint
    planted = (*good[:10], pickle.dumps(([1, 2], None, None, None)), fp.sha256, fp.size, fp.mtime_ns, *good[14:])
    _plant(agent, {str(path): planted})
    index = ci.open_corpus_index(agent, agent / "memory")
    store = MemoryStore(agent / "memory", index)
    (lazy,) = [s for s in store.scan().entries if s.id == "entry1"]
    assert index.hits == 1 and not index._new[str(path)].decoded
    edited = path.read_text(encoding="utf-8").replace("Fact number 1", "Fact number one")
    path.write_text(edited, encoding="utf-8")
    caplog.set_level("WARNING")
    entry = lazy.entry
    assert entry.content == "Fact number one about Portland."
    assert any("could not be decoded" in r.getMessage() for r in caplog.records)
    with pytest.raises(ConflictError):
        store.rewrite(lazy, entry.evolve(importance_score=0.1))
    assert path.read_text(encoding="utf-8") == edited
