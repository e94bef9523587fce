"""Reverse a whole cycle: restore what it archived, archive what it created, put folded survivors back, put decayed
importance (and updatedAt) back, take its review stamps off.

A cycle writes up to three journals, its exact-duplicate fold (``<cycle>-fold``), its decay (``<cycle>-decay``) and
its plan; each tags what it archives and creates with its own journal's id, so each is undone by that id. Every
reversal is checked against what the cycle wrote: a value the agent changed since is kept, and reported as a
conflict.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from dreamkeeper.consolidation.journal import (
    Journal,
    Step,
    StepPaths,
    has_decay_values,
    journal_dir,
    journal_paths,
    put_decay_values,
)
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    CREATED_BY_CYCLE,
    STALE_COPY_OF,
    ConflictError,
    MalformedFile,
    MemoryStore,
    MemoryStoreError,
    StoredEntry,
    note_undone,
    replace_file,
    utcnow,
)

log = logging.getLogger(__name__)

_ABSENT: Final = object()


@dataclass
class UndoResult:
    cycle_id: str
    restored: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)
    unstamped: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    details: list[str] = field(default_factory=list)


def journals_of(agent_dir: Path, cycle_id: str) -> list[Path]:
    return [path for path in journal_paths(agent_dir, cycle_id) if path.exists()]


def undo_cycle(agent_dir: Path, memory_root: Path, cycle_id: str) -> UndoResult:
    paths = journals_of(agent_dir, cycle_id)
    if not paths:
        raise FileNotFoundError(f"no journal for cycle {cycle_id} under {journal_dir(agent_dir)}; nothing was changed")
    store = MemoryStore(memory_root)
    result = UndoResult(cycle_id)
    undone = []
    for path in reversed(paths):  # the plan first, then the fold it was planned on
        journal = Journal.load(path)
        undone.append(journal.header.cycle_id)
        _Undo(store, journal, result).run()
    # Said before anything else can run (the caller holds the cycle lock): what this cycle archived and wrote no
    # longer stands, and the stale write-back repair must not take what undo brought back for a stale copy.
    note_undone(agent_dir, undone)
    log.info(
        "undid cycle %s — %d restored, %d successor(s) archived, %d rewrite(s) reverted, %d stamp(s) removed, "
        "%d conflict(s)",
        cycle_id,
        len(result.restored),
        len(result.archived),
        len(result.reverted),
        len(result.unstamped),
        len(result.conflicts),
    )
    return result


class _Undo:
    """One journal's steps, last first. Steps are looked at whatever their recorded outcome: a change written just
    before a crash has no outcome line, and the tags and values checked here say whether it happened."""

    def __init__(self, store: MemoryStore, journal: Journal, result: UndoResult) -> None:
        self.store = store
        self.journal = journal
        self.result = result
        self.tag = journal.header.cycle_id  # what this journal's archives and successors carry
        self.path_of = StepPaths(store, journal.header)

    def run(self) -> None:
        steps = self.journal.header.steps
        for index in range(len(steps) - 1, -1, -1):
            step = steps[index]
            try:
                current = self._current(step)
                if current is not None:
                    self._undo(step, current)
            except (ConflictError, MemoryStoreError, ValueError, OSError) as exc:
                log.warning("undo of %s %s: %s", step.op, step.id, exc)
                self.result.conflicts.append(step.id)
                self.result.details.append(f"{step.op} {step.id}: {exc}")

    def _current(self, step: Step) -> StoredEntry | None:
        path = self.path_of(step)
        if not path.exists():
            return None
        current = self.store.read_file(path)
        if isinstance(current, MalformedFile):
            raise ConflictError(path, f"is not an entry we may write: {current.error}")
        return current

    def _undo(self, step: Step, current: StoredEntry) -> None:
        entry = current.entry
        if step.op == "archive":
            # A stale copy archived again by a later repair names the journal that first archived it (STALE_COPY_OF).
            if entry.is_archived and self.tag in (entry.meta(ARCHIVED_BY_CYCLE), entry.meta(STALE_COPY_OF)):
                self.store.restore(current)
                self.result.restored.append(step.id)
        elif step.op == "create":
            if entry.meta(CREATED_BY_CYCLE) == self.tag and entry.is_live:
                self.store.archive(current, f"undone cycle {self.tag}", utcnow(), f"undo-{self.tag}")
                self.result.archived.append(step.id)
        elif step.op == "update" and step.before is not None and step.after is not None:
            self._revert_update(step, current)
        elif step.op == "decay" and step.before is not None and step.after is not None:
            if has_decay_values(current.entry, step.before):
                return  # not decayed after all (a conflict at the time), or undone already
            if not has_decay_values(current.entry, step.after):
                raise ConflictError(current.path, "importance or updatedAt changed after the cycle decayed it")
            restored = put_decay_values(current.entry.to_json_obj(), step.before)
            replace_file(current.path, _dump(restored), current.fingerprint)
            self.result.reverted.append(step.id)
        elif step.op == "stamp" and step.metadata is not None and step.previous is not None:
            self._unstamp(step, current)

    def _revert_update(self, step: Step, current: StoredEntry) -> None:
        """Three-way: each value the fold changed goes back to what it was, if it is still what the fold wrote."""
        assert step.before is not None and step.after is not None
        now = current.entry.to_json_obj()
        reverted, changed, kept = _three_way(step.before, step.after, now)
        if changed:
            replace_file(current.path, _dump(reverted), current.fingerprint)
            self.result.reverted.append(step.id)
        if kept:
            raise ConflictError(current.path, f"changed after the fold ({', '.join(kept)}); those values were kept")

    def _unstamp(self, step: Step, current: StoredEntry) -> None:
        assert step.metadata is not None and step.previous is not None
        entry = current.entry
        ours = {key: value for key, value in step.metadata.items() if entry.meta(key) == value}
        if not ours or all(step.previous.get(key) == value for key, value in ours.items()):
            return
        restored = entry.with_meta(**{key: step.previous.get(key) for key in ours})
        self.store.rewrite(current, restored)
        self.result.unstamped.append(step.id)


def _three_way(
    before: dict[str, Any], after: dict[str, Any], now: dict[str, Any]
) -> tuple[dict[str, Any], bool, list[str]]:
    """``now`` with every key the change before -> after touched put back to ``before`` where it still holds the
    ``after`` value; nested objects (metadata) key by key. Returns the result, whether anything changed, and the
    keys whose value was changed by someone else (kept)."""
    out = dict(now)
    changed = False
    kept: list[str] = []
    for key in dict.fromkeys((*before, *after)):
        old, new, present = before.get(key, _ABSENT), after.get(key, _ABSENT), now.get(key, _ABSENT)
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict) and isinstance(present, dict):
            inner, inner_changed, inner_kept = _three_way(old, new, present)
            out[key] = inner
            changed |= inner_changed
            kept += [f"{key}.{k}" for k in inner_kept]
        elif present == new:
            if old is _ABSENT:
                del out[key]
            else:
                out[key] = old
            changed = True
        elif present != old:
            kept.append(key)
    return out, changed, kept


def _dump(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
