"""The executor of a cycle's journal: applies its steps in order, resumes a journal a crash interrupted, and says
where each step's file is (``StepPaths``, shared with undo and recovery).

Split from ``journal.py`` (the journal's format, writing and reading): see that module's docstring for the
write-ahead rules every step here keeps (idempotent steps, a source archived only after its successor exists,
every archive guarded by the fingerprint read at snapshot, a failed step recorded and the run going on).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Any, Final

from dreamkeeper.consolidation.journal import (
    DECAY_FIELDS,
    STOPPING_ERRNOS,
    ExecutionTally,
    Journal,
    JournalHeader,
    Step,
)
from dreamkeeper.consolidation.journal_steps import has_decay_values, with_decay_values
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    CREATED_BY_CYCLE,
    MUST_NOT_EXIST,
    ConflictError,
    Entry,
    Fingerprint,
    MalformedFile,
    MemoryStore,
    MemoryStoreError,
    PathEscapeError,
    StoredEntry,
    StoreWriteError,
    derived_bytes,
    dumps_indented,
    ensure_inside,
    entry_location,
    fsync_directory,
    path_of_name,
    replace_file,
    shown,
)

log = logging.getLogger(__name__)


def _dump(obj: dict[str, Any]) -> bytes:
    # json.dumps(indent=2, ensure_ascii=False) byte for byte (memory/jsontext.py), without its pure-Python encoder.
    return (dumps_indented(obj) + "\n").encode("utf-8")


class StepPaths:
    """Where each step's file is in the memory root being applied to (or undone in).

    A path that is absolute, climbs out with '..', leads out through a symlinked directory, or does not name the
    step's own entry is refused (a hand-edited or hostile journal); journals written before paths were relative
    are read relative to the memory root they name, so a copied agent directory still recovers into itself."""

    def __init__(self, store: MemoryStore, header: JournalHeader) -> None:
        self.root = store.root
        self.legacy_root = None if header.path_base == "memory-root" else PurePosixPath(header.memory_root)
        self._inside: set[Path] = set()  # directories checked to resolve inside the memory root
        self._dirs: dict[str, str] = {}  # a step path's directory part -> that directory's path string, validated

    def __call__(self, step: Step) -> Path:
        head, _, name = step.path.rpartition("/")
        if self.legacy_root is None and name == f"{step.id}.json":
            # A directory already validated for an earlier step: the same answer as below, without parsing the
            # path again (a cold start's decay journals one step per entry of the corpus).
            directory = self._dirs.get(head)
            if directory is not None:
                # Joined as strings, the Path built from its directory's (``path_of_name``): ``directory / name``
                # parsed the name again and interned it, for every step of a cold start's journals.
                return path_of_name(os.path.join(directory, name))
        path = self._resolve(step)
        if self.legacy_root is None and path.name == name:
            self._dirs[head] = str(path.parent)
        return path

    def _resolve(self, step: Step) -> Path:
        relative = PurePosixPath(step.path)
        if self.legacy_root is not None:
            with contextlib.suppress(ValueError):
                relative = relative.relative_to(self.legacy_root)
        if relative.is_absolute() or ".." in relative.parts or not relative.parts:
            raise PathEscapeError(Path(step.path), self.root)
        if relative.name != f"{step.id}.json":
            raise ValueError(f"journal path {step.path} does not name entry {step.id}; step refused")
        path = self.root.joinpath(*relative.parts)
        if path.parent not in self._inside:
            ensure_inside(self.root, path.parent)
            self._inside.add(path.parent)
        return path


STAMP_BATCH = 512
"""Steps written between two directory fsyncs and journal appends: review stamps and decays, and the plan's
creates, updates and archives (``Executor``)."""

_BATCHED_ALONE: Final = frozenset({"stamp", "decay"})
_WINDOWED: Final = frozenset({"create", "update", "archive"})


class Executor:
    """Runs journal steps in order; safe to run again on a journal a crash interrupted.

    ``snapshot`` (path -> the entry as the cycle read it) lets a stamp be written from memory instead of reading
    and parsing the file again; the fingerprint check in the write still refuses a file the agent changed.

    Every write is durable in batches (docs/architecture.md, "Batched writes"): each file's data is fsynced before
    its rename as always, the renames of a batch become durable with one fsync of each directory they touched, and
    then the batch's outcomes are appended to the journal at once. Review stamps and decays (metadata rewrites of
    one file each) batch freely. Creates, updates and archives go in windows of whole groups: first every create and
    update of the window, then one flush, and only then the window's archives, then a flush again: a source is still
    archived only after its successor is on disk for good. A step whose outcome line a crash lost is run again on
    recovery, and finds its work done (a successor by its cycle id, an archive by its cycle id, a stamp or a decay
    by its values), or redoes it when a power cut undid the rename.
    """

    def __init__(
        self,
        store: MemoryStore,
        journal: Journal,
        now: datetime,
        snapshot: Mapping[str, StoredEntry] | None = None,
        decayed: Mapping[str, Entry] | None = None,
        *,
        remember: bool = False,
    ) -> None:
        self.store = store
        self.journal = journal
        self.now = now
        self.cycle_id = journal.header.cycle_id
        self.snapshot = snapshot or {}
        # Path -> the entry the decay plan made of the snapshot's (the values its journal step records): written as
        # it is, instead of being rebuilt from the step's values, while the file is still the snapshot's.
        self.decayed = decayed or {}
        self.tally = ExecutionTally()
        self.written: dict[str, Fingerprint] = {}
        """Path -> fingerprint of every stamp and decay this run wrote (the report's final scan trusts the snapshot's
        parse of a file whose bytes are still exactly these: they change no id, content or live state)."""
        self.made: dict[str, StoredEntry] = {}
        """Path -> what this run created, updated or archived there: the entry whose JSON it wrote (a parse of those
        bytes gives it back) with the fingerprint of the write. The cycle's later looks at these files (the fold's
        snapshot, the report's final scan) take it instead of reading back bytes the cycle itself just wrote,
        while the file's size and mtime are still exactly the write's (``Writes._own``). Only with ``remember``:
        recovery, which has no later look, does not hold an entry per step of a journal of any size."""
        self.decays: dict[str, tuple[Entry, str]] = {}
        """Path -> the entry a decay wrote there and the sha256 of the bytes it decayed (only with ``remember``): the
        corpus index keeps it for the next scan, which then need not parse the bytes this cycle wrote
        (``CorpusIndex.remember``)."""
        self._remember = remember
        self._pending: list[tuple[int, str, str | None]] = []  # outcomes of steps written, not yet durable
        self._pending_dirs: set[Path] = set()  # the directories those writes renamed files in
        self.path_of = StepPaths(store, journal.header)

    def run(self) -> ExecutionTally:
        steps = self.journal.header.steps
        index = 0
        while index < len(steps):
            step = steps[index]
            if step.op in _WINDOWED:
                index = self._window(index)
                continue
            index += 1
            previous = self.journal.outcomes.get(index - 1)
            if previous is not None:
                continue
            if step.op in _BATCHED_ALONE:
                run = self._stamp if step.op == "stamp" else self._decay
                self._add(index - 1, *self._guarded(step, run))
                continue
            # An unknown op: refused as its own failed step (``_run_step`` says what it is).
            self._flush()
            self._add(index - 1, *self._guarded(step, self._run_step))
        self._flush()
        self.journal.finish()
        if self.tally.failed > 1:
            log.error(
                "%d steps of %s could not be done; the first: %s",
                self.tally.failed,
                self.cycle_id,
                self.tally.errors[0],
            )
        return self.tally

    def _window(self, start: int) -> int:
        """Run the creates, updates and archives from ``start`` up to ``STAMP_BATCH`` steps (whole groups); returns
        the index after the window. Heads (creates, updates) first and flushed, then the archives."""
        steps = self.journal.header.steps
        end = start
        while end < len(steps) and steps[end].op in _WINDOWED:
            if end - start >= STAMP_BATCH and steps[end].group != steps[end - 1].group:
                break
            end += 1
        self._flush()
        archives: list[int] = []
        for index in range(start, end):
            step = steps[index]
            previous = self.journal.outcomes.get(index)
            if previous is not None:
                if previous != "done" and step.op in ("create", "update"):
                    self.tally.failed_groups.add(step.group)
                continue
            if step.op == "archive":
                archives.append(index)
                continue
            outcome, detail = self._guarded(step, self._run_step)
            if outcome != "done":
                self.tally.failed_groups.add(step.group)
            self._add(index, outcome, detail)
        # Every successor of the window is on disk for good, and journaled, before any of its sources is archived.
        self._flush()
        for index in archives:
            step = steps[index]
            if self._group_head_failed(index, step):
                self._add(index, "skipped", "its replacement was not saved")
                continue
            self._add(index, *self._guarded(step, self._run_step))
        self._flush()
        return end

    def _add(self, index: int, outcome: str, detail: str | None) -> None:
        self._pending.append((index, outcome, detail))
        if len(self._pending) >= STAMP_BATCH:
            self._flush()

    def _guarded(self, step: Step, run: Callable[[Step], str]) -> tuple[str, str | None]:
        """A step's outcome and, when it was not done, why. Only a volume that takes no writes stops the run."""
        try:
            outcome = run(step)
            if outcome == "done":
                self.tally.written_ids.add(step.id)
            return outcome, None
        except ConflictError as exc:
            log.warning("left %s as it is: %s", step.id, exc)
            self.tally.conflicts += 1
            return "conflict", str(exc)
        except StoreWriteError as exc:
            if exc.errno in STOPPING_ERRNOS:
                with contextlib.suppress(OSError):
                    self._flush()
                raise
            self.tally.write_failed += 1
            return self._failed(step, str(exc))
        except OSError as exc:  # the filesystem refused (EACCES, EIO, EPERM ...), not the entry
            self.tally.write_failed += 1
            return self._failed(step, f"{type(exc).__name__}: {exc}")
        except (MemoryStoreError, ValueError) as exc:
            # One entry the store cannot write (a path it refuses, text UTF-8 cannot hold, ...) fails its own step
            # (and its group's archives), never the cycle; the file is left as it was.
            return self._failed(step, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # a bug must not wedge the agent either: the step is skipped, the trace logged
            log.exception("unexpected error in %s of %s", step.op, step.id)
            return self._failed(step, f"{type(exc).__name__}: {exc}")

    def _failed(self, step: Step, error: str) -> tuple[str, str]:
        # The first failure is the error that matters (a read-only tree fails every step the same way): logged in
        # full; the rest at DEBUG, and counted in the summary at the end of the run.
        level = logging.ERROR if not self.tally.failed else logging.DEBUG
        log.log(level, "could not %s %s: %s (step skipped, recorded in %s)", step.op, step.id, error, self.journal.path)
        self.tally.failed += 1
        self.tally.errors.append(f"{step.op} {step.id}: {error}")
        return "failed", error[:500]

    def _snapshot_or_read(
        self, step: Step, path: Path, name: str | None = None, expected: Fingerprint | None = None
    ) -> StoredEntry | None:
        """The entry as the cycle read it when that is what the step expects (the write's own fingerprint check
        still refuses a file changed since); otherwise, e.g. resuming a journal, the file as it is now. ``name``,
        ``expected``: ``str(path)`` and the step's expected fingerprint, when the caller has them already."""
        assert step.expected is not None
        stored = self.snapshot.get(str(path) if name is None else name)
        if stored is not None and stored.fingerprint == (
            step.expected.to_fingerprint() if expected is None else expected
        ):
            return stored
        return self._read(path)

    def _stamp(self, step: Step) -> str:
        assert step.expected is not None and step.metadata is not None
        path = self.path_of(step)
        stored = self._snapshot_or_read(step, path)
        if stored is None or stored.fingerprint != step.expected.to_fingerprint():
            return "stale"  # the agent wrote meanwhile: it will simply be reviewed again
        entry = self._carrying(step, path, stored.entry)
        try:
            fingerprint = self.store.rewrite(stored, entry.with_meta(**step.metadata), sync_directory=False)
        except ConflictError:
            return "stale"  # changed after the snapshot: nothing written, reviewed (and decayed) again next cycle
        self._pending_dirs.add(path.parent)
        # Keyed by the snapshot's own string for the file (``stored.name`` is ``str(path)``): kept to the cycle's end.
        self.written[stored.name] = fingerprint
        self.tally.stamped += 1
        self._decayed(step)
        return "done"

    def _carrying(self, step: Step, path: Path, entry: Entry) -> Entry:
        """``entry`` with the decay its step carries (``steps_from_plan``): the decay plan's own entry when that is
        what the cycle holds for the file, else the values written into the entry read (a resumed journal)."""
        if step.after is None:
            return entry
        if entry is self.decayed.get(str(path)):
            return entry
        return with_decay_values(entry, step.after)

    def _decayed(self, step: Step) -> None:
        if step.after is not None:  # a stamp or an archive done: the decay it carried is on disk with it
            self.tally.decayed += 1
            self.tally.decayed_ids.add(step.id)

    def _decay(self, step: Step) -> str:
        assert step.expected is not None and step.after is not None
        path = self.path_of(step)
        name, expected = str(path), step.expected.to_fingerprint()  # once each: a steady cycle decays hundreds
        stored = self._snapshot_or_read(step, path, name, expected)
        if stored is None:
            raise ConflictError(path, "the entry disappeared")
        if stored.fingerprint != expected:
            if has_decay_values(stored.entry, step.after):
                return "done"  # written before a crash, journal line lost
            raise ConflictError(path, "changed since the snapshot (the agent wrote to it)")
        planned = self.decayed.get(name)
        data = None
        if planned is not None and stored is self.snapshot.get(name):
            updated = planned
            if step.before is not None:
                # The plan's own entry, whose step's values are its JSON's: the file's bytes with the two values
                # replaced, when they are the bytes the last cycle's decay wrote (at 100k entries a steady cycle
                # re-encoded 5,700 entries for their two values).
                changes = [(key, step.before.get(key), step.after.get(key)) for key in DECAY_FIELDS]
                data = derived_bytes(self.store.corpus_index, stored, changes)
        else:
            updated = with_decay_values(stored.entry, step.after)
        fingerprint = self.store.rewrite(stored, updated, sync_directory=False, data=data)
        self._pending_dirs.add(path.parent)
        self.written[stored.name] = fingerprint  # the snapshot's string for the file (as ``_stamp``)
        if self._remember:
            self.decays[stored.name] = (updated, expected.sha256)  # the plan's own entry: held by it anyway
        self.tally.decayed += 1
        self.tally.decayed_ids.add(step.id)
        return "done"

    def note_decays(self, decayed: dict[str, tuple[Entry, Fingerprint, str]]) -> None:
        """This run's writes in ``decayed`` (path -> a decay's entry, the fingerprint written and the sha256 of the
        bytes decayed): a decay's replaces what an earlier run noted; any other write (a stamp, an update, an
        archive) removes it."""
        for name, fingerprint in self.written.items():
            decay = self.decays.get(name)
            if decay is None or name in self.made:
                decayed.pop(name, None)
            else:
                decayed[name] = (decay[0], fingerprint, decay[1])
        for name in self.made:
            decayed.pop(name, None)

    def _flush(self) -> None:
        """Make the batch's renames durable (one fsync per directory), then record their outcomes."""
        if not self._pending:
            return
        for directory in sorted(self._pending_dirs):
            try:
                fsync_directory(directory)
            except OSError as exc:  # the files are written; only their durability across power loss is unsure
                log.warning("could not fsync %s after a batch of writes: %s", directory, exc)
        self.journal.record_many(self._pending)
        self._pending = []
        self._pending_dirs = set()

    def _group_head_failed(self, index: int, step: Step) -> bool:
        if step.group in self.tally.failed_groups:
            return True
        for earlier in range(index - 1, -1, -1):
            other = self.journal.header.steps[earlier]
            if other.group != step.group:
                break
            if other.op in ("create", "update"):
                return self.journal.outcomes.get(earlier) != "done"
        return False

    def _read(self, path: Path) -> StoredEntry | None:
        if not os.path.lexists(path):
            return None
        result = self.store.read_file(path)
        if isinstance(result, MalformedFile):
            raise ConflictError(path, f"is not an entry we may write any more: {result.error}")
        return result

    def _run_step(self, step: Step) -> str:
        path = self.path_of(step)
        if step.op == "create":
            assert step.after is not None
            successor = Entry.from_json_obj(step.after)
            if entry_location(self.store.root, successor.id, successor.category) != path or successor.id != step.id:
                raise ValueError(f"journal path {step.path} is not where successor {successor.id} belongs")
            current = self._read(path)
            if current is not None:
                if current.entry.meta(CREATED_BY_CYCLE) == self.cycle_id and current.id == step.id:
                    return "done"  # written before a crash, journal line lost
                raise ConflictError(path, "a different file already has the successor's name")
            fingerprint = replace_file(path, _dump(step.after), MUST_NOT_EXIST, sync_directory=False)
            if self._remember:  # by its string: no Path kept to the cycle's end (``StoredEntry.passing_path``)
                name = str(path)
                self.made[name] = StoredEntry.named(successor, name, fingerprint)
            self._pending_dirs.add(path.parent)
            self.tally.created += 1
            return "done"
        if step.op == "update":
            assert step.after is not None and step.expected is not None
            # The snapshot's parse when it is what the step expects (the fingerprint-guarded write below still
            # refuses a file changed since): no second read of a file the cycle holds. Resuming, the file as it is.
            current = self._snapshot_or_read(step, path)
            if current is None:
                raise ConflictError(path, "the entry disappeared")
            if current.entry.to_json_obj() == step.after:
                return "done"
            fingerprint = replace_file(path, _dump(step.after), step.expected.to_fingerprint(), sync_directory=False)
            if self._remember:
                name = current.name  # the snapshot's string for the file (``str(path)``)
                self.made[name] = StoredEntry.named(Entry.from_json_obj(step.after), name, fingerprint)
            self._pending_dirs.add(path.parent)
            self.tally.updated += 1
            log.info(
                "%s %s (its text kept): %s",
                step.reason or "folded exact duplicates into",
                step.id,
                shown(current.entry.content),
            )
            return "done"
        if step.op == "archive":
            assert step.expected is not None and step.reason is not None
            current = self._snapshot_or_read(step, path)
            if current is None:
                raise ConflictError(path, "the entry disappeared")
            if current.entry.is_archived:
                if current.entry.meta(ARCHIVED_BY_CYCLE) == self.cycle_id:
                    self._decayed(step)  # written with it before a crash
                    return "done"
                raise ConflictError(path, "already archived by someone else")
            if current.fingerprint != step.expected.to_fingerprint():
                raise ConflictError(path, "changed since the snapshot (the agent wrote to it)")
            if step.metadata or step.after is not None:  # written with the archive, in the same guarded write
                entry = self._carrying(step, path, current.entry)
                if step.metadata:
                    entry = entry.with_meta(**step.metadata)
                current = StoredEntry.named(entry, current.name, current.fingerprint)
            archived = self.store.archive(
                current, step.reason, self.now, self.cycle_id, parse_back=False, sync_directory=False
            )
            if self._remember:
                self.made[archived.name] = archived
            self._pending_dirs.add(path.parent)
            self.tally.archived += 1
            self._decayed(step)
            if step.kind == "ephemeral":
                self.tally.ephemeral += 1
            elif step.kind == "folded":
                self.tally.archived_folded += 1
            else:
                self.tally.archived_merged += 1
            return "done"
        if step.op == "stamp":
            return self._stamp(step)
        if step.op == "decay":
            return self._decay(step)
        raise ValueError(f"unknown journal op {step.op}")
