"""Render a plan as a readable diff (``dreamkeeper dream --dry-run``)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from dreamkeeper.consolidation.plan import Plan
from dreamkeeper.consolidation.report import CycleReport


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
    for merge in plan.merges:
        tag = " (repaired)" if merge.repaired else ""
        category = escape(f"[{merge.successor.category or 'uncategorized'}]")
        console.print(f"[cyan]merge[/cyan]{tag} → new {merge.successor.id} {category}")
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
