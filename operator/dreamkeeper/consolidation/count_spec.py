"""The shape of one row of the counts table (``counts.py``): how far a count travels, its Prometheus family, its
Event, its phrases and its cell in the ``dreamkeeper dream`` table. The rows themselves are in ``counts.py``."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

# How far a count travels: the cycle's own report only; also the Job's summary and the schedule's lastRun; also
# added into the schedule's totals (and a Prometheus counter, if it has a metric).
Reach = Literal["report", "run", "totals"]


@dataclass(frozen=True)
class Family:
    """A Prometheus family (name without ``_total``). A labelled family carries several counts, one per value."""

    name: str
    description: str = ""  # a labelled family's own; an unlabelled one is described by its count
    label: str | None = None

    def series(self, value: str) -> Metric:
        return Metric(self, value)


@dataclass(frozen=True)
class Metric:
    family: Family
    label_value: str | None = None


def metric(name: str) -> Metric:
    return Metric(Family(name))


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event the operator fires when a counted cycle has this count above zero."""

    type: Literal["Normal", "Warning"]
    reason: str
    what: str  # "cycle <job>: <n> <what>"


@dataclass(frozen=True)
class Phrase:
    """The count in a sentence: ``text`` with ``{}`` for the number. A detail goes in parentheses after the
    phrase before it: "archived 7 (4 with replacement, 3 ephemeral)"."""

    text: str
    detail: bool = False


class Row(StrEnum):
    """The rows of the ``dreamkeeper dream`` table, in order. A row shows its counts joined by " / "; details go in
    parentheses: "78 (78 / 0)"."""

    ENTRIES = "entries (live at start)"
    REVIEWED = "reviewed / withheld"
    FOLDED = "exact duplicates folded"
    DECAYED = "importance decayed (left the high-value floor)"
    SAVED = "merges saved (into an existing entry)"
    SUBSUMED = "merges without the model (subsumed)"
    ARCHIVED = "archived (with replacement / ephemeral)"
    REJECTED = "merges rejected (inventing) / repaired"
    REFUSED = "proposals refused: restating / offer layout / offer notation"
    PROTECTED = "prunes refused: floor / census"
    CONFLICTS = "conflicts with concurrent writes"
    WRITE_FAILURES = "changes that could not be written"
    STALE = "stale write-backs repaired (resurrected / reinforcements carried)"
    HARD_DELETES = "hard deletes"
    AGENT_DELETES = "entries the agent deleted itself"
    HELD = "held for approval (would leave the live corpus)"
    PURGED = "purged (retention) (kept as last records)"
    SPECIFICS_LOST = "specifics lost (orphaned / losses reversed)"
    CLOCK = "stages refused: the clock disagrees"
    LIVE = "live / archived entries now"
    BACKLOG = "near-duplicate clusters left (duplicate backlog)"
    PROPOSER = "proposer calls / tokens in / out"
    BATCHES = "proposer batches usable / unusable / failed"


@dataclass(frozen=True)
class Cell:
    row: Row
    detail: bool = False


@dataclass(frozen=True)
class Count:
    """One row of the table. ``name`` is the field's (filled in by ``COUNTS``)."""

    description: str
    reach: Reach = "report"
    state: bool = False  # the corpus after the cycle, not a tally: never summed; unknown (None) in a run without it
    totals_key: str | None = None  # its key in status.totals, where that predates the one name (the CR's API)
    metric: Metric | None = None  # a counter when summed, a gauge when a state
    event: Event | None = None
    said: Phrase | None = None  # in the Event of a counted cycle
    logged: Phrase | None = None  # in the cycle's closing log line
    safeguard: Phrase | None = None  # in the "safeguards fired" log line
    cli: Cell | None = None
    name: str = ""

    @property
    def in_run(self) -> bool:
        """Carried by the Job's summary into status.lastRun."""
        return self.reach != "report"

    @property
    def summed(self) -> bool:
        """Added into status.totals."""
        return self.reach == "totals"
