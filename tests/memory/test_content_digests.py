"""Content digests (memory/content_digests.py): a generation of a list of entries that decay's own rewrites
(importanceScore and updatedAt) do not change and every other change does, taken from a kept digest only for the
very bytes it was made from, and never trusted from a damaged file."""

from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.memory import MemoryStore, StoredEntry
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.memory.content_digests import decay_only, entry_digest
from dreamkeeper.memory.corpus_index import CorpusIndex
from dreamkeeper.memory.entry import Entry
from tests.memory.conftest import rockbot_entry, write_raw
from tests.memory.test_corpus_index import later


def cycle(agent: Path) -> tuple[list[StoredEntry], CorpusIndex, str]:
    """One cycle's worth: scanned with the agent's index, the generation of every parsed file asked, saved."""
    index = ci.open_corpus_index(agent, agent / "memory")
    entries = MemoryStore(agent / "memory", index).scan().entries
    generation = index.content_generation(entries)
    index.save()
    return entries, index, generation


def rewrite(agent: Path, entry_id: str, **changes: Any) -> None:
    """The file of ``entry_id`` written again with ``changes`` (camelCase keys), as the agent or a decay would."""
    path = next((agent / "memory").rglob(f"{entry_id}.json"))
    obj = json.loads(path.read_text(encoding="utf-8"))
    obj.update(changes)
    path.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    os.utime(path, ns=(0, 1_000_000_000))  # old at once (the racy rule waived); its ctime still moved


def test_a_digest_ignores_decays_two_values_and_sees_every_other_field() -> None:
    entry = Entry.from_json_obj(rockbot_entry("e1"))
    base = entry_digest(entry)
    later_time = entry.created_at + timedelta(days=400)
    assert entry_digest(entry.evolve(importance_score=0.01, updated_at=later_time)) == base
    changed = {
        "content": "Rose lives in Seattle now.",
        "category": "people/friends",
        "tags": ["friends"],
        "created_at": later_time,
        "last_seen_at": later_time,
        "reinforcement_count": entry.reinforcement_count + 1,
        "metadata": {"consolidationReviewedHash": "0000"},
        "superseded_by": "e9",
        "archived_at": later_time,
        "archive_reason": "merged",
    }
    assert set(changed) | {"id", "importance_score", "updated_at"} == set(entry.__dict__)  # every field tried
    for name, value in changed.items():
        assert entry_digest(entry.evolve(**{name: value})) != base, name


def test_a_digest_is_of_values_not_of_objects() -> None:
    """One datetime object for two fields or two equal ones: the same digest (a pickle would differ)."""
    entry = Entry.from_json_obj(rockbot_entry("e1"))
    shared = entry.evolve(last_seen_at=entry.created_at)
    copied = entry.evolve(last_seen_at=entry.created_at + timedelta(0))
    twin = entry.created_at.replace(microsecond=entry.created_at.microsecond)
    assert twin is not entry.created_at
    assert entry_digest(shared) == entry_digest(copied) == entry_digest(entry.evolve(last_seen_at=twin))


def test_decays_rewrite_keeps_the_generation_and_an_edit_changes_it(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    later(monkeypatch)
    _, _, first = cycle(agent)
    _, index, again = cycle(agent)
    assert again == first and index.digests_made == 0 and index.digests_kept == 3  # all from the kept digests
    rewrite(agent, "entry1", importanceScore=0.125, updatedAt="2026-11-30T00:00:00.0000000+00:00")
    _, index, decayed = cycle(agent)
    assert decayed == first and index.reads == 1 and index.digests_made == 1
    rewrite(agent, "entry1", content="Fact number 1 about Seattle.")
    _, _, edited = cycle(agent)
    assert edited != first
    rewrite(agent, "entry1", content="Fact number 1 about Portland.")
    _, _, back = cycle(agent)
    assert back == first  # a function of the content, not of its history


@pytest.mark.parametrize("change", ["added", "removed", "renamed", "reordered", "elsewhere"])
def test_a_list_with_other_entries_has_another_generation(
    agent: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    later(monkeypatch)
    entries, index, first = cycle(agent)
    if change == "reordered":
        assert index.content_generation(list(reversed(entries))) != first
        return
    if change == "elsewhere":  # the same entries at other paths
        moved = [StoredEntry(s.entry, s.path.with_name("x" + s.path.name), s.fingerprint) for s in entries]
        assert index.content_generation(moved) != first
        return
    root = agent / "memory"
    if change == "added":
        write_raw(root, rockbot_entry("entry9", content="Fact number 9 about Portland."))
    elif change == "removed":
        next(root.rglob("entry2.json")).unlink()
    else:
        path = next(root.rglob("entry2.json"))
        path.rename(path.parent.parent / path.name)  # same file elsewhere: its category says another folder
    assert cycle(agent)[2] != first


def test_a_stage_changed_copy_is_digested_from_its_fields(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry a stage changed in memory (decay's evolve) keeps its record's path and fingerprint: digested anew,
    never taken from the record's digest (whatever it changed)."""
    later(monkeypatch)
    entries, index, first = cycle(agent)
    decayed = [StoredEntry(s.entry.evolve(importance_score=0.01), s.path, s.fingerprint) for s in entries]
    assert index.content_generation(decayed) == first
    made = index.digests_made
    edited = [StoredEntry(s.entry.evolve(content=s.entry.content + "!"), s.path, s.fingerprint) for s in entries]
    assert index.content_generation(edited) != first
    assert index.digests_made == made + len(entries)


def test_a_digest_is_kept_with_its_record_and_made_again_for_new_bytes(
    agent: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records saved before any cycle asked (a scan alone) get their digests when one does, and keep them; a file
    changed behind the index is read again, and its new parse digested, never given the old record's digest."""
    later(monkeypatch)
    index = ci.open_corpus_index(agent, agent / "memory")
    MemoryStore(agent / "memory", index).scan()
    index.save()  # records without digests
    _, index, first = cycle(agent)
    assert index.digests_made == 3 and index.digests_kept == 0
    _, index, again = cycle(agent)
    assert again == first and index.digests_made == 0 and index.digests_kept == 3
    rewrite(agent, "entry0", metadata={"note": "added by hand"})
    _, index, edited = cycle(agent)
    assert edited != first and index.digests_made == 1 and index.digests_kept == 2


def test_no_index_no_kept_digests(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a record (a racy file, no usable index) every entry is digested from its fields: the same value."""
    later(monkeypatch)
    _, _, first = cycle(agent)
    index = ci.open_corpus_index(agent, agent / "memory")
    entries = MemoryStore(agent / "memory").scan().entries  # scanned without the index: no record is theirs
    assert index.content_generation(entries) == first and index.digests_kept == 0


def test_a_list_decay_made_keeps_the_generation_without_a_digest(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``derived``: a list that is another with some entries replaced by decay's copies (``Entry.evolve`` of
    importance and updatedAt) has that list's generation, the very value a digest of every entry gives; any other
    difference, and it is None (the caller digests)."""
    later(monkeypatch)
    entries, index, first = cycle(agent)

    def decayed(stored: StoredEntry, **changes: Any) -> StoredEntry:
        return StoredEntry(stored.entry.evolve(importance_score=0.01, **changes), stored.path, stored.fingerprint)

    made = [decayed(entries[0]), entries[1], decayed(entries[2])]
    assert index.derived_generation(made, entries, first) == first == index.content_generation(made)
    assert index.derived_generation(entries, entries, "G") == "G"
    others = {
        "edited": [decayed(entries[0], content="Fact number 0 about Seattle."), *entries[1:]],
        "reordered": [entries[1], entries[0], entries[2]],
        "shorter": entries[:2],
        "moved": [StoredEntry(entries[0].entry, entries[0].path.with_name("x.json"), entries[0].fingerprint),
                  *entries[1:]],
    }  # fmt: skip
    for name, other in others.items():
        assert index.derived_generation(other, entries, first) is None, name
        assert index.content_generation(other) != first, name


def test_decay_only_is_strict_about_what_it_cannot_see_in_a_digest() -> None:
    entry = Entry.from_json_obj(rockbot_entry("e1", metadata={"a": "1", "b": "2"}))
    assert decay_only(entry, entry.evolve(importance_score=0.2))  # tags and metadata copied, equal
    assert decay_only(entry, entry.evolve(updated_at=entry.created_at + timedelta(days=1)))
    assert not decay_only(entry, entry.evolve(metadata={"b": "2", "a": "1"}))  # equal, but in another order
    assert not decay_only(entry, entry.evolve(tags=["other"]))
    assert not decay_only(entry, entry.evolve(reinforcement_count=entry.reinforcement_count + 1))
    twin = entry.evolve(importance_score=0.2)
    twin.__dict__["last_seen_at"] = entry.last_seen_at.replace()  # an equal value, another object: not vouched
    assert not decay_only(entry, twin)
    assert entry_digest(twin) == entry_digest(entry)  # (a digest would find them the same: None is only "unsure")
