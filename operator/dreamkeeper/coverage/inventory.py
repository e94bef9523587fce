"""The token inventory of one or many texts, and the one rule deciding whether it covers a specific.

A merged text is reduced to sets of whole tokens (words, numbers, technical tokens, phone digit strings, runs
of unspaced scripts, dates). Coverage is membership, never substring search, except inside runs of scripts
written without spaces (CJK, Thai...), where no word boundary exists to respect. Counts make the same structure
serve as a multiset for the corpus-wide census (`CoverageIndex`): adding and removing texts is exact.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import TypeVar

from dreamkeeper.coverage import dates
from dreamkeeper.coverage.specifics import Specific
from dreamkeeper.coverage.text import (
    CONTINUOUS_CHAR_RE,
    Chunk,
    chunk_key,
    fold,
    number_key,
    phone_digit_keys,
    sub_pieces,
)
from dreamkeeper.coverage.tokens import tokens_of

# Every key an inventory holds is interned: a corpus says the same words, numbers and chunks again and again, and an
# inventory's keys were most of its memory (4.7 KB a text of ~100 characters, 2.1 KB interned). A cycle keeps the
# inventories of its merges' successors from validation to the end-of-run check (check.py's memo), so this is what
# lets the memo hold a large cycle's merges in the memory it held fewer in (issue 27). Interning changes no
# comparison: keys are compared by value, and an interned string is equal to every string it was made from.
_intern = sys.intern


def _chunk_keys(chunked: Iterable[Chunk]) -> Iterator[str]:
    for chunk in chunked:
        if chunk.text.isascii() and chunk.text.isalpha():
            continue  # one plain word: in the word set, where identifiers made of letters are looked up too
        yield _intern(chunk_key(chunk.text))
        if any(separator in chunk.text for separator in "=/@"):
            for piece in sub_pieces(chunk.text):
                yield _intern(chunk_key(piece))


def _bigrams(run: str) -> set[str]:
    return {run[i : i + 2] for i in range(len(run) - 1)}


class Inventory:
    """Multiset of the tokens of the texts added to it."""

    __slots__ = ("_bigram_runs", "chunks", "date_keys", "full_dates", "numbers", "phones", "runs", "words")

    def __init__(self) -> None:
        self.words: Counter[str] = Counter()
        self.numbers: Counter[str] = Counter()
        self.chunks: Counter[str] = Counter()
        self.phones: Counter[str] = Counter()
        self.runs: Counter[str] = Counter()
        # Projections of every date stated (numeric or month-name): ("m", 8), ("ym", 2026, 8), ("y", 2026) ...
        self.date_keys: Counter[dates.DateKey] = Counter()
        # Full dates an ISO date may be rewritten as: month-name dates and other year-first spellings.
        self.full_dates: Counter[tuple[str, int, int, int]] = Counter()
        self._bigram_runs: dict[str, Counter[str]] = {}

    @classmethod
    def of(cls, text: str) -> Inventory:
        inventory = cls()
        inventory.add(text)
        return inventory

    def add(self, text: str) -> None:
        self._apply(text, +1)

    def remove(self, text: str) -> None:
        self._apply(text, -1)

    def _apply(self, text: str, sign: int) -> None:
        tokens = tokens_of(text)  # read once for extraction and inventory alike (coverage/tokens.py)
        prepared = tokens.text
        word_keys: list[str] = []
        run_keys: list[str] = []
        for word in tokens.listed:
            key = _intern(fold(word.text))
            word_keys.append(key)
            if word.script == "continuous":
                run_keys.append(key)
        number_keys: list[str] = []
        date_keys: list[dates.DateKey] = []
        full_dates: list[tuple[str, int, int, int]] = []
        for _, _, token in tokens.numbers:
            number_keys.append(_intern(number_key(token)))
            numeric = dates.numeric_date(token)
            if numeric is not None:
                date_keys.extend(numeric.date.projections())
                if numeric.year_first:
                    full_dates.append(("ymd", *_full(numeric.date)))
        for expression in tokens.month_dates:
            date_keys.extend(expression.date.projections())
            if expression.date.year is not None and expression.date.day is not None:
                full_dates.append(("named", *_full(expression.date)))
        _update(self.words, word_keys, sign)
        _update(self.numbers, number_keys, sign)
        _update(self.chunks, _chunk_keys(tokens.chunked), sign)
        _update(self.phones, map(_intern, phone_digit_keys(prepared)), sign)
        _update(self.date_keys, date_keys, sign)
        _update(self.full_dates, full_dates, sign)
        for run in run_keys:
            before = self.runs[run]
            _update(self.runs, (run,), sign)
            if (before > 0) != (self.runs[run] > 0):
                for bigram in _bigrams(run):
                    holders = self._bigram_runs.setdefault(bigram, Counter())
                    _update(holders, (run,), sign)
                    if not holders:
                        del self._bigram_runs[bigram]

    def run_contains(self, key: str) -> bool:
        if key in self.runs:
            return True
        holders = self._bigram_runs.get(key[:2])
        return holders is not None and any(key in run for run in holders)

    def covers(self, specific: Specific) -> bool:
        return covers(specific, self)


_K = TypeVar("_K")


def _full(date: dates.PartialDate) -> tuple[int, int, int]:
    assert date.year is not None and date.day is not None
    return (date.year, date.month, date.day)


def _update(counter: Counter[_K], keys: Iterable[_K], sign: int) -> None:
    if sign > 0:
        counter.update(keys)
        return
    for key in keys:
        count = counter[key] + sign
        if count > 0:
            counter[key] = count
        else:
            del counter[key]


def _dates_credit(specific: Specific, inventory: Inventory) -> bool:
    """Every date this month name or number took part in is stated by the merged text (any spelling)."""
    return bool(specific.date_contexts) and all(
        context.projection() in inventory.date_keys for context in specific.date_contexts
    )


def covers(specific: Specific, inventory: Inventory) -> bool:
    """Whether ``inventory`` keeps ``specific``: a whole-token match, or an equivalent date spelling."""
    key = specific.key
    kind = specific.kind
    if kind in ("name", "acronym"):
        if specific.date_contexts:
            # A month name that only ever appeared inside dates is kept only if those dates are: "July 8, 2027"
            # is not kept by "July 9, 2027" (a single-digit day is no specific of its own).
            return _dates_credit(specific, inventory)
        return key in inventory.words
    if kind == "caseless":
        if CONTINUOUS_CHAR_RE.search(key):
            return inventory.run_contains(key)
        return key in inventory.words
    if kind == "identifier":
        return key in inventory.chunks or (key.isalpha() and key in inventory.words)
    if kind in ("email", "url", "host", "path"):
        return key in inventory.chunks
    if kind == "phone":
        return key in inventory.phones
    if kind == "number":
        if key in inventory.numbers or _dates_credit(specific, inventory):
            return True
        # "Rockford filed in 2026" is kept by "filed on 2026-04-15": the year is stated.
        return dates.is_year(key) and ("y", int(key)) in inventory.date_keys
    if kind == "date":
        if key in inventory.numbers:
            return True
        numeric = dates.numeric_date(key)
        if numeric is None:
            return False
        full = _full(numeric.date)
        # An ISO date may be respelled as a month-name date or another year-first form, never as M/D/YYYY
        # (which is ambiguous with D/M/YYYY); "08-19" alone is never a date.
        return ("named", *full) in inventory.full_dates or (
            numeric.year_first and ("ymd", *full) in inventory.full_dates
        )
    raise AssertionError(f"unknown specific kind {kind!r}")
