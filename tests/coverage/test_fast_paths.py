"""The tokeniser's fast paths (issue 27: a cold cycle tokenises thousands of texts) find exactly what the general
paths find: words of an ASCII text through the standard library's pattern, chunks with nothing to trim taken as
they are, the words of a text without addresses listed without asking where addresses are."""

from __future__ import annotations

from collections.abc import Iterator

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.coverage.technical import address_spans, inside
from dreamkeeper.coverage.text import _CHUNK_RE, WORD_RE, Chunk, Word, chunks, prepare, trim, words
from dreamkeeper.coverage.tokens import read_tokens
from tests.coverage.test_memo import any_texts

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
