"""Extraction of *specifics*: the words, numbers and codes a merge must not lose.

RockBot's rules (reference §3.1-3.6): capitalised words (sentence-position-aware stoplist, lowercase-evidence
rule, vocabulary overrides), acronyms, numbers of two or more digits (skipped in numeric-exempt categories),
month names that take part in a date. Beyond RockBot (its holes, reference §6.2/§6.6): e-mail addresses, URLs,
host names, file paths, lowercase or mixed identifiers ("marimer-work", "rockyl", "gpt-4o", "W-9", "S3"),
@handles, phone numbers as a whole, two-letter names ("Al", "Ed"), words of scripts without letter case, and
dates and phones stay protected in numeric-exempt categories.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Literal

from dreamkeeper.coverage import dates
from dreamkeeper.coverage.lexicon import is_english_word
from dreamkeeper.coverage.stoplist import MONTHS, SENTENCE_OPENERS, TWO_LETTER_COMMON_WORDS
from dreamkeeper.coverage.technical import address_spans, inside, phones, technical_tokens
from dreamkeeper.coverage.text import (
    NUMBER_RE,
    chunk_key,
    chunks,
    fold,
    is_sentence_initial,
    number_key,
    prepare,
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

    phone_spans = phones(text)
    for start, end, digits in phone_spans:
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
        if any(s <= start and end <= e for s, e, _ in phone_spans):
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
