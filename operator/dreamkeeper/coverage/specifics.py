"""Extraction of *specifics*: the words, numbers and codes a merge must not lose.

RockBot's rules (reference §3.1-3.6): capitalised words (sentence-position-aware stoplist, lowercase-evidence
rule, vocabulary overrides), acronyms, numbers of two or more digits (skipped in numeric-exempt categories),
month names that take part in a date. Beyond RockBot (its holes, reference §6.2/§6.6): e-mail addresses, URLs,
host names, file paths, lowercase or mixed identifiers ("marimer-work", "rockyl", "gpt-4o", "W-9", "S3"),
@handles, phone numbers as a whole, two-letter names ("Al", "Ed"), words of scripts without letter case, and
dates and phones stay protected in numeric-exempt categories.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final, Literal

from dreamkeeper.coverage import dates
from dreamkeeper.coverage.lexicon import is_english_word, is_plain_english_word
from dreamkeeper.coverage.stoplist import (
    IRREGULAR_PAST_OPENERS,
    MONTHS,
    NAMES_THAT_ARE_WORDS,
    SENTENCE_OPENERS,
    TWO_LETTER_COMMON_WORDS,
)
from dreamkeeper.coverage.technical import address_spans, inside, phones, technical_tokens, within
from dreamkeeper.coverage.text import (
    Word,
    chunk_key,
    fold,
    is_sentence_initial,
    number_key,
    prepare,
    words,
)
from dreamkeeper.coverage.tokens import Tokens, read_tokens, tokens_of
from dreamkeeper.coverage.vocabulary import DEFAULT_VOCABULARY, Vocabulary

SpecificKind = Literal[
    "name", "acronym", "number", "date", "email", "url", "host", "path", "identifier", "phone", "caseless"
]
# The kinds that identify someone or something: a prune may not make one vanish from the live corpus by default
# (``CycleSettings.prune_census``). Dates, numbers, URLs, hosts and paths are facts about them, counted instead.
IDENTITY_KINDS: Final[frozenset[SpecificKind]] = frozenset(
    {"name", "acronym", "caseless", "email", "phone", "identifier"}
)


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
    prepared = prepare(text)
    addresses = address_spans(prepared)
    return frozenset(
        key
        for word in words(prepared)
        if not inside(addresses, word.start) and (key := _evidence_key(word, vocabulary)) is not None
    )


def _evidence_key(word: Word, vocabulary: Vocabulary) -> str | None:
    """The key a word contributes to lowercase evidence, if any (`lowercase_evidence`'s rule for one word)."""
    if word.script != "cased" or any(c.isupper() for c in word.text):
        return None
    key = fold(word.text)
    if key.isascii() and not (is_english_word(key) or vocabulary.is_extra_common(key)):
        return None
    return key


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

    Served from a memo of the evidence-independent analysis of ``text`` (see `_analysis`); the result is the
    same as `extract_specifics_unmemoised` for every input.
    """
    analysis = _analysis(text, vocabulary.is_numeric_exempt(category), vocabulary)
    if evidence is None or not analysis.demotable or evidence == text:
        return list(analysis.own)
    return _specifics_under(analysis, lowercase_evidence(evidence, vocabulary))


def sources_specifics(
    sources: Sequence[tuple[str, str | None]], vocabulary: Vocabulary = DEFAULT_VOCABULARY
) -> list[list[Specific]]:
    """The specifics of each of a merge's sources (text, category), lowercase evidence from all of them together:
    exactly ``extract_specifics(text, category, vocabulary, evidence="\\n".join(texts))`` for each source.

    That call re-read the whole joined text (normalised, chunked, its addresses and words found) for each source
    with a demotable word: 3.4 CPU s of a 100k cold cycle (issue 27). Evidence acts only through the demotable
    keys (`_specifics_under`), so here it is read once a merge, for those keys only, and only from the sources that
    can write one of them (`sources_lowercase_evidence`)."""
    analyses = [_analysis(text, vocabulary.is_numeric_exempt(category), vocabulary) for text, category in sources]
    wanted = frozenset(key for analysis in analyses for key in analysis.demotable)
    if len(sources) < 2 or not wanted:
        # One source is its own evidence (the memo's own specifics); with no demotable word evidence acts on nothing.
        return [list(analysis.own) for analysis in analyses]
    evidence = sources_lowercase_evidence([text for text, _ in sources], vocabulary, wanted)
    return [_specifics_under(analysis, evidence) if analysis.demotable else list(analysis.own) for analysis in analyses]


def sources_lowercase_evidence(
    texts: Sequence[str], vocabulary: Vocabulary = DEFAULT_VOCABULARY, wanted: frozenset[str] | None = None
) -> frozenset[str]:
    """``lowercase_evidence("\\n".join(texts))``, intersected with ``wanted`` when given, read text by text.

    Why the union of the texts' own evidence is the joined text's (tests/coverage/test_fast_paths.py checks it on
    arbitrary texts): a line feed is a stable boundary for NFKC (a starter that composes with nothing, so
    normalisation does not reach across it) and the apostrophe translation is per character, so the joined text
    prepared is the prepared texts joined; no word and no chunk (hence no address span) holds a line feed, so the
    joined text's words outside addresses are each text's; and whether a word is evidence depends on the word alone
    (`_evidence_key`). With ``wanted``, an ASCII text in which no wanted key occurs is not read: it is its own
    prepared text (NFKC and the apostrophe translation leave ASCII as it is), and an evidence key of it is one of
    its words, lowercased already, so a substring of it."""
    keys: set[str] = set()
    for text in texts:
        if wanted is not None and text.isascii() and not any(key in text for key in wanted):
            continue
        keys.update(lowercase_evidence(text, vocabulary))
    return frozenset(keys if wanted is None else keys & wanted)


def extract_specifics_unmemoised(
    text: str,
    category: str | None = None,
    vocabulary: Vocabulary = DEFAULT_VOCABULARY,
    evidence: str | None = None,
) -> list[Specific]:
    """`extract_specifics` computed from scratch, evidence applied in the word pass: the memo's reference."""
    source_of_evidence = evidence if evidence is not None else text
    return _extract(prepare(text), category, vocabulary, lowercase_evidence(source_of_evidence, vocabulary))


# --- the memo ----------------------------------------------------------------------------------------------

# One thing found in a prepared text, in position order: (value, kind, key, date context, demotable).
# ``demotable`` marks a capitalised word that the lowercase evidence of its key makes ordinary language; it is
# the only way evidence acts on extraction (`_judge_word`), so everything else is a function of the text alone.
_Item = tuple[str, SpecificKind, str, dates.PartialDate | None, bool]

# A cycle asks about the same texts several times (the offline proposer's pairwise checks, validation, the
# census, the post-apply loss measurement) with a working set of about 30k texts at 100k entries. An LRU smaller
# than a sequential scan thrashes, so this one is generous. With items and specifics shared (`_Shared`) an analysis
# costs about 0.7 KB on the bench corpus (tracemalloc; 3.5 KB unshared): a full memo about 50 MB, a 100k cycle's
# about 20 MB.
SPECIFICS_MEMO_SIZE: Final = 1 << 16
_EMPTY: Final[frozenset[str]] = frozenset()


@dataclass(frozen=True, slots=True)
class _Analysis:
    own: tuple[Specific, ...]  # the specifics under the text's own lowercase evidence
    demotable: tuple[str, ...]  # keys of the demotable words
    own_demoted: frozenset[str]  # those the text's own evidence demotes
    items: tuple[_Item, ...]  # everything found, in order; empty when nothing is demotable (never needed then)


class _Shared:
    """One object per distinct item and specific across analyses: the same names, numbers and dates recur across
    a corpus (about 4k distinct among 80k at 10k entries), and immutable values can be shared. Specifics are
    keyed with their date contexts, which their equality ignores. Cleared when it outgrows the memo, which only
    loses sharing from then on."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._items: dict[_Item, _Item] = {}
        self._specifics: dict[tuple[str, str, str, tuple[dates.PartialDate, ...]], Specific] = {}

    def item(self, item: _Item) -> _Item:
        return self._items.setdefault(item, item)

    def specific(self, specific: Specific) -> Specific:
        key = (specific.text, specific.kind, specific.key, specific.date_contexts)
        return self._specifics.setdefault(key, specific)

    def trim(self, force: bool = False) -> None:
        if force or len(self._items) + len(self._specifics) > self._limit:
            self._items.clear()
            self._specifics.clear()


_SHARED: Final = _Shared(4 * SPECIFICS_MEMO_SIZE)


@lru_cache(maxsize=SPECIFICS_MEMO_SIZE)
def _analysis(text: str, exempt: bool, vocabulary: Vocabulary) -> _Analysis:
    """Keyed by text, numeric exemption (all the category decides) and vocabulary *content* (pydantic equality
    and hashing of the frozen model), so every `Vocabulary()` with the same lists shares one memo."""
    _SHARED.trim()
    scanned, own_evidence = _scan(tokens_of(text), exempt, vocabulary)
    items = tuple(_SHARED.item(item) for item in scanned)
    demotable = tuple(dict.fromkeys(item[2] for item in items if item[4]))
    own_demoted = frozenset(key for key in demotable if key in own_evidence) or _EMPTY
    own = tuple(_SHARED.specific(specific) for specific in _collect(items, own_demoted))
    return _Analysis(own, demotable, own_demoted, items if demotable else ())


def _specifics_under(analysis: _Analysis, evidence: frozenset[str]) -> list[Specific]:
    """The analysed text's specifics under ``evidence``. Evidence acts on demotable words only, and only through
    membership of their key: the same demoted keys give the same item sequence, hence the same result."""
    demoted = frozenset(key for key in analysis.demotable if key in evidence) or _EMPTY
    if demoted == analysis.own_demoted:
        return list(analysis.own)
    return _collect(analysis.items, demoted)


def specifics_memo_info() -> tuple[int, int, int]:
    """(hits, misses, current size) of the extraction memo: for tests and benchmarks."""
    info = _analysis.cache_info()
    return info.hits, info.misses, info.currsize


def clear_specifics_memo() -> None:
    _analysis.cache_clear()
    _SHARED.trim(force=True)


# --- extraction --------------------------------------------------------------------------------------------


def _collect(items: Iterable[_Item], demoted: frozenset[str]) -> list[Specific]:
    collector = _Collector()
    for value, kind, key, context, demotable in items:
        if not (demotable and key in demoted):
            collector.add(value, kind, key, context)
    return collector.result()


def _extract(text: str, category: str | None, vocabulary: Vocabulary, evidence: frozenset[str]) -> list[Specific]:
    items, _ = _scan(read_tokens(text), vocabulary.is_numeric_exempt(category), vocabulary)
    return _collect(items, evidence)


def _scan(tokens: Tokens, exempt: bool, vocabulary: Vocabulary) -> tuple[list[_Item], frozenset[str]]:
    """What a prepared text holds, whatever the evidence: its items in position order (a stable sort, so items
    at one offset keep the order technical, phone, number, word) and its own lowercase evidence."""
    text = tokens.text
    found: list[tuple[int, _Item]] = [
        (token.start, (token.value, token.kind, chunk_key(token.value), None, False))
        for token in technical_tokens(text, vocabulary, tokens.chunked)
    ]

    phone_spans = phones(text)
    for start, end, digits in phone_spans:
        found.append((start, (text[start:end], "phone", digits, None, False)))

    expressions = tokens.month_dates
    number_contexts = {
        span: expression.date
        for expression in expressions
        for span in (expression.day_span, expression.year_span)
        if span is not None
    }
    for start, end, token in tokens.numbers:
        if within(phone_spans, start, end):
            continue  # part of a phone number, which is protected whole
        numeric = dates.numeric_date(token)
        if numeric is not None:
            found.append((start, (token, "date", number_key(token), numeric.date, False)))
            continue
        context = number_contexts.get((start, end))
        if exempt and context is None:
            continue  # telemetry in an exempt category; dates and phones stay protected there
        found.append((start, (token, "number", number_key(token), context, False)))

    month_contexts = {expression.month_span: expression.date for expression in expressions}
    # `lowercase_evidence` computes the addresses without the chunks; the spans are the same either way.
    evidence: set[str] = set()
    listed = tokens.listed
    named = _named_mid_sentence(text, listed)
    joined = _joined_to_a_name(text, listed)
    for word in listed:
        evidence_key = _evidence_key(word, vocabulary)
        if evidence_key is not None:
            evidence.add(evidence_key)
            continue  # an all-lowercase word is never a specific by itself (identifiers are judged on chunks)
        verdict = _judge_word(text, word, vocabulary, named, word.start in joined)
        if verdict is not None:
            kind, demotable = verdict
            key = fold(word.text)
            context = month_contexts.get((word.start, word.end)) if key in MONTHS else None
            found.append((word.start, (word.text, kind, key, context, demotable)))

    found.sort(key=lambda item: item[0])
    return [item for _, item in found], frozenset(evidence)


def _named_mid_sentence(text: str, listed: Sequence[Word]) -> frozenset[str]:
    """Keys of the capitalised words the text writes mid-sentence: there they are names, so they are names at the
    start of a sentence too ("Hunter called. I thanked Hunter.")."""
    return frozenset(
        fold(word.text)
        for word in listed
        if word.script == "cased" and word.text[0].isupper() and not is_sentence_initial(text, word.start)
    )


def _capitalised(word: Word) -> bool:
    return word.script == "cased" and word.text[0].isupper()


def _spaced(text: str, left: Word, right: Word) -> bool:
    return all(c in " \t" for c in text[left.end : right.start]) and left.end < right.start


def _joined_to_a_name(text: str, listed: Sequence[Word]) -> frozenset[int]:
    """Starts of capitalised words joined to a following capitalised word: the first word of a multi-word name
    ("Personal OneDrive", "Blue Origin") or a coordinated one ("Briefing and Triage")."""
    starts: set[int] = set()
    for i, word in enumerate(listed[:-1]):
        if not _capitalised(word):
            continue
        after = listed[i + 1]
        if not _spaced(text, word, after):
            continue
        if _capitalised(after):
            starts.add(word.start)
            continue
        third = listed[i + 2] if i + 2 < len(listed) else None
        if third is not None and after.text in ("and", "or") and _spaced(text, after, third) and _capitalised(third):
            starts.add(word.start)
    return frozenset(starts)


def _is_past_tense(key: str) -> bool:
    """A verb that opens a memory followed by its object's name ("Met Tomasz", "Called Allen"): regular -ed
    forms of dictionary words, and the common irregular past forms."""
    return key in IRREGULAR_PAST_OPENERS or (key.endswith("ed") and is_plain_english_word(key))


def is_ordinary_opener(
    word: str, vocabulary: Vocabulary, named: frozenset[str] = frozenset(), joined: bool = False
) -> bool:
    """Whether a capitalised word is ordinary language when it opens a sentence (#18 finding 8: "Met", "Repo",
    "Merge" were taken as specifics, so a merge that starts a sentence differently lost or invented them).

    RockBot's baseline and the imperative openers are. So is any plain dictionary word ("Met", "Repo", "She"),
    unless it is also a name (`NAMES_THAT_ARE_WORDS`), a month (dates), written capitalised mid-sentence in the same
    text (``named``), or the first word of a multi-word or coordinated name (``joined``: "Personal OneDrive",
    "Briefing and Triage" stay protected, as in RockBot) — a past-tense verb before a name is still ordinary
    ("Met Tomasz")."""
    key = fold(word)
    if vocabulary.is_baseline_common(word) or key in SENTENCE_OPENERS:
        return True
    if not key.isascii() or key in named or key in NAMES_THAT_ARE_WORDS or key in MONTHS:
        return False
    if joined and not _is_past_tense(key):
        return False
    return is_plain_english_word(key)


def _judge_word(
    text: str, word: Word, vocabulary: Vocabulary, named: frozenset[str] = frozenset(), joined: bool = False
) -> tuple[SpecificKind, bool] | None:
    """A word's kind if it is a specific, and whether lowercase evidence of its key would make it ordinary."""
    if word.script != "cased":
        # Scripts without letter case cannot mark names, so every word of two or more letters is protected.
        return ("caseless", False) if len(word.text) >= 2 else None
    spelled = word.text
    if not spelled[0].isupper() or len(spelled) < 2:
        return None  # lowercase words are judged as identifiers, on whole tokens
    if vocabulary.is_always_specific(spelled):
        return ("acronym" if spelled.isupper() else "name", False)
    if spelled.isupper():
        return None if vocabulary.is_common(spelled) else ("acronym", False)
    key = fold(spelled)
    if vocabulary.is_extra_common(spelled):
        return None
    if len(spelled) == 2:
        return None if key in TWO_LETTER_COMMON_WORDS else ("name", True)
    if is_sentence_initial(text, word.start) and is_ordinary_opener(spelled, vocabulary, named, joined):
        return None
    # Kept unless the evidence writes it in lowercase (the old `key in evidence` test, moved out of the pass).
    return ("name", True)


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
