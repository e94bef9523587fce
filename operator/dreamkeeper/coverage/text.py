"""Tokenisation shared by extraction and coverage, so a text always covers every specific extracted from it.

Both sides of the check (the sources being mined for specifics and the merged text being searched) go through
the same functions here. That is what makes the check whole-token instead of substring: "prose" is one word
token and never contains the token "rose"; "2010" is one number token and never contains "10".
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from typing import Final, Literal, NamedTuple

import regex

from dreamkeeper.coverage.stoplist import NON_TERMINAL_ABBREVIATIONS

# Curly and modifier apostrophes become ASCII so "Rocky’s" and "Rocky's" tokenise alike.
_APOSTROPHES: Final = str.maketrans({"\u2019": "'", "\u02bc": "'", "\uff07": "'"})


def prepare(text: str) -> str:
    """NFKC-normalise a text (full-width forms, ligatures) and unify apostrophes; offsets refer to the result."""
    return unicodedata.normalize("NFKC", text).translate(_APOSTROPHES)


def fold(text: str) -> str:
    """The comparison key of a token: NFKC + casefold (so "STRASSE" == "straße", "ＸＥＢＩＡ" == "xebia")."""
    if text.isascii():
        return text.lower()  # NFKC is the identity on ASCII and casefold is lower()
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold())


# --- words -------------------------------------------------------------------------------------------------

# Scripts written without spaces between words: a run of them is compared as a run (see continuous_covered).
# Hiragana is mostly grammar in Japanese, so it separates runs instead of joining them.
_CONTINUOUS: Final = r"\p{Han}\p{Katakana}\p{Thai}\p{Lao}\p{Khmer}\p{Myanmar}\p{Tibetan}\p{Yi}\u30fc\u3005\u3006"
_CASED: Final = r"\p{Lu}\p{Ll}\p{Lt}"
_CASELESS: Final = rf"[[\p{{Lo}}\p{{Lm}}]--[{_CONTINUOUS}\p{{Hiragana}}]]"
WORD_RE: Final = regex.compile(
    rf"(?V1)(?P<cased>[{_CASED}][{_CASED}\p{{M}}]*(?:'[{_CASED}][{_CASED}\p{{M}}]*)*)"
    rf"|(?P<continuous>[{_CONTINUOUS}][{_CONTINUOUS}\p{{M}}]*)"
    rf"|(?P<caseless>{_CASELESS}(?:{_CASELESS}|\p{{M}})*)"
)
CONTINUOUS_CHAR_RE: Final = regex.compile(rf"[{_CONTINUOUS}]")

WordClass = Literal["cased", "continuous", "caseless"]


class Word(NamedTuple):
    """A run of letters (apostrophes allowed inside cased words), possessive already stripped. A named tuple, not a
    frozen dataclass: a text has dozens and a cold cycle reads thousands of texts, and a frozen dataclass's
    ``__init__`` (one ``object.__setattr__`` a field) cost several times a tuple's construction."""

    text: str
    start: int
    end: int
    script: WordClass


def strip_possessive(word: str) -> str:
    if len(word) > 2 and word[-2:] in ("'s", "'S"):
        return word[:-2]
    return word


# WORD_RE on a text of ASCII characters only: the only letters there are A-Z and a-z (cased; no marks, no
# caseless or continuous scripts), so this pattern finds the same matches, all "cased", with the standard library's
# engine, about twice as fast as the Unicode-property pattern (a cold cycle reads thousands of texts; issue 27).
_ASCII_WORD_RE: Final = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)*")


def words(text: str) -> Iterator[Word]:
    """Word tokens of a prepared text. Hyphens, digits and punctuation end a word; "OneDrive" is one word."""
    if text.isascii():
        for ascii_match in _ASCII_WORD_RE.finditer(text):
            raw = ascii_match.group()
            if len(raw) > 2 and raw[-2:] in ("'s", "'S"):
                raw = raw[:-2]
            start = ascii_match.start()
            yield Word(raw, start, start + len(raw), "cased")
        return
    for match in WORD_RE.finditer(text):
        script: WordClass = match.lastgroup  # type: ignore[assignment]
        raw = match.group()
        if script == "cased" and len(raw) > 2 and raw[-2:] in ("'s", "'S"):
            raw = raw[:-2]  # strip_possessive, inline: this loop runs for every word of every text read
        start = match.start()
        yield Word(raw, start, start + len(raw), script)


# --- numbers -----------------------------------------------------------------------------------------------

# RockBot's number rule: a digit followed by one or more digits, each optionally preceded by . , : / -
NUMBER_RE: Final = regex.compile(r"\d(?:[.,:/\-]?\d)++")  # possessive: linear fullmatch (same matches)
_THOUSANDS_RE: Final = regex.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?")


def number_key(token: str) -> str:
    """ "1,000" and "1000" are the same number; other separators are significant ("2:00" is not "200")."""
    folded = fold(token)
    if _THOUSANDS_RE.fullmatch(folded):
        return folded.replace(",", "")
    return folded


# --- phone-like digit groups -------------------------------------------------------------------------------

# Digits separated by short runs of phone punctuation. A phone specific is covered when its digits equal a
# contiguous, group-aligned slice of such a run, so "612-555-1234" == "(612) 555-1234" == "6125551234", and
# "+1 386-299-4605" covers "386-299-4605" (a country code added) but not the reverse (a country code lost).
_DIGIT_RUN_RE: Final = regex.compile(r"\d+(?:[ \t.()\-]{1,3}\d+)*")
_DIGITS_RE: Final = regex.compile(r"\d+")
_MIN_PHONE_DIGITS: Final = 7
_MAX_PHONE_GROUPS: Final = 6


def phone_digit_keys(text: str) -> Iterator[str]:
    for run in _DIGIT_RUN_RE.finditer(text):
        groups = _DIGITS_RE.findall(run.group())
        for i in range(len(groups)):
            digits = ""
            for j in range(i, min(len(groups), i + _MAX_PHONE_GROUPS)):
                digits += groups[j]
                if len(digits) >= _MIN_PHONE_DIGITS:
                    yield digits


# --- chunks (whitespace-delimited technical tokens) --------------------------------------------------------

_CHUNK_RE: Final = regex.compile(r"[^\s,;|()\[\]{}<>\"“”«»`*—–…]+")
_LEADING: Final = "'‘¿¡"
_TRAILING: Final = ".:!?'"


def trim(piece: str) -> str:
    """Drop sentence punctuation and a possessive around a technical token ("lhotka.net's." -> "lhotka.net")."""
    while True:
        trimmed = piece.lstrip(_LEADING).rstrip(_TRAILING)
        trimmed = strip_possessive(trimmed)
        if trimmed == piece:
            return trimmed
        piece = trimmed


def chunk_key(piece: str) -> str:
    folded = fold(piece)
    return folded.rstrip("/") or folded


class Chunk(NamedTuple):
    """A trimmed chunk and its offset (a named tuple for the reason ``Word`` is one)."""

    text: str
    start: int


def chunks(text: str) -> Iterator[Chunk]:
    """Trimmed whitespace/bracket-delimited tokens of a prepared text, with their offsets."""
    for match in _CHUNK_RE.finditer(text):
        raw = match.group()
        last = raw[-1]
        if raw[0] not in _LEADING and last not in _TRAILING and last not in "sS":
            # Nothing for `trim` to take (no leading or trailing punctuation, no possessive): most chunks of a text.
            yield Chunk(raw, match.start())
            continue
        trimmed = trim(raw)
        if trimmed:
            yield Chunk(trimmed, match.start() + raw.index(trimmed))


def sub_pieces(piece: str) -> Iterator[str]:
    """Every sub-token a technical token can be cited by: its "=", "/" and "@" parts, nested in the order
    extraction splits them ("id=rockyl", "marimer-work/xebia", "user@xebia.com" -> "xebia.com")."""
    for assignment_part in piece.split("="):
        part = trim(assignment_part)
        if not part:
            continue
        yield part
        if part.startswith("mailto:"):
            yield part.removeprefix("mailto:")
        for path_part in part.split("/"):
            segment = trim(path_part)
            if not segment:
                continue
            yield segment
            for address_part in segment.split("@"):
                trimmed = trim(address_part)
                if trimmed:
                    yield trimmed


# --- sentence position -------------------------------------------------------------------------------------

_OPENERS: Final = "\"'([{“‘«"
_BULLETS: Final = "-*•–—"
_TERMINATORS: Final = ".!?:;"
_NEWLINES: Final = "\n\r\u2028\u2029\x0b\x0c\x85"


def is_sentence_initial(text: str, start: int) -> bool:
    """RockBot's rule (reference §3.3); errs toward "not initial", which keeps more words protected."""
    i = start - 1
    while i >= 0 and text[i] in _OPENERS:
        i -= 1
    while i >= 0 and text[i].isspace():
        if text[i] in _NEWLINES:
            return True
        i -= 1
    if i < 0:
        return True
    previous = text[i]
    if previous in _BULLETS:
        j = i - 1
        while j >= 0 and text[j] in " \t":
            j -= 1
        return j < 0 or text[j] in _NEWLINES
    if previous in _TERMINATORS:
        return not (previous == "." and _ends_abbreviation(text, i))
    return False


def _ends_abbreviation(text: str, dot: int) -> bool:
    j = dot
    while j > 0 and (text[j - 1].isalpha() or text[j - 1] == "."):
        j -= 1
    return text[j:dot].replace(".", "").casefold() in NON_TERMINAL_ABBREVIATIONS
