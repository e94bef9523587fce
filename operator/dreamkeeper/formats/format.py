"""The memory-format seam: what the engine asks of a format, and the two kinds shipped.

The engine (gating, clustering, proposals, coverage, census, floor, blast radius, journal, undo, report, metrics)
works on entries in a store. A format says where that store is and keeps it in step with the agent's own files:

* ``rockbot``: the agent's memory *is* such a store (one JSON file per entry under ``AGENT_DIR/memory``). Nothing
  to ingest, nothing to render: every byte the engine writes is what it wrote before formats existed.
* a Markdown profile (``openclaw``, ``hermes``, ``claude``): the store holds one record per unit of the agent's
  files (``AGENT_DIR/.dreamkeeper/units``); ``prepare`` ingests the files into it before anything reads it, and
  ``finish`` renders what changed back into the files. Both run under dreamkeeper's cycle lock.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol

from dreamkeeper.formats import records as rec
from dreamkeeper.formats.ingest import IngestReport, ingest
from dreamkeeper.formats.layout import check_outside_indexed, memory_dir, units_root
from dreamkeeper.formats.profile import Profile, ProfileOverrides, resolve_profile
from dreamkeeper.formats.render import RenderReport, render
from dreamkeeper.memory import MemoryStore, MiB, StoredEntry, SweepReport, memory_root, read_regular_text, sweep

log = logging.getLogger(__name__)

ROCKBOT = "rockbot"


@dataclass(frozen=True)
class FormatCounts:
    """What a format did to the agent's files (summed into the cycle report's counts)."""

    units_ingested: int = 0  # new units found in the agent's files
    units_kept_for_agent: int = 0  # units the agent removed, kept in the archive (restorable)
    units_written: int = 0  # units written into the agent's files (successors, restores)
    units_taken_out: int = 0  # archived units taken out of the agent's files
    units_refused: int = 0  # units that could not be written (a cap, a lock, a file that would not parse back)
    stale_units: int = 0  # archived units a stale writer put back, taken out again


@dataclass(frozen=True)
class FormatOutcome:
    counts: FormatCounts = FormatCounts()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prepared(FormatOutcome):
    ingest: IngestReport | None = None


@dataclass(frozen=True)
class Finished(FormatOutcome):
    render: RenderReport | None = None
    files_written: tuple[str, ...] = field(default_factory=tuple)


class MemoryFormat(Protocol):
    name: str

    def store_root(self, agent_dir: Path, memory_dir: Path | None = None) -> Path:
        """Where the engine's entries are."""
        ...

    def check(self, agent_dir: Path) -> None:
        """Refuse a layout the format cannot serve safely (before anything is written)."""
        ...

    def prepare(self, agent_dir: Path, store: MemoryStore, now: datetime) -> Prepared:
        """Bring the store up to date with the agent's files (the caller holds the cycle lock)."""
        ...

    def finish(self, agent_dir: Path, store: MemoryStore, now: datetime) -> Finished:
        """Write what changed in the store into the agent's files (the caller holds the cycle lock)."""
        ...

    def keep(self, due: Sequence[StoredEntry]) -> Mapping[str, str]:
        """Of archived entries a purge would delete, those it must keep, and why."""
        ...

    def sweep(self, agent_dir: Path) -> SweepReport:
        """Clean what killed writes of ours left among the agent's files."""
        ...

    def preview(self, agent_dir: Path, now: datetime) -> contextlib.AbstractContextManager[Path]:
        """A store to plan on without writing anything (a dry run): a throwaway copy, ingested."""
        ...


class RockBotFormat:
    """RockBot's own files are the store: every method is a no-op."""

    name = ROCKBOT

    def store_root(self, agent_dir: Path, memory_dir: Path | None = None) -> Path:
        return memory_root(agent_dir, memory_dir)

    def check(self, agent_dir: Path) -> None:
        return None

    def prepare(self, agent_dir: Path, store: MemoryStore, now: datetime) -> Prepared:
        return Prepared()

    def finish(self, agent_dir: Path, store: MemoryStore, now: datetime) -> Finished:
        return Finished()

    def keep(self, due: Sequence[StoredEntry]) -> Mapping[str, str]:
        return {}

    def sweep(self, agent_dir: Path) -> SweepReport:
        return SweepReport()

    @contextlib.contextmanager
    def preview(self, agent_dir: Path, now: datetime) -> Iterator[Path]:
        yield memory_root(agent_dir)


class MarkdownFormat:
    """An agent's Markdown memory directory, described by a profile."""

    def __init__(self, profile: Profile) -> None:
        self.profile = profile
        self.name = profile.name

    def store_root(self, agent_dir: Path, memory_dir: Path | None = None) -> Path:
        return units_root(agent_dir)

    def check(self, agent_dir: Path) -> None:
        root = memory_dir(agent_dir, self.profile)
        if not root.is_dir():
            raise FileNotFoundError(
                f"no {self.profile.name} memory directory at {root} (memory_dir {self.profile.memory_dir!r} under "
                f"AGENT_DIR); nothing was changed"
            )
        check_outside_indexed(agent_dir, self.profile)

    def prepare(self, agent_dir: Path, store: MemoryStore, now: datetime) -> Prepared:
        self.check(agent_dir)
        store.root.mkdir(parents=True, exist_ok=True)
        report = ingest(agent_dir, self.profile, store, now)
        counts = FormatCounts(
            units_ingested=report.created,
            units_kept_for_agent=len(report.agent_removed),
            stale_units=len(report.stale_copies),
        )
        own = own_consolidation(agent_dir, self.profile)
        return Prepared(counts, (*report.notes(), *([own] if own else [])), report)

    def finish(self, agent_dir: Path, store: MemoryStore, now: datetime) -> Finished:
        report = render(agent_dir, self.profile, store, now)
        counts = FormatCounts(
            units_written=len(report.placed),
            units_taken_out=len(report.removed),
            units_refused=len(report.refused),
        )
        return Finished(counts, tuple(report.notes()), report, tuple(dict.fromkeys(report.files_written)))

    def keep(self, due: Sequence[StoredEntry]) -> Mapping[str, str]:
        """A record whose unit is still in the agent's files (an append-only log keeps consolidated units as
        history): deleting it would make the next ingest take the unit for new."""
        return {
            s.id: "its unit is still in the agent's files (an append-only log)"
            for s in due
            if rec.placement_of(s.entry) == rec.IN_FILE
        }

    def sweep(self, agent_dir: Path) -> SweepReport:
        root = memory_dir(agent_dir, self.profile)
        return sweep(root) if root.is_dir() else SweepReport()

    @contextlib.contextmanager
    def preview(self, agent_dir: Path, now: datetime) -> Iterator[Path]:
        """A copy of the unit records, ingested: the dry run plans on what the agent's files say now."""
        with tempfile.TemporaryDirectory(prefix="dreamkeeper-preview-") as scratch:
            copy = Path(scratch) / "units"
            source = units_root(agent_dir)
            if source.is_dir():
                shutil.copytree(source, copy, symlinks=True)
            else:
                copy.mkdir()
            self.check(agent_dir)
            ingest(agent_dir, self.profile, MemoryStore(copy), now, note=False)
            yield copy


def own_consolidation(agent_dir: Path, profile: Profile) -> str | None:
    """A note when the agent's own consolidation is (or may be) on."""
    flag = profile.dream_flag
    if flag is None:
        return None
    path = agent_dir / flag.file
    try:
        value: object = json.loads(read_regular_text(path, MiB))
        for key in flag.path:
            value = value.get(key) if isinstance(value, dict) else None
    except FileNotFoundError:
        value = None
    except (OSError, ValueError):
        return f"could not read {flag.file} (JSON5?) to check that {profile.name}'s own consolidation is off: " + (
            profile.dream_switch or ""
        )
    on = flag.default_on if value is None else value is not False
    if not on:
        return None
    return (
        f"{profile.name}'s own consolidation is on: two consolidators of the same files make each other's work "
        f"stale; set {profile.dream_switch}"
    )


def get_format(name: str = ROCKBOT, overrides: ProfileOverrides | None = None) -> MemoryFormat:
    """The format by name (``rockbot`` or a shipped profile), with a deployment's profile overrides."""
    if name == ROCKBOT:
        if overrides is not None and overrides.model_dump(exclude_defaults=True):
            raise ValueError("the rockbot format has no profile to override")
        return RockBotFormat()
    return MarkdownFormat(resolve_profile(name, overrides))


__all__ = [
    "ROCKBOT",
    "Finished",
    "FormatCounts",
    "FormatOutcome",
    "MarkdownFormat",
    "MemoryFormat",
    "Prepared",
    "RockBotFormat",
    "get_format",
]
