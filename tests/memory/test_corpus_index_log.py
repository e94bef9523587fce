"""The corpus index's log (memory/corpus_index.py): a cycle that changed a few files appends their records instead
of rewriting the whole index; a torn, damaged, superseded or planted log costs reads, never a wrong parse."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dreamkeeper.memory import MemoryStore, StoredEntry
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.memory.corpus_index import CorpusIndex, index_path
from tests.memory.conftest import rockbot_entry, write_raw

LATER_NS = 60 * 1_000_000_000
N = 12


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "agent" / "memory"
    root.mkdir(parents=True)
    for i in range(N):
        write_raw(root, rockbot_entry(f"entry{i}", content=f"Fact number {i} about Portland."))
    real = ci.time.time_ns
    monkeypatch.setattr(ci, "_now_ns", lambda: real() + LATER_NS)  # files are a minute old: trusted
    return tmp_path / "agent"


def scan(agent: Path) -> tuple[dict[str, str], CorpusIndex]:
    index = ci.open_corpus_index(agent, agent / "memory")
    result = MemoryStore(agent / "memory", index).scan()
    index.save()
    return {s.id: s.entry.content for s in result.entries}, index


def entry(agent: Path, i: int) -> Path:
    return agent / "memory" / "people" / "family" / f"entry{i}.json"


def edit(agent: Path, i: int, word: str, was: str = "Portland") -> None:
    path = entry(agent, i)
    path.write_text(path.read_text(encoding="utf-8").replace(was, word), encoding="utf-8")


def log_path(agent: Path) -> Path:
    return index_path(agent).with_name("corpus-index.log")


def test_a_few_changes_are_appended_and_read_back(agent: Path) -> None:
    scan(agent)
    base = index_path(agent).read_bytes()
    edit(agent, 3, "Lisbon")
    entry(agent, 5).unlink()
    write_raw(agent / "memory", rockbot_entry("entry99", content="A new fact."))
    seen, index = scan(agent)
    assert index.appended and index_path(agent).read_bytes() == base  # the base is not rewritten
    assert log_path(agent).stat().st_size > 0
    again, index = scan(agent)
    assert again == seen and again["entry3"] == "Fact number 3 about Lisbon." and "entry5" not in again
    assert (index.hits, index.reads) == (N, 0)  # base + log: every file known, nothing read
    assert not index.appended  # nothing changed: nothing written


def test_a_torn_last_frame_costs_only_reads(agent: Path) -> None:
    scan(agent)
    edit(agent, 1, "Lisbon")
    scan(agent)
    edit(agent, 2, "Madrid")
    scan(agent)
    log = log_path(agent)
    data = log.read_bytes()
    log.write_bytes(data[:-7])  # a crash in the middle of the second append
    seen, index = scan(agent)
    assert seen["entry1"] == "Fact number 1 about Lisbon." and seen["entry2"] == "Fact number 2 about Madrid."
    assert index.reads == 1  # the torn frame's file (its base record is stale: its stat no longer matches)
    assert not index.appended and log.stat().st_size == 0  # the next save rewrote the index whole
    _, index = scan(agent)
    assert (index.hits, index.reads) == (N, 0)


@pytest.mark.parametrize("damage", ["flipped", "garbage", "directory"])
def test_a_damaged_log_costs_only_reads(agent: Path, damage: str) -> None:
    scan(agent)
    edit(agent, 1, "Lisbon")
    scan(agent)
    log = log_path(agent)
    if damage == "flipped":
        data = log.read_bytes()
        middle = len(data) // 2
        log.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    elif damage == "garbage":
        log.write_bytes(os.urandom(512))
    else:
        log.unlink()
        log.mkdir()
    seen, index = scan(agent)
    assert seen["entry1"] == "Fact number 1 about Lisbon."
    assert index.reads == 1 and index.hits == N - 1


def test_frames_of_an_earlier_base_are_ignored(agent: Path) -> None:
    scan(agent)
    edit(agent, 1, "Lisbon")
    scan(agent)
    old_log = log_path(agent).read_bytes()
    edit(agent, 1, "Berlin", was="Lisbon")
    for i in range(2, N):  # most files change: the index is rewritten whole (a new base)
        edit(agent, i, "Oslo")
    scan(agent)
    assert log_path(agent).stat().st_size == 0
    log_path(agent).write_bytes(old_log)  # the earlier base's frame: entry1's record as it was (about Lisbon)
    seen, index = scan(agent)
    assert seen["entry1"] == "Fact number 1 about Berlin."
    assert (index.hits, index.reads) == (N, 0)  # applied, that frame's stale record would have cost a read


def test_a_hard_link_planted_as_the_log_is_never_written(agent: Path) -> None:
    scan(agent)
    victim = entry(agent, 7)
    before = victim.read_bytes()
    os.link(victim, log_path(agent))
    edit(agent, 1, "Lisbon")
    scan(agent)  # appending is refused: the index is rewritten whole instead, the log left as it is
    edit(agent, 2, "Madrid")
    scan(agent)
    assert victim.read_bytes() == before and log_path(agent).read_bytes() == before
    again, index = scan(agent)
    assert again["entry1"] == "Fact number 1 about Lisbon." and again["entry2"] == "Fact number 2 about Madrid."
    assert index.reads == 0


def test_a_symlink_planted_as_the_log_is_never_followed(agent: Path, tmp_path: Path) -> None:
    scan(agent)
    target = tmp_path / "elsewhere.txt"
    target.write_bytes(b"keep me")
    log_path(agent).symlink_to(target)
    edit(agent, 1, "Lisbon")
    scan(agent)
    edit(agent, 2, "Madrid")
    scan(agent)
    assert target.read_bytes() == b"keep me"
    again, index = scan(agent)
    assert again["entry2"] == "Fact number 2 about Madrid." and index.reads == 0


def test_the_log_is_folded_into_the_base_once_it_grows(agent: Path) -> None:
    scan(agent)
    base = index_path(agent).read_bytes()
    for i, word in enumerate(["Lisbon", "Madrid", "Rome", "Paris", "Vienna"]):
        edit(agent, i, word)
        _, index = scan(agent)
        if index.appended:
            continue
        # More than a third of the records in the log: the index was rewritten, the log emptied.
        assert i >= N // 3 and index_path(agent).read_bytes() != base and log_path(agent).stat().st_size == 0
        break
    else:
        pytest.fail("the log was never folded into the base")
    seen, index = scan(agent)
    assert seen["entry3"] == "Fact number 3 about Paris." and (index.hits, index.reads) == (N, 0)


def test_records_of_files_written_after_the_scan_are_not_logged_again(agent: Path) -> None:
    # A steady cycle: its scan reads the files the last cycle's decay rewrote, then its own decay rewrites the same
    # ones. Their new records are stale before the save: forgotten, they were appended to the log every cycle
    # (and the whole index rewritten every few cycles, once the log passed a third of the records).
    scan(agent)
    written = [str(entry(agent, i)) for i in (2, 7)]
    for cycle, word in enumerate(("Lisbon", "Oslo", "Quito")):
        index = ci.open_corpus_index(agent, agent / "memory")
        seen = {s.id: s.entry.content for s in MemoryStore(agent / "memory", index).scan().entries}
        assert index.reads == (0 if cycle == 0 else 2)  # the files written last time are read, nothing else
        before = log_path(agent).stat().st_size if log_path(agent).exists() else 0
        assert "Portland" in seen["entry2"] or cycle
        for i in (2, 7):
            edit(agent, i, word, was=("Portland", "Lisbon", "Oslo")[cycle])
        index.forget(written)
        index.save()
        after = log_path(agent).stat().st_size if log_path(agent).exists() else 0
        if cycle == 0:
            assert after > before  # their records were on disk: removed once
        else:
            assert after == before and not index.appended  # nothing to say: nothing written
    index = ci.open_corpus_index(agent, agent / "memory")
    seen = {s.id: s.entry.content for s in MemoryStore(agent / "memory", index).scan().entries}
    assert index.reads == 2 and seen["entry2"] == "Fact number 2 about Quito." == seen["entry7"].replace("7", "2")
    assert all(seen[f"entry{i}"] == f"Fact number {i} about Portland." for i in range(N) if i not in (2, 7))


def test_a_forgotten_record_no_longer_vouches_for_its_screen_verdict(agent: Path) -> None:
    scan(agent)
    index = ci.open_corpus_index(agent, agent / "memory")
    entries = MemoryStore(agent / "memory", index).scan().entries
    index.note_fit(entries)
    target = next(s for s in entries if s.id == "entry4")
    assert index.known_fit(target)
    index.forget([str(target.path)])
    assert not index.known_fit(target) and all(index.known_fit(s) for s in entries if s is not target)


def test_a_screen_verdict_is_the_records_own_and_vouches_only_for_the_entry_it_holds(agent: Path) -> None:
    scan(agent)
    index = ci.open_corpus_index(agent, agent / "memory")
    store = MemoryStore(agent / "memory", index)
    entries = store.scan().entries
    assert not any(index.known_fit(s) for s in entries)  # never screened yet
    index.note_fit(entries)
    index.save()
    edit(agent, 6, "Lagos")
    # A later cycle: its index loads the verdicts with the records; the changed file is read and not vouched for.
    index = ci.open_corpus_index(agent, agent / "memory")
    store = MemoryStore(agent / "memory", index)
    later = {s.id: s for s in store.scan().entries}
    assert index.reads == 1 and not index.known_fit(later["entry6"])
    assert all(index.known_fit(s) for i, s in later.items() if i != "entry6")
    # The same file parsed again is another entry object: the verdict was about the record's, not this one.
    reparsed = store.read_file(later["entry3"].path)
    assert isinstance(reparsed, StoredEntry) and reparsed.entry == later["entry3"].entry
    assert not index.known_fit(reparsed) and index.known_fit(later["entry3"])
    index.note_fit([reparsed])  # not the record's entry: nothing learnt
    assert not index.known_fit(reparsed)
    index.note_fit([later["entry6"]])
    assert index.known_fit(later["entry6"])


def test_changes_over_several_scans_and_saves_of_one_process_are_all_saved(agent: Path) -> None:
    """A save looks only at the paths a scan gave a record read from its file since the last save (``_fresh``), and
    applies its changes to the records it knows are on disk in place: every change of every scan in between is still
    saved, each removal too, and a second save of the same process appends from what the first one wrote."""
    for i in range(100, 140):  # enough records for a few changes to be appended, not rewritten whole
        write_raw(agent / "memory", rockbot_entry(f"entry{i}", content=f"Fact number {i} about Portland."))
    total = N + 40
    scan(agent)

    def look() -> tuple[dict[str, str], CorpusIndex]:  # a scan of another process, which saves nothing
        index = ci.open_corpus_index(agent, agent / "memory")
        return {s.id: s.entry.content for s in MemoryStore(agent / "memory", index).scan().entries}, index

    index = ci.open_corpus_index(agent, agent / "memory")
    store = MemoryStore(agent / "memory", index)
    store.scan()
    edit(agent, 1, "Lisbon")
    store.scan()  # entry1 read here (a fresh record)...
    edit(agent, 2, "Madrid")
    entry(agent, 3).unlink()
    write_raw(agent / "memory", rockbot_entry("entry50", content="A new fact about Quito."))
    store.scan()  # ...and hit here: still to be saved; entry2 read, entry3 gone, entry50 new
    index.forget([str(entry(agent, 4))])  # a record dropped: removed from disk
    index.save()
    assert index.appended
    seen, other = look()
    assert (other.hits, other.reads) == (total - 1, 1)  # every record right but entry4's, forgotten: read again
    assert seen["entry1"].endswith("Lisbon.") and seen["entry2"].endswith("Madrid.") and "entry3" not in seen
    assert seen["entry50"] == "A new fact about Quito."
    # The same process saves again after more changes: appended from what it wrote, not from what it loaded.
    edit(agent, 5, "Oslo")
    entry(agent, 6).unlink()
    store.scan()
    index.save()
    assert index.appended
    seen, other = look()
    assert (other.hits, other.reads) == (total - 1, 0)
    assert seen["entry5"].endswith("Oslo.") and "entry6" not in seen and seen["entry1"].endswith("Lisbon.")
