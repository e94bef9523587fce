"""The decay journal of a cycle (``<cycle id>-decay``), written without holding its steps.

Its decays are written at apply (docs/architecture.md, "Decay carried into the cycle's write"), when the cycle holds
the most memory: on a cold start the journal names nearly every entry of the corpus (a step object of about 1 KB
and 450 bytes of JSON each; a plan held by the blast-radius cap writes all of them alone). So its steps are
streamed to the file as they are built, and the executor gets them one at a time from the decay actions
(``DecaySteps``): the same file byte for byte as ``Journal.create`` writes (tests/consolidation/
test_decay_journal.py), and the same steps.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
from abc import abstractmethod
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import ClassVar, Final, Protocol, overload

from dreamkeeper.consolidation.journal import JOURNAL_DIR, ExecutionTally, Journal, JournalHeader, Step, journal_path
from dreamkeeper.consolidation.journal_steps import decay_step
from dreamkeeper.consolidation.plan import DecayAction
from dreamkeeper.memory import ConflictError, MemoryStore, ensure_state_dir, format_timestamp, fsync_directory

log = logging.getLogger(__name__)

PARTIAL: Final = ".partial"  # a decay journal being written: never a *.jsonl, so never taken for a journal
_CHUNK: Final = 1 << 20
# A journal this short keeps the steps it wrote for the executor, which takes each once (a steady cycle's few percent
# of the corpus: building every step twice was about a sixth of its decay write path). ~1.5 KB each (tracemalloc, a
# settled 10k corpus's 599 decays), so at most ~12 MB held, and only between the write and the run; a longer journal
# (a cold start) builds them again. 8192, not 2048: a steady cycle at 100,000 entries decays ~6,100 entries, and
# built each of their steps twice (~0.2 s of its ~5 s).
_KEEP_MAX: Final = 8192


class BuiltSteps(Sequence[Step]):
    """A journal's steps built when asked for (``DecaySteps`` here, ``plan_steps.PlanSteps``): a sequence like a
    list, whose ``_step`` gives the step at a non-negative index."""

    @overload
    def __getitem__(self, index: int) -> Step: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Step]: ...

    def __getitem__(self, index: int | slice) -> Step | Sequence[Step]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
            if index < 0:
                raise IndexError("step index out of range")
        return self._step(index)  # IndexError past the end, as a list

    def __iter__(self) -> Iterator[Step]:
        for index in range(len(self)):
            yield self[index]

    @abstractmethod
    def _step(self, index: int) -> Step:
        """The step at ``index`` (non-negative); IndexError past the end."""


class DecaySteps(BuiltSteps):
    """A decay journal's steps, built from its actions when asked for (each built the same way, so the same)."""

    all_decays: ClassVar[bool] = True  # Journal.as_folded need not build them to know

    def __init__(self, store: MemoryStore, actions: Sequence[DecayAction]) -> None:
        self.store = store
        self.actions = actions
        self._kept: dict[int, Step] = {}  # steps the journal was written from, until asked for (``_KEEP_MAX``)

    def __len__(self) -> int:
        return len(self.actions)

    def _step(self, index: int) -> Step:
        kept = self._kept.pop(index, None)
        return kept if kept is not None else decay_step(self.store, self.actions[index], index + 1)

    def written(self) -> Iterator[Step]:
        """The steps in order, for the journal's file; a short journal keeps them for the executor's one look each
        (the same objects, so the same step as a rebuilt one: ``decay_step`` is a pure function of the action)."""
        keep = len(self) <= _KEEP_MAX
        for index in range(len(self)):
            step = self[index]
            if keep:
                self._kept[index] = step
            yield step


class StreamedSteps(Protocol):
    """Steps a journal is streamed from, a sequence of them whose ``written`` yields them in order for the file
    (``DecaySteps`` here, and ``plan_steps.PlanSteps``)."""

    def __len__(self) -> int: ...

    def written(self) -> Iterator[Step]: ...


def write_decay_journal(
    agent_dir: Path, cycle_id: str, actions: Sequence[DecayAction], store: MemoryStore, now: datetime
) -> Journal:
    """Journal ``actions`` (fsynced, created exclusively, its directory fsynced) and return the journal, whose
    steps are a ``DecaySteps``."""
    return write_streamed_journal(agent_dir, cycle_id, DecaySteps(store, actions), store, now)


def write_streamed_journal(
    agent_dir: Path, cycle_id: str, steps: StreamedSteps, store: MemoryStore, now: datetime
) -> Journal:
    """Journal ``steps`` as ``Journal.create`` would, the same bytes, without ever holding all of them or their
    JSON (fsynced, created exclusively, its directory fsynced); the journal's steps are ``steps`` itself."""
    ensure_state_dir(agent_dir, JOURNAL_DIR)
    path = journal_path(agent_dir, cycle_id)
    directory = path.parent
    for leftover in directory.glob(f".*{PARTIAL}"):  # a cycle killed while writing one (we hold the cycle lock)
        with contextlib.suppress(OSError):
            leftover.unlink()
            log.info("removed %s: a journal a killed cycle left half-written (never a journal)", leftover)
    empty = JournalHeader(
        cycle_id=cycle_id, created_at=format_timestamp(now), memory_root=str(store.root), path_base="memory-root"
    )
    head = JournalHeader.__pydantic_serializer__.to_json(empty)
    assert head.endswith(b"[]}"), head  # the steps are the header's last field
    temp = directory / f".{path.name}.{os.getpid()}{PARTIAL}"
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        buffer = bytearray(head[:-2])
        serializer = Step.__pydantic_serializer__
        for number, step in enumerate(steps.written()):
            if number:
                buffer += b","
            buffer += serializer.to_json(step)
            if len(buffer) >= _CHUNK:
                _write_all(fd, buffer)
                buffer.clear()
        buffer += b"]}\n"
        _write_all(fd, buffer)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
    os.close(fd)
    try:
        _link(temp, path)
    finally:
        with contextlib.suppress(OSError):
            temp.unlink()
    fsync_directory(directory)
    header = JournalHeader.model_construct(**{**dict(empty), "steps": steps})
    return Journal(path, header)


def _write_all(fd: int, data: bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _link(temp: Path, path: Path) -> None:
    """``temp`` at ``path``, never over a journal already there (as ``replace_file(..., MUST_NOT_EXIST)``)."""
    try:
        os.link(temp, path)
    except FileExistsError as exc:
        raise ConflictError(path, "a journal of that name already exists") from exc
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
        if os.path.lexists(path):  # a volume without hard links: check, then rename
            raise ConflictError(path, "a journal of that name already exists") from exc
        os.replace(temp, path)


@dataclass(frozen=True)
class DecayTally:
    """What the decay journal(s) of a cycle wrote: ids decayed, of them how many left the high-value floor, and
    what could not be written (as notes for the report)."""

    ids: frozenset[str] = frozenset()
    left_floor: int = 0
    conflicts: int = 0
    write_failed: int = 0
    notes: tuple[str, ...] = ()

    @classmethod
    def of(cls, tally: ExecutionTally, left_floor: frozenset[str], notes: tuple[str, ...]) -> DecayTally:
        done = frozenset(tally.decayed_ids)
        return cls(done, len(left_floor & done), tally.conflicts, tally.write_failed, notes)

    def __add__(self, other: DecayTally) -> DecayTally:
        return DecayTally(
            self.ids | other.ids,
            self.left_floor + other.left_floor,
            self.conflicts + other.conflicts,
            self.write_failed + other.write_failed,
            self.notes + other.notes,
        )


__all__ = ["PARTIAL", "DecaySteps", "DecayTally", "write_decay_journal"]
