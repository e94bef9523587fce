"""The tokeniser's fast paths (issue 27: a cold cycle tokenises thousands of texts) find exactly what the general
paths find: words of an ASCII text through the standard library's pattern, chunks with nothing to trim taken as
they are, the words of a text without addresses listed without asking where addresses are."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.coverage.specifics import (
    extract_specifics_unmemoised,
    lowercase_evidence,
    sources_lowercase_evidence,
    sources_specifics,
)
from dreamkeeper.coverage.technical import address_spans, inside
from dreamkeeper.coverage.text import _CHUNK_RE, WORD_RE, Chunk, Word, chunks, prepare, trim, words
from dreamkeeper.coverage.tokens import read_tokens
from tests.coverage.test_memo import VOCABULARIES, any_texts, categories, full

# Every ASCII character class the patterns care about: letters, apostrophes, possessives, digits, underscores,
# punctuation a chunk is trimmed of, separators, controls that are whitespace to one engine or another.
ASCII_ATOMS = ["Rocky", "rocky", "ROCKY", "'s", "'S", "'", "s", "S", "x", "O'Brien", "don't", "1", "42", "_", "-"]
ASCII_ATOMS += [".", ":", "!", "?", "'", "(", ")", "@", "/", "=", ",", ";", " ", "\t", "\n", "\x0b", "\x1c", "\x1f"]
ASCII_ATOMS += ["a.b", "lhotka.net's.", "user@xebia.com", "gpt-4o", "'quoted'", "Rocky's", "xs", "ss"]
ascii_texts = st.lists(st.sampled_from(ASCII_ATOMS), max_size=14).map("".join)
texts = st.one_of(ascii_texts, any_texts, st.text(alphabet=st.characters(max_codepoint=127), max_size=40))


def unicode_words(text: str) -> Iterator[Word]:
    """`words` by the Unicode-property pattern alone (the path every non-ASCII text takes)."""
    for match in WORD_RE.finditer(text):
        raw = match.group()
        if match.lastgroup == "cased" and len(raw) > 2 and raw[-2:] in ("'s", "'S"):
            raw = raw[:-2]
        yield Word(raw, match.start(), match.start() + len(raw), match.lastgroup)  # type: ignore[arg-type]


def trimmed_chunks(text: str) -> Iterator[Chunk]:
    """`chunks` with every chunk trimmed (no fast path)."""
    for match in _CHUNK_RE.finditer(text):
        raw = match.group()
        piece = trim(raw)
        if piece:
            yield Chunk(piece, match.start() + raw.index(piece))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_words_are_those_of_the_unicode_pattern(text: str) -> None:
    prepared = prepare(text)
    assert list(words(prepared)) == list(unicode_words(prepared))


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_chunks_are_those_trimmed_one_by_one(text: str) -> None:
    prepared = prepare(text)
    assert list(chunks(prepared)) == list(trimmed_chunks(prepared))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts)
def test_listed_words_are_the_words_outside_addresses(text: str) -> None:
    prepared = prepare(text)
    tokens = read_tokens(prepared)
    spans = address_spans(prepared)
    assert list(tokens.addresses) == spans
    assert list(tokens.listed) == [w for w in unicode_words(prepared) if not inside(spans, w.start)]


def test_the_ascii_path_is_taken_and_agrees_on_the_cases_it_must() -> None:
    text = "Rocky's NAS at lhotka.net's. O'Brien don't 'quoted' x_y Ana's"
    expected = ["Rocky", "NAS", "at", "lhotka", "net", "O'Brien", "don't", "quoted", "x", "y", "Ana"]
    assert [w.text for w in words(text)] == expected
    assert list(words(text)) == list(unicode_words(text))
    assert [c.text for c in chunks("(Rocky's) lhotka.net's. 'hi' ok")] == ["Rocky", "lhotka.net", "hi", "ok"]


# A merge's lowercase evidence (issue 27): the joined sources read once, as the union of each source's own evidence.
# Atoms that could reach across the line feed joining two sources if anything did: combining marks and Hangul jamo
# (NFKC composes them with what precedes), ligatures and full-width forms (NFKC expands them), curly apostrophes,
# carriage returns, address fragments cut at a text's end, and capitalised words whose lowercase twin is English.
BOUNDARY_ATOMS = ["\u0301", "e\u0301", "\u1100", "\u1161", "\ufb01", "\uff21\uff4e\uff4e", "\u2019s", "\r", "\n"]
BOUNDARY_ATOMS += ["user@", "@xebia.com", "lhotka.", ".net", "http://", "Mark", "mark", "Rose", "rose", "May", "may"]
boundary_texts = st.lists(st.sampled_from([*BOUNDARY_ATOMS, *ASCII_ATOMS]), max_size=8).map("".join)
merge_sources = st.lists(st.one_of(texts, boundary_texts), min_size=1, max_size=4)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(merge_sources, st.sampled_from(range(len(VOCABULARIES))))
def test_sources_evidence_is_the_evidence_of_the_joined_sources(sources: list[str], v: int) -> None:
    vocabulary = VOCABULARIES[v]
    joined = lowercase_evidence("\n".join(sources), vocabulary)
    assert sources_lowercase_evidence(sources, vocabulary) == joined
    for wanted in (frozenset(), frozenset({"mark", "rose"}), frozenset({"may", "rocky", "net", "xebia", "é"})):
        assert sources_lowercase_evidence(sources, vocabulary, wanted) == joined & wanted


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.one_of(texts, boundary_texts), categories), min_size=1, max_size=4),
    st.sampled_from(range(len(VOCABULARIES))),
)
def test_sources_specifics_are_each_sources_extraction_under_the_joined_evidence(
    sources: list[tuple[str, str | None]], v: int
) -> None:
    vocabulary = VOCABULARIES[v]
    evidence = "\n".join(text for text, _ in sources)
    expected = [full(extract_specifics_unmemoised(text, category, vocabulary, evidence)) for text, category in sources]
    assert [full(found) for found in sources_specifics(sources, vocabulary)] == expected


def test_a_source_demotes_another_sources_word_through_the_union() -> None:
    sources = [("Mark reviewed the plan with Rose in Austin.", None), ("mark the rose bed", None)]
    found = sources_specifics(sources)
    assert [[s.text for s in group] for group in found] == [["Austin"], []]
    assert sources_lowercase_evidence([text for text, _ in sources]) >= {"mark", "rose"}
