"""The extraction and inventory memos answer exactly what computing from scratch answers, whatever the order of
questions, the evidence, the category or the vocabulary object."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.coverage import (
    DEFAULT_VOCABULARY,
    Inventory,
    SourceText,
    Specific,
    Vocabulary,
    check,
    extract_specifics,
    find_missing_specifics,
    keep_inventory,
    merged_inventory,
    required_specifics,
    specifics,
    technical,
)
from dreamkeeper.coverage.check import _InventoryMemo, inventory_memo_info
from dreamkeeper.coverage.specifics import (
    clear_specifics_memo,
    extract_specifics_unmemoised,
    lowercase_evidence,
    specifics_memo_info,
)
from dreamkeeper.coverage.text import prepare
from dreamkeeper.coverage.tokens import read_tokens
from tests.coverage.test_properties import ATOMS, SEPARATORS

# Capitalised words whose lowercase twin is ordinary English: the only words evidence can demote.
TWINS = ["Mark", "mark", "Will", "will", "Rose", "rose", "Bill", "bill", "Turkey", "turkey", "Sue", "sue"]
TWINS += ["Ed", "ed", "Go", "go", "May", "may", "March", "march", "Review", "review", "Apple", "apple", "Notes"]

VOCABULARIES = [
    DEFAULT_VOCABULARY,
    Vocabulary(),  # equal content, another object
    Vocabulary(extraCommonWords=["Apple", "team"], alwaysSpecificWords=["Review", "Mark"]),
    Vocabulary(numericExemptCategories=["people"]),
]

atom = st.sampled_from([*ATOMS, *TWINS])
texts = st.builds(
    lambda atoms, seps: "".join(a + s for a, s in zip(atoms, seps, strict=False)),
    st.lists(atom, min_size=0, max_size=10),
    st.lists(st.sampled_from(SEPARATORS), min_size=10, max_size=10),
)
any_texts = st.one_of(texts, st.text(max_size=60))
categories = st.sampled_from([None, "people/contacts", "anti-patterns/routing", "anti-patterns/routing/x", "a"])


def full(found: list[Specific]) -> list[tuple[str, str, str, object]]:
    """Every field, date contexts included (which `Specific` equality ignores)."""
    return [(s.text, s.kind, s.key, s.date_contexts) for s in found]


@pytest.fixture(autouse=True)
def fresh_memos() -> Iterator[None]:
    clear_specifics_memo()
    check.clear_inventory_memo()
    yield
    clear_specifics_memo()
    check.clear_inventory_memo()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(
        st.tuples(any_texts, categories, st.sampled_from(range(len(VOCABULARIES))), st.none() | any_texts),
        min_size=1,
        max_size=6,
    ),
    st.booleans(),
)
def test_memoised_extraction_equals_computing_from_scratch(
    questions: list[tuple[str, str | None, int, str | None]], clear_first: bool
) -> None:
    if clear_first:
        clear_specifics_memo()
    # Each question asked twice, interleaved with the others, and once more with the text joined into its
    # evidence (the shape a merge's check has): every answer must equal the unmemoised one.
    for _ in range(2):
        for text, category, v, evidence in questions:
            vocabulary = VOCABULARIES[v]
            expected = extract_specifics_unmemoised(text, category, vocabulary, evidence)
            assert full(extract_specifics(text, category, vocabulary, evidence)) == full(expected)
            joined = text if evidence is None else text + "\n" + evidence
            assert full(extract_specifics(text, category, vocabulary, joined)) == full(
                extract_specifics_unmemoised(text, category, vocabulary, joined)
            )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_texts, st.sampled_from(range(len(VOCABULARIES))))
def test_own_evidence_of_the_scan_is_lowercase_evidence(text: str, v: int) -> None:
    vocabulary = VOCABULARIES[v]
    _, own = specifics._scan(read_tokens(prepare(text)), False, vocabulary)
    assert own == lowercase_evidence(text, vocabulary)


def test_evidence_demotes_through_the_memo() -> None:
    text = "Mark reviewed the plan with Rose in Austin."
    assert [s.text for s in extract_specifics(text)] == ["Mark", "Rose", "Austin"]
    # Another source writing "mark" and "rose" in lowercase makes them ordinary words (RockBot's rule)...
    demoted = extract_specifics(text, evidence=text + "\nmark the rose bed")
    assert [s.text for s in demoted] == ["Austin"]
    # ...and the memoised own answer is untouched by that question.
    assert [s.text for s in extract_specifics(text)] == ["Mark", "Rose", "Austin"]


def test_equal_vocabularies_share_the_memo_and_different_ones_do_not() -> None:
    text = "Apple hired Duane in 2026 for 42 days."
    extract_specifics(text, None, DEFAULT_VOCABULARY)
    hits, misses, _ = specifics_memo_info()
    extract_specifics(text, None, Vocabulary())  # another object, same content: the offline proposer's case
    assert specifics_memo_info()[:2] == (hits + 1, misses)
    custom = Vocabulary(extraCommonWords=["Apple"])
    assert [s.text for s in extract_specifics(text, None, custom)] == ["Duane", "2026", "42"]
    assert specifics_memo_info()[1] == misses + 1
    assert [s.text for s in extract_specifics(text, None, DEFAULT_VOCABULARY)] == ["Apple", "Duane", "2026", "42"]


def test_categories_share_the_memo_by_numeric_exemption() -> None:
    text = "Latency at Fabrikam took 42 ms on 2026-08-19."
    assert [s.text for s in extract_specifics(text, "people/contacts")] == ["Fabrikam", "42", "2026-08-19"]
    _, misses, _ = specifics_memo_info()
    assert [s.text for s in extract_specifics(text, None)] == ["Fabrikam", "42", "2026-08-19"]
    assert specifics_memo_info()[1] == misses  # not exempt either: same analysis
    # An exempt category drops plain numbers but keeps dates.
    assert [s.text for s in extract_specifics(text, "anti-patterns/routing")] == ["Fabrikam", "2026-08-19"]
    assert specifics_memo_info()[1] == misses + 1


def test_callers_get_their_own_list() -> None:
    text = "Trish met Roberts in Las Vegas."
    first = extract_specifics(text)
    first.clear()
    assert [s.text for s in extract_specifics(text)] == ["Trish", "Roberts", "Las", "Vegas"]


def test_sharing_table_outgrowing_its_limit_changes_no_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(specifics, "_SHARED", specifics._Shared(limit=3))
    samples = ["Trish met Roberts in Las Vegas on August 19, 2026.", "Mark called 612-555-1234.", "Rose: 42, 365"]
    for text in samples * 2:
        clear_specifics_memo()
        assert full(extract_specifics(text)) == full(extract_specifics_unmemoised(text))


def test_the_memo_is_bounded() -> None:
    assert specifics._analysis.cache_info().maxsize == specifics.SPECIFICS_MEMO_SIZE
    memo = _InventoryMemo(2)
    a, b = memo.get("Alpha one"), memo.get("Bravo two")
    assert memo.get("Alpha one") is a  # a hit refreshes it
    memo.get("Charlie three")  # evicts the least recently used: Bravo
    assert len(memo) == 2
    assert memo.get("Alpha one") is a
    assert memo.get("Bravo two") is not b
    assert (memo.hits, memo.misses) == (2, 4)


def test_inventory_memo_serves_the_check_and_accepts_kept_inventories() -> None:
    merged = "Allen Conway works at Xebia; phone +1 386-299-4605."
    built = Inventory.of(merged)
    keep_inventory(merged, built)
    assert merged_inventory(merged) is built
    sources = [SourceText("Allen Conway (Xebia) can be reached at 386-299-4605.")]
    hits = inventory_memo_info()[0]
    assert find_missing_specifics(sources, merged) == []
    assert inventory_memo_info()[0] == hits + 1
    assert find_missing_specifics([SourceText("Allen moved to Austin.")], merged) == ["Austin"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_texts, min_size=1, max_size=3), any_texts)
def test_memoised_inventory_answers_like_a_fresh_one(sources: list[str], merged: str) -> None:
    fresh = Inventory.of(merged)
    for _ in range(2):
        shared = merged_inventory(merged)
        for specific in required_specifics([SourceText(s) for s in sources]):
            assert shared.covers(specific) == fresh.covers(specific)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(
        st.text(alphabet=st.characters(min_codepoint=65, max_codepoint=122), min_size=1, max_size=12),
        st.sampled_from([*ATOMS, *TWINS, "rockyl", "iPhone", "accountId", "xebia", "the", "Ab", "aB", "qq"]),
    ),
    st.sampled_from(range(len(VOCABULARIES))),
)
def test_plain_word_fast_path_classifies_like_the_full_rules(piece: str, v: int) -> None:
    vocabulary = VOCABULARIES[v]
    assert list(technical._classify(piece, vocabulary)) == list(technical._classify_full(piece, vocabulary))


def test_the_plain_word_memo_leaves_the_vocabulary_its_say() -> None:
    # The memo keeps what a word is whatever the vocabulary; a word only the vocabulary can call ordinary is
    # decided by the vocabulary asked, every time (issue 27: the memo must never serve another vocabulary's answer).
    rockyl = Vocabulary(extraCommonWords=["rockyl"])
    for _ in range(2):
        assert list(technical._classify("rockyl", DEFAULT_VOCABULARY)) == [("rockyl", "identifier")]
        assert list(technical._classify("rockyl", rockyl)) == []
        assert [s.text for s in extract_specifics("ask rockyl today", None, DEFAULT_VOCABULARY)] == ["rockyl"]
        assert extract_specifics("ask rockyl today", None, rockyl) == []


def test_a_known_inventory_is_served_without_building_or_reordering() -> None:
    first, second = "Allen Conway works at Xebia.", "Rocky has a Sheltie named Milo."
    assert check.known_inventory(first) is None
    built = merged_inventory(first)
    merged_inventory(second)
    hits, misses, size = inventory_memo_info()
    assert check.known_inventory(first) is built
    assert inventory_memo_info() == (hits, misses, size)  # a peek is neither a hit nor a miss, and builds nothing
    memo = _InventoryMemo(2)
    memo.put("a", Inventory.of("a"))
    memo.put("b", Inventory.of("b"))
    memo.peek("a")
    memo.put("c", Inventory.of("c"))  # "a" was only peeked at: still the oldest, so it goes
    assert memo.peek("a") is None and memo.peek("b") is not None


def test_texts_merely_read_go_before_any_merges_text() -> None:
    # Issue 27: subsumption tried ~27,000 hosts at 100,000 entries; put in the memo as merges were, they pushed out
    # the ~13,700 merges' inventories validation and the end-of-run check ask for again, and each was built twice.
    memo = _InventoryMemo(3)
    a, b = Inventory.of("Alpha one"), Inventory.of("Bravo two")
    memo.put("Alpha one", a)
    memo.put("Bravo two", b)
    memo.offer("x-ray 1", Inventory.of("x-ray 1"))
    memo.offer("yankee 2", Inventory.of("yankee 2"))  # full: the text merely read before it goes, not a merge's
    assert memo.peek("x-ray 1") is None and memo.peek("yankee 2") is not None
    assert memo.peek("Alpha one") is a and memo.peek("Bravo two") is b
    memo.put("Charlie three", Inventory.of("Charlie three"))  # the offered one goes, though newer than both merges
    assert memo.peek("yankee 2") is None and memo.peek("Alpha one") is a and len(memo) == 3
    memo.put("Delta four", Inventory.of("Delta four"))  # nothing offered left: the least recently used merge goes
    assert memo.peek("Alpha one") is None and memo.peek("Bravo two") is b


def test_a_text_offered_then_asked_for_as_a_merge_is_served_and_kept_as_one() -> None:
    memo = _InventoryMemo(2)
    offered = Inventory.of("Rocky has a Sheltie named Milo.")
    memo.offer("Rocky has a Sheltie named Milo.", offered)
    assert memo.get("Rocky has a Sheltie named Milo.") is offered  # served, not built again
    assert (memo.hits, memo.misses) == (1, 0)
    memo.offer("other 1", Inventory.of("other 1"))
    memo.offer("other 2", Inventory.of("other 2"))  # offers only push each other out now
    assert memo.peek("Rocky has a Sheltie named Milo.") is offered
    memo.offer("Rocky has a Sheltie named Milo.", Inventory.of("Rocky has a Sheltie named Milo."))
    assert memo.peek("Rocky has a Sheltie named Milo.") is offered  # an offer never demotes a merge's text


def test_inventories_share_their_keys() -> None:
    # Interned: the words, numbers, chunks and phone digits a corpus repeats are held once, whichever texts say them
    # (issue 27: 4.7 KB an inventory of a ~100-character text, 2.1 KB interned), and coverage is unchanged.
    first = Inventory.of("Allen Conway keeps nas-01 at 10.0.0.1 (call 612-555-1234), 4,200 units.")
    second = Inventory.of("allen CONWAY: nas-01 and 10.0.0.1; phone 612-555-1234; 4200 units")
    for name in ("words", "numbers", "chunks", "phones"):
        mine = {key: key for key in getattr(first, name)}
        theirs = {key: key for key in getattr(second, name)}
        common = mine.keys() & theirs.keys()
        assert common, name
        assert all(mine[key] is theirs[key] for key in common), name
    sources = [SourceText("Allen Conway: nas-01, 10.0.0.1, 612-555-1234, 4200 units")]
    assert find_missing_specifics(sources, "allen CONWAY: nas-01 and 10.0.0.1; phone 612-555-1234; 4200 units") == []
