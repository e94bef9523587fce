"""An independent re-implementation of RockBot's `MergeCoverage` as documented (reference §3.1-§3.6).

Used by the evaluation (a column next to our check) and by tests that show a case RockBot wrongly accepts.
Only what the reference describes: capitalised words (>= 3 letters), acronyms, numbers of >= 2 digits, the
sentence-position baseline, lowercase evidence from sources *and* the merged text, case-insensitive **substring**
coverage, and RockBot's date equivalence (month credited by any numeric date of that month whose year is one of
the years written next to the month; an ISO date credited by a month-name date of the same day).
"""

from __future__ import annotations

from collections.abc import Sequence

import regex

from dreamkeeper.coverage import SourceText, Vocabulary
from dreamkeeper.coverage.dates import month_name_dates, numeric_date
from dreamkeeper.coverage.stoplist import BASELINE_COMMON_WORDS, MONTHS
from dreamkeeper.coverage.text import is_sentence_initial

_CAPITALISED = regex.compile(r"(?<![\p{L}\p{N}_'])\p{Lu}[\p{L}']{2,}")
_ACRONYM = regex.compile(r"(?<![\p{L}\p{N}_])\p{Lu}{2,}(?![\p{L}\p{N}_])")
_NUMBER = regex.compile(r"\d(?:[.,:/\-]?\d)+")
_LOWER = regex.compile(r"[\p{L}']+")


def _strip(word: str) -> str:
    for suffix in ("'s", "’s"):
        if word.endswith(suffix):
            return word[: -len(suffix)]
    return word.rstrip("'’")


def _extract(text: str, category: str | None, vocabulary: Vocabulary, evidence: set[str]) -> list[str]:
    found: list[str] = []
    for match in _CAPITALISED.finditer(text):
        word = _strip(match.group())
        if len(word) <= 2:
            continue
        if not vocabulary.is_always_specific(word):
            if vocabulary.is_extra_common(word):
                continue
            if word.lower() in BASELINE_COMMON_WORDS and is_sentence_initial(text, match.start()):
                continue
            if word.lower() in evidence:
                continue
        found.append(word)
    for match in _ACRONYM.finditer(text):
        word = match.group()
        if vocabulary.is_always_specific(word) or not vocabulary.is_common(word):
            found.append(word)
    if not vocabulary.is_numeric_exempt(category):
        found.extend(match.group() for match in _NUMBER.finditer(text))
    return found


def _month_credited(month_word: str, sources: Sequence[str], merged: str) -> bool:
    month = MONTHS.get(month_word.lower())
    if month is None:
        return False
    expressions = [e for text in sources for e in month_name_dates(text) if e.date.month == month]
    if not expressions:
        return False  # a bare month name (a person) is never credited
    years = {e.date.year for e in expressions if e.date.year is not None}
    for match in _NUMBER.finditer(merged):
        numeric = numeric_date(match.group())
        if numeric and numeric.date.month == month and (not years or numeric.date.year in years):
            return True
    return False


def _iso_credited(token: str, merged: str) -> bool:
    numeric = numeric_date(token)
    if numeric is None or not numeric.year_first:
        return False
    return any(e.date == numeric.date for e in month_name_dates(merged))


def rockbot_missing(sources: Sequence[SourceText], merged: str, vocabulary: Vocabulary | None = None) -> list[str]:
    """RockBot's verdict: the specifics it would report missing (empty = it accepts the merge)."""
    vocabulary = vocabulary or Vocabulary()
    texts = [s.text for s in sources]
    evidence = {token.lower() for text in (*texts, merged) for token in _LOWER.findall(text) if token == token.lower()}
    required: dict[str, str] = {}
    for source in sources:
        for specific in _extract(source.text, source.category, vocabulary, evidence):
            required.setdefault(specific.lower(), specific)
    lowered = merged.lower()
    missing = [
        specific
        for key, specific in required.items()
        if key not in lowered and not _month_credited(specific, texts, merged) and not _iso_credited(specific, merged)
    ]
    return sorted(missing, key=lambda s: (s.upper(), s))
