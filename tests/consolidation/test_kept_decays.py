"""The corpus index's kept decays (memory/corpus_index_own.py, issue 27): a steady cycle decays the same files every
time, and the next scan takes the entry each decay wrote instead of parsing the file, once it found the very bytes
written (their sha256 and size). Anything else is parsed: an agent's write after the decay (even one that keeps the
size and the mtime), a damaged, truncated, planted or foreign kept file, a record whose blob cannot be decoded. A
kept entry stands for a parse of its file: the same values, and the same bytes when it is written again."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from dreamkeeper.consolidation import cluster_cache, quiet
from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import Entry, MemoryStore
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.memory import corpus_index_own as own
from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.memory.content_digests import entry_digest
from dreamkeeper.memory.corpus_index_records import Record
from dreamkeeper.proposers import OfflineProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus
from tests.consolidation.test_steady_index import DAY_NS, TEXTS

# Old enough to decay on every cycle (past the grace period), and entries that never decay (two days old).
OLD = [Seed(f"old{i}", text, importance=0.6, age_days=90) for i, text in enumerate(TEXTS)]
NEW = [Seed(f"new{i}", f"{text} (noted {i})", category="people", age_days=2) for i, text in enumerate(TEXTS)]


class Agent:
    """An agent directory whose cycles run an hour apart, each cache's clock a day apart (their racy rules)."""

    def __init__(self, path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.path = path
        self.at = 0
        for module in (ci, cluster_cache, quiet):
            real = module.time.time_ns  # type: ignore[attr-defined]
            monkeypatch.setattr(module, "_now_ns", lambda real=real: real() + (self.at + 1) * DAY_NS)

    @property
    def memory(self) -> Path:
        return self.path / "memory"

    def cycle(self) -> CycleOutcome:
        settings = CycleSettings(min_interval_hours=0)
        options = CycleOptions(agent_dir=self.path, settings=settings, now=BASE_TIME + timedelta(hours=self.at))
        outcome = asyncio.run(run_cycle(options, OfflineProposer()))
        assert outcome.report.result == "completed"
        self.at += 1
        return outcome

    def kept(self) -> dict[str, Record]:
        return own.load_own(own.own_path(ci.index_path(self.path)), str(self.memory))

    def scan(self) -> tuple[dict[str, Entry], ci.CorpusIndex]:
        index = ci.open_corpus_index(self.path, self.memory)
        entries = {s.id: s.entry for s in MemoryStore(self.memory, index).scan().entries}
        return entries, index


def parsed(agent: Agent) -> dict[str, Entry]:
    return {s.id: s.entry for s in MemoryStore(agent.memory).scan().entries}


@pytest.fixture
def agent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Agent:
    agent = Agent(tmp_path / "agent", monkeypatch)
    write_corpus(agent.path, OLD + NEW)
    for _ in range(3):
        agent.cycle()
    return agent


def test_the_next_scan_takes_each_kept_decay_instead_of_parsing_its_file(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept = agent.kept()
    assert sorted(str(r.view_id) for r in kept.values()) == sorted(s.id for s in OLD)
    parses: list[bytes] = []
    real = Entry.from_json_bytes.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Entry], data: bytes) -> Entry:
        parses.append(data)
        return real(cls, data)  # type: ignore[no-any-return]

    monkeypatch.setattr(Entry, "from_json_bytes", classmethod(counted))
    entries, index = agent.scan()
    assert index.own_taken == index.reads == len(OLD) and index.hits == len(NEW)
    assert parses == []  # not one file parsed
    monkeypatch.undo()
    assert entries == parsed(agent)


def test_a_kept_entry_stands_for_a_parse_of_its_file(agent: Agent) -> None:
    """The same values as the file's parse, its JSON the file's very bytes, its content digest the parse's, and a
    later decay of either writes the same bytes (the kept entry remembers the file it was decayed from, the parse the
    file it was read from)."""
    kept = agent.kept()
    later = datetime(2031, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
    for name, record in kept.items():
        data = Path(name).read_bytes()
        assert hashlib.sha256(data).hexdigest() == record.fingerprint.sha256
        parse = Entry.from_json_bytes(data)
        entry = record.entry
        assert entry == parse and entry.model_dump() == parse.model_dump()
        assert entry.to_json_bytes() == data
        assert record.content == entry_digest(parse)  # the digest carried from the record decayed is the file's
        for importance in (entry.importance_score / 2, 0.0, entry.importance_score):
            again, parse_again = (e.evolve(importance_score=importance, updated_at=later) for e in (entry, parse))
            assert again.to_json_bytes() == parse_again.to_json_bytes()


def test_an_agent_write_after_the_decay_is_parsed_even_with_its_size_and_mtime(agent: Agent) -> None:
    kept = agent.kept()
    name = next(iter(kept))
    path = Path(name)
    st = os.stat(path)
    text = path.read_text(encoding="utf-8")
    content = str(kept[name].view_content)
    edited = content[:-1] + ("?" if content[-1] != "?" else "!")  # one character: the same size
    path.write_text(text.replace(content, edited), encoding="utf-8")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the mtime put back
    assert os.stat(path).st_size == st.st_size
    entries, index = agent.scan()
    assert index.own_taken == len(kept) - 1 and index.reads == len(kept)
    assert entries[str(kept[name].view_id)].content == edited
    assert entries == parsed(agent)
    # The cycle decays the agent's version, not the kept one.
    agent.cycle()
    assert parsed(agent)[str(kept[name].view_id)].content == edited


def _garbage(path: Path) -> None:
    path.write_bytes(b"not a kept file")


def _truncated(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _flipped(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-20] ^= 0x01
    path.write_bytes(bytes(data))


def _the_index(path: Path) -> None:
    shutil.copyfile(path.with_name(ci.INDEX_NAME), path)  # a whole, valid index file: not a kept file


def _symlink(path: Path) -> None:
    target = path.with_name("elsewhere")
    path.rename(target)
    path.symlink_to(target)


def _empty(path: Path) -> None:
    path.write_bytes(b"")


@pytest.mark.parametrize("damage", [_garbage, _truncated, _flipped, _the_index, _symlink, _empty])
def test_a_damaged_kept_file_costs_the_reads_it_saved_and_nothing_else(
    agent: Agent, damage: object, caplog: pytest.LogCaptureFixture
) -> None:
    path = own.own_path(ci.index_path(agent.path))
    assert agent.kept()
    damage(path)  # type: ignore[operator]
    with caplog.at_level(logging.INFO, logger="dreamkeeper.memory.corpus_index_own"):
        entries, index = agent.scan()
    assert index.own_taken == 0 and index.reads == len(OLD)
    assert entries == parsed(agent)
    assert "kept decays" in caplog.text
    outcome = agent.cycle()  # and the cycle after it keeps its own decays again
    assert outcome.report.decayed == len(OLD) and len(agent.kept()) == len(OLD)


def test_kept_decays_of_another_root_are_not_used(
    agent: Agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    copy = Agent(tmp_path / "copy", monkeypatch)
    copy.at = agent.at
    shutil.copytree(agent.path, copy.path, symlinks=True)
    entries, index = copy.scan()
    assert index.own_taken == 0 and entries == parsed(copy)


def test_a_kept_record_that_cannot_be_decoded_is_read_from_its_file(
    agent: Agent, caplog: pytest.LogCaptureFixture
) -> None:
    """A planted kept file (its checksum made right) whose record's blob gives no entry: the file is read."""
    path = own.own_path(ci.index_path(agent.path))
    kept = agent.kept()
    name = next(iter(kept))
    kept[name].blob = b"\x80\x05K\x01."  # a pickle of 1: no entry's values
    own.save_own(path, str(agent.memory), kept)
    scanned = MemoryStore(agent.memory, ci.open_corpus_index(agent.path, agent.memory)).scan()
    with caplog.at_level(logging.WARNING):
        entries = {s.id: s.entry for s in scanned.entries}
    assert entries == parsed(agent)
    assert "could not be decoded" in caplog.text


def test_more_decays_than_the_cap_keep_none(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cold start decays the whole corpus: nothing is kept (the next scan parses those files, as before)."""
    monkeypatch.setattr(ci, "OWN_MIN", 2)  # a quarter of 12 entries is 3: fewer than the 6 decays
    agent.cycle()
    assert agent.kept() == {}
    entries, index = agent.scan()
    assert index.own_taken == 0 and index.reads == len(OLD) and entries == parsed(agent)


def test_a_kept_file_no_longer_decayed_becomes_an_ordinary_record(agent: Agent) -> None:
    """Taken once its bytes are checked, and saved in the index with its stat (trusted a day later): the scan after
    that takes it by its stat alone, as any unchanged file."""
    entries, index = agent.scan()
    assert index.own_taken == len(OLD)
    index.save()  # no cycle: the kept file is left as it is, the index learns the files' records
    again, index = agent.scan()
    assert index.reads == 0 and index.hits == len(OLD) + len(NEW) and again == entries == parsed(agent)


def test_a_kept_decay_keeps_its_screen_verdict_and_the_next_cycle_screens_none_but_what_changed(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dreamkeeper.consolidation import quarantine

    kept = agent.kept()
    assert all(record.fit is True for record in kept.values())
    screened: list[str] = []
    real = quarantine.Screen.unfit

    def counted(self: quarantine.Screen, stored: object) -> str | None:
        screened.append(stored.id)  # type: ignore[attr-defined]
        return real(self, stored)  # type: ignore[arg-type]

    monkeypatch.setattr(quarantine.Screen, "unfit", counted)
    agent.cycle()
    assert screened == []
    name = next(iter(agent.kept()))  # the agent rewrites one: that one is screened again
    path = Path(name)
    path.write_text(path.read_text(encoding="utf-8").replace('"content": "', '"content": "Edited: '), encoding="utf-8")
    agent.cycle()
    assert screened == [str(agent.kept()[name].view_id)]


def test_a_decay_whose_values_the_screen_would_refuse_is_kept_unscreened() -> None:
    """``decay_keeps_fit`` checks the two values a decay changes as the screen does; a kept decay that fails it (an
    updatedAt beyond RockBot's offsets, an importance beyond its float) carries no verdict: the next cycle screens it
    (and quarantines it)."""
    from datetime import timezone

    from dreamkeeper.consolidation.quarantine import decay_keeps_fit
    from dreamkeeper.memory.corpus_index_own import kept_records
    from tests.memory.conftest import rockbot_entry

    entry = Entry.from_json_obj(rockbot_entry("e1", content="Allen Conway works at Xebia."))
    now = datetime(2026, 12, 7, 17, 0, tzinfo=UTC)
    fine = entry.evolve(importance_score=0.25, updated_at=now)
    far = entry.evolve(importance_score=0.25, updated_at=now.astimezone(timezone(timedelta(hours=15))))
    huge = entry.evolve(importance_score=float("inf"), updated_at=now)
    assert decay_keeps_fit(fine) and not decay_keeps_fit(far) and not decay_keeps_fit(huge)
    before = Record((1, 2, 3, 4), entry, Fingerprint("a" * 64, 10, 5), True, content=b"d" * 16)
    written = Fingerprint("b" * 64, 11, 6)
    records = {"/m/e1.json": before}
    for decayed, fit in ((fine, True), (far, None), (huge, None)):
        out = kept_records({"/m/e1.json": (decayed, written, "a" * 64)}, records, 10, decay_keeps_fit)
        assert out["/m/e1.json"].fit is fit and out["/m/e1.json"].content == b"d" * 16
    # Another version decayed than the one the record holds: neither its digest nor its verdict is carried.
    out = kept_records({"/m/e1.json": (fine, written, "c" * 64)}, records, 10, decay_keeps_fit)
    assert out["/m/e1.json"].fit is None and out["/m/e1.json"].content is None
