"""Extraction of *specifics*: the words, numbers and codes a merge must not lose.

RockBot's rules (reference §3.1-3.6): capitalised words (sentence-position-aware stoplist, lowercase-evidence
rule, vocabulary overrides), acronyms, numbers of two or more digits (skipped in numeric-exempt categories),
month names that take part in a date. Beyond RockBot (its holes, reference §6.2/§6.6): e-mail addresses, URLs,
host names, file paths, lowercase or mixed identifiers ("marimer-work", "rockyl", "gpt-4o", "W-9", "S3"),
@handles, phone numbers as a whole, two-letter names ("Al", "Ed"), words of scripts without letter case, and
dates and phones stay protected in numeric-exempt categories.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final, Literal

import regex

from dreamkeeper.coverage import dates
from dreamkeeper.coverage.lexicon import is_english_word
from dreamkeeper.coverage.stoplist import MONTHS, SENTENCE_OPENERS, TWO_LETTER_COMMON_WORDS, word_set
from dreamkeeper.coverage.text import (
    NUMBER_RE,
    Chunk,
    chunk_key,
    chunks,
    fold,
    is_sentence_initial,
    number_key,
    prepare,
    trim,
    words,
)
from dreamkeeper.coverage.vocabulary import DEFAULT_VOCABULARY, Vocabulary

SpecificKind = Literal[
    "name", "acronym", "number", "date", "email", "url", "host", "path", "identifier", "phone", "caseless"
]


@dataclass(frozen=True, slots=True)
class Specific:
    """One thing a merge must keep.

    ``text`` is the first spelling seen (NFKC-normalised, possessive stripped), ``key`` the comparison form.
    ``date_contexts`` lists the dates this month name or day/year number was part of; it is empty when any
    occurrence stood outside a date expression, and then a numeric date can never stand in for it.
    """

    text: str
    kind: SpecificKind
    key: str
    date_contexts: tuple[dates.PartialDate, ...] = field(default=(), compare=False)

    def as_dict(self) -> dict[str, str]:
        return {"text": self.text, "kind": self.kind, "key": self.key}


# --- technical tokens --------------------------------------------------------------------------------------

_EMAIL_RE: Final = regex.compile(r"(?:mailto:)?[\p{L}\p{N}._%+\-']+@[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+)*\.\p{L}{2,}")
_URL_RE: Final = regex.compile(r"(?i)(?:[a-z][a-z0-9+.\-]*://|www\.)[^\s]+")
_HOST_RE: Final = regex.compile(r"(?:[\p{L}\p{N}](?:[\p{L}\p{N}\-]*[\p{L}\p{N}])?\.)+(?P<tld>\p{L}{2,})")
_FILE_RE: Final = regex.compile(r"[^\s/\\]*[\p{L}\p{N}_\-][^\s/\\]*\.(?P<ext>[\p{L}\p{N}]{1,5})")
_ROOTED_PATH_RE: Final = regex.compile(r"(?:~|\.{1,2})?/[^\s]*\p{L}[^\s]*|[A-Za-z]:\\[^\s]*|[^\s]*\\[^\s]+")
_HANDLE_RE: Final = regex.compile(r"[@#][\p{L}\p{N}_][\p{L}\p{N}_.\-]*")
_IDENTIFIER_CHARS_RE: Final = regex.compile(r"[\p{L}\p{M}\p{N}_'\-]+")
_HAS_LETTER_RE: Final = regex.compile(r"\p{L}")
_GENERIC_TLDS: Final = word_set(
    """
    com net org edu gov mil int io dev ai app co info biz me tv xyz online site tech cloud page blog shop store
    news name pro mobi asia jobs tel travel museum aero coop cat email live life world today social agency
    """
)
_FILE_EXTENSIONS: Final = word_set(
    """
    txt md json jsonc yaml yml toml ini cfg conf py js ts tsx jsx cs java go rs rb php sh ps1 bat c h cpp hpp
    html htm css xml csv tsv log pdf doc docx xls xlsx ppt pptx png jpg jpeg gif svg webp mp3 mp4 wav mov zip
    gz tgz tar rar 7z exe dll so dylib bin iso img sql db sqlite bak tmp lock
    """
)

# Units and ordinals that may follow a number without making an identifier ("10th", "3pm", "16GB", "1080p").
_UNIT_RE: Final = regex.compile(
    r"(?i)\d+(?:[.,:]\d+)*(?:st|nd|rd|th|am|pm|s|ms|h|hr|hrs|m|min|mins|d|k|x|kb|mb|gb|tb|kg|g|km|cm|mm|mi|"
    r"ft|lb|lbs|oz|ml|l|hz|khz|mhz|ghz|w|kw|v|mph|kph|fps|dpi|px|pt|p|y|yr|yrs|yo|wk|wks|mo|mos|%)"
)


def _is_abbreviation(labels: list[str]) -> bool:
    """ "e.g", "i.e", "a.m", "U.S", "Ph.D": short alphabetic labels, at least one a single letter."""
    return all(label.isalpha() and len(label) <= 2 for label in labels) and any(len(x) == 1 for x in labels)


def _part_is_ordinary(part: str, neighbours_have_digit: bool, vocabulary: Vocabulary) -> bool:
    """Whether one hyphen-separated part of a token is plain language (or protected by another rule)."""
    if not part or part.isdigit() or NUMBER_RE.fullmatch(part) or _UNIT_RE.fullmatch(part):
        return True
    has_letter = bool(_HAS_LETTER_RE.search(part))
    has_digit = any(ch.isdigit() for ch in part)
    if has_letter and has_digit:
        return False  # "S3", "EC2", "mp3", "x86", "i18n"
    if not has_letter:
        return True
    if len(part) == 1:
        # "W-9", "I-9": a lone letter next to a number is a code; "T-shirt", "e-mail" are words.
        return not neighbours_have_digit
    if part[0].isupper():
        return True  # capitalised or all-caps: the name and acronym rules decide
    if any(ch.isupper() for ch in part[1:]):
        return False  # camelCase: "iPhone", "accountId"
    if not part.isascii():
        return True  # no lexicon for other languages' lowercase words
    lowered = part.casefold()
    if len(lowered) <= 2 or is_english_word(lowered) or vocabulary.is_extra_common(lowered):
        return True
    pieces = [p for p in lowered.split("'") if p]
    return "'" in lowered and all(len(p) <= 2 or is_english_word(p) for p in pieces)


def _is_identifier(token: str, vocabulary: Vocabulary) -> bool:
    if not _IDENTIFIER_CHARS_RE.fullmatch(token) or not _HAS_LETTER_RE.search(token):
        return False
    if not token.isalpha() and vocabulary.is_always_specific(token):
        return True  # a deployment's own code made of English words: "tailspin-main", "work_laptop"
    if "_" in token.strip("_"):
        return True
    if _UNIT_RE.fullmatch(token):
        return False
    parts = token.split("-")
    for index, part in enumerate(parts):
        around = parts[max(0, index - 1) : index] + parts[index + 1 : index + 2]
        neighbours_have_digit = any(ch.isdigit() for p in around for ch in p)
        if not _part_is_ordinary(part, neighbours_have_digit, vocabulary):
            return True
    return False


def _classify(piece: str, vocabulary: Vocabulary) -> Iterator[tuple[str, SpecificKind]]:
    """The technical specifics one trimmed token holds (none, itself, or its "/"-separated parts)."""
    if _EMAIL_RE.fullmatch(piece):
        yield piece.removeprefix("mailto:"), "email"
        return
    if _URL_RE.fullmatch(piece):
        yield piece, "url"
        return
    if _ROOTED_PATH_RE.fullmatch(piece):
        yield piece, "path"
        return
    if "/" in piece:
        last = piece.rsplit("/", 1)[1]
        file = _FILE_RE.fullmatch(last)
        if file and fold(file.group("ext")) in _FILE_EXTENSIONS:
            yield piece, "path"
            return
        # "and/or", "America/Chicago", "marimer-work/xebia": judge each part on its own.
        for part in piece.split("/"):
            trimmed = trim(part)
            if trimmed:
                yield from _classify(trimmed, vocabulary)
        return
    if _HANDLE_RE.fullmatch(piece) and _HAS_LETTER_RE.search(piece[1:]):
        yield piece, "identifier"
        return
    if "." in piece.strip("."):
        labels = piece.split(".")
        if _is_abbreviation(labels):
            return
        file = _FILE_RE.fullmatch(piece)
        if file and fold(file.group("ext")) in _FILE_EXTENSIONS:
            yield piece, "path"
            return
        host = _HOST_RE.fullmatch(piece)
        if host:
            tld = fold(host.group("tld"))
            if tld in _GENERIC_TLDS or len(tld) == 2:
                yield piece, "host"
                return
        if _HAS_LETTER_RE.search(piece) and any(ch.isdigit() for ch in piece) and not _UNIT_RE.fullmatch(piece):
            yield piece, "identifier"  # "v1.2.3", "gpt-4.1"
        return
    if _is_identifier(piece, vocabulary):
        yield piece, "identifier"


def _technical_pieces(chunk: Chunk) -> Iterator[str]:
    """A chunk, or its "="-separated parts ("accountId=rockyl"); URLs are kept whole."""
    if _URL_RE.fullmatch(chunk.text) or "=" not in chunk.text:
        yield chunk.text
        return
    for part in chunk.text.split("="):
        trimmed = trim(part)
        if trimmed:
            yield trimmed


@dataclass(frozen=True, slots=True)
class TechnicalToken:
    start: int
    end: int
    value: str
    kind: SpecificKind


def technical_tokens(
    text: str, vocabulary: Vocabulary = DEFAULT_VOCABULARY, chunked: Sequence[Chunk] | None = None
) -> list[TechnicalToken]:
    """E-mails, URLs, hosts, paths, handles and identifiers of a prepared text, with their offsets."""
    found: list[TechnicalToken] = []
    for chunk in chunks(text) if chunked is None else chunked:
        for piece in _technical_pieces(chunk):
            for value, kind in _classify(piece, vocabulary):
                start = chunk.start + max(0, chunk.text.find(value))
                found.append(TechnicalToken(start, start + len(value), value, kind))
    return found


def address_spans(text: str, chunked: Sequence[Chunk] | None = None) -> list[tuple[int, int]]:
    """Where technical tokens that are more than one plain word sit ("allen.conway@xebia.com", "gpt-4o").

    Words inside them are not words of the text: "Allen" is not kept by an e-mail address that happens to start
    with "allen", and "Lhotka" is not made ordinary by "lhotka.net". Always judged with the default vocabulary,
    so extraction and coverage agree on these spans whatever the deployment's word lists say.
    """
    spans: list[tuple[int, int]] = []
    for chunk in chunks(text) if chunked is None else chunked:
        if chunk.text.isalpha():
            continue  # a plain word is never more than one word
        for piece in _technical_pieces(chunk):
            for value, _ in _classify(piece, DEFAULT_VOCABULARY):
                if not value.isalpha():
                    start = chunk.start + max(0, chunk.text.find(value))
                    spans.append((start, start + len(value)))
    return sorted(spans)


def inside(spans: list[tuple[int, int]], start: int) -> bool:
    """Whether offset ``start`` falls inside one of the sorted, disjoint ``spans``."""
    index = bisect_right(spans, (start, sys.maxsize)) - 1
    return index >= 0 and spans[index][0] <= start < spans[index][1]


# --- phones ------------------------------------------------------------------------------------------------

_PHONE_RES: Final = (
    regex.compile(r"(?<![\w+])\+\d{1,3}(?:[ .\-]?\(?\d{1,4}\)?){2,5}(?![\w])"),
    regex.compile(r"(?<![\w\-.])(?:\(\d{3}\)[ ]?|\d{3}[\-.])\d{3}[\-.]\d{4}(?![\w\-])"),
    regex.compile(r"(?<![\w\-.(])\d{3}-\d{4}(?![\w\-])"),
)


def _phones(text: str) -> list[tuple[int, int, str]]:
    spans: list[tuple[int, int, str]] = []
    for pattern in _PHONE_RES:
        for match in pattern.finditer(text):
            start, end = match.span()
            digits = "".join(ch for ch in match.group() if ch.isdigit())
            if not 7 <= len(digits) <= 15 or any(s < end and start < e for s, e, _ in spans):
                continue
            spans.append((start, end, digits))
    return spans


# --- extraction --------------------------------------------------------------------------------------------


class _Collector:
    """Gathers specifics by key, first spelling wins, date contexts merged across occurrences."""

    def __init__(self) -> None:
        self._items: dict[str, Specific] = {}
        self._bare: set[str] = set()

    def add(self, text: str, kind: SpecificKind, key: str, context: dates.PartialDate | None = None) -> None:
        existing = self._items.get(key)
        if context is None:
            self._bare.add(key)
        if existing is None:
            self._items[key] = Specific(text, kind, key, (context,) if context else ())
        elif context is not None and context not in existing.date_contexts:
            self._items[key] = Specific(existing.text, existing.kind, key, (*existing.date_contexts, context))

    def result(self) -> list[Specific]:
        return [
            Specific(s.text, s.kind, s.key, ()) if s.key in self._bare and s.kind != "date" else s
            for s in self._items.values()
        ]


@lru_cache(maxsize=64)  # a merge's sources share one evidence text
def lowercase_evidence(text: str, vocabulary: Vocabulary = DEFAULT_VOCABULARY) -> frozenset[str]:
    """Words the text writes in all-lowercase: proof that a capitalised twin is ordinary language.

    A lowercase word the English lexicon does not know is no such proof: "lhotka" in "lhotka.net" must not
    demote the surname "Lhotka" (it is itself protected as an identifier anyway).
    """
    evidence: set[str] = set()
    prepared = prepare(text)
    addresses = address_spans(prepared)
    for word in words(prepared):
        if word.script != "cased" or any(c.isupper() for c in word.text) or inside(addresses, word.start):
            continue
        key = fold(word.text)
        if key.isascii() and not (is_english_word(key) or vocabulary.is_extra_common(key)):
            continue
        evidence.add(key)
    return frozenset(evidence)


def extract_specifics(
    text: str,
    category: str | None = None,
    vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    evidence: str | None = None,
) -> list[Specific]:
    """The specifics of one text, in order of first appearance.

    ``evidence`` is the text whose lowercase words demote capitalised twins to ordinary language; for a merge
    pass all of its sources (not the merged text: a model's wording must not switch off a source's protection).
    Defaults to ``text`` itself.
    """
    source_of_evidence = evidence if evidence is not None else text
    return _extract(prepare(text), category, vocabulary, lowercase_evidence(source_of_evidence, vocabulary))


def _extract(text: str, category: str | None, vocabulary: Vocabulary, evidence: frozenset[str]) -> list[Specific]:
    chunked = list(chunks(text))
    found: list[tuple[int, str, SpecificKind, str, dates.PartialDate | None]] = [
        (token.start, token.value, token.kind, chunk_key(token.value), None)
        for token in technical_tokens(text, vocabulary, chunked)
    ]

    phones = _phones(text)
    for start, end, digits in phones:
        found.append((start, text[start:end], "phone", digits, None))

    expressions = dates.month_name_dates(text)
    number_contexts = {
        span: expression.date
        for expression in expressions
        for span in (expression.day_span, expression.year_span)
        if span is not None
    }
    exempt = vocabulary.is_numeric_exempt(category)
    for match in NUMBER_RE.finditer(text):
        start, end = match.span()
        if any(s <= start and end <= e for s, e, _ in phones):
            continue  # part of a phone number, which is protected whole
        token = match.group()
        numeric = dates.numeric_date(token)
        if numeric is not None:
            found.append((start, token, "date", number_key(token), numeric.date))
            continue
        context = number_contexts.get((start, end))
        if exempt and context is None:
            continue  # telemetry in an exempt category; dates and phones stay protected there
        found.append((start, token, "number", number_key(token), context))

    month_contexts = {expression.month_span: expression.date for expression in expressions}
    addresses = address_spans(text, chunked)
    for word in words(text):
        if inside(addresses, word.start):
            continue
        kept = _judge_word(text, word.text, word.start, word.script, vocabulary, evidence)
        if kept is not None:
            context = month_contexts.get((word.start, word.end)) if fold(word.text) in MONTHS else None
            found.append((word.start, word.text, kept, fold(word.text), context))

    collector = _Collector()
    for _, value, kind, key, context in sorted(found, key=lambda item: item[0]):
        collector.add(value, kind, key, context)
    return collector.result()


def _judge_word(
    text: str, word: str, start: int, script: str, vocabulary: Vocabulary, evidence: frozenset[str]
) -> SpecificKind | None:
    if script != "cased":
        # Scripts without letter case cannot mark names, so every word of two or more letters is protected.
        return "caseless" if len(word) >= 2 else None
    if not word[0].isupper() or len(word) < 2:
        return None  # lowercase words are judged as identifiers, on whole tokens
    if vocabulary.is_always_specific(word):
        return "acronym" if word.isupper() else "name"
    if word.isupper():
        return None if vocabulary.is_common(word) else "acronym"
    key = fold(word)
    if vocabulary.is_extra_common(word) or key in evidence:
        return None
    if len(word) == 2:
        return None if key in TWO_LETTER_COMMON_WORDS else "name"
    if (vocabulary.is_baseline_common(word) or key in SENTENCE_OPENERS) and is_sentence_initial(text, start):
        return None
    return "name"


def merge_specifics(groups: Iterable[list[Specific]]) -> list[Specific]:
    """Union of several texts' specifics by key; a month or number bare anywhere loses its date contexts."""
    merged: dict[str, Specific] = {}
    bare: set[str] = set()
    for group in groups:
        for specific in group:
            if not specific.date_contexts:
                bare.add(specific.key)
            existing = merged.get(specific.key)
            if existing is None:
                merged[specific.key] = specific
            else:
                contexts = tuple(dict.fromkeys((*existing.date_contexts, *specific.date_contexts)))
                merged[specific.key] = Specific(existing.text, existing.kind, existing.key, contexts)
    return [Specific(s.text, s.kind, s.key, ()) if s.key in bare and s.kind != "date" else s for s in merged.values()]
