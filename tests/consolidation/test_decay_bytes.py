"""A decay of a kept decay is written from the bytes its file holds (memory/corpus_index_own.py ``derived_bytes``,
memory/jsontext.py ``with_values``; issue 27): a steady cycle decays the same files every time, and those files hold
the very bytes the last decay wrote, so the new bytes are those with two values replaced, not the whole entry
encoded again. They must be the bytes the whole encoding gives, always; anything the derivation cannot vouch for (an
agent's rewrite, a file that spells the keys its own way, RockBot's 7-digit timestamps) is encoded whole."""

from __future__ import annotations

import re
from typing import Any

import pytest

from dreamkeeper.consolidation.journal import DECAY_FIELDS
from dreamkeeper.consolidation.journal_steps import decay_values, with_decay_values
from dreamkeeper.memory import Entry, MemoryStore, StoredEntry, kept_values
from dreamkeeper.memory import corpus_index as ci
from dreamkeeper.memory.entry import format_timestamp
from dreamkeeper.memory.jsontext import with_values
from tests.consolidation.corpus import BASE_TIME
from tests.consolidation.test_kept_decays import NEW, OLD, Agent, parsed
from tests.consolidation.test_kept_decays import agent as agent  # the fixture: three cycles, kept decays


class Rewrites:
    """Every ``MemoryStore.rewrite`` of a cycle: the entry, and the bytes the caller derived (None: encoded whole)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, Entry, bytes | None]] = []
        real = MemoryStore.rewrite

        def spy(store: MemoryStore, stored: StoredEntry, entry: Entry, **kwargs: Any) -> Any:
            self.calls.append((stored.id, entry, kwargs.get("data")))
            return real(store, stored, entry, **kwargs)

        monkeypatch.setattr(MemoryStore, "rewrite", spy)

    def derived(self) -> set[str]:
        return {entry_id for entry_id, _, data in self.calls if data is not None}

    def whole(self) -> set[str]:
        return {entry_id for entry_id, _, data in self.calls if data is None}


def _files(agent: Agent) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in agent.memory.rglob("*.json")}


def test_a_steady_cycle_writes_every_kept_decay_from_its_bytes_and_they_are_the_whole_encoding(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    rewrites = Rewrites(monkeypatch)
    for _ in range(2):  # twice: the second derives from bytes that were themselves derived
        before = _files(agent)
        rewrites.calls.clear()
        outcome = agent.cycle()
        assert outcome.report.decayed == len(OLD)
        assert rewrites.derived() == {s.id for s in OLD} and rewrites.whole() == set()
        after = _files(agent)
        for entry_id, entry, data in rewrites.calls:
            assert data == entry.to_json_bytes() == after[entry_id]  # the bytes the whole encoding gives
            assert data != before[entry_id]
            assert Entry.from_json_bytes(after[entry_id]).to_json_bytes() == after[entry_id]
    monkeypatch.undo()
    assert {s.id for s in MemoryStore(agent.memory).scan().entries} == {s.id for s in OLD + NEW}


def test_an_agent_rewrite_of_a_decayed_file_is_encoded_whole(agent: Agent, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent rewrites a file the last decay wrote (its own layout: compact, the same values): the next decay of it
    reads the agent's bytes and encodes the entry whole; every other kept decay is still derived."""
    target = OLD[0].id
    path = next(agent.memory.rglob(f"{target}.json"))
    path.write_bytes(re.sub(rb"\n\s*", b"", path.read_bytes()))  # the agent's own layout, one line
    rewrites = Rewrites(monkeypatch)
    agent.cycle()
    assert rewrites.whole() == {target} and rewrites.derived() == {s.id for s in OLD[1:]}
    monkeypatch.undo()
    written = path.read_bytes()
    assert written == Entry.from_json_bytes(written).to_json_bytes() and parsed(agent)[target].importance_score < 0.6


def test_a_file_that_spells_the_decay_keys_its_own_way_keeps_its_spelling(
    agent: Agent, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RockBot reads keys case-insensitively; a file spelling them ``ImportanceScore`` keeps that spelling on every
    decay, so the derivation, which looks for the keys as spelled, never applies: each decay encodes it whole."""
    target = OLD[1].id
    path = next(agent.memory.rglob(f"{target}.json"))
    path.write_bytes(path.read_bytes().replace(b'"importanceScore"', b'"ImportanceScore"'))
    rewrites = Rewrites(monkeypatch)
    for _ in range(2):
        rewrites.calls.clear()
        agent.cycle()
        assert target in rewrites.whole() and target not in rewrites.derived()
        written = path.read_bytes()
        assert b'"ImportanceScore"' in written and b'"importanceScore"' not in written
        assert written == Entry.from_json_bytes(written).to_json_bytes()


def test_rockbots_seven_digit_stamps_and_whole_number_importances_derive_the_same_bytes() -> None:
    """The unit the executor relies on, over files as RockBot writes them: for each, the derived bytes of its decay
    are the whole encoding of the decayed entry, or there are none (then it is encoded whole)."""
    texts = [
        b'{\n  "id": "r1",\n  "content": "Jordan\'s vault",\n  "category": null,\n  "tags": [],\n'
        b'  "createdAt": "2026-03-10T00:37:41.9001713+00:00",\n  "updatedAt": "2026-03-10T00:37:41.9001713+00:00",\n'
        b'  "lastSeenAt": "2026-03-10T00:37:41.9001713+00:00",\n  "reinforcementCount": 1,\n'
        b'  "importanceScore": 1,\n  "metadata": {\n    "importanceScore": "0.2"\n  }\n}\n',
        b'{\n  "id": "r2",\n  "content": "no updatedAt at all",\n  "importanceScore": 0.8\n}\n',
        b'{\n  "id": "r3",\n  "content": "stamps with a Z",\n  "updatedAt": "2026-03-10T00:37:41.9001713Z",\n'
        b'  "importanceScore": 0.30000000000000004,\n  "extra": {"importanceScore": 1}\n}\n',
    ]
    later = BASE_TIME.replace(microsecond=123456)
    derived = 0
    for text in texts:
        entry = Entry.from_json_bytes(text)
        base = entry.to_json_bytes()  # what a decay of ours wrote: its bytes are the entry's encoding
        after = {"importanceScore": entry.importance_score * 0.9, "updatedAt": format_timestamp(later)}
        decayed = with_decay_values(entry, after)
        before = decay_values(entry)
        got = with_values(base, [(key, before.get(key), after[key]) for key in ("importanceScore", "updatedAt")])
        if got is not None:
            derived += 1
            assert got == decayed.to_json_bytes()
    assert derived == 2  # r2 has no updatedAt: the decay adds it at the end, which only the whole encoding does


def test_a_kept_decays_values_before_are_read_from_its_bytes_as_its_entry_gives_them(agent: Agent) -> None:
    """The journal's values before a decay (``decay_step``): read from a kept decay's bytes, the very values its
    entry's JSON gives; asked of the entry for any file the scan did not take from a kept decay."""
    index = ci.open_corpus_index(agent.path, agent.memory)
    scanned = MemoryStore(agent.memory, index).scan()
    read = {s.id: kept_values(index, s, DECAY_FIELDS) for s in scanned.entries}
    assert {entry_id for entry_id, values in read.items() if values is not None} == {s.id for s in OLD}
    for stored in scanned.entries:
        values = read[stored.id]
        if values is not None:
            assert values == decay_values(stored.entry) and list(values) == list(DECAY_FIELDS)
            assert type(values["importanceScore"]) is type(decay_values(stored.entry)["importanceScore"])
    # The same file, parsed by another scan: not the object the kept decay's bytes were read for, not vouched for.
    other = next(s for s in MemoryStore(agent.memory).scan().entries if s.id == OLD[0].id)
    assert kept_values(index, other, DECAY_FIELDS) is None
