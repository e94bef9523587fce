"""The typed plan passed between stages: what validation accepted, and nothing else, reaches apply."""

from __future__ import annotations

from dataclasses import dataclass, field

from dreamkeeper.memory import Entry, StoredEntry


@dataclass
class FoldAction:
    """Exact duplicates: ``survivor`` is rewritten as ``updated`` (counters only), then ``copies`` archived."""

    survivor: StoredEntry
    updated: Entry
    copies: list[StoredEntry]


@dataclass
class MergeAction:
    """A coverage-checked merge: ``successor`` is created first; only then are ``sources`` archived.

    With ``into`` set, the merge restated that live entry verbatim and is folded into it at once: ``successor`` is
    what ``into`` becomes (same id and text, the merge's counters and provenance added), written over it."""

    successor: Entry
    sources: list[StoredEntry]
    repaired: bool = False
    batch_index: int = 0
    into: StoredEntry | None = None
    subsumed: bool = False  # settled with no model: ``into`` already held every specific of the sources (subsume.py)


@dataclass
class PruneAction:
    """A standalone prune the policy allows: archived ``flagged ephemeral by consolidation``."""

    target: StoredEntry
    lost_specifics: list[str] = field(default_factory=list)


@dataclass
class DecayAction:
    """Importance decay: ``target`` rewritten as ``updated`` (importance and updatedAt only)."""

    target: StoredEntry
    updated: Entry


@dataclass
class StampAction:
    """Metadata-only bookkeeping (review, rejection, decline stamps). Never touches content."""

    target: StoredEntry
    metadata: dict[str, str | None]


@dataclass
class Plan:
    folds: list[FoldAction] = field(default_factory=list)
    merges: list[MergeAction] = field(default_factory=list)
    prunes: list[PruneAction] = field(default_factory=list)
    stamps: list[StampAction] = field(default_factory=list)
    decays: list[DecayAction] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (self.folds or self.merges or self.prunes or self.stamps or self.decays)

    def leaving_ids(self) -> set[str]:
        ids = {c.id for f in self.folds for c in f.copies}
        ids |= {s.id for m in self.merges for s in m.sources}
        ids |= {p.target.id for p in self.prunes}
        return ids
