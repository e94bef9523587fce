"""Markdown files as blocks under headings, and edits that touch only the blocks they name.

The parser is deliberately small (a line scanner, not a CommonMark renderer): it only has to find where each unit's
bytes are so that a rewrite can remove or add a unit and leave every other byte of the file as it was. It knows
front matter, ATX and setext headings, fenced code, list items (with their nested items and continuation lines),
paragraphs, thematic breaks, comment-only lines, and *managed regions* (an agent's own generated blocks, e.g.
OpenClaw dreaming's ``<!-- openclaw:dreaming:light:start -->`` … ``:end -->``), which are never units and never
edited. Every edit is checked by parsing the result again (``edit``): the units that were to stay are all there, the
removed ones are gone, the added ones are under the heading path they were meant for; otherwise the edit is refused.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from dreamkeeper.formats.units import Unit, UnitKey, UnitKind, assign_keys, heading_string, normalise_text

BlockKind = Literal["unit", "heading", "managed", "frontmatter", "other", "blank"]

_LINE = re.compile(r"[^\n]*\n|[^\n]+\Z")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})")
_ITEM = re.compile(r"^( {0,3})([-*+]|\d{1,9}[.)])([ \t]+|$)")
_BREAK = re.compile(r"^ {0,3}(?:(?:\*[ \t]*){3,}|(?:-[ \t]*){3,}|(?:_[ \t]*){3,})$")
_COMMENT_ONLY = re.compile(r"^\s*(?:<!--.*?-->\s*)+$", re.S)
OPENCLAW_MANAGED = (r"<!--\s*openclaw:[\w:.-]*:start\s*-->", r"<!--\s*openclaw:[\w:.-]*:end\s*-->")


class EditRefused(ValueError):
    """An edit whose result would not be what was asked: nothing is written."""


@dataclass(frozen=True, slots=True)
class Block:
    kind: BlockKind
    start: int
    end: int
    heading: tuple[str, ...]  # the heading path in effect; a heading block's own path ends with its title
    level: int = 0  # a heading's level
    item: bool = False  # a unit that is a list item


@dataclass
class Parsed:
    text: str
    blocks: list[Block] = field(default_factory=list)

    def units(self, file: str, kind: UnitKind) -> list[Unit]:
        found = [
            (b.heading, self.text[b.start : b.end].rstrip("\r\n"), b.start, b.end)
            for b in self.blocks
            if b.kind == "unit"
        ]
        return assign_keys(file, found, kind)


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, line without its line end) for every line."""
    return [(m.start(), m.group().rstrip("\n").rstrip("\r")) for m in _LINE.finditer(text)]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _heading_title(raw: str) -> str:
    return " ".join(raw.strip().split())


class _Scanner:
    def __init__(self, text: str, managed: Sequence[tuple[str, str]]) -> None:
        self.text = text
        self.lines = _lines(text)
        self.managed = [(re.compile(a), re.compile(b)) for a, b in managed]
        self.blocks: list[Block] = []
        self.stack: list[tuple[int, str]] = []  # (level, title)

    def end_of(self, index: int) -> int:
        """Offset just past line ``index`` (its line end included)."""
        return self.lines[index + 1][0] if index + 1 < len(self.lines) else len(self.text)

    def path(self) -> tuple[str, ...]:
        return tuple(title for _, title in self.stack)

    def add(self, kind: BlockKind, first: int, last: int, **extra: object) -> None:
        heading = extra.pop("heading", self.path())
        self.blocks.append(Block(kind, self.lines[first][0], self.end_of(last), heading, **extra))  # type: ignore[arg-type]

    def starts_other(self, line: str) -> bool:
        """A line that ends a paragraph: a heading, a fence, a list item, a break, a managed region."""
        return bool(
            _ATX.match(line)
            or _FENCE.match(line)
            or _ITEM.match(line)
            or _BREAK.match(line)
            or any(start.search(line) for start, _ in self.managed)
        )

    def scan(self) -> list[Block]:
        i, n = 0, len(self.lines)
        if n and self.lines[0][1].strip() == "---":
            for j in range(1, n):
                if self.lines[j][1].strip() in ("---", "..."):
                    self.add("frontmatter", 0, j)
                    i = j + 1
                    break
        while i < n:
            line = self.lines[i][1]
            if not line.strip():
                self.add("blank", i, i)
                i += 1
            elif (managed := self._managed(i)) is not None:
                self.add("managed", i, managed)
                i = managed + 1
            elif match := _ATX.match(line):
                self._heading(i, i, len(match.group(1)), match.group(2) or "")
                i += 1
            elif fence := _FENCE.match(line):
                last = self._fence_end(i, fence.group(2))
                self.add("unit", i, last)
                i = last + 1
            elif _BREAK.match(line):
                self.add("other", i, i)
                i += 1
            elif item := _ITEM.match(line):
                last = self._item_end(i, len(item.group(1)))
                self.add("unit", i, last, item=True)
                i = last + 1
            else:
                i = self._paragraph(i)
        return self.blocks

    def _managed(self, i: int) -> int | None:
        line = self.lines[i][1]
        for start, end in self.managed:
            if start.search(line):
                for j in range(i, len(self.lines)):
                    if end.search(self.lines[j][1]):
                        return j
                return len(self.lines) - 1  # never closed: everything after it is the agent's own
        return None

    def _heading(self, first: int, last: int, level: int, title: str) -> None:
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, _heading_title(title)))
        self.add("heading", first, last, level=level)

    def _fence_end(self, i: int, fence: str) -> int:
        for j in range(i + 1, len(self.lines)):
            stripped = self.lines[j][1].lstrip(" ")
            if stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]).strip():
                return j
        return len(self.lines) - 1

    def _item_end(self, i: int, indent: int) -> int:
        """The last line of the list item starting at line ``i``: nested items, indented lines, lazy continuation
        lines, and blank lines followed by an indented line all belong to it."""
        last, j, n = i, i + 1, len(self.lines)
        while j < n:
            line = self.lines[j][1]
            if not line.strip():
                k = j
                while k < n and not self.lines[k][1].strip():
                    k += 1
                if k < n and _indent(self.lines[k][1]) > indent and not self._top(self.lines[k][1], indent):
                    j = k
                    continue
                return last
            if self._top(line, indent):
                return last
            if fence := _FENCE.match(line):
                j = self._fence_end(j, fence.group(2))
            last = j
            j += 1
        return last

    def _top(self, line: str, indent: int) -> bool:
        """A line that ends a list item of this indent: a sibling item, or any block start at its indent or less."""
        if _indent(line) > indent:
            return False
        return bool(
            _ITEM.match(line)
            or _ATX.match(line)
            or _BREAK.match(line)
            or _FENCE.match(line)
            or any(start.search(line) for start, _ in self.managed)
        )

    def _paragraph(self, i: int) -> int:
        j, n = i + 1, len(self.lines)
        while j < n:
            line = self.lines[j][1]
            if not line.strip():
                break
            if _SETEXT.match(line) and j == i + 1 and not _BREAK.match(self.lines[i][1]):
                level = 1 if line.strip().startswith("=") else 2
                self._heading(i, j, level, self.lines[i][1])
                return j + 1
            if self.starts_other(line):
                break
            j += 1
        body = self.text[self.lines[i][0] : self.end_of(j - 1)]
        self.add("other" if _COMMENT_ONLY.match(body) else "unit", i, j - 1)
        return j


def parse(text: str, managed: Sequence[tuple[str, str]] = ()) -> Parsed:
    """Blocks of a Markdown text in order; their spans cover the whole text."""
    return Parsed(text, _Scanner(text, managed).scan())


# ---- edits ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Insertion:
    """A unit to add: its text (as the model or the archive has it), under a heading path."""

    text: str
    heading: tuple[str, ...]
    as_item: bool = True  # written as a list item ("- text") unless it already is one
    # Where it was (a restore or an undo): the hash of the unit it came after under its heading, "" when it was the
    # first; None (a successor) or not found: after the section's last unit.
    after: str | None = None


def block_text(text: str, as_item: bool) -> str:
    """A unit's text as the lines to insert (ending with a line end): a list item, continuation lines indented."""
    body = text.strip("\n").rstrip()
    if as_item and not re.match(r"^\s{0,3}(?:[-*+]|\d{1,9}[.)])\s", body):
        lines = body.split("\n")
        body = "\n".join(["- " + lines[0].lstrip(), *(("  " + x.lstrip()) if x.strip() else "" for x in lines[1:])])
    return body + "\n"


def edit(
    text: str,
    *,
    file: str,
    kind: UnitKind,
    remove: Sequence[UnitKey] = (),
    insert: Sequence[Insertion] = (),
    managed: Sequence[tuple[str, str]] = (),
) -> str:
    """``text`` with the units ``remove`` names taken out and ``insert`` added under their headings (a missing
    heading is created at the end of its parent's section, or of the file). Every other byte is kept.

    Raises EditRefused when a unit to remove is not there or when the result, parsed again, is not exactly the old
    units minus the removed plus the inserted."""
    parsed = parse(text, managed)
    before = parsed.units(file, kind)
    by_key = {u.key: u for u in before}
    missing = [k.describe() for k in remove if k not in by_key]
    if missing:
        raise EditRefused(f"{file}: not found (changed since it was read?): {', '.join(missing)}")
    out = _remove(parsed, [by_key[k] for k in remove])
    landed = []
    # A unit goes back after the unit it followed; when that one is itself coming back, after it has: passes until
    # no anchored insertion finds its anchor, the rest at the end of their sections.
    waiting = list(insert)
    while waiting:
        current = parse(out, managed)
        hashes = {(b.heading, _hash_of(current.text[b.start : b.end])) for b in current.blocks if b.kind == "unit"}
        ready = [i for i in waiting if i.after is None or i.after == "" or (i.heading, i.after) in hashes]
        ready = ready or [Insertion(i.text, i.heading, i.as_item) for i in waiting]  # anchors gone: section ends
        chosen = ready[0]
        out, heading = _insert(current, chosen)
        landed.append(Insertion(chosen.text, heading, chosen.as_item))
        waiting.pop(next(n for n, i in enumerate(waiting) if i.text == chosen.text and i.heading == chosen.heading))
    _verify(out, file, kind, managed, before, remove, landed)
    return out


def _remove(parsed: Parsed, units: Sequence[Unit]) -> str:
    """The text without the units' spans. A blank line left doubled by a removal goes with the unit."""
    text, blocks = parsed.text, parsed.blocks
    drop: set[tuple[int, int]] = {(u.start, u.end) for u in units}
    index = {(b.start, b.end): n for n, b in enumerate(blocks)}
    for unit in units:
        n = index[(unit.start, unit.end)]
        prev_blank = n > 0 and blocks[n - 1].kind == "blank" and (blocks[n - 1].start, blocks[n - 1].end) not in drop
        next_n = n + 1
        while next_n < len(blocks) and (blocks[next_n].start, blocks[next_n].end) in drop:
            next_n += 1
        at_end = next_n >= len(blocks)
        if prev_blank and not at_end and blocks[next_n].kind == "blank":
            drop.add((blocks[next_n].start, blocks[next_n].end))
        elif prev_blank and at_end:
            drop.add((blocks[n - 1].start, blocks[n - 1].end))
    pieces, at = [], 0
    for start, end in sorted(drop):
        pieces.append(text[at:start])
        at = end
    pieces.append(text[at:])
    return "".join(pieces)


def _section(blocks: list[Block], path: tuple[str, ...]) -> tuple[int, int] | None:
    """Block indexes [heading, end) of the section with this heading path (the first, when repeated)."""
    for n, block in enumerate(blocks):
        if block.kind == "heading" and block.heading == path:
            return _section_at(blocks, n)
    return None


def _section_ending(blocks: list[Block], path: tuple[str, ...]) -> tuple[tuple[str, ...], int, int] | None:
    """The section whose heading path *ends with* ``path`` (a heading created earlier under a file's title, say),
    when exactly one does: its full path and block indexes."""
    found = [
        n
        for n, b in enumerate(blocks)
        if b.kind == "heading" and len(b.heading) > len(path) and b.heading[-len(path) :] == path
    ]
    if len({blocks[n].heading for n in found}) != 1:
        return None
    head, end = _section_at(blocks, found[0])
    return blocks[found[0]].heading, head, end


def _section_at(blocks: list[Block], n: int) -> tuple[int, int]:
    block = blocks[n]
    end = n + 1
    while end < len(blocks) and not (blocks[end].kind == "heading" and blocks[end].level <= block.level):
        end += 1
    return n, end


def _insert(parsed: Parsed, insertion: Insertion) -> tuple[str, tuple[str, ...]]:
    """The text with the insertion added, and the heading path it lands under: the path asked for, below the
    headings still open where it is appended when none of the path exists (a file's title, say)."""
    text, blocks, path = parsed.text, parsed.blocks, insertion.heading
    if path and _section(blocks, path) is None and (ending := _section_ending(blocks, path)) is not None:
        path = ending[0]  # the heading exists below a title it was not asked for: added there, never twice
    # The deepest existing prefix of the heading path; the headings below it are created.
    depth, section = len(path), None
    while depth > 0 and (section := _section(blocks, path[:depth])) is None:
        depth -= 1
    if section is None:  # no prefix exists: the preamble (no path), else the end of the file
        first_heading = next((n for n, b in enumerate(blocks) if b.kind == "heading"), len(blocks))
        section = (-1, first_heading if not path else len(blocks))
    head, end = section
    inside = [n for n in range(head + 1, end) if blocks[n].kind != "blank"]
    if depth < len(path):
        last = inside[-1] if inside else head  # new headings go at the end of the parent's section
    else:
        own = [n for n in inside if all(blocks[m].kind != "heading" for m in range(head + 1, n + 1))]
        last = own[-1] if own else head  # after the section's own last block, before its sub-headings
        units = [n for n in own if blocks[n].kind == "unit"]
        if insertion.after == "" and units:
            return _insert_before(text, blocks[units[0]], insertion), path  # it was the section's first unit
        anchored = [n for n in units if _hash_of(text[blocks[n].start : blocks[n].end]) == insertion.after]
        if anchored:
            last = anchored[0]
    at = blocks[last].end if last >= 0 else 0
    prefix = text[:at]
    if prefix and not prefix.endswith("\n"):
        prefix += "\n"
    new = ""
    level = blocks[head].level if head >= 0 else 1
    landed = path
    if head < 0 and path:
        # Appended at the end of the file: the new heading nests under the headings open there of a lower level.
        open_path = blocks[-1].heading if blocks else ()
        levels = {b.heading: b.level for b in blocks if b.kind == "heading"}  # the last heading of each path
        kept = [open_path[i - 1] for i in range(1, len(open_path) + 1) if levels.get(open_path[:i], 7) <= level]
        landed = (*kept, *path)
    for title in path[depth:]:
        level = min(level + 1, 6)
        new += ("\n" if prefix or new else "") + "#" * level + " " + title + "\n"
    previous = blocks[last] if last >= 0 and not new else None
    tight = previous is not None and previous.kind == "unit" and previous.item and insertion.as_item
    if (prefix or new) and not tight:
        new += "\n"
    new += block_text(insertion.text, insertion.as_item)
    rest = text[at:]
    if rest.strip() and not rest.startswith(("\n", "\r\n")) and not (tight and _ITEM.match(rest)):
        new += "\n"
    return prefix + new + rest, landed


def _insert_before(text: str, first: Block, insertion: Insertion) -> str:
    body = block_text(insertion.text, insertion.as_item)
    tight = first.item and insertion.as_item
    return text[: first.start] + body + ("" if tight else "\n") + text[first.start :]


def _verify(
    out: str,
    file: str,
    kind: UnitKind,
    managed: Sequence[tuple[str, str]],
    before: list[Unit],
    remove: Sequence[UnitKey],
    insert: Sequence[Insertion],
) -> None:
    after = parse(out, managed).units(file, kind)
    want = Counter((heading_string(u.heading), u.key.hash) for u in before)
    for key in remove:
        want[(key.heading, key.hash)] -= 1
    got = Counter((heading_string(u.heading), u.key.hash) for u in after)
    for insertion in insert:
        got_key = (heading_string(insertion.heading), _hash_of(insertion.text))
        if got[got_key] <= want[got_key]:
            raise EditRefused(f"{file}: the added unit did not parse back under {insertion.heading!r}")
        got[got_key] -= 1
    want = +want
    got = +got
    if want != got:
        lost = sorted((want - got).elements())[:3]
        extra = sorted((got - want).elements())[:3]
        raise EditRefused(f"{file}: the rewrite would change units it was not asked to (missing {lost}, extra {extra})")


def _hash_of(text: str) -> str:
    from dreamkeeper.formats.units import text_hash

    return text_hash(text)


__all__ = [
    "OPENCLAW_MANAGED",
    "Block",
    "EditRefused",
    "Insertion",
    "Parsed",
    "block_text",
    "edit",
    "normalise_text",
    "parse",
]
