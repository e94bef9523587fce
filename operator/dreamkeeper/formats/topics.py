"""One file per memory with a ``MEMORY.md`` index (Claude Code's auto memory, OpenHarness): render for whole files.

A unit is a topic file: its identity is the file, its text the body (the front matter, ``name``/``description``/
``type``…, is kept beside it in the record, ``dkFrontMatter``). The index is ``MEMORY.md``: one line per topic,
``- [Title](file.md) — hook``, and the agent loads only its first 200 lines / 25 KB.

* A file a cycle archived is **moved** into ``AGENT_DIR/.dreamkeeper/archive/<day>/<file>``, never deleted
  (anthropics/claude-code#47959: 23 files deleted in a day), and only if it still holds what the record says (the
  move is verified after it is made: a version the agent wrote meanwhile is put back); its index line goes with it.
* A merge's successor is a new topic file (the first source's front matter, the merged text as its body) with an
  index line; a restored or undone file comes back under its name (a new one if the name was taken since).
* The index is rewritten once per render, fingerprint-guarded (read again and redone when the agent wrote it
  meanwhile), never past 200 lines or 25,000 characters when it grows, and every line it adds points at a file that
  exists; lines pointing at files dreamkeeper did not move are never touched.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from dreamkeeper.formats import records as rec
from dreamkeeper.formats.layout import FILE_ARCHIVE_DIR, read_bytes
from dreamkeeper.formats.units import Unit, UnitKey, text_hash
from dreamkeeper.memory import (
    MERGED_FROM,
    MUST_NOT_EXIST,
    ConflictError,
    StoredEntry,
    fsync_directory,
    replace_file,
    shown,
    state_dir,
    successor_in,
)

if TYPE_CHECKING:
    from dreamkeeper.formats.render import _Render

log = logging.getLogger(__name__)

INDEX_LINES = 200  # what Claude Code loads of MEMORY.md
INDEX_CHARS = 25_000
_LINK = re.compile(r"\]\(\s*(?:\./)?([^)\s]+?)\s*\)")
_SLUG = re.compile(r"[^a-z0-9]+")


def split_front(text: str) -> tuple[str, str]:
    """(front matter including its fences and line end, body)."""
    if text.startswith("---\n") or text.startswith("---\r\n"):
        end = re.search(r"\r?\n---[ \t]*(\r?\n|$)", text[3:])
        if end is not None:
            cut = 3 + end.end()
            return text[:cut], text[cut:]
    return "", text


def _front_value(front: str, key: str) -> str | None:
    found = re.search(rf"(?m)^{key}:\s*(.+?)\s*$", front)
    return found.group(1).strip("'\"") if found else None


def _slug(text: str, taken: set[str], suffix: str) -> str:
    words = _SLUG.sub("-", text.lower()).strip("-")[:40].strip("-") or "memory"
    name = f"{words}.md"
    n = 1
    while name.lower() in taken:
        n += 1
        name = f"{words}-{suffix}{'' if n == 2 else n}.md"
    return name


@dataclass
class _Index:
    add: list[str] = field(default_factory=list)  # lines to append
    drop: set[str] = field(default_factory=set)  # files whose lines go


class TopicRender:
    """The render of a one-file-per-memory profile (called by ``render._Render``)."""

    def __init__(self, render: _Render) -> None:
        self.r = render
        self.index = _Index()
        self.archive_day = render.now.strftime("%Y-%m-%d")

    def run(self) -> None:
        r = self.r
        scan = r.store.scan()
        r.by_id = {s.id.lower(): s for s in scan.entries}
        taken = {p.name.lower() for p in r.root.glob("*.md")} if r.root.is_dir() else set()
        removing = [s for s in scan.entries if s.entry.is_archived and rec.placement_of(s.entry) == rec.IN_FILE]
        for stored in scan.entries:
            if rec.placement_of(stored.entry) == rec.IN_FILE and stored.entry.is_live:
                r.placed.add(stored.id.lower())
        for stored in scan.entries:
            if rec.needs_placing(stored.entry):
                self._place(stored, taken)
        for stored in removing:
            successor = successor_in(stored.entry.archive_reason)
            if successor is not None and successor.lower() not in r.placed:
                r._keep_source(stored, f"its successor {successor} is not in a file")
                continue
            self._move_out(stored)
        if self.index.add or self.index.drop:
            self._write_index()
        r._revert_unplaced()

    # ---- files ----------------------------------------------------------------------------------------------

    def _place(self, stored: StoredEntry, taken: set[str]) -> None:
        r, entry = self.r, stored.entry
        own = entry.meta(rec.FILE)
        front = entry.meta(rec.FRONT) or ""
        if own and ("/" in own or own.startswith(".") or r.profile.rule_for(own) is None):
            r._refuse(stored, f"{own!r} is not a topic file of the {r.profile.name} profile")  # a tampered record
            return
        if not own:
            sources = [r.by_id.get(i.strip().lower()) for i in (entry.meta(MERGED_FROM) or "").split(",")]
            first = next((s for s in sources if s is not None), None)
            if first is not None:
                front = first.entry.meta(rec.FRONT) or ""
            title = _front_value(front, "name") or entry.content.split("\n", 1)[0]
            own = _slug(title, taken, entry.id[:6])
        elif own.lower() in taken and not (r.root / own).exists():
            taken.discard(own.lower())
        if own.lower() in taken:
            own = _slug(Path(own).stem, taken, "restored")
        body = entry.content.strip("\n") + "\n"
        data = (front + ("\n" if front and not front.endswith("\n\n") else "") + body) if front else body
        path = r.root / own
        try:
            replace_file(path, data.encode("utf-8"), MUST_NOT_EXIST)
        except (ConflictError, OSError) as exc:
            r._refuse(stored, f"{own}: {exc}")
            return
        taken.add(own.lower())
        unit_text = split_front(data)[1].strip("\n")
        key = UnitKey(own, "", "file", 1)
        placed = rec.placed_entry(entry, Unit(key, unit_text, 0, len(data), "file"))
        r.store.update(stored, placed.with_meta(**{rec.MOVED_TO: None, rec.FRONT: front or None}))
        r.placed.add(stored.id.lower())
        r.report.placed.append(stored.id)
        r.report.files_written.append(own)
        description = _front_value(front, "description") or unit_text.split("\n", 1)[0][:150]
        title = _front_value(front, "name") or Path(own).stem
        self.index.add.append(f"- [{title}]({own}) — {description}")
        log.info("wrote topic file %s for unit %s: %s", own, stored.id, shown(entry.content))

    def _move_out(self, stored: StoredEntry) -> None:
        """Move a topic file into the archive: only if it still says what the record says, verified after."""
        r, entry = self.r, stored.entry
        relative = entry.meta(rec.FILE) or ""
        if "/" in relative or relative.startswith(".") or r.profile.rule_for(relative) is None:
            r.report.refused.append(f"{stored.id}: {relative!r} is not a topic file of the {r.profile.name} profile")
            return
        path = r.root / relative
        try:
            data, fingerprint = read_bytes(path)
        except FileNotFoundError:
            r.store.update(stored, entry.with_meta(**{rec.PLACEMENT: rec.REMOVED}))
            return
        except OSError as exc:
            r.report.refused.append(f"{stored.id}: {relative} not moved: {exc}")
            return
        if text_hash(split_front(data.decode("utf-8", "replace"))[1]) != text_hash(entry.content):
            r.report.refused.append(f"{stored.id}: {relative} changed since it was read; left for the next run")
            return
        target = state_dir(r.agent_dir) / FILE_ARCHIVE_DIR / self.archive_day / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target = target.with_name(f"{target.stem}.{entry.id}{target.suffix}")
        os.rename(path, target)
        if hashlib.sha256(target.read_bytes()).hexdigest() != fingerprint.sha256:
            # The agent wrote it between the read and the move: its version goes back under its name.
            try:
                os.link(target, path)
                os.unlink(target)
            except FileExistsError:
                log.warning("%s was written again meanwhile; the version moved is kept at %s", path, target)
            r.report.conflicts += 1
            r.report.refused.append(f"{stored.id}: {relative} was written meanwhile; left for the next run")
            return
        fsync_directory(path.parent)
        fsync_directory(target.parent)
        moved = target.relative_to(r.agent_dir).as_posix()
        r.store.update(stored, entry.with_meta(**{rec.PLACEMENT: rec.REMOVED, rec.MOVED_TO: moved}))
        r.report.removed.append(stored.id)
        self.index.drop.add(relative)
        log.info(
            "moved topic file %s (unit %s, %s) into the archive: %s", relative, stored.id, entry.archive_reason, moved
        )

    # ---- the index ------------------------------------------------------------------------------------------

    def _write_index(self) -> None:
        r = self.r
        name = r.profile.index_file or "MEMORY.md"
        path = r.root / name
        for _ in range(5):
            try:
                data, fingerprint = read_bytes(path)
                text, expected = data.decode("utf-8"), fingerprint
            except FileNotFoundError:
                text, expected = "", None
            lines = text.splitlines(keepends=True)
            kept = [line for line in lines if not (m := _LINK.search(line)) or m.group(1) not in self.index.drop]
            new = "".join(kept)
            if new and not new.endswith("\n"):
                new += "\n"
            new += "".join(line + "\n" for line in self.index.add if line not in new)
            grows = len(new) > len(text)
            if grows and (new.count("\n") > INDEX_LINES or len(new) > INDEX_CHARS):
                r.report.refused.append(f"{name}: the index would grow past what the agent loads; lines not added")
                new = "".join(kept)
            try:
                replace_file(path, new.encode("utf-8"), expected if expected is not None else MUST_NOT_EXIST)
                return
            except ConflictError:
                r.report.conflicts += 1
                continue
        r.report.refused.append(f"{name}: the agent kept writing it; the index is fixed by the next run")


__all__ = ["INDEX_CHARS", "INDEX_LINES", "TopicRender", "split_front"]
