"""Folding journals into the write-back index: what each cycle archived and wrote, step by step, once.

Every complete journal within the retention window is folded in exactly once, oldest first: a cycle folds in its
own journals at its end (from memory), and the next cycle catches up on any a killed cycle left (once recovery has
finished them). Undo and hand restores are read from the reversals log (``memory/reversals.py``) after the
journals: what they brought back must never look like a stale copy.
"""

from __future__ import annotations

import gc
import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

from dreamkeeper.consolidation.baseline import Counters, baseline_of
from dreamkeeper.consolidation.journal import (
    DECAY_JOURNAL_SUFFIX,
    FOLD_JOURNAL_SUFFIX,
    WRITEBACK_JOURNAL_SUFFIX,
    Journal,
    Step,
    journal_dir,
)
from dreamkeeper.consolidation.journal_steps import FoldedStamp
from dreamkeeper.consolidation.writeback.records import Archived, Layer, WriteBackIndex
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    BOOKKEEPING_KEYS,
    ENTRY_FILE_LIMIT,
    REVIEWED_HASH,
    Entry,
    Reversal,
    format_timestamp,
    loads_json,
    read_regular,
    read_reversals,
    review_hash,
    successor_in,
)

log = logging.getLogger(__name__)

DEFAULT_WINDOW = timedelta(days=90)  # how far back stale copies are looked for when archives are kept forever
MAX_LAYERS = 32  # per entry; older layers only matter to an agent cache older than all of them
_PHASE = {WRITEBACK_JOURNAL_SUFFIX: 0, FOLD_JOURNAL_SUFFIX: 1, "": 2}  # a cycle's journals, in the order written


def window_start(retention: timedelta | None, now: datetime) -> datetime:
    """How far back stale copies are looked for: the retention window (archives past it may be purged)."""
    return now - (retention or DEFAULT_WINDOW)


def journal_order(journal_id: str) -> tuple[str, int]:
    for suffix, phase in _PHASE.items():
        if suffix and journal_id.endswith(suffix):
            return journal_id[: -len(suffix)], phase
    return journal_id, _PHASE[""]


def journal_time(journal_id: str) -> datetime | None:
    """When a journal's cycle started, from its id (``%Y%m%dT%H%M%SZ-xxxxxx``); None if it is not such an id."""
    try:
        return datetime.strptime(journal_id[:16], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except (ValueError, IndexError):
        return None


def catch_up(
    index: WriteBackIndex,
    agent_dir: Path,
    window_start: datetime,
    in_memory: Mapping[str, Journal] | None = None,
) -> int:
    """Fold in every complete journal not folded in yet (``in_memory`` spares reading this cycle's own), then the
    reversals logged since. Returns how many journals were folded in."""
    rebuild = not index.journals and index.reversals_offset == 0
    pending = []
    directory = journal_dir(agent_dir)
    names = sorted(p.name for p in directory.glob("*.jsonl")) if directory.is_dir() else []
    for name in names:
        journal_id = name[: -len(".jsonl")]
        if journal_id in index.journals or journal_id in index.undone or journal_id.endswith(DECAY_JOURNAL_SUFFIX):
            continue  # folded in already, or undone, or decay's own (nothing in it is folded in: ``ingest``)
        started = journal_time(journal_id)
        if started is not None and started < window_start:
            continue
        pending.append(journal_id)
    pending.sort(key=journal_order)
    reversals, offset = read_reversals(agent_dir, index.reversals_offset)
    items: list[tuple[str, int, Any]] = []
    for journal_id in pending:
        journal = (in_memory or {}).get(journal_id)
        if journal is None:
            try:
                journal = Journal.load(directory / f"{journal_id}.jsonl")
            except (OSError, ValueError, IndexError) as exc:
                log.warning("write-back index: journal %s unreadable (%s); not folded in", journal_id, exc)
                continue
        if not journal.complete:
            continue  # recovery finishes it first; folded in then
        items.append((journal.header.created_at, 0, journal))
    if rebuild:
        # No index yet: journals and reversals in time order (an entry restored and later archived again).
        items += [(r.at, 1, r) for r in reversals]
        items.sort(key=lambda item: (item[0], item[1]))
    else:
        items += [("", 1, r) for r in reversals]  # after the journals: every pending journal predates them
    folded = 0
    collecting = gc.isenabled()
    gc.disable()  # records are long-lived and acyclic; a cold start folds in 100k steps (the collector doubled it)
    try:
        for _, kind, item in items:
            if kind == 0:
                ingest(index, item)
                folded += 1
            else:
                apply_reversal(index, item)
    finally:
        if collecting:
            gc.enable()
    if offset != index.reversals_offset:
        index.reversals_offset = offset
        index.changed = True
    return folded


def ingest(index: WriteBackIndex, journal: Journal) -> None:
    """What one journal's done steps did, into the records of the entries it touched."""
    header = journal.header
    journal_id = header.cycle_id
    if journal_id in index.journals or journal_id in index.undone or journal.undone:
        return
    if journal_id.endswith(DECAY_JOURNAL_SUFFIX) and all(step.op == "decay" for step in header.steps):
        # Decay's journal: a decay step changes the importance and updatedAt alone, which no stale copy is judged by,
        # so nothing of it is folded in. Recording its id only made every steady cycle (whose one journal is its
        # decay's) load and rewrite the whole index (writes.py ``_update_index``); ``catch_up`` skips it by name.
        return
    index.journals[journal_id] = header.created_at
    index.changed = True
    # A large plan's steps are built when looked at (plan_steps.py): their ops and groups are known without that, so a
    # step is looked at only when its op and outcome say it is folded in (a create or a decay never is).
    steps = header.steps
    ops_groups = getattr(steps, "ops_groups", None)
    pairs = ops_groups() if ops_groups is not None else [(s.op, s.group) for s in steps]
    view = getattr(steps, "for_fold", steps.__getitem__)  # what this fold reads of a step, no more
    heads = {group: journal.outcomes.get(n) for n, (op, group) in enumerate(pairs) if op in ("create", "update")}
    for number, (op, group) in enumerate(pairs):
        if op not in _FOLDED_IN:
            continue
        outcome = journal.outcomes.get(number)
        if outcome == "conflict" and op == "archive":
            # The agent wrote a source after the snapshot, so it was not archived; its successor was written with
            # it all the same (content and counts). Watched as if archived: the next cycle archives it, carrying
            # what the agent changed, instead of counting it in two places (or merging it again).
            if heads.get(group) == "done" and (step := view(number)).kind in ("merged", "folded"):
                _archived(index, journal, step)
            continue
        if outcome != "done":
            continue
        step = view(number)
        if op == "stamp":
            _stamped(index, journal_id, step)
        elif op == "update":
            _updated(index, journal_id, step)
        else:
            _archived(index, journal, step)


_FOLDED_IN: Final = frozenset({"stamp", "update", "archive"})


def _stamped(index: WriteBackIndex, journal_id: str, step: Step | FoldedStamp) -> None:
    # The marker holds only what the stamp changed: a review hash re-stamped unchanged (the content is the same) is
    # in every cache too, and would make a stale copy look like one that descends from the stamp.
    metadata, previous = step.metadata or {}, step.previous
    marker = {k: v for k, v in metadata.items() if v is not None and (previous is None or previous.get(k) != v)}
    index.add_layer(step.id, metadata.get(REVIEWED_HASH), Layer(journal_id, marker), MAX_LAYERS)


def _updated(index: WriteBackIndex, journal_id: str, step: Step) -> None:
    if step.before is None or step.after is None:
        return
    baseline = step.baseline or {}
    if "repair" in baseline:
        layer = baseline.get("layer")
        if layer:  # a carry of stale changes into this entry: the agent's cache of it lacks that too
            h = review_hash(Entry.from_json_obj(step.after).content)
            index.add_layer(step.id, h, Layer.of(journal_id, dict(layer["marker"]), layer.get("changes")), MAX_LAYERS)
        for source in baseline.get("sources") or ():
            _carried(index, journal_id, source)
        return
    before, after = Entry.from_json_obj(step.before), Entry.from_json_obj(step.after)
    index.add_layer(step.id, review_hash(after.content), layer_between(journal_id, before, after), MAX_LAYERS)


def layer_between(journal_id: str, before: Entry, after: Entry) -> Layer:
    """The in-place change from ``before`` to ``after`` (an exact-duplicate fold's survivor), as a layer."""
    old, new = before.metadata or {}, after.metadata or {}
    return Layer(
        journal=journal_id,
        marker={k: v for k, v in new.items() if k in BOOKKEEPING_KEYS and old.get(k) != v},
        rc=after.reinforcement_count - before.reinforcement_count,
        tags=tuple(t for t in after.tags if t not in before.tags),
        filled={k: v for k, v in new.items() if k not in BOOKKEEPING_KEYS and k not in old},
        created=format_timestamp(after.created_at) if after.created_at < before.created_at else None,
        seen=format_timestamp(after.seen_at) if after.seen_at > before.seen_at else None,
        importance=after.importance_score if after.importance_score > before.importance_score else None,
    )


def _archived(index: WriteBackIndex, journal: Journal, step: Step) -> None:
    journal_id = journal.header.cycle_id
    baseline = step.baseline or _baseline_on_disk(journal, step)
    if not baseline:
        return  # its content is unknown: a stale copy of it cannot be told from an edit
    if step.kind == "stale":
        _carried(index, journal_id, {**baseline, "id": step.id})
        return
    if "h" not in baseline or step.reason is None:
        return
    record = index.edit(step.id)
    record.h = str(baseline["h"])
    record.archived = Archived(
        journal=journal_id,
        reason=step.reason,
        successor=successor_in(step.reason),
        kind=step.kind or "merged",
        image=Counters.from_json(baseline),
    )


def _baseline_on_disk(journal: Journal, step: Step) -> dict[str, Any] | None:
    """A journal written before archive steps had baselines: the archived file is the archived image, as long as it
    is still this journal's archive (an agent's stale copy over it is not)."""
    if step.kind == "stale":
        return None
    path = Path(step.path)
    if not path.is_absolute():  # journals name files relative to the memory root they were written for
        if ".." in path.parts:
            return None
        path = Path(journal.header.memory_root) / path
    try:
        entry = Entry.from_json_obj(loads_json(read_regular(path, ENTRY_FILE_LIMIT, follow_symlinks=False)))
    except (OSError, ValueError):
        return None
    if not entry.is_archived or entry.meta(ARCHIVED_BY_CYCLE) != journal.header.cycle_id:
        return None
    return baseline_of(entry)


def _carried(index: WriteBackIndex, journal_id: str, source: dict[str, Any]) -> None:
    """A stale copy's changes were carried: the next copy of the same cache is measured from this one."""
    record = index.get(str(source["id"]))
    if record is not None and record.archived is not None:
        index.changed = True
        record.archived.carried[str(source["lineage"])] = (journal_id, Counters.from_json(source["copy"]))


def apply_reversal(index: WriteBackIndex, reversal: Reversal) -> None:
    for entry_id in reversal.restored:
        record = index.get(entry_id)
        if record is not None and record.archived is not None:
            record.archived = None  # live again by a person's decision
            index.changed = True
    if reversal.reversed_journals:
        # An undo is said before its first write: from then on its journals no longer stand, whether it finishes
        # or is killed (then resumed): what it restored is never taken for a stale copy.
        forget(index, reversal.reversed_journals)


def forget(index: WriteBackIndex, journal_ids: Iterable[str]) -> None:
    """Undone journals: what they did no longer stands (and they are never folded in again)."""
    undone = set(journal_ids)
    index.undone |= undone
    index.forget_journals(undone)
