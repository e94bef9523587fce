"""Subsumption reads each member of a component once (issue 27: re-extracting a text's specifics, numbers and words
for every pair was most of the stage's CPU at 100,000 entries). What it decides must be what the pairwise coverage
check decides, under the cycle's vocabulary, never a memo of another one."""

from __future__ import annotations

import asyncio
import itertools
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from bench.sim.world import write_synthetic_corpus

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.subsume import _covers, _Member, subsume_component
from dreamkeeper.coverage import (
    DEFAULT_VOCABULARY,
    Inventory,
    SourceText,
    Vocabulary,
    check,
    find_missing_specifics,
    keep_inventory,
    known_inventory,
)
from dreamkeeper.coverage.check import _InventoryMemo, clear_inventory_memo
from dreamkeeper.coverage.specifics import clear_specifics_memo, extract_specifics_unmemoised
from dreamkeeper.demo.sample import generate_sample
from dreamkeeper.memory import Entry, MemoryStore, StoredEntry
from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.proposers import OfflineProposer

T0 = datetime(2026, 5, 1, tzinfo=UTC)


def stored(entry_id: str, content: str, age_days: int, category: str = "people") -> StoredEntry:
    entry = Entry(id=entry_id, content=content, category=category, created_at=T0 - timedelta(days=age_days))
    return StoredEntry(entry, Path(f"/nowhere/{entry_id}.json"), Fingerprint("0" * 64, 1, 0))


def always(_a: str, _b: str) -> bool:
    return True


def reference_covers(host: StoredEntry, other: StoredEntry, vocabulary: Vocabulary) -> bool:
    """The check as it was asked pair by pair before: a fresh extraction, the coverage check itself."""
    h, o = host.entry, other.entry
    if not extract_specifics_unmemoised(o.content, o.category, vocabulary):
        return False
    if not set(re.findall(r"\d+", o.content)) <= set(re.findall(r"\d+", h.content)):
        return False
    return not find_missing_specifics([SourceText(o.content, o.category)], h.content, vocabulary)


def test_every_pair_of_the_sample_is_decided_as_the_pairwise_coverage_check_decides(tmp_path: Path) -> None:
    generate_sample(tmp_path / "agent")
    live = [s for s in MemoryStore(tmp_path / "agent" / "memory").scan().live][:80]
    vocabulary = Vocabulary(extra_common_words=("Postgres",), always_specific_words=("nightly",))
    for vocab in (DEFAULT_VOCABULARY, vocabulary):
        clear_specifics_memo()
        clear_inventory_memo()
        members = {s.id: _Member(s, vocab) for s in live}
        agreed = covered = 0
        for host, other in itertools.permutations(live, 2):
            got = _covers(members[host.id], members[other.id])
            assert got == reference_covers(host, other, vocab), (host.entry.content, other.entry.content)
            agreed += 1
            covered += got
        assert agreed == 80 * 79 and covered > 0  # the sample has copies: some pairs are covered
        for member in members.values():  # what a member holds is a fresh extraction's result
            entry = member.stored.entry
            assert list(member.specifics) == extract_specifics_unmemoised(entry.content, entry.category, vocab)


def test_a_changed_vocabulary_is_not_served_stale() -> None:
    older = stored("o1", "Anders Benedetti uses the Kestrel tool.", age_days=20)
    newer = stored("n1", "Anders Benedetti no longer uses the tool.", age_days=2)  # news: never taken in
    # By default "Kestrel" is a name the newer entry lacks: nothing can take the older one in.
    assert subsume_component([older, newer], DEFAULT_VOCABULARY, always) == []
    # The same texts, asked again in the same process under a vocabulary calling it an ordinary word.
    ordinary = Vocabulary(extra_common_words=("Kestrel",))
    found = subsume_component([older, newer], ordinary, always)
    assert [(f.kept.id, [c.id for c in f.covered]) for f in found] == [("n1", ["o1"])]
    # And back: the default vocabulary's answer, not the last one's.
    assert subsume_component([older, newer], DEFAULT_VOCABULARY, always) == []


def test_near_is_asked_once_per_pair_of_a_component() -> None:
    # No numbers: every pair may be a cover, so every pair's nearness is needed (once).
    members = [stored(f"m{n}", f"Anders Benedetti prefers Signal, note {'abcdefgh'[n - 1]}.", n) for n in range(1, 9)]
    asked: list[tuple[str, str]] = []

    def near(a: str, b: str) -> bool:
        asked.append((a, b))
        return True

    subsume_component(members, DEFAULT_VOCABULARY, near)
    pairs = {frozenset(p) for p in asked}
    assert len(asked) == len(pairs) == 8 * 7 // 2  # each unordered pair once (the measure is symmetric)


def test_a_member_never_takes_in_a_text_with_a_number_it_does_not_write() -> None:
    # The number test runs before any extraction now: it must still keep two facts apart.
    three = stored("f3", "Fact number 3 about the NAS backup job at Contoso.", age_days=20)
    twelve = stored("f12", "Fact number 12 about the NAS backup job at Contoso.", age_days=2)
    assert subsume_component([three, twelve], DEFAULT_VOCABULARY, always) == []


def test_near_is_never_asked_of_a_pair_whose_numbers_rule_out_a_cover_and_nothing_else_changes() -> None:
    # Issue 27: subsumption measured every pair of a component, k squared; at 100,000 entries components are large.
    # A pair where neither writes every number of the other can be taken in neither way: its nearness is not needed.
    members = [
        stored(f"m{n}", f"Anders Benedetti keeps host nas-{n:02d} in rack {n}.", age_days=n) for n in range(1, 9)
    ]
    members.append(stored("copy", "Anders Benedetti keeps host nas-01 in rack 1.", age_days=40))  # m1's older copy
    asked: list[frozenset[str]] = []

    def near(a: str, b: str) -> bool:
        asked.append(frozenset((a, b)))
        return True

    found = subsume_component(members, DEFAULT_VOCABULARY, near)
    assert found == subsume_component(members, DEFAULT_VOCABULARY, always)  # the same as measuring every pair
    assert [(f.kept.id, [c.id for c in f.covered]) for f in found] == [("m1", ["copy"])]
    digits = {s.id: set(re.findall(r"\d+", s.entry.content)) for s in members}
    for pair in asked:
        a, b = sorted(pair)
        assert digits[a] <= digits[b] or digits[b] <= digits[a], pair
    assert asked == [frozenset(("copy", "m1"))]  # main asked all 36 pairs


def test_subsumption_hands_the_memo_its_hosts_and_the_hosts_it_only_tried_go_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 27: every member tried as a host went into the shared memo as a merge's text would; at 100,000 entries
    # ~27,000 of them pushed out the merges' inventories that validation and the end-of-run check then built again.
    monkeypatch.setattr(check, "_INVENTORIES", _InventoryMemo(4))
    members = [stored(f"m{n}", f"Anders Benedetti prefers Signal, note {'abcdefgh'[n - 1]}.", n) for n in range(1, 9)]
    found = subsume_component(members, DEFAULT_VOCABULARY, always)
    assert [(f.kept.id, len(f.covered)) for f in found] == [("m1", 7)]  # the newest takes in the other seven
    host = members[0].entry.content
    assert known_inventory(host) is not None
    for n in range(3):  # three merges of other components: the memo (4) is full, and only the tried hosts went
        keep_inventory(f"Merged text {n}", Inventory.of(f"Merged text {n}"))
    assert known_inventory(host) is not None
    assert all(known_inventory(m.entry.content) is None for m in members[1:])


def test_a_cold_cycle_builds_no_merge_s_inventory_again_in_validation_or_its_end_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real cold cycle whose merges fit the memo but whose merges and tried hosts together do not (512; at 3,000
    entries ~410 merges and ~760 tried), as at 100,000 entries with the memo's own size: validation and the
    end-of-run check read every merge's inventory from the memo (before, 189 were built again here), and the
    cycle decides exactly what it decides with room for everything."""
    built: dict[str, int] = {}
    stage = ["start"]
    of = Inventory.of.__func__  # type: ignore[attr-defined]

    def counted(cls: type[Inventory], text: str) -> Inventory:
        built[stage[0]] = built.get(stage[0], 0) + 1
        return of(cls, text)  # type: ignore[no-any-return]

    monkeypatch.setattr(Inventory, "of", classmethod(counted))
    reports = []
    for size in (512, 1 << 16):
        monkeypatch.setattr(check, "_INVENTORIES", _InventoryMemo(size))
        built.clear()
        agent = tmp_path / str(size)
        write_synthetic_corpus(agent / "memory", 3000, 3)
        options = CycleOptions(
            agent_dir=agent,
            settings=CycleSettings(archive_cap=1.0),
            force=True,
            now=datetime(2026, 12, 7, 6, tzinfo=UTC),
            progress=lambda name: stage.__setitem__(0, name),
        )
        report = asyncio.run(run_cycle(options, OfflineProposer())).report
        assert report.result == "completed"
        assert built.get("subsumption", 0) > 512 and report.saved > 300  # tried hosts overflow the small memo
        assert built.get("validation", 0) == 0 and built.get("report", 0) == 0, built
        reports.append((report.saved, report.archived, report.decayed, report.lost_specifics, len(report.rejections)))
    assert reports[0] == reports[1]
