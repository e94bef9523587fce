"""The blast radius: a cycle never takes more than a fraction of the live corpus out at once without a human.

Every proposal passes the safeguards one by one (coverage, floors, protected categories); none of them sees the
whole. A hostile or confused model can propose many individually acceptable prunes: in the multi-tenant trial one
cycle archived a quarter of a corpus (46 ephemeral prunes) and it was a plain `CycleCompleted`. RockBot's own
memory audit calls a live drop of more than 10% a loss alert (`loss-percent-threshold`), so that is the default
cap: a validated plan whose *live drop* (merge sources + prunes - successors created) exceeds ``archive_cap`` of
the live entries it works on, and at least ``archive_cap_min_entries`` entries, is not applied. The cycle archives
nothing beyond its exact-duplicate folds (byte-identical copies, applied before the plan exists), writes the plan
to ``.dreamkeeper/holds/pending.json`` and says so (count ``held``; the operator's `ArchivesHeld` Warning).

A held plan is applied by a later cycle run with ``approve_hold=<its cycle id>`` (a DreamSchedule's
``spec.approveHold``), and only if the corpus is unchanged: every live entry the plan was made from still has the
content hash it had. A changed corpus makes the plan stale: it is discarded and the cycle plans afresh. While a
plan waits, cycles are skipped (no proposer is asked again for the same corpus).
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from pydantic import BaseModel, Field

from dreamkeeper.consolidation.plan import MergeAction, Plan, PruneAction
from dreamkeeper.memory import (
    LARGE_STATE_LIMIT,
    UNCHECKED,
    Entry,
    StoredEntry,
    read_state_file,
    replace_file,
    state_dir,
)

log = logging.getLogger(__name__)

PENDING = "pending.json"


def live_drop(plan: Plan) -> int:
    """Entries the plan takes out of the live corpus, net of the successors it creates (the audit's measure). A
    merge folded into a live entry (``into``: a subsumption, or a merge restating a live text) creates none; a
    source-less save (sourceless.py) offsets nothing: a plan cannot buy room for prunes by writing new entries."""
    sources = sum(len(m.sources) for m in plan.merges)
    return max(0, sources + len(plan.prunes) - sum(1 for m in plan.merges if m.sources and m.into is None))


def exceeds(drop: int, live: int, cap: float, min_entries: int) -> bool:
    return live > 0 and drop >= max(1, min_entries) and drop / live > cap


class HeldMerge(BaseModel):
    successor: dict[str, object]  # the successor entry, as its file will hold it
    sources: list[str]
    repaired: bool = False
    into: str | None = None  # the live entry the merge is folded into (its successor is that entry rewritten)
    subsumed: bool = False  # decided with no model (subsume.py)


class HeldPlan(BaseModel):
    """A validated plan over the cap, kept on the volume for a human to approve."""

    cycle_id: str
    held_at: datetime
    live: int = Field(ge=0)  # live entries the plan was made from
    drop: int = Field(ge=0)
    cap: float
    corpus: dict[str, str]  # every live entry id -> the sha256 of its file when the plan was made
    merges: list[HeldMerge] = Field(default_factory=list)
    prunes: list[str] = Field(default_factory=list)
    outcome: str | None = None  # once settled: "applied" or "stale" (the file stays, as the record)

    @property
    def fraction(self) -> float:
        return self.drop / self.live if self.live else 0.0

    def describe(self) -> str:
        return (
            f"cycle {self.cycle_id} would take {self.drop} of {self.live} live entries out ({self.fraction:.1%}, "
            f"over the {self.cap:.0%} cap): {len(self.merges)} merge(s), {len(self.prunes)} prune(s)"
        )

    @classmethod
    def of(cls, cycle_id: str, now: datetime, plan: Plan, live: list[StoredEntry], cap: float) -> HeldPlan:
        return cls(
            cycle_id=cycle_id,
            held_at=now,
            live=len(live),
            drop=live_drop(plan),
            cap=cap,
            corpus={s.id: s.fingerprint.sha256 for s in live},
            merges=[
                HeldMerge(
                    successor=m.successor.to_json_obj(),
                    sources=[s.id for s in m.sources],
                    repaired=m.repaired,
                    into=m.into.id if m.into is not None else None,
                    subsumed=m.subsumed,
                )
                for m in plan.merges
            ],
            prunes=[p.target.id for p in plan.prunes],
        )

    def changed(self, live: list[StoredEntry]) -> list[str]:
        """Ids whose content differs from the plan's view (new, gone or rewritten), sorted."""
        now = {s.id: s.fingerprint.sha256 for s in live}
        return sorted(i for i in set(now) | set(self.corpus) if now.get(i) != self.corpus.get(i))

    def plan(self, live: list[StoredEntry]) -> Plan:
        """The plan again, over the current entries (the caller checked ``changed`` is empty)."""
        by_id = {s.id: s for s in live}
        merges = [
            MergeAction(
                Entry.from_json_obj(m.successor),
                [by_id[i] for i in m.sources],
                m.repaired,
                into=by_id[m.into] if m.into is not None else None,
                subsumed=m.subsumed,
            )
            for m in self.merges
        ]
        return Plan(merges=merges, prunes=[PruneAction(by_id[i]) for i in self.prunes])


def holds_dir(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / "holds"


def read_pending(agent_dir: Path) -> HeldPlan | None:
    """The plan waiting for approval, if one does. Read bounded, and only as a regular file: anything else (a FIFO
    hung the cycle holding the lock, issue 22) is a ``StateFileError``, one clear error with nothing changed."""
    path = holds_dir(agent_dir) / PENDING
    # The plan names every live entry with its file's hash (``corpus``): it grows with the corpus (17 MB at 100,000
    # entries, issue 27), so it is read under the large-state bound; the small one wedged every later cycle.
    data = read_state_file(path, LARGE_STATE_LIMIT)
    if data is None:
        return None
    try:
        held = HeldPlan.model_validate_json(data)
        return held if held.outcome is None else None
    except ValueError as exc:
        log.warning("held plan %s is unreadable (%s); it is ignored and kept for inspection", path, exc)
        return None


def keep(agent_dir: Path, held: HeldPlan) -> Path:
    path = holds_dir(agent_dir) / PENDING
    path.parent.mkdir(parents=True, exist_ok=True)
    replace_file(path, (held.model_dump_json(indent=2) + "\n").encode("utf-8"), UNCHECKED)
    return path


def settle(agent_dir: Path, held: HeldPlan, outcome: str) -> None:
    """The pending plan is done with (``applied`` or ``stale``): marked so (nothing is deleted; purge is the only
    path that deletes files), and kept under its cycle id for the record."""
    settled = held.model_copy(update={"outcome": outcome})
    data = (settled.model_dump_json(indent=2) + "\n").encode("utf-8")
    directory = holds_dir(agent_dir)
    replace_file(directory / f"{held.cycle_id}.json", data, UNCHECKED)
    replace_file(directory / PENDING, data, UNCHECKED)
