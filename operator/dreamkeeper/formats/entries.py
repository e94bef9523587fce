"""Files of entries joined by a separator line (Hermes Agent's ``MEMORY.md`` and ``USER.md``: ``"\\n§\\n"``).

Hermes (``tools/memory_tool.py``, hermes-agent 0.19.0) reads a file as ``raw.split("\\n§\\n")``, each entry stripped,
empty ones dropped, and writes ``"\\n§\\n".join(entries)``. Its drift guard refuses ``replace`` and ``remove`` (not
``add``) when the file on disk does not round-trip that way, or when one entry is longer than the file's character
cap: a file dreamkeeper writes must therefore be exactly the join of stripped, non-empty entries, none containing the
separator, none longer than the cap, and the whole join within the cap (``len(join) <= cap``, as Hermes counts).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from dreamkeeper.formats.markdown import EditRefused
from dreamkeeper.formats.units import Unit, UnitKey, UnitKind, assign_keys, text_hash

HERMES_SEPARATOR = "\n§\n"


@dataclass(frozen=True, slots=True)
class EntryFile:
    text: str
    separator: str
    units: list[Unit]

    @property
    def round_trips(self) -> bool:
        """Whether the agent's own parser and writer give these exact bytes back (Hermes' drift guard's first test,
        which compares the stripped file)."""
        return self.text.strip() == self.separator.join(u.text for u in self.units)


def parse_entries(text: str, file: str, kind: UnitKind, separator: str = HERMES_SEPARATOR) -> EntryFile:
    found: list[tuple[tuple[str, ...], str, int, int]] = []
    at = 0
    for piece in text.split(separator):
        stripped = piece.strip()
        if stripped:
            start = at + (len(piece) - len(piece.lstrip()))
            found.append(((), stripped, start, start + len(stripped)))
        at += len(piece) + len(separator)
    return EntryFile(text, separator, assign_keys(file, found, kind))


def _placed(kept: list[str], added: list[str], after: list[str | None]) -> list[str]:
    """The entries with each added one after the entry it followed (a restore: ``after`` is that entry's hash, ""
    for the first), in passes so a chain of restored neighbours comes back in order; the rest appended."""
    entries = list(kept)
    waiting = list(zip(added, after + [None] * (len(added) - len(after)), strict=True))
    while waiting:
        hashes = [text_hash(e) for e in entries]
        for n, (text, anchor) in enumerate(waiting):
            if anchor == "":
                entries.insert(0, text)
            elif anchor is not None and anchor in hashes:
                entries.insert(hashes.index(anchor) + 1, text)
            else:
                continue
            waiting.pop(n)
            break
        else:
            entries += [text for text, _ in waiting]  # no anchor left to find: at the end, as Hermes adds
            waiting = []
    return entries


def joined_length(texts: Sequence[str], separator: str = HERMES_SEPARATOR) -> int:
    """Hermes' character count of a file: the length of the join (0 for none)."""
    return len(separator.join(texts)) if texts else 0


def edit_entries(
    text: str,
    *,
    file: str,
    kind: UnitKind,
    remove: Sequence[UnitKey] = (),
    insert: Sequence[str] = (),
    cap: int | None = None,
    separator: str = HERMES_SEPARATOR,
    after: Sequence[str | None] = (),
) -> str:
    """The file with entries removed and appended, written as the agent writes it. Refused (EditRefused) when an
    entry to remove is not there, an added entry would be split by the separator or be empty, or the result would
    be over the cap (unless it only shrinks a file someone else already wrote over its cap)."""
    parsed = parse_entries(text, file, kind, separator)
    by_key = {u.key: u for u in parsed.units}
    missing = [k.describe() for k in remove if k not in by_key]
    if missing:
        raise EditRefused(f"{file}: not found (changed since it was read?): {', '.join(missing)}")
    gone = set(remove)
    kept = [u.text for u in parsed.units if u.key not in gone]
    added = []
    for entry in insert:
        clean = entry.strip()
        if not clean:
            raise EditRefused(f"{file}: an empty entry cannot be added")
        if separator.strip() and any(line.strip() == separator.strip() for line in clean.split("\n")):
            raise EditRefused(f"{file}: the entry contains the separator line {separator.strip()!r}: {clean[:80]!r}")
        added.append(clean)
    entries = _placed(kept, added, list(after))
    size = joined_length(entries, separator)
    if cap is not None:
        before = joined_length([u.text for u in parsed.units], separator)
        if size > cap and size > before:
            raise EditRefused(f"{file}: {size:,} characters would be over its cap of {cap:,} (now {before:,})")
        too_long = [e for e in added if len(e) > cap]
        if too_long:
            raise EditRefused(f"{file}: an entry of {len(too_long[0]):,} characters is longer than the cap {cap:,}")
    out = separator.join(entries)
    check = parse_entries(out, file, kind, separator)
    want = Counter(text_hash(e) for e in entries)
    if Counter(u.key.hash for u in check.units) != want or not check.round_trips:
        raise EditRefused(f"{file}: the rewrite would not parse back as the same entries")
    return out


__all__ = ["HERMES_SEPARATOR", "EntryFile", "edit_entries", "joined_length", "parse_entries"]
