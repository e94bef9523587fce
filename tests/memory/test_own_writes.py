"""The last cycle's own writes (memory/own_writes.py): the next scan takes the entry a decay wrote instead of parsing
the file, only while the file holds exactly the bytes written, and what it takes is what the parse would have been
(so a cycle decides the same with the file, without it, and with it damaged)."""

from __future__ import annotations

import logging
import os
import pickle
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.consolidation.decay import float32
from dreamkeeper.demo.sample import BUNDLED_SAMPLE
from dreamkeeper.memory import Entry, Fingerprint, MemoryStore, StoredEntry
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.memory.checked_files import write_checked
from dreamkeeper.memory.content_digests import content_generation
from dreamkeeper.memory.own_writes import FORMAT, kept_form
from tests.memory.conftest import rockbot_entry, write_raw
from tests.memory.test_roundtrip import _shapes

NOW = datetime(2026, 9, 14, 6, 0, 0, 123456, tzinfo=UTC)
LATER_NS = 60 * 1_000_000_000


def decayed(entry: Entry, now: datetime = NOW, factor: float = 0.97) -> Entry:
    """What ``plan_decay`` makes of an entry: importance lowered in float32, updatedAt = now."""
    return entry.evolve(importance_score=float32(entry.importance_score * factor), updated_at=now)


def same_entry(form: Entry, parsed: Entry) -> None:
    """``form`` is ``parsed`` in every part that decides what is read, compared or written."""
    assert form.__dict__ == parsed.__dict__
    assert form.__pydantic_extra__ == parsed.__pydantic_extra__
    assert form.__pydantic_fields_set__ == parsed.__pydantic_fields_set__
    mine, theirs = form._origin, parsed._origin  # type: ignore[attr-defined]
    assert mine.shape.keys == theirs.shape.keys
    assert mine.kept == theirs.kept
    assert mine.created_default == theirs.created_default
    assert form.to_json_bytes() == parsed.to_json_bytes()


def writes_alike(form: Entry, parsed: Entry, before: Entry) -> None:
    """Every later write of the two is the same file: an undo of the decay, a further decay, a review stamp."""
    undo = {"importance_score": before.importance_score, "updated_at": before.updated_at}
    assert form.evolve(**undo).to_json_bytes() == parsed.evolve(**undo).to_json_bytes()
    later = NOW + timedelta(days=3)
    assert decayed(form, later).to_json_bytes() == decayed(parsed, later).to_json_bytes()
    stamp = {"consolidationReviewedHash": "FEDCBA9876543210"}
    assert form.with_meta(**stamp).to_json_bytes() == parsed.with_meta(**stamp).to_json_bytes()


@pytest.mark.parametrize("obj", _shapes(), ids=lambda o: str(o.get("id") or o.get("Id")))
def test_the_kept_form_of_a_decay_is_its_parse(store: MemoryStore, memory_root: Path, obj: dict[str, Any]) -> None:
    write_raw(memory_root, obj)
    before = store.require(obj.get("id") or obj["Id"]).entry
    written = decayed(before)
    data = written.to_json_bytes()
    form = kept_form(written)
    has_created = any(key.lower() == "createdat" for key in obj)
    assert (form is None) == (not has_created)  # a parse gives a file without createdAt a fresh default
    if form is None:
        return
    parsed = Entry.from_json_bytes(data)
    same_entry(form, parsed)
    assert form.to_json_bytes() == data
    writes_alike(form, parsed, before)


def test_a_rockbot_file_loses_only_the_raw_text_of_the_values_decay_changed(
    store: MemoryStore, memory_root: Path
) -> None:
    """.NET writes 7 fraction digits, which are kept raw: the decay's updatedAt is written in its own form, the
    other timestamps as the file had them; the kept form says exactly that (the entry as decayed still holds the
    old raw text, which a parse of the new file does not)."""
    write_raw(memory_root, rockbot_entry())
    before = store.require("a1b2c3d4e5f6").entry
    written = decayed(before)
    form = kept_form(written)
    assert form is not None and form is not written
    parsed = Entry.from_json_bytes(written.to_json_bytes())
    same_entry(form, parsed)
    assert len(written._origin.kept) == len(form._origin.kept) + 2  # type: ignore[attr-defined]
    text = written.to_json_bytes().decode()
    assert '"createdAt": "2026-03-01T08:15:02.1234567+00:00"' in text  # kept raw, and in the kept form
    assert '"updatedAt": "2026-09-14T06:00:00.123456+00:00"' in text


def test_a_decay_that_kept_updated_at_keeps_its_raw_text(store: MemoryStore, memory_root: Path) -> None:
    """On a clock that stands still the decay writes the updatedAt the file had, raw: kept in the form too."""
    write_raw(memory_root, rockbot_entry())
    before = store.require("a1b2c3d4e5f6").entry
    assert before.updated_at is not None
    written = decayed(before, before.updated_at)
    form = kept_form(written)
    assert form is not None
    same_entry(form, Entry.from_json_bytes(written.to_json_bytes()))


@pytest.mark.parametrize(
    "change",
    [
        pytest.param({"extra": True}, id="an unknown key added"),
        pytest.param({"field": True}, id="a field the file lacked set"),
    ],
)
def test_what_it_cannot_tell_is_not_kept(store: MemoryStore, memory_root: Path, change: dict[str, bool]) -> None:
    obj = rockbot_entry()
    del obj["archiveReason"]
    write_raw(memory_root, obj)
    entry = decayed(store.require("a1b2c3d4e5f6").entry)
    if change.get("extra"):
        entry = Entry.model_validate({**entry.to_json_obj(), "x-new": 1}, by_alias=True)
    else:
        entry = entry.evolve(archive_reason="kept by hand")
    assert kept_form(entry) is None


def test_every_bundled_sample_entry_decays_to_its_parse(tmp_path: Path) -> None:
    shutil.copytree(BUNDLED_SAMPLE, tmp_path / "agent")
    entries = MemoryStore(tmp_path / "agent" / "memory").scan().entries
    kept = 0
    for stored in entries:
        written = decayed(stored.entry)
        form = kept_form(written)
        if form is None:
            continue
        kept += 1
        parsed = Entry.from_json_bytes(written.to_json_bytes())
        same_entry(form, parsed)
        writes_alike(form, parsed, stored.entry)
    assert kept == len(entries) >= 300  # every sample file has its createdAt


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    ticks=st.integers(0, 9_999_999),
    offset=st.sampled_from(["+00:00", "-05:00", "+05:30", "Z"]),
    importance=st.one_of(st.integers(0, 1), st.floats(0.0, 1.0, allow_nan=False)),
    unknown=st.dictionaries(
        st.text("abcxyz", min_size=1, max_size=5).map(lambda k: "x-" + k), st.integers(), max_size=3
    ),
)
def test_random_spellings_decay_to_their_parse(
    tmp_path: Path, ticks: int, offset: str, importance: float, unknown: dict[str, int]
) -> None:
    stamp = f"2026-03-01T08:15:02.{ticks:07d}{offset}"
    obj = rockbot_entry(createdAt=stamp, updatedAt=stamp, lastSeenAt=stamp, importanceScore=importance, **unknown)
    before = Entry.from_json_obj(obj)
    written = decayed(before)
    form = kept_form(written)
    assert form is not None
    parsed = Entry.from_json_bytes(written.to_json_bytes())
    same_entry(form, parsed)
    writes_alike(form, parsed, before)


# ---- the scan that takes them ---------------------------------------------------------------------------------


def later(monkeypatch: pytest.MonkeyPatch) -> None:
    real = ci.time.time_ns
    monkeypatch.setattr(ci, "_now_ns", lambda: real() + LATER_NS)


def decay_all(agent: Path, digests: bool = False) -> dict[str, tuple[Entry, Fingerprint, Entry]]:
    """A cycle's worth: scanned with the agent's index, every entry decayed and written, the writes kept, saved.
    ``digests``: the cycle asked for the content generation first (each record given its content digest)."""
    index = ci.open_corpus_index(agent, agent / "memory")
    store = MemoryStore(agent / "memory", index)
    entries = store.scan().entries
    if digests:
        index.content_generation(entries)
    written: dict[str, tuple[Entry, Fingerprint, Entry]] = {}
    for stored in entries:
        entry = decayed(stored.entry)
        written[str(stored.path)] = (entry, store.rewrite(stored, entry), stored.entry)
    index.keep_own(written)  # as Writes.record: before forget, which drops the records the digests are in
    index.forget(written)
    index.save()
    return written


def next_scan(agent: Path) -> tuple[list[StoredEntry], ci.CorpusIndex]:
    index = ci.open_corpus_index(agent, agent / "memory")
    entries = MemoryStore(agent / "memory", index).scan().entries
    index.save()
    return entries, index


def same_scan(seen: list[StoredEntry], agent: Path) -> None:
    """What a store without any index parses from the files."""
    fresh = MemoryStore(agent / "memory").scan().entries
    assert [s.path for s in seen] == [s.path for s in fresh]
    for mine, parsed in zip(seen, fresh, strict=True):
        assert mine.fingerprint == parsed.fingerprint
        same_entry(mine.entry, parsed.entry)


def test_the_next_scan_takes_the_writes_and_parses_nothing_of_them(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    later(monkeypatch)
    written = decay_all(agent)
    assert len(written) == 3
    seen, index = next_scan(agent)
    assert (index.reads, index.own.taken) == (3, 3)
    by_path = {str(s.path): s.entry for s in seen}
    assert all(by_path[name] is index.own.known(name)[2] for name in written)  # type: ignore[index]
    same_scan(seen, agent)
    # Taken, then recorded like any file read: the scan after that reads nothing at all.
    seen, index = next_scan(agent)
    assert (index.reads, index.hits, index.own.taken) == (0, 3, 0)


def test_a_taken_write_keeps_its_content_digest(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decay leaves the content digest as it was (it leaves out decay's two values): the next cycle's content
    generation makes none for the files it took, and is the one every parse of them gives."""
    later(monkeypatch)
    decay_all(agent, digests=True)
    seen, index = next_scan(agent)
    assert index.own.taken == 3
    generation = index.content_generation(seen)
    assert (index.digests_kept, index.digests_made) == (3, 0)
    assert generation == content_generation(MemoryStore(agent / "memory").scan().entries, {}, set())[0]
    # Carried on with the records the scan made of them: the next cycle's writes keep them again.
    decay_all(agent)
    seen, index = next_scan(agent)
    index.content_generation(seen)
    assert (index.own.taken, index.digests_kept, index.digests_made) == (3, 3, 0)
    # Without a digest in the records (a cycle that never asked, from a cold index), none is invented.
    for path in ci.index_path(agent).parent.glob("corpus-index*"):
        path.unlink()
    decay_all(agent)
    seen, index = next_scan(agent)
    index.content_generation(seen)
    assert (index.own.taken, index.digests_kept, index.digests_made) == (3, 0, 3)


def test_a_write_that_changed_more_than_decay_keeps_no_digest(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The record's digest is of the entry before the write: kept only for a write that changed decay's values
    alone. One that changed the content too is digested from what it wrote: the generation is the parses'."""
    later(monkeypatch)
    index = ci.open_corpus_index(agent, agent / "memory")
    store = MemoryStore(agent / "memory", index)
    entries = store.scan().entries
    index.content_generation(entries)
    written: dict[str, tuple[Entry, Fingerprint, Entry]] = {}
    for number, stored in enumerate(entries):
        entry = decayed(stored.entry)
        base = stored.entry
        if number == 1:  # (said to be made from another entry than the record's: the digest is not taken on trust)
            entry = entry.evolve(content=entry.content + " Since 2026.")
            base = entry
        written[str(stored.path)] = (entry, store.rewrite(stored, entry), base)
    index.keep_own(written)
    index.forget(written)
    index.save()
    seen, index = next_scan(agent)
    generation = index.content_generation(seen)
    assert (index.own.taken, index.digests_kept, index.digests_made) == (3, 2, 1)
    assert generation == content_generation(MemoryStore(agent / "memory").scan().entries, {}, set())[0]


def test_a_file_the_agent_rewrote_since_is_parsed(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Same size, in place, in the same second: other bytes, so the parse of them, never the kept entry."""
    later(monkeypatch)
    written = decay_all(agent)
    name = next(iter(written))
    path = Path(name)
    text = path.read_text(encoding="utf-8")
    edited = text.replace("Portland", "Portlanx")
    assert edited != text and len(edited) == len(text)
    before = os.stat(path)
    path.write_text(edited, encoding="utf-8")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    seen, index = next_scan(agent)
    assert (index.reads, index.own.taken) == (3, 2)
    assert "Portlanx" in next(s.entry.content for s in seen if str(s.path) == name)
    same_scan(seen, agent)


def _damaged(path: Path, how: str, root: str) -> None:
    data = path.read_bytes()
    if how == "truncated":
        path.write_bytes(data[: len(data) // 2])
    elif how == "flipped":
        path.write_bytes(data[:-10] + bytes([data[-10] ^ 0x01]) + data[-9:])
    elif how == "another root":
        kept = pickle.loads(data.split(b"\n", 2)[2])  # (test only: the product loads it restricted)
        payload = pickle.dumps((kept[0], root + "-elsewhere", kept[2]))
        assert write_checked(path, FORMAT, payload, "test", "")
    elif how == "another version":
        kept = pickle.loads(data.split(b"\n", 2)[2])
        assert write_checked(path, FORMAT, pickle.dumps(("0" * 64, kept[1], kept[2])), "test", "")
    elif how == "planted":
        assert write_checked(path, FORMAT, pickle.dumps((os.system, ("true",))), "test", "")
    else:
        path.write_bytes(b"not an own-writes file at all\n")


@pytest.mark.parametrize("how", ["truncated", "flipped", "another root", "another version", "planted", "garbage"])
def test_a_damaged_file_costs_a_parse_never_a_wrong_entry(
    agent: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    later(monkeypatch)
    decay_all(agent)
    own = ci.index_path(agent).with_name("corpus-index.own")
    assert own.is_file()
    _damaged(own, how, str(agent / "memory"))
    with caplog.at_level(logging.WARNING, logger="dreamkeeper.memory.own_writes"):
        seen, index = next_scan(agent)
    assert index.own.taken == 0 and index.reads == 3
    assert any("own writes" in r.getMessage() and "parses every file" in r.getMessage() for r in caplog.records)
    same_scan(seen, agent)


def test_only_the_last_cycles_writes_are_kept(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cycle that wrote nothing leaves nothing for the next scan to look up (the file emptied, not left stale)."""
    later(monkeypatch)
    decay_all(agent)
    index = ci.open_corpus_index(agent, agent / "memory")
    MemoryStore(agent / "memory", index).scan()
    assert index.own.taken == 3
    index.keep_own({})
    index.save()
    again = ci.open_corpus_index(agent, agent / "memory")
    again.load()
    assert again.own.known(str(next(iter(again._old)))) is None and not again.own._kept
