"""Useless or misleading proposals are refused before any check, each counted with its reason (issue 23 item 3):
a merge of one entry that only repeats or rewords it, a merged text copied from the offer's layout, ids written in
the offer's notation. Their sources are shielded from pruning; nothing is stamped declined on their account."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.refusals import copies_layout, in_offer_notation
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import DECLINED_CLUSTER, MemoryStore
from dreamkeeper.proposers.prompts import entry_header
from dreamkeeper.proposers.scripted import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus

FARID = "Farid Rasmussen is a Producer at Contoso; email farid.rasmussen@contoso.example, phone +1 407-555-0159."
FARID_2 = "Farid Rasmussen is a Producer at Contoso, email farid.rasmussen@contoso.example; phone +1 407-555-0159!"
IMOGEN = "Imogen Lindqvist is an Engineering Manager at Proseware; email imogen.lindqvist@proseware.example."
IMOGEN_2 = "Imogen Lindqvist is an Engineering Manager at Proseware, email imogen.lindqvist@proseware.example!"
SEEDS = [
    Seed("083200b7a724", FARID, "people/farid"),
    Seed("9c59d7402ecc", FARID_2, "people/farid"),
    Seed("7d2eb8c68286", IMOGEN, "people/imogen"),
    Seed("d1090b231039", IMOGEN_2, "people/imogen"),
]


def save(content: str, *ids: str) -> dict[str, Any]:
    return {"content": content, "category": None, "tags": [], "sourceIds": list(ids), "importance": None}


def dream(agent: Path, reply: dict[str, Any]) -> CycleOutcome:
    # RockBot's batch layout (where ids are shown as [ID:…]); no subsumption, so the model's merges are judged.
    settings = CycleSettings(min_interval_hours=0, offer_shape="batches", subsume=False)
    return asyncio.run(run_cycle(CycleOptions(agent, settings, now=BASE_TIME), ScriptedProposer([reply])))


def test_a_merge_of_one_entry_that_only_repeats_it_is_refused_and_counted(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, SEEDS)
    r = dream(tmp_path, {"toDelete": ["083200b7a724"], "toSave": [save(FARID, "083200b7a724")]}).report
    assert (r.refused_restating, r.saved, r.rejected, r.archived) == (1, 0, 0, 0)
    assert r.refusals[0].reason.startswith("useless") and "only repeats" in r.refusals[0].reason
    assert r.refusals[0].source_ids == ["083200b7a724"]
    assert store.require("083200b7a724").entry.is_live  # shielded from the prune that came with it
    assert store.require("083200b7a724").entry.meta(DECLINED_CLUSTER) is not None  # its cluster left intact


def test_a_merge_of_one_entry_that_rewords_it_is_refused(tmp_path: Path) -> None:
    write_corpus(tmp_path, SEEDS)
    reworded = "Met Imogen Lindqvist, an Engineering Manager at Proseware; email imogen.lindqvist@proseware.example."
    r = dream(tmp_path, {"toDelete": [], "toSave": [save(reworded, "7d2eb8c68286")]}).report
    assert (r.refused_restating, r.saved) == (1, 0)
    assert "only rewords" in r.refusals[0].reason and r.refusals[0].content == reworded


def test_a_merged_text_copying_the_offers_header_line_is_refused(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, SEEDS)
    header = entry_header(1, store.require("083200b7a724").entry)
    r = dream(tmp_path, {"toDelete": [], "toSave": [save(header, "083200b7a724", "9c59d7402ecc")]}).report
    assert (r.refused_layout, r.saved, r.rejected, r.invented) == (1, 0, 0, 0)
    assert "layout" in r.refusals[0].reason


def test_a_merged_text_prefixed_with_a_source_id_is_refused(tmp_path: Path) -> None:
    write_corpus(tmp_path, SEEDS)
    prefixed = f"[7d2eb8c68286] {IMOGEN}"
    r = dream(tmp_path, {"toDelete": [], "toSave": [save(prefixed, "7d2eb8c68286", "d1090b231039")]}).report
    assert (r.refused_layout, r.saved, r.rejected, r.repaired) == (1, 0, 0, 0)  # no repair request spent on it
    assert "the id 7d2eb8c68286" in r.refusals[0].reason


def test_ids_written_in_the_offer_notation_are_refused(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, SEEDS)
    reply = {
        "toDelete": ["ID:7d2eb8c68286"],
        "toSave": [save(FARID, "ID:083200b7a724", "[ID:9c59d7402ecc]")],
    }
    r = dream(tmp_path, reply).report
    assert (r.refused_notation, r.saved, r.archived) == (2, 0, 0)
    assert all(x.reason.startswith("offer notation") for x in r.refusals)
    assert all(s.entry.is_live for s in MemoryStore(tmp_path / "memory").scan().entries)
    assert store.require("7d2eb8c68286").entry.is_live


def test_a_good_merge_beside_them_is_still_saved(tmp_path: Path) -> None:
    write_corpus(tmp_path, SEEDS)
    reply = {"toDelete": [], "toSave": [save(FARID, "083200b7a724"), save(IMOGEN, "7d2eb8c68286", "d1090b231039")]}
    r = dream(tmp_path, reply).report
    assert (r.refused_restating, r.saved, r.archived_with_replacement) == (1, 1, 2)


def test_the_checks_themselves() -> None:
    assert in_offer_notation("ID:abc") and in_offer_notation("[id: abc]") and not in_offer_notation("abc")
    assert copies_layout("Farid works at Contoso.", ["083200b7a724"]) is None
    assert copies_layout("There are 260 memory entries. 40 are shown below", []) == "the offer's heading"
    # An id the sources themselves state is no copy of the layout.
    assert copies_layout("Ticket 083200b7a724 is open.", ["083200b7a724"], ["Ticket 083200b7a724 is open"]) is None
    assert copies_layout("a b c", ["a", "b"]) is None  # short test ids are ordinary words


def test_a_placeholder_copied_from_the_reply_format_is_refused(tmp_path: Path) -> None:
    # Qwen2.5-Coder 0.5B answered a cluster question with the contract's placeholder as its merged text; each cost
    # a repair request before it was rejected for dropping every specific.
    write_corpus(tmp_path, SEEDS)
    for placeholder in ("<the one entry>", "...", "[merged text]"):
        assert copies_layout(placeholder, []) == "a placeholder, not a text"
    r = dream(tmp_path, {"toDelete": [], "toSave": [save("<the one entry>", "7d2eb8c68286", "d1090b231039")]}).report
    assert (r.refused_layout, r.rejected, r.repaired, r.saved) == (1, 0, 0, 0)


def _copies_an_id_by_pattern_alone(content: str, offered_ids: list[str], said: str) -> str | None:
    """The id part of `copies_layout` as it was before the ASCII prefilter: one pattern per id, always asked."""
    for entry_id in offered_ids:
        if len(entry_id) < 8:
            continue
        word = re.compile(rf"(?<!\w){re.escape(entry_id)}(?!\w)", re.I)
        if word.search(content) and not word.search(said):
            return f"the id {entry_id}"
    return None


def test_an_id_written_with_a_letter_only_unicode_case_folding_matches_is_still_refused() -> None:
    """re.IGNORECASE matches "ſ" (long s) to "s" and the Kelvin sign to "k": a merged text holding them is not ASCII,
    so the id is asked the pattern, not skipped by the substring prefilter (which would miss both)."""
    assert copies_layout("Fixed in ſeed0b7a724 today.", ["seed0b7a724"]) == "the id seed0b7a724"
    assert copies_layout("See \u212aafe0b7a724 now.", ["KAFE0B7A724"]) == "the id KAFE0B7A724"
    assert copies_layout("Fixed in SEED0B7A724 today.", ["seed0b7a724"]) == "the id seed0b7a724"  # ASCII case


ID_ATOMS = ["083200b7a724", "9C59D7402ECC", "seed0b7a724", "kafe0b7a724", "ſeed0b7a724", "\u212aafe0b7a724", "é0b7a724"]
TEXT_ATOMS = [*ID_ATOMS, "Farid", "works", "at", "x", "_", "-", ".", " ", "\n", "é", "0", "abc083200b7a724"]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(TEXT_ATOMS), max_size=8).map("".join),
    st.lists(st.sampled_from([*ID_ATOMS, "short"]), max_size=4),
    st.lists(st.sampled_from(TEXT_ATOMS), max_size=4).map("".join),
)
def test_the_id_check_answers_as_asking_every_id_its_pattern_does(content: str, ids: list[str], said: str) -> None:
    if copies_layout(content, [], [said]) is not None:
        return  # another layout rule answered first; the ids are not asked
    assert copies_layout(content, ids, [said]) == _copies_an_id_by_pattern_alone(content, ids, said)
