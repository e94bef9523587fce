"""The dry run (``dreamkeeper dream --dry-run``): the cycle's effects with nothing written, and what a person
reads of a cycle — the plan as a diff, the report as a table."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from datetime import datetime

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from dreamkeeper.consolidation.blast import HeldPlan, read_pending
from dreamkeeper.consolidation.clock import ClockCheck
from dreamkeeper.consolidation.count_phrases import cli_rows
from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.decay import DecayPlan
from dreamkeeper.consolidation.embeddings import Vector
from dreamkeeper.consolidation.plan import DecayAction, FoldAction, Plan
from dreamkeeper.consolidation.quarantine import screened
from dreamkeeper.consolidation.quiet import REPAIR, QuietMemo, repair_state
from dreamkeeper.consolidation.report import CycleReport, CycleResult
from dreamkeeper.consolidation.stages import (
    Applied,
    CycleContext,
    Decayed,
    Folded,
    Ingested,
    Measured,
    Purged,
    Recovered,
    Rendered,
    Repaired,
    Snapshot,
    Validated,
    snapshot_of,
)
from dreamkeeper.consolidation.writeback import plan_from_journals, window_start
from dreamkeeper.coverage import Vocabulary
from dreamkeeper.memory import StoredEntry


class DryRun:
    """Every effect of a cycle, planned and counted, none performed: no lock, no recovery, no purge, no journal,
    no ledger, no report file. The fold is planned (its copies leave the corpus the gate sees), the plan shown."""

    result: CycleResult = "dry-run"
    first_write_at: datetime | None = None

    def __init__(self, context: CycleContext) -> None:
        self.context = context
        self._decays: tuple[DecayAction, ...] = ()

    def hold(self) -> AbstractContextManager[object]:
        return nullcontext()

    def recover(self) -> Recovered:
        return Recovered()

    def too_soon(self) -> str | None:
        return None

    def ingest(self) -> Ingested:
        return Ingested()  # a Markdown format's dry run plans on a copy of its records, ingested (run_cycle)

    def render(self) -> Rendered:
        return Rendered()

    def purge(self, vocabulary: Vocabulary, clock: ClockCheck) -> Purged:
        return Purged()

    def write_embeddings(self, vectors: Mapping[str, Vector], replace: frozenset[str]) -> int:
        return 0  # a dry run writes nothing; the vectors only serve its gate

    def snapshot(self, purged: Purged) -> Snapshot:
        self.context.stage("snapshot")
        store = self.context.store
        return snapshot_of(screened(store.scan(), store.root))

    def repair(self, snapshot: Snapshot, quiet: QuietMemo | None = None, generation: str | None = None) -> Repaired:
        """The repair planned: the stale copies it would repair leave the corpus the fold and the gate see (the
        index is caught up in memory only)."""
        self.context.stage("repair")
        quiet = quiet if generation is not None else None
        state = repair_state(self.context.agent_dir) if quiet is not None else None
        if quiet is not None and state is not None and quiet.unchanged(REPAIR, generation, self.context.now, state):
            return Repaired(snapshot)  # as a real cycle (writes.py): nothing, last time, over this very corpus
        since = window_start(self.context.settings.retention, self.context.now)
        _, plan = plan_from_journals(self.context.agent_dir, snapshot.scan, self.context.now, since)
        live = [s for s in snapshot.live if s.path not in plan.stale_paths]
        counts = CycleCounts(
            stale_write_backs=plan.stale,
            resurrected=plan.resurrected,
            reinforcements_carried=plan.carried,
            stale_edits=plan.edited,
        )
        return Repaired(replace(snapshot, live=live), counts, plan.notes)

    def fold(self, snapshot: Snapshot, folds: list[FoldAction]) -> Folded:
        leaving = Plan(folds=folds).leaving_ids()
        n = sum(len(f.copies) for f in folds)
        live = [s for s in snapshot.live if s.id not in leaving]
        return Folded(snapshot.scan, live, tuple(folds), CycleCounts(folded=n, archived=n, archived_with_replacement=n))

    def decay(self, folded: Folded, plan: DecayPlan) -> Decayed:
        updated = {a.target.id: StoredEntry(a.updated, a.target.path, a.target.fingerprint) for a in plan.actions}
        live = [updated.get(s.id, s) for s in folded.live]
        counts = CycleCounts(decayed=len(plan.actions), decay_left_floor=len(plan.left_floor))
        self._decays = plan.actions
        return Decayed(live, plan.actions, plan.left_floor, counts)

    def write_decays(self, live: list[StoredEntry]) -> list[StoredEntry]:
        return live  # nothing is written: a dry run holds no plan either

    def apply(self, folded: Folded, validated: Validated) -> Applied:
        plan = validated.plan
        sources = sum(len(m.sources) for m in plan.merges)
        counts = CycleCounts(
            saved=len(plan.merges),
            merged_into_existing=sum(1 for m in plan.merges if m.into is not None),
            archived=sources + len(plan.prunes),
            archived_with_replacement=sources,
            ephemeral=len(plan.prunes),
        )
        # The folds and decays, done by earlier stages, are shown in the diff too.
        return Applied(replace(plan, folds=list(folded.folds), decays=list(self._decays)), counts)

    def measure(self, snapshot: Snapshot, folded: Folded, applied: Applied, validated: Validated) -> Measured:
        plan = validated.plan  # without the folds: their copies already left `folded.live`
        archived = folded.counts.archived + applied.counts.archived
        created = sum(1 for m in plan.merges if m.into is None)
        live = len(folded.live) + created - len(plan.leaving_ids())
        return Measured(CycleCounts(live_entries=live, archived_entries=len(folded.scan.archived) + archived))

    def record(self, report: CycleReport) -> None:
        return None

    def record_failure(self, report: CycleReport, error: BaseException) -> None:
        return None

    def pending_hold(self) -> HeldPlan | None:
        return read_pending(self.context.agent_dir)  # reading only: a dry run shows what a cycle would do

    def keep_hold(self, held: HeldPlan) -> None:
        return None

    def settle_hold(self, held: HeldPlan, outcome: str) -> None:
        return None


def _clip(text: str, width: int = 160) -> str:
    """One line, escaped: entry text is data and must never be read as rich markup."""
    flat = " ".join(text.split())
    return escape(flat if len(flat) <= width else flat[: width - 1] + "…")


def render_plan(plan: Plan, report: CycleReport, console: Console) -> None:
    console.print(f"[bold]dry run {report.cycle_id}[/bold] — nothing was written")
    console.print(
        f"reviewing {report.reviewed} of {report.total} entries ({report.withheld} withheld); "
        f"{report.clusters} cluster(s) offered, {report.reopened} reopened"
    )
    for fold in plan.folds:
        console.print(f"[cyan]fold[/cyan] {len(fold.copies)} exact duplicate(s) into {fold.survivor.id}")
        for copy in fold.copies:
            console.print(f"  [red]- {copy.id}[/red] {_clip(copy.entry.content)}")
    for decay in plan.decays:
        before, after = decay.target.entry.importance_score, decay.updated.importance_score
        console.print(f"[blue]decay[/blue] {decay.target.id} importance {before:.2f} → {after:.2f}")
    for merge in plan.merges:
        tag = " (repaired)" if merge.repaired else ""
        category = escape(f"[{merge.successor.category or 'uncategorized'}]")
        where = "into existing" if merge.into is not None else "new"
        console.print(f"[cyan]merge[/cyan]{tag} → {where} {merge.successor.id} {category}")
        for source in merge.sources:
            console.print(f"  [red]- {source.id}[/red] {_clip(source.entry.content)}")
        console.print(f"  [green]+ {merge.successor.id}[/green] {_clip(merge.successor.content)}")
    for prune in plan.prunes:
        console.print(f"[yellow]archive (ephemeral)[/yellow] {prune.target.id} {_clip(prune.target.entry.content)}")
    for rejection in report.rejections:
        console.print(
            f"[magenta]rejected[/magenta] merge of {escape('[' + ', '.join(rejection.source_ids) + ']')} — "
            f"{escape(rejection.reason)}: {escape(', '.join(rejection.missing))}"
        )
    for protection in report.protections:
        console.print(f"[magenta]protected[/magenta] {protection.id} — {escape(protection.reason)}")
    console.print(f"{len(plan.stamps)} entr(ies) would be stamped reviewed")


def render_report(report: CycleReport, console: Console) -> None:
    table = Table(title=f"dream cycle {report.cycle_id} — {report.result}", show_header=False)
    if report.skip_reason:
        table.add_row("skipped", report.skip_reason)
    for label, value in cli_rows(report):
        table.add_row(label, value)
    console.print(table)
