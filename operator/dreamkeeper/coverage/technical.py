"""Technical tokens: e-mail addresses, URLs, host names, file paths, @handles, identifiers and phone numbers.

RockBot protected none of these (reference §6.2): "marimer-work", "rockyl", "gpt-4o", "W-9", "S3",
"atconway@bellsouth.net" or "+33 6 12 34 56 78" could all be dropped by a merge. A token is judged whole, after
trimming sentence punctuation; "/"- and "="-separated parts are judged on their own unless the whole is a path.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

import regex

from dreamkeeper.coverage.lexicon import is_english_word
from dreamkeeper.coverage.stoplist import word_set
from dreamkeeper.coverage.text import NUMBER_RE, Chunk, chunks, fold, trim
from dreamkeeper.coverage.vocabulary import DEFAULT_VOCABULARY, Vocabulary

TechnicalKind = Literal["email", "url", "host", "path", "identifier"]

# --- classification --------------------------------------------------------------------------------------

_EMAIL_RE: Final = regex.compile(r"(?:mailto:)?[\p{L}\p{N}._%+\-']+@[\p{L}\p{N}\-]+(?:\.[\p{L}\p{N}\-]+)*\.\p{L}{2,}")
_URL_RE: Final = regex.compile(r"(?i)(?:[a-z][a-z0-9+.\-]*://|www\.)[^\s]+")
# Possessive repetitions (``++``, ``*+``) where giving back can never lead to a match: a failing fullmatch of a long
# token ("a.a.a." ..., "1.1.1." ...) backtracked quadratically without them (5 s at 128 KB). Same matches.
_HOST_RE: Final = regex.compile(r"(?:[\p{L}\p{N}](?:[\p{L}\p{N}\-]*[\p{L}\p{N}])?\.)++(?P<tld>\p{L}{2,})")
_EXTENSION_RE: Final = regex.compile(r"[\p{L}\p{N}]{1,5}")
_FILE_STEM_CHAR_RE: Final = regex.compile(r"[\p{L}\p{N}_\-]")
_PATH_SEPARATOR_RE: Final = regex.compile(r"[\s/\\]")
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
    r"(?i)\d++(?:[.,:]\d++)*+(?:st|nd|rd|th|am|pm|s|ms|h|hr|hrs|m|min|mins|d|k|x|kb|mb|gb|tb|kg|g|km|cm|mm|mi|"
    r"ft|lb|lbs|oz|ml|l|hz|khz|mhz|ghz|w|kw|v|mph|kph|fps|dpi|px|pt|p|y|yr|yrs|yo|wk|wks|mo|mos|%)"
)


def file_extension(piece: str) -> str | None:
    """The extension of a file name ("notes.md" -> "md"): 1-5 letters or digits after the last dot, a stem with a
    letter, digit, "_" or "-", no whitespace or path separator anywhere. The single pattern this replaces (any
    stem, a stem character, any stem, a dot, the extension) backtracked quadratically on a long token that is no
    file name: "a@a." repeated took 8 s at 20 KB. tests/coverage/test_linear.py checks the two agree."""
    stem, dot, extension = piece.rpartition(".")
    if not dot or not _EXTENSION_RE.fullmatch(extension) or _PATH_SEPARATOR_RE.search(piece):
        return None
    return extension if _FILE_STEM_CHAR_RE.search(stem) else None


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


@lru_cache(maxsize=1 << 15)
def _plain_word_is_ordinary(word: str) -> bool | None:
    """`_part_is_ordinary` of one A-Z word with no digit beside it, as far as it does not depend on the vocabulary:
    None when only the vocabulary's extra common words can make it ordinary (its last question), so the memo is the
    same for every vocabulary. Extraction asks it of every plain word of every text; a corpus repeats its words."""
    if _UNIT_RE.fullmatch(word):
        return True
    if len(word) == 1 or word[0].isupper():
        return True
    if any(ch.isupper() for ch in word[1:]):
        return False  # camelCase: "iPhone", "accountId"
    lowered = word.casefold()
    if len(lowered) <= 2 or is_english_word(lowered):
        return True
    return None


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


def _classify(piece: str, vocabulary: Vocabulary) -> Iterator[tuple[str, TechnicalKind]]:
    """The technical specifics one trimmed token holds (none, itself, or its "/"-separated parts)."""
    if piece.isascii() and piece.isalpha():
        # Most tokens are plain English words; same answer as `_classify_full`, without its patterns: each of them
        # needs a character that is not a letter ("@", "://", "www.", "/", "\\", ":", "#", ".", a digit), so only
        # the identifier rule applies, and for A-Z letters only it is its one-part rule (no "_", "-", digit, unit).
        ordinary = _plain_word_is_ordinary(piece)
        if ordinary is None:  # the lexicon does not know it: the deployment's vocabulary decides
            ordinary = vocabulary.is_extra_common(piece.casefold())
        if not ordinary:
            yield piece, "identifier"
        return
    yield from _classify_full(piece, vocabulary)


def _classify_full(piece: str, vocabulary: Vocabulary) -> Iterator[tuple[str, TechnicalKind]]:
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
        extension = file_extension(piece.rsplit("/", 1)[1])
        if extension is not None and fold(extension) in _FILE_EXTENSIONS:
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
        extension = file_extension(piece)
        if extension is not None and fold(extension) in _FILE_EXTENSIONS:
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
        if any(_is_identifier(label, vocabulary) for label in labels if label):
            # No host, file or address pattern claims it, yet a part is a code: a malformed address is still
            # someone's ("johnsmc_johnsales.com", #18 finding 7), "northwind.example" still a place.
            yield piece, "identifier"
        return
    if _is_identifier(piece, vocabulary):
        yield piece, "identifier"


def _technical_pieces(chunk: Chunk) -> Iterator[str]:
    """A chunk, or its "="-separated parts ("accountId=rockyl"); URLs are kept whole."""
    if "=" not in chunk.text or _URL_RE.fullmatch(chunk.text):  # the cheap test first: most chunks have no "="
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
    kind: TechnicalKind


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


def inside(spans: Sequence[tuple[int, int]], start: int) -> bool:
    """Whether offset ``start`` falls inside one of the sorted, disjoint ``spans``."""
    index = bisect_right(spans, (start, sys.maxsize)) - 1
    return index >= 0 and spans[index][0] <= start < spans[index][1]


# --- phones ------------------------------------------------------------------------------------------------

# A phone never ends on a digit group that goes on as another number ("+1 386-299-4605 8/19/2026": the 8 starts
# a date, 8.5 or 8:30 a value): the match gives that group back instead. A parenthesised group is an area code and
# only follows the country code ("+1 (651) 555-0199", "+44 (0)20 7946 0958"): in "+1 386-299-4605 (651) 555-0199"
# the "(651)" starts the second number.
_NOT_A_NUMBER_GOING_ON = r"(?![/.:\-]\d)"
_PHONE_RES: Final = (
    regex.compile(
        r"(?<![\w+])\+\d{1,3}(?:[ .\-]?\(\d{1,4}\))?(?:[ .\-]?\d{1,4}){1,5}(?![\w])" + _NOT_A_NUMBER_GOING_ON
    ),
    regex.compile(r"(?<![\w\-.])(?:\(\d{3}\)[ ]?|\d{3}[\-.])\d{3}[\-.]\d{4}(?![\w\-])" + _NOT_A_NUMBER_GOING_ON),
    regex.compile(r"(?<![\w\-.(])\d{3}-\d{4}(?![\w\-])" + _NOT_A_NUMBER_GOING_ON),
)


def phones(text: str) -> list[tuple[int, int, str]]:
    """Phone numbers of a prepared text as (start, end, digits), in position order: "+1 386-299-4605",
    "(612) 555-1234". An earlier pattern's match wins over an overlapping later one."""
    spans: list[tuple[int, int, str]] = []
    for pattern in _PHONE_RES:
        taken = [(start, end) for start, end, _ in spans]  # sorted and disjoint: overlap is a bisection away
        added: list[tuple[int, int, str]] = []
        for match in pattern.finditer(text):
            start, end = _without_a_dotted_tail(text, *match.span())
            digits = "".join(ch for ch in text[start:end] if ch.isdigit())
            if not 7 <= len(digits) <= 15 or _overlaps(taken, start, end):
                continue
            added.append((start, end, digits))
        spans = sorted((*spans, *added))
    return spans


def _without_a_dotted_tail(text: str, start: int, end: int) -> tuple[int, int]:
    """A phone keeps one style of separator once its groups use dots or dashes ("+1.651.555.0199",
    "+1 386-299-4605", "+44 20 7946 0958"): a run of dotted groups after spaced ones, or a spaced group after dashed
    or dotted ones, is a value of its own ("+1 386-299-4605 8.33", "+1 386-299-4605 42")."""
    first_dot = text.find(".", start, end)
    cut = text.rfind(" ", start, first_dot) if first_dot > 0 else -1
    if cut > start:
        return start, cut
    joined = _JOINED_GROUPS.search(text, start, end)
    cut = text.find(" ", joined.end(), end) if joined else -1
    return (start, cut) if cut > start else (start, end)


_JOINED_GROUPS: Final = regex.compile(r"\d[\-.]\d")


def _overlaps(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    """Whether [start, end) overlaps one of the sorted, disjoint ``spans``."""
    index = bisect_right(spans, (start, sys.maxsize))
    return (index > 0 and spans[index - 1][1] > start) or (index < len(spans) and spans[index][0] < end)


def within(spans: Sequence[tuple[int, int, str]], start: int, end: int) -> bool:
    """Whether [start, end) lies inside one of the sorted, disjoint ``spans`` (as ``phones`` returns them)."""
    index = bisect_right(spans, (start, sys.maxsize, "")) - 1
    return index >= 0 and spans[index][0] <= start and end <= spans[index][1]
