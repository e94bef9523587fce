"""Write-ahead journal of a cycle's changes (the executor that applies and resumes them is ``executor.py``).

The validated plan is written (fsynced) before the first change; each step's outcome is appended as it happens
(review stamps per batch), and fsynced with each stamp batch and at the end: steps are idempotent, so a lost
outcome line only means a re-check. A cycle killed at any instant is finished by the next run
(``dreamkeeper recover``): a successor is created at most once (its id is in the journal and creation is
exclusive), a source is archived only after its successor exists, and every archive is guarded by the fingerprint
read at snapshot.

Paths in a journal are relative to the memory root and resolved against the root of the directory being recovered
(a copied agent directory recovers into itself, from any working directory); a step whose path would leave that
root, or does not name its own entry, is refused. A step that fails for any reason is recorded as failed with the
error, and the run goes on: a journal always completes, so one bad step can never wedge the agent. Only a disk
that takes no writes at all (full, read-only) stops the run, leaving the journal for the next one to finish.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Final, Literal

from pydantic import BaseModel, Field, ValidationError

from dreamkeeper.memory import (
    MUST_NOT_EXIST,
    Fingerprint,
    MemoryStore,
    MemoryStoreError,
    MiB,
    ensure_state_dir,
    format_timestamp,
    fsync_directory,
    loads_json,
    open_regular,
    read_regular,
    replace_file,
    state_dir,
)

log = logging.getLogger(__name__)

FOLD_JOURNAL_SUFFIX = "-fold"  # the exact-duplicate fold's journal: <cycle id>-fold.jsonl
DECAY_JOURNAL_SUFFIX = "-decay"  # importance decay's journal: <cycle id>-decay.jsonl
JOURNAL_LIMIT: Final = 4096 * MiB  # a cold start at 100k entries journals ~100 MB; this is a bound, not a size
UNREADABLE_SUFFIX: Final = ".unreadable"  # a journal that cannot be loaded is moved aside under this suffix
STOPPING_ERRNOS: Final = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})
"""Write errors of the whole volume: applying stops (the journal stays, to be finished when it takes writes)."""
WRITEBACK_JOURNAL_SUFFIX = "-writeback"  # the stale write-back repair's journal: <cycle id>-writeback.jsonl
JOURNAL_SUFFIXES: Final = ("", WRITEBACK_JOURNAL_SUFFIX, FOLD_JOURNAL_SUFFIX, DECAY_JOURNAL_SUFFIX)

Op = Literal["create", "update", "archive", "stamp", "decay"]
DECAY_FIELDS = ("importanceScore", "updatedAt")  # all a decay step changes (and all its undo puts back)
ArchiveKind = Literal["merged", "folded", "ephemeral", "undo", "stale"]


class FingerprintModel(BaseModel):
    sha256: str
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, fp: Fingerprint) -> FingerprintModel:
        return cls(sha256=fp.sha256, size=fp.size, mtime_ns=fp.mtime_ns)

    def to_fingerprint(self) -> Fingerprint:
        return Fingerprint(self.sha256, self.size, self.mtime_ns)


class Step(BaseModel):
    op: Op
    id: str
    path: str
    group: int
    expected: FingerprintModel | None = None
    # An update's whole object before and after; a decay's values (DECAY_FIELDS) before and after, on its own step or
    # carried by the stamp or archive of the same entry, which writes them in its one write.
    before: dict[str, Any] | None = None
    after: dict[str, Any] | None = None
    reason: str | None = None
    kind: ArchiveKind | None = None
    metadata: dict[str, str | None] | None = None  # a stamp's keys; keys an archive also sets
    previous: dict[str, str | None] | None = None  # a stamp's keys as they were before it (for undo)
    # What the cycle saw of an entry it archives (content hash, counters: consolidation/baseline.py), or what a
    # stale write-back repair did (consolidation/writeback): how a later cycle knows a stale copy when it sees one.
    baseline: dict[str, Any] | None = None


PathBase = Literal["as-written", "memory-root"]


class JournalHeader(BaseModel):
    cycle_id: str
    created_at: str
    memory_root: str
    # "memory-root": step paths are relative to the memory root. Journals written before had paths as the cycle
    # saw them (absolute, or relative to its working directory); they are read relative to ``memory_root``.
    path_base: PathBase = "as-written"
    steps: list[Step] = Field(default_factory=list)


@dataclass
class ExecutionTally:
    created: int = 0
    updated: int = 0
    archived: int = 0
    archived_merged: int = 0
    archived_folded: int = 0
    ephemeral: int = 0
    stamped: int = 0
    decayed: int = 0
    conflicts: int = 0
    failed: int = 0  # steps that could not be done (a write error, a refused path, a bug): recorded, skipped
    write_failed: int = 0  # of them, those the filesystem refused (permissions, I/O): the cycle fails
    failed_groups: set[int] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    written_ids: set[str] = field(default_factory=set)  # entries a step of ours wrote (done), successors included
    decayed_ids: set[str] = field(default_factory=set)  # entries whose decay is on disk (its own step, or carried)


JOURNAL_DIR: Final = "journal"


def journal_dir(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / JOURNAL_DIR


def journal_path(agent_dir: Path, cycle_id: str) -> Path:
    return journal_dir(agent_dir) / f"{cycle_id}.jsonl"


def journal_paths(agent_dir: Path, cycle_id: str) -> list[Path]:
    """A cycle's journals in the order they were written: its stale write-back repair, its exact-duplicate fold,
    its decay, then its plan."""
    return [
        journal_path(agent_dir, cycle_id + WRITEBACK_JOURNAL_SUFFIX),
        journal_path(agent_dir, cycle_id + FOLD_JOURNAL_SUFFIX),
        journal_path(agent_dir, cycle_id + DECAY_JOURNAL_SUFFIX),
        journal_path(agent_dir, cycle_id),
    ]


def relative_path(store: MemoryStore, path: Path) -> str:
    """How a journal names ``path``: relative to the memory root, '/'-separated."""
    if os.sep == "/":
        # The same lexical answer as relative_to, by string: a cold start journals a step per entry of the corpus.
        text, root = str(path), str(store.root)
        if text.startswith(root) and text[len(root) : len(root) + 1] == "/" and len(text) > len(root) + 1:
            return text[len(root) + 1 :]
    return path.relative_to(store.root).as_posix()


class Journal:
    """Append-only JSONL: the header (the whole plan) first, then one line per step outcome."""

    def __init__(self, path: Path, header: JournalHeader, outcomes: dict[int, str] | None = None) -> None:
        self.path = path
        self.header = header
        self.outcomes: dict[int, str] = outcomes or {}
        self.complete = False
        self.undone = False  # an undo reversed it (and closed it): recovery never finishes it

    @classmethod
    def create(cls, agent_dir: Path, header: JournalHeader) -> Journal:
        ensure_state_dir(agent_dir, JOURNAL_DIR)
        path = journal_path(agent_dir, header.cycle_id)
        # The serializer's bytes, not ``model_dump_json()`` + "\n" encoded (three copies of the header at once): a
        # cold start's decay journal names every entry of the corpus (about 45 MB at 100,000 entries).
        data = JournalHeader.__pydantic_serializer__.to_json(header) + b"\n"
        replace_file(path, data, MUST_NOT_EXIST)
        return cls(path, header)

    @classmethod
    def load(cls, path: Path) -> Journal:
        """Raises ``UnreadableJournalError`` when the file is not a journal (its header cannot be read)."""
        try:
            lines = read_regular(path, JOURNAL_LIMIT, follow_symlinks=False).decode("utf-8").splitlines()
            header = JournalHeader.model_validate_json(lines[0] if lines else "")
        except (OSError, UnicodeDecodeError, ValidationError) as exc:
            raise UnreadableJournalError(path, exc) from None
        journal = cls(path, header)
        for line in lines[1:]:
            try:
                record = loads_json(line)
            except ValueError:
                break  # a torn last line from a crash mid-append: that step is re-checked on resume
            if not isinstance(record, dict):
                continue
            if record.get("kind") == "complete":
                journal.complete = True
            elif record.get("kind") == "undone":
                journal.undone = True
            elif isinstance(record.get("step"), int) and "outcome" in record:
                journal.outcomes[record["step"]] = str(record["outcome"])
        return journal

    def as_folded(self) -> Journal:
        """This journal as much as the write-back index folds in (``writeback/ingest.py`` reads a journal's stamps,
        updates and archives, never a decay step): a journal of decays alone is its id, time and state. A cycle keeps
        its journals until its end to fold them in, and a cold start's decay journal held a step object per decayed
        entry there (about 40 MB at 10,000 entries, issue 27). Any other journal is itself."""
        steps = self.header.steps
        if not steps:
            return self
        # A streamed decay journal's steps say so (decay_journal.DecaySteps): not built again to be looked at.
        if not getattr(steps, "all_decays", False) and any(step.op != "decay" for step in steps):
            return self
        folded = Journal(self.path, self.header.model_copy(update={"steps": []}))
        folded.complete, folded.undone = self.complete, self.undone
        return folded

    def record(self, step: int, outcome: str, detail: str | None = None, *, sync: bool = True) -> None:
        self.record_many([(step, outcome, detail)], sync=sync)

    def record_many(self, outcomes: Sequence[tuple[int, str, str | None]], *, sync: bool = True) -> None:
        """Append several outcomes with one write (and one fsync unless ``sync`` is False).

        An outcome line only spares a resumed run the re-check of a step; every step is idempotent (a successor
        is recognised by its cycle id, an archive by its cycle id, a stamp by its fingerprint), so a line lost to
        a power cut costs a re-check, never a second change. A killed process loses at most the lines of the
        stamp batch in progress.
        """
        lines: list[dict[str, Any]] = []
        for step, outcome, detail in outcomes:
            self.outcomes[step] = outcome
            line: dict[str, Any] = {"step": step, "outcome": outcome}
            if detail:
                line["detail"] = detail
            lines.append(line)
        if lines:
            self._append(*lines, sync=sync)

    def finish(self) -> None:
        self._append({"kind": "complete", "at": format_timestamp(datetime.now().astimezone())})
        self.complete = True

    def close_undone(self) -> None:
        """An undo reverses this journal: it is closed (complete) unfinished, so no recovery ever runs its remaining
        steps (issue 22: a cycle killed mid-apply, undone, was finished by the next cycle's recovery, archiving
        sources "merged into" the successor the undo had archived)."""
        at = format_timestamp(datetime.now().astimezone())
        self._append({"kind": "undone", "at": at}, {"kind": "complete", "at": at})
        self.undone = self.complete = True

    def _append(self, *records: dict[str, Any], sync: bool = True) -> None:
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write("".join(json.dumps(record) + "\n" for record in records))
            handle.flush()
            if sync:
                os.fsync(handle.fileno())


class UnreadableJournalError(MemoryStoreError):
    def __init__(self, path: Path, cause: BaseException) -> None:
        detail = str(cause).replace("\n", "; ")[:300]
        super().__init__(f"journal {path} cannot be read ({type(cause).__name__}: {detail})")
        self.path = path


def set_aside(journal: Path) -> Path:
    """Move a journal that cannot be read out of the way (renamed, kept), so that recovery goes on without it."""
    aside = journal.with_name(journal.name + UNREADABLE_SUFFIX)
    os.rename(journal, aside)
    return aside


def incomplete_journals(agent_dir: Path) -> Iterator[Path]:
    """Journals that may not be complete: the caller loads each (one that is not a journal fails to load)."""
    directory = ensure_state_dir(agent_dir, JOURNAL_DIR, create=False)
    if directory is None:
        return
    for path in sorted(directory.glob("*.jsonl")):
        with contextlib.suppress(OSError, ValueError):
            if _ends_complete(path):
                continue  # the common case, read from the file's tail: history must not cost a full read per cycle
            lines = read_regular(path, JOURNAL_LIMIT, follow_symlinks=False).decode("utf-8").splitlines()
            if lines and _records_say_complete(lines):
                continue  # not yielded, whatever its header holds: skip validating the whole plan
        yield path


def _ends_complete(path: Path) -> bool:
    """Whether the journal's last line is its completion record (written last, after every outcome)."""
    fd, st = open_regular(path, JOURNAL_LIMIT, follow_symlinks=False)
    try:
        os.lseek(fd, max(0, st.st_size - 4096), os.SEEK_SET)
        tail = os.read(fd, 4096)
    finally:
        os.close(fd)
    try:
        record = loads_json(tail.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    except ValueError:
        return False
    return isinstance(record, dict) and record.get("kind") == "complete" and set(record) == {"kind", "at"}


def _records_say_complete(lines: list[str]) -> bool:
    """Journal.load's record loop without the header: every cycle checks every journal ever written, and validating
    each one's header (the whole plan: 100k steps after a cold start at 100k entries) made recovery grow with
    history. Anything unusual answers False, so the caller falls back to the full load."""
    complete = False
    try:
        for line in lines[1:]:
            try:
                record = loads_json(line)
            except ValueError:
                break
            if record.get("kind") == "complete":
                complete = True
            elif "step" in record:
                int(record["step"])
                str(record["outcome"])
    except Exception:
        return False
    return complete


def _relative(store: MemoryStore, step: Step) -> Step:
    """A step as a journal names it: its path relative to the memory root (a copied directory recovers into itself)."""
    path = Path(step.path)
    return step.model_copy(update={"path": relative_path(store, path)}) if path.is_absolute() else step


def write_journal_steps(
    agent_dir: Path, cycle_id: str, steps: list[Step], store: MemoryStore, now: datetime
) -> Journal:
    header = JournalHeader(
        cycle_id=cycle_id,
        created_at=format_timestamp(now),
        memory_root=str(store.root),
        path_base="memory-root",
        steps=[_relative(store, step) for step in steps],
    )
    journal = Journal.create(agent_dir, header)
    fsync_directory(journal.path.parent)
    return journal
