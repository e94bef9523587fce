"""One text's tokens, read once for both sides of the coverage check.

Extraction (``specifics._scan``: what a text must keep) and the inventory (``inventory.Inventory``: what a text
keeps) tokenise a text the same way: its chunks, the address spans inside them, the words outside those, its
numbers and its month-name dates. A cycle asks both of most texts it reads (subsumption extracts a member's
specifics and builds its inventory; validation and the census again), so the tokens of the last texts read are
kept in a small memo (``tokens_of``), and each side reads them from there. The memo only saves work: ``read_tokens``
gives the same tokens from scratch (tests/coverage/test_tokens.py), and a texts's tokens are immutable.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from dreamkeeper.coverage import dates
from dreamkeeper.coverage.technical import address_spans, inside
from dreamkeeper.coverage.text import NUMBER_RE, Chunk, Word, chunks, prepare, words


@dataclass(frozen=True, slots=True)
class Tokens:
    """A prepared text and what both sides of the coverage check read of it (every offset is into ``text``)."""

    text: str
    chunked: tuple[Chunk, ...]
    addresses: tuple[tuple[int, int], ...]  # sorted, disjoint spans of technical tokens that are no plain word
    listed: tuple[Word, ...]  # the words outside those spans, in order
    numbers: tuple[tuple[int, int, str], ...]  # NUMBER_RE's matches: start, end, token
    month_dates: tuple[dates.DateExpression, ...]


def read_tokens(prepared: str) -> Tokens:
    """The tokens of an already prepared text, read from scratch."""
    chunked = tuple(chunks(prepared))
    addresses = tuple(address_spans(prepared, chunked))
    if addresses:
        listed = tuple(word for word in words(prepared) if not inside(addresses, word.start))
    else:
        listed = tuple(words(prepared))  # most texts hold no address: no word to leave out
    numbers = tuple((match.start(), match.end(), match.group()) for match in NUMBER_RE.finditer(prepared))
    return Tokens(prepared, chunked, addresses, listed, numbers, tuple(dates.month_name_dates(prepared)))


TOKENS_MEMO_SIZE: Final = 1 << 10
"""Texts whose tokens are kept: the last ones read. Subsumption reads a component's members one after the other
(a member's specifics, then its inventory when it hosts another); ~10 KB a text, so ~10 MB at most."""


@lru_cache(maxsize=TOKENS_MEMO_SIZE)
def tokens_of(text: str) -> Tokens:
    """The tokens of ``text`` (prepared here), from the memo when it was read lately."""
    return read_tokens(prepare(text))


def clear_tokens_memo() -> None:
    tokens_of.cache_clear()


__all__ = ["TOKENS_MEMO_SIZE", "Tokens", "clear_tokens_memo", "read_tokens", "tokens_of"]
