"""Reverse a whole cycle: restore what it archived, archive what it created, put folded survivors back, and put
decayed importance (and updatedAt) back."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from dreamkeeper.consolidation.journal import (
    Journal,
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
    note_undone,
    replace_file,
    utcnow,
)

log = logging.getLogger(__name__)


@dataclass
class UndoResult:
    cycle_id: str
    restored: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)


def journals_of(agent_dir: Path, cycle_id: str) -> list[Path]:
    return [path for path in journal_paths(agent_dir, cycle_id) if path.exists()]


def undo_cycle(agent_dir: Path, memory_root: Path, cycle_id: str) -> UndoResult:
    paths = journals_of(agent_dir, cycle_id)
    if not paths:
        raise FileNotFoundError(f"no journal for cycle {cycle_id} under {journal_dir(agent_dir)}; nothing was changed")
    store = MemoryStore(memory_root)
    result = UndoResult(cycle_id)
    undone = []
    for path in reversed(paths):
        journal = Journal.load(path)
        # Each journal tags what it archives with its own id (a fold's is <cycle>-fold); a stale copy archived
        # again by a later repair names the journal that first archived it (STALE_COPY_OF): both come back.
        journal_id = journal.header.cycle_id
        undone.append(journal_id)
        for index in range(len(journal.header.steps) - 1, -1, -1):
            step = journal.header.steps[index]
            if journal.outcomes.get(index) != "done" and step.op != "create":
                continue
            target = Path(step.path)
            current = store.read_file(target) if target.exists() else None
            if current is None or isinstance(current, MalformedFile):
                continue
            try:
                if step.op == "archive":
                    tags = {current.entry.meta(ARCHIVED_BY_CYCLE), current.entry.meta(STALE_COPY_OF)}
                    if current.entry.is_archived and journal_id in tags:
                        store.restore(current)
                        result.restored.append(step.id)
                elif step.op == "create":
                    if current.entry.meta(CREATED_BY_CYCLE) == cycle_id and current.entry.is_live:
                        store.archive(current, f"undone cycle {cycle_id}", utcnow(), f"undo-{cycle_id}")
                        result.archived.append(step.id)
                elif step.op == "decay" and step.before is not None and step.after is not None:
                    if has_decay_values(current.entry, step.after):
                        restored = put_decay_values(current.entry.to_json_obj(), step.before)
                        data = (json.dumps(restored, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
                        replace_file(target, data, current.fingerprint)
                        result.reverted.append(step.id)
                    else:
                        raise ConflictError(target, "importance or updatedAt changed after the cycle decayed it")
                elif step.op == "update" and step.before is not None and step.after is not None:
                    if current.entry.to_json_obj() == step.after:
                        data = (json.dumps(step.before, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
                        replace_file(target, data, current.fingerprint)
                        result.reverted.append(step.id)
                    else:
                        raise ConflictError(target, "changed after the cycle folded into it; left as it is")
            except ConflictError as exc:
                log.warning("undo of %s: %s", step.id, exc)
                result.conflicts.append(step.id)
    # Said before anything else can run (the caller holds the cycle lock): what this cycle archived and wrote no
    # longer stands, and the stale write-back repair must not take what undo brought back for a stale copy.
    note_undone(agent_dir, undone)
    log.info(
        "undid cycle %s — %d restored, %d successor(s) archived, %d rewrite(s) reverted, %d conflict(s)",
        cycle_id,
        len(result.restored),
        len(result.archived),
        len(result.reverted),
        len(result.conflicts),
    )
    return result
