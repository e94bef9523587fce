"""Reverse a whole cycle: restore what it archived, archive what it created, put folded survivors back, put decayed
importance (and updatedAt) back, take its review stamps off.

A cycle writes up to four journals, its stale write-back repair (``<cycle>-writeback``), its exact-duplicate fold
(``<cycle>-fold``), its decay (``<cycle>-decay``) and its plan; each tags what it archives and creates with its own
journal's id, so each is undone by that id. Every reversal is checked against what the cycle wrote: a value the
agent changed since is kept, and reported as a conflict.

An undo agrees with the rest of the engine (issue 22):

* it is announced in the reversals log **before its first write** (``note_undoing``): from then on the write-back
  index no longer takes what the cycle did for standing (what the undo restores is never a "stale copy" to archive
  again), and no recovery ever finishes a journal of that cycle (an unfinished one is closed as undone). An undo
  that cannot announce itself changes nothing;
* an undo that did not finish (killed, its last write failed) is **resumed**: by ``undo`` again, or by the next
  cycle's recovery (``resume_undos``); every step is idempotent;
* it never archives a successor (or reverts a text) when that would take the last live mention of a specific out
  of the live corpus: a source purged since cannot come back, so its successor stays live, and the undo says so;
* its end is checked by the end-of-run invariant (``invariant.py``), which brings back what the undo archived if a
  fact was lost all the same.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from dreamkeeper.consolidation.executor import StepPaths
from dreamkeeper.consolidation.invariant import Census, Reversed, Verdict, judge, reverse, scan_map, tags_in
from dreamkeeper.consolidation.journal import Journal, Step, journal_dir, journal_paths
from dreamkeeper.consolidation.journal_steps import has_decay_values, put_decay_values
from dreamkeeper.consolidation.purge import agent_vocabulary
from dreamkeeper.coverage import VOCABULARY_FILE, CoverageIndex, Vocabulary, extract_specifics
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    CREATED_BY_CYCLE,
    MERGED_FROM,
    STALE_COPY_OF,
    ConflictError,
    Entry,
    MalformedFile,
    MemoryStore,
    MemoryStoreError,
    StoredEntry,
    check_state_files,
    note_undoing,
    note_undone,
    read_reversals,
    replace_file,
    shown_all,
    unfinished_undos,
    utcnow,
)

log = logging.getLogger(__name__)

_ABSENT: Final = object()
UNDO_TAG_PREFIX: Final = "undo-"  # what an undo's archives carry as their cycle: undo-<journal id>


@dataclass
class UndoResult:
    cycle_id: str
    restored: list[str] = field(default_factory=list)
    archived: list[str] = field(default_factory=list)
    reverted: list[str] = field(default_factory=list)
    unstamped: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # successors kept live: the last live holders of a specific
    missing: list[str] = field(default_factory=list)  # entries the cycle archived that are gone (purged since)
    details: list[str] = field(default_factory=list)
    specifics_lost: list[str] = field(default_factory=list)  # the end-of-run invariant, after its reversal
    orphaned: list[str] = field(default_factory=list)
    losses_reversed: list[str] = field(default_factory=list)
    resumed: bool = False  # an earlier undo of this cycle had not finished
    journals: list[str] = field(default_factory=list)  # the journal ids undone (its archives: undo-<journal id>)

    @property
    def incomplete(self) -> bool:
        """Something was left as it is (exit 1): a conflict, a successor kept, a source that is gone, a loss."""
        return bool(
            self.conflicts or self.kept or self.missing or self.specifics_lost or self.orphaned or self.losses_reversed
        )


def journals_of(agent_dir: Path, cycle_id: str) -> list[Path]:
    return [path for path in journal_paths(agent_dir, cycle_id) if path.exists()]


def undo_tags(journal_ids: list[str]) -> set[str]:
    return {UNDO_TAG_PREFIX + j for j in journal_ids}


def undo_cycle(agent_dir: Path, memory_root: Path, cycle_id: str, vocabulary: Vocabulary | None = None) -> UndoResult:
    """Reverse ``cycle_id`` (the caller holds the cycle lock). Raises FileNotFoundError when the cycle left no
    journal, ``StateFileError`` when the undo cannot be announced: nothing was changed then."""
    paths = journals_of(agent_dir, cycle_id)
    if not paths:
        raise FileNotFoundError(f"no journal for cycle {cycle_id} under {journal_dir(agent_dir)}; nothing was changed")
    check_state_files(agent_dir)
    journals = [Journal.load(path) for path in reversed(paths)]  # the plan first, then the fold it was planned on
    ids = [journal.header.cycle_id for journal in journals]
    store = MemoryStore(memory_root)
    words = vocabulary if vocabulary is not None else agent_vocabulary(agent_dir, VOCABULARY_FILE)
    result = UndoResult(cycle_id, resumed=cycle_id in unfinished_undos(read_reversals(agent_dir)[0]), journals=ids)
    scan = store.scan()
    before = Census.of(scan.entries)
    # Said before anything else (the caller holds the cycle lock): what this cycle did no longer stands. A log that
    # cannot be written stops the undo here, with nothing changed.
    note_undoing(agent_dir, cycle_id, ids)
    for journal in journals:
        if not journal.complete:
            try:
                journal.close_undone()
            except OSError as exc:  # the reversals log already says so: recovery skips it all the same
                log.warning(
                    "could not close journal %s as undone (%s); the reversals log says it is", journal.path, exc
                )
    holders = _Holders(before.live, words)
    for journal in journals:
        _Undo(store, journal, result, holders).run()
    note_undone(agent_dir, ids)
    _check_end(agent_dir, store, before, ids, words, result)
    log.info(
        "undid cycle %s — %d restored, %d successor(s) archived, %d rewrite(s) reverted, %d stamp(s) removed, "
        "%d conflict(s), %d successor(s) kept as the last live holder of a specific, %d gone since",
        cycle_id,
        len(result.restored),
        len(result.archived),
        len(result.reverted),
        len(result.unstamped),
        len(result.conflicts),
        len(result.kept),
        len(result.missing),
    )
    return result


def _check_end(
    agent_dir: Path, store: MemoryStore, before: Census, ids: list[str], words: Vocabulary, result: UndoResult
) -> None:
    """The end-of-run invariant over the undo: whatever it archived that held the last mention of a fact comes back."""
    after = scan_map(store)
    ours = tags_in(undo_tags(ids))
    verdict: Verdict = judge(before, after, ours, words)
    if verdict.clean:
        return
    brought: Reversed = reverse(agent_dir, store, verdict, after)
    result.losses_reversed = brought.restored
    if brought.restored:
        verdict = judge(before, scan_map(store), ours, words)
    result.specifics_lost, result.orphaned = verdict.lost, verdict.orphaned
    result.details += [*verdict.notes("undo"), *brought.notes()]


def resume_undos(agent_dir: Path, memory_root: Path, vocabulary: Vocabulary | None = None) -> list[UndoResult]:
    """Finish every undo that was announced and did not finish (the caller holds the cycle lock)."""
    results = []
    for cycle_id in unfinished_undos(read_reversals(agent_dir)[0]):
        if not journals_of(agent_dir, cycle_id):
            log.warning("an unfinished undo of cycle %s has no journal left to resume from", cycle_id)
            continue
        log.warning("resuming the undo of cycle %s, which did not finish", cycle_id)
        results.append(undo_cycle(agent_dir, memory_root, cycle_id, vocabulary))
    return results


class _Holders:
    """The live corpus as the undo changes it, asked before a successor is archived (or a text reverted) whether
    that would take the last live mention of one of its specifics out (a source purged since cannot come back)."""

    def __init__(self, live: Mapping[str, StoredEntry], vocabulary: Vocabulary) -> None:
        self.texts = {entry_id: stored.entry.content for entry_id, stored in live.items()}
        self.vocabulary = vocabulary
        self._index: CoverageIndex | None = None

    @property
    def index(self) -> CoverageIndex:
        if self._index is None:
            self._index = CoverageIndex()
            for text in self.texts.values():
                self._index.add(text)
        return self._index

    def live(self, entry_id: str, text: str) -> None:
        """``entry_id`` is live now with ``text`` (restored, or reverted)."""
        self._drop(entry_id)
        self.texts[entry_id] = text
        if self._index is not None:
            self._index.add(text)

    def gone(self, entry_id: str) -> None:
        self._drop(entry_id)

    def _drop(self, entry_id: str) -> None:
        old = self.texts.pop(entry_id, None)
        if old is not None and self._index is not None:
            self._index.remove(old)

    def only_here(self, entry: Entry, replacement: str | None = None) -> list[str]:
        """The specifics of ``entry`` no other live text says (``replacement``: the text it would hold instead)."""
        specifics = extract_specifics(entry.content, entry.category, self.vocabulary)
        if not specifics:
            return []
        # The common case, cheaply: the sources it replaced are live again (the undo restored them just before) and
        # say it all; only a specific they do not say needs the whole live corpus.
        sources = CoverageIndex()
        for source in (entry.meta(MERGED_FROM) or "").split(","):
            text = self.texts.get(source) if source and source != entry.id else None
            if text is not None:
                sources.add(text)
        if replacement is not None:
            sources.add(replacement)
        specifics = [s for s in specifics if not sources.covers(s)]
        if not specifics:
            return []
        index = self.index
        own = self.texts.get(entry.id)
        if own is not None:
            index.remove(own)
        if replacement is not None:
            index.add(replacement)
        try:
            return [s.text for s in specifics if not index.covers(s)]
        finally:
            if replacement is not None:
                index.remove(replacement)
            if own is not None:
                index.add(own)


class _Undo:
    """One journal's steps, last first. Steps are looked at whatever their recorded outcome: a change written just
    before a crash has no outcome line, and the tags and values checked here say whether it happened."""

    def __init__(self, store: MemoryStore, journal: Journal, result: UndoResult, holders: _Holders) -> None:
        self.store = store
        self.journal = journal
        self.result = result
        self.holders = holders
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
                elif step.op == "archive" and self.journal.outcomes.get(index) in (None, "done"):
                    # Archived by the cycle and gone since (the retention purge): it cannot come back; its successor
                    # (if any) is then the last live holder of what it said, and is kept (``_keeps``).
                    self.result.missing.append(step.id)
                    self.result.details.append(
                        f"{step.id}: archived by {self.tag} and gone since (purged); not restored"
                    )
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
                self.holders.live(current.id, entry.content)
                self.result.restored.append(step.id)
        elif step.op == "create":
            if entry.meta(CREATED_BY_CYCLE) == self.tag and entry.is_live:
                if self._keeps(current.entry, None):
                    return
                self.store.archive(current, f"undone cycle {self.tag}", utcnow(), UNDO_TAG_PREFIX + self.tag)
                self.holders.gone(current.id)
                self.result.archived.append(step.id)
        elif step.op == "update" and step.before is not None and step.after is not None:
            self._revert_update(step, current)
        elif step.op == "decay" and step.before is not None and step.after is not None:
            self._undecay(step, current)
        elif step.op == "stamp" and step.metadata is not None and step.previous is not None:
            self._unstamp(step, current)
        if step.op in ("stamp", "archive") and step.before is not None and step.after is not None:
            # The decay this step carried (journal_steps.steps_from_plan), undone like a decay step of its own, from the
            # file as the undo of the stamp or archive left it.
            again = self._current(step)
            if again is not None:
                self._undecay(step, again)

    def _undecay(self, step: Step, current: StoredEntry) -> None:
        assert step.before is not None and step.after is not None
        if has_decay_values(current.entry, step.before):
            return  # not decayed after all (a conflict at the time), or undone already
        if not has_decay_values(current.entry, step.after):
            raise ConflictError(current.path, "importance or updatedAt changed after the cycle decayed it")
        restored = put_decay_values(current.entry.to_json_obj(), step.before)
        replace_file(current.path, _dump(restored), current.fingerprint)
        self.result.reverted.append(step.id)

    def _revert_update(self, step: Step, current: StoredEntry) -> None:
        """Three-way: each value the fold changed goes back to what it was, if it is still what the fold wrote."""
        assert step.before is not None and step.after is not None
        now = current.entry.to_json_obj()
        reverted, changed, kept = _three_way(step.before, step.after, now)
        if changed:
            text = Entry.from_json_obj(reverted).content
            if current.entry.is_live and text != current.entry.content and self._keeps(current.entry, text):
                return  # a merge folded into a live entry: its text goes back only if the sources still say it
            replace_file(current.path, _dump(reverted), current.fingerprint)
            if current.entry.is_live:
                self.holders.live(current.id, text)
            self.result.reverted.append(step.id)
        if kept:
            raise ConflictError(current.path, f"changed after the fold ({', '.join(kept)}); those values were kept")

    def _keeps(self, entry: Entry, replacement: str | None) -> bool:
        """Whether ``entry`` must stay as it is: it holds the last live mention of a specific (its sources purged)."""
        only = self.holders.only_here(entry, replacement)
        if not only:
            return False
        log.warning(
            "undo of %s kept %s live: it is the last live entry saying %s (its sources are gone)",
            self.tag,
            entry.id,
            shown_all(only),
        )
        self.result.kept.append(entry.id)
        self.result.details.append(
            f"{entry.id}: kept live, the last live entry saying {shown_all(only)} (the sources it replaced are gone)"
        )
        return True

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
