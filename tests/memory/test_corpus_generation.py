"""The corpus index's generation (memory/corpus_index.py, ``CorpusIndex.generation``): the identity of a corpus the
loaded index vouches for whole. A stage may keep an answer under it (consolidation/quiet.py, cluster_cache.py), so
it must change, or be None, whenever the files may differ from what the index says: a file edited, added, removed,
racy, a damaged index or log, the index's own save, the cycle's own writes (``forget``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dreamkeeper.memory import MemoryStore, ScanResult
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.memory.corpus_index import CorpusIndex, index_path
from tests.memory.conftest import rockbot_entry, write_raw
from tests.memory.test_corpus_index import later


def cycle(agent: Path) -> tuple[ScanResult, CorpusIndex]:
    """One cycle's worth: a store with the agent's index, scanned, the index saved."""
    index = ci.open_corpus_index(agent, agent / "memory")
    result = MemoryStore(agent / "memory", index).scan()
    index.save()
    return result, index


def settled(agent: Path) -> str:
    """The generation of the corpus as it stands, once the index holds all of it."""
    cycle(agent)
    result, index = cycle(agent)
    assert result.generation is not None and index.generation == result.generation
    return result.generation


def test_an_unchanged_corpus_keeps_its_generation(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    later(monkeypatch)
    first, _ = cycle(agent)
    assert first.generation is None  # no index yet: every file read, nothing vouched for
    generation = settled(agent)
    again, index = cycle(agent)
    assert again.generation == generation and (index.hits, index.reads) == (3, 0)


@pytest.mark.parametrize("change", ["edited", "added", "removed", "renamed"])
def test_a_changed_corpus_has_none_then_another(agent: Path, monkeypatch: pytest.MonkeyPatch, change: str) -> None:
    later(monkeypatch)
    generation = settled(agent)
    root = agent / "memory"
    path = root / "people" / "family" / "entry1.json"
    if change == "edited":
        path.write_text(path.read_text(encoding="utf-8").replace("Portland", "Portlant"), encoding="utf-8")
    elif change == "added":
        write_raw(root, rockbot_entry("entry9", content="A new fact."))
    elif change == "removed":
        path.unlink()
    else:
        os.rename(path, path.with_name("entry7.json"))
    changed, _ = cycle(agent)
    assert changed.generation is None
    after = settled(agent)
    assert after != generation


def test_a_second_scan_after_a_change_stays_unvouched(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Within one process the second scan compares with the first's records: all match, yet the corpus is not the
    one the loaded index described. Not exact once, not exact until the next load."""
    later(monkeypatch)
    settled(agent)
    path = agent / "memory" / "people" / "family" / "entry0.json"
    path.write_text(path.read_text(encoding="utf-8").replace("Portland", "Portlant"), encoding="utf-8")
    index = ci.open_corpus_index(agent, agent / "memory")
    store = MemoryStore(agent / "memory", index)
    assert store.scan().generation is None
    second = store.scan()
    assert (index.hits, index.reads) == (3, 0)
    assert second.generation is None and index.generation is None


def test_a_racy_file_is_never_vouched_for(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = agent / "memory" / "people" / "family" / "entry0.json"
    monkeypatch.setattr(ci, "_now_ns", lambda: os.stat(path).st_mtime_ns)
    for _ in range(3):
        result, _ = cycle(agent)
        assert result.generation is None


def test_a_malformed_file_is_named_in_the_generation(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A malformed file is read by every scan (never cached): the corpus is still vouched for, with the malformed
    file's stat in its identity, so rewriting it (still malformed) gives another generation."""
    later(monkeypatch)
    bad = agent / "memory" / "broken.json"
    bad.write_text("{not json", encoding="utf-8")
    generation = settled(agent)
    again, index = cycle(agent)
    assert again.generation == generation and index.reads == 1
    bad.write_text("{still not json", encoding="utf-8")
    rewritten, _ = cycle(agent)
    assert rewritten.generation is not None and rewritten.generation != generation


def test_the_cycles_own_writes_end_the_generation(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``forget`` (the files the cycle wrote): not vouched for from then on; the next cycle reads them."""
    later(monkeypatch)
    settled(agent)
    index = ci.open_corpus_index(agent, agent / "memory")
    result = MemoryStore(agent / "memory", index).scan()
    assert index.generation is not None
    index.forget([str(result.entries[0].path)])
    assert index.generation is None
    index.save()
    again, index = cycle(agent)
    assert again.generation is None and index.reads == 1
    assert settled(agent) is not None


def test_a_save_that_writes_ends_the_generation(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index learnt something (the screen's verdicts) and wrote it: the next load has another identity, so the
    one this process saw is no longer vouched for; one with nothing to write keeps it."""
    later(monkeypatch)
    generation = settled(agent)
    index = ci.open_corpus_index(agent, agent / "memory")
    result = MemoryStore(agent / "memory", index).scan()
    index.save()
    assert index.generation == generation  # nothing to write: the file is the one loaded
    index.note_fit(result.entries)
    index.save()
    assert index.generation is None
    assert settled(agent) not in (None, generation)


@pytest.mark.parametrize("damage", ["index", "log"])
def test_a_damaged_index_or_log_vouches_for_nothing(agent: Path, monkeypatch: pytest.MonkeyPatch, damage: str) -> None:
    later(monkeypatch)
    write_raw(agent / "memory", rockbot_entry("entry5", content="Fact number 5 about Portland."))
    settled(agent)
    path = agent / "memory" / "people" / "family" / "entry5.json"
    path.write_text(path.read_text(encoding="utf-8").replace("Portland", "Portlant"), encoding="utf-8")
    cycle(agent)  # the change appended to the log
    generation = settled(agent)
    target = index_path(agent) if damage == "index" else ci.CorpusIndex(index_path(agent), agent).log_path
    data = target.read_bytes()
    assert data
    middle = len(data) // 2
    target.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    damaged, index = cycle(agent)
    assert damaged.generation is None  # a damaged index: not loaded; a damaged frame: entry5's record is stale
    assert index.reads == (4 if damage == "index" else 1)
    assert settled(agent) not in (None, generation)
