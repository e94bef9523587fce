"""A unit: the smallest piece of an agent's Markdown memory that consolidation keeps, merges or archives.

What a unit is depends on the file: a Markdown block under its heading path (a bullet with its sub-bullets and
continuation lines, a paragraph, a fenced block: OpenClaw's MEMORY.md and daily notes), a ``§`` entry (Hermes'
MEMORY.md and USER.md), or a whole file (one-file-per-memory layouts). Its **identity** is where it is and what it
says, normalised: the file, the heading path, the hash of its whitespace-collapsed text without a list marker, and
an ordinal among identical texts under the same heading. Reformatting (``*`` for ``-``, re-wrapped lines) keeps a
unit's identity; changing what it says makes it another unit (the old text is kept in the archive, never lost).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

UnitKind = Literal["core", "log", "file"]

HEADING_JOIN = " > "  # how a heading path is written in one string (unit records, logs, the archive)
_LIST_MARKER = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_SPACE = re.compile(r"\s+")


def normalise_text(text: str) -> str:
    """What a unit says, for its identity: NFC, one leading list marker dropped, whitespace runs collapsed."""
    text = unicodedata.normalize("NFC", text).strip()
    text = _LIST_MARKER.sub("", text, count=1)
    return _SPACE.sub(" ", text).strip()


def text_hash(text: str) -> str:
    """The first 16 hex digits of the SHA-256 of the normalised text (a unit's content half of its identity)."""
    return hashlib.sha256(normalise_text(text).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def heading_string(path: tuple[str, ...]) -> str:
    return HEADING_JOIN.join(path)


def heading_tuple(value: str | None) -> tuple[str, ...]:
    return tuple(value.split(HEADING_JOIN)) if value else ()


@dataclass(frozen=True, slots=True)
class UnitKey:
    """A unit's identity: file (relative to the agent's memory directory, '/'-separated), heading path, text hash,
    and its ordinal among units with the same file, heading path and hash (1 for nearly every unit)."""

    file: str
    heading: str
    hash: str
    nth: int = 1

    def unit_id(self) -> str:
        """The unit record's id: derived from the identity, so the same unit always gets the same record."""
        digest = hashlib.sha256(f"{self.file}\0{self.heading}\0{self.hash}\0{self.nth}".encode()).hexdigest()
        return "md-" + digest[:20]

    def describe(self) -> str:
        where = f"{self.file} § {self.heading}" if self.heading else self.file
        return where if self.nth == 1 else f"{where} (#{self.nth})"


@dataclass(frozen=True, slots=True)
class Unit:
    """One unit as read from a file: its identity, its text verbatim, and where its bytes are (character offsets
    into the file's text, the span the unit's lines take including their line ends)."""

    key: UnitKey
    text: str
    start: int
    end: int
    kind: UnitKind
    heading: tuple[str, ...] = ()
    front: str = ""  # a whole-file unit's front matter (its text is the body)


def assign_keys(file: str, found: list[tuple[tuple[str, ...], str, int, int]], kind: UnitKind) -> list[Unit]:
    """Units from (heading path, text, start, end) in file order, identical texts under one heading numbered in
    order of appearance."""
    seen: dict[tuple[str, str], int] = {}
    units = []
    for heading, text, start, end in found:
        heading_text = heading_string(heading)
        digest = text_hash(text)
        nth = seen.get((heading_text, digest), 0) + 1
        seen[(heading_text, digest)] = nth
        units.append(Unit(UnitKey(file, heading_text, digest, nth), text, start, end, kind, heading))
    return units
