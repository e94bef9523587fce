"""`dreamkeeper memory list|restore|purge`: the memory commands that need the coverage package.

They sit in the ``memory`` group with ``stats|show`` (``memory/cli.py``), but live at this layer because they need
the coverage package (memory ← coverage ← consolidation): the purge's last-record rule, and the end-of-run invariant
every command that writes ends with (``invariant.py``). ``purge`` deletes exactly what a cycle's purge would: past
retention, below the high-value floor, and not the last record of any specific, and only when the clock agrees with
the agent's history (``clock.py``). ``list --archived`` says for each archived entry what the purge would do with it
now, and why. ``restore`` is announced in the reversals log before its first write.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from dreamkeeper.consolidation.agent_view import agent_view
from dreamkeeper.consolidation.clock import check_clock
from dreamkeeper.consolidation.cycle import read_ledger
from dreamkeeper.consolidation.format_stages import KeepFn, kept_by_format
from dreamkeeper.consolidation.invariant import Census, EndCheck, end_check, invariant_error, scan_map, tags_in
from dreamkeeper.consolidation.memory_units_cli import with_formats
from dreamkeeper.consolidation.purge import LastRecords, agent_vocabulary, archived_state
from dreamkeeper.consolidation.purge_policy import KeepRule, purge_window
from dreamkeeper.consolidation.quarantine import screened
from dreamkeeper.consolidation.settings import CycleSettings, RockBotSettings
from dreamkeeper.consolidation.units_cli import FORMAT_OPT, PROFILE_OPT, format_of, is_markdown, unit_session
from dreamkeeper.coverage import VOCABULARY_FILE, Vocabulary
from dreamkeeper.memory import (
    CycleLock,
    HighValueFloor,
    MemoryStoreError,
    PurgeReport,
    StoredEntry,
    check_state_files,
    entry_summary,
    note_restored,
    unheld,
    utcnow,
    validate_id,
)
from dreamkeeper.memory.cli import (
    AGENT_DIR_ARG,
    JSON_OPT,
    MEMORY_DIR_OPT,
    Failure,
    Scope,
    UsageError,
    _clip,
    _in_category,
    _in_scope,
    _listing,
    emit_json,
    err,
    expected_errors,
    memory_group,
    open_store,
    out,
)

# The bounds of the cycle's own settings (a century; the DreamSchedule's floor): no overflow, no NaN.
RETENTION_OPT = typer.Option(90, "--retention-days", min=0, max=36_500, help="Archived longer than this; 0 = forever.")
VOCABULARY_OPT = typer.Option(
    VOCABULARY_FILE, "--vocabulary", help="Coverage vocabulary, relative to AGENT_DIR (the cycle's default)."
)


def register(app: typer.Typer) -> None:
    memory = memory_group(app)
    memory.command("list")(list_command)
    memory.command("restore")(restore_command)
    memory.command("purge")(purge_command)
    with_formats(memory, restore_command)  # stats, show and restore learn --format (memory_units_cli.py)


def _store_dir(
    agent_dir: Path, memory_dir: Path | None, memory_format: str | None, profile_json: str | None
) -> Path | None:
    """Where the entries are: RockBot's memory folder, or a Markdown format's unit records."""
    chosen = format_of(memory_format, profile_json)
    if not is_markdown(chosen):
        return memory_dir
    if memory_dir is not None:
        raise UsageError("--memory-dir is RockBot's; a Markdown format's files are named by its profile")
    chosen.check(agent_dir)
    return chosen.store_root(agent_dir)


def list_command(
    agent_dir: Path = AGENT_DIR_ARG,
    memory_dir: Path | None = MEMORY_DIR_OPT,
    live: bool = typer.Option(False, "--live", help="Live entries only (the default)."),
    archived: bool = typer.Option(False, "--archived", help="Archived entries only, with what purge would do."),
    all_entries: bool = typer.Option(False, "--all", help="Live, archived and superseded entries."),
    category: str | None = typer.Option(None, "--category", help="Only this category and its subcategories."),
    limit: int | None = typer.Option(None, "--limit", min=1, help="At most this many entries."),
    retention_days: int = RETENTION_OPT,
    floor_importance: float = typer.Option(0.8, "--floor-importance", min=0.0, max=2.0, help="The purge's floor."),
    floor_reinforcement: int = typer.Option(
        5, "--floor-reinforcement", min=0, max=2**31 - 1, help="The purge's floor."
    ),
    vocabulary: str = VOCABULARY_OPT,
    as_json: bool = JSON_OPT,
    memory_format: str | None = FORMAT_OPT,
    profile_json: str | None = PROFILE_OPT,
) -> None:
    """List entries in store order (category folders, then id); archived ones with the purge's verdict. For a
    Markdown format, its units as of the last cycle (each unit's file and heading are in ``show``)."""
    with expected_errors():
        if live + archived + all_entries > 1:
            raise UsageError("give at most one of --live, --archived, --all")
        scope = Scope.archived if archived else Scope.all if all_entries else Scope.live
        store = open_store(agent_dir, _store_dir(agent_dir, memory_dir, memory_format, profile_json))
        scan = store.scan()
        rows: list[StoredEntry] = []
        for stored in scan.entries:
            if _in_scope(stored.entry, scope) and _in_category(stored.entry, category):
                rows.append(stored)
                if limit is not None and len(rows) >= limit:
                    break
        verdicts: dict[str, tuple[str, str]] = {}
        if any(s.entry.is_archived for s in rows):
            rule = LastRecords.of((s.entry for s in scan.entries), agent_vocabulary(agent_dir, vocabulary))
            floor = HighValueFloor(importance=floor_importance, reinforcement=floor_reinforcement)
            now = utcnow()
            for stored in rows:
                if stored.entry.is_archived:
                    verdicts[stored.id] = archived_state(stored.entry, retention_days, floor, rule, now)
    if as_json:
        listed = []
        for stored in rows:
            row = _listing(stored)
            if stored.id in verdicts:
                row["purge"], row["purgeReason"] = verdicts[stored.id]
            listed.append(row)
        emit_json(listed)
        return
    table = Table(title=f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'} ({scope.value})")
    table.add_column("id", no_wrap=True)
    table.add_column("category", overflow="fold", max_width=28)
    table.add_column("imp", justify="right", no_wrap=True)
    table.add_column("reinf", justify="right", no_wrap=True)
    table.add_column("state", no_wrap=True)
    if verdicts:
        table.add_column("purge", overflow="fold", max_width=40)
    table.add_column("content", no_wrap=True)
    # Rich shrinks columns badly around one long no-wrap cell; cut the content to what is left of the width.
    category_width = min(28, max((len(s.entry.category or "-") for s in rows), default=1))
    budget = max(16, out.width - category_width - 50 - (40 if verdicts else 0))
    for stored in rows:
        entry = stored.entry
        state = "archived" if entry.is_archived else "superseded" if entry.superseded_by else "live"
        cells = [entry.id, escape(entry.category or "-"), f"{entry.importance_score:.2f}"]
        cells += [str(entry.reinforcement_count), state]
        if verdicts:
            verdict = verdicts.get(stored.id)
            cells.append(escape(f"{verdict[0]}: {verdict[1]}" if verdict else ""))
        cells.append(escape(_clip(entry.content, budget)))
        table.add_row(*cells)
    out.print(table)


def purge_command(
    agent_dir: Path = AGENT_DIR_ARG,
    memory_dir: Path | None = MEMORY_DIR_OPT,
    retention_days: int = RETENTION_OPT,
    floor_importance: float = typer.Option(
        0.8, "--floor-importance", min=0.0, max=2.0, help="Never purge at or above."
    ),
    floor_reinforcement: int = typer.Option(
        5, "--floor-reinforcement", min=0, max=2**31 - 1, help="Never purge at or above."
    ),
    vocabulary: str = VOCABULARY_OPT,
    yes: bool = typer.Option(False, "--yes", help="Really delete. Without it, only shows what would go."),
    trust_clock: bool = typer.Option(
        False, "--trust-clock", help="Purge even when the clock is earlier than the newest ledger or journal time."
    ),
    as_json: bool = JSON_OPT,
    memory_format: str | None = FORMAT_OPT,
    profile_json: str | None = PROFILE_OPT,
) -> None:
    """Hard-delete entries archived longer than the retention, except high-value ones and last records (an entry
    holding a specific no live entry says). A dry run unless --yes. Refused (nothing deleted) when the clock is
    earlier than the agent's newest ledger or journal time, unless --trust-clock. For a Markdown
    format, archived units (never one whose text is still in the agent's files)."""
    with expected_errors():
        chosen = format_of(memory_format, profile_json)
        store = open_store(agent_dir, _store_dir(agent_dir, memory_dir, memory_format, profile_json))
        floor = HighValueFloor(importance=floor_importance, reinforcement=floor_reinforcement)
        words = agent_vocabulary(agent_dir, vocabulary)

        # As a cycle's purge: never before RockBot's own window when its retention is known (purge_policy.py); in
        # another agent's directory RockBot's configuration is not read.
        rockbot = RockBotSettings(read_agent_settings=not is_markdown(chosen))
        window = purge_window(CycleSettings(retention_days=retention_days), agent_view(agent_dir, rockbot))
        if window.note:
            out.print(escape(window.note))
        checked: EndCheck | None = None

        def run(dry_run: bool) -> PurgeReport:
            nonlocal checked
            entries = screened(store.scan(), store.root).entries  # never a file the engine would not act on
            rule = LastRecords.of((s.entry for s in entries), words)
            now = utcnow()
            if not dry_run:
                check_state_files(agent_dir)
                clock = check_clock(agent_dir, now, read_ledger(agent_dir), None, trust=trust_clock)
                if not clock.allows:
                    raise Failure(clock.refusal("purge") + "; nothing was deleted")
            own = [StoredEntry(unheld(s.entry), s.path, s.fingerprint) for s in entries]
            keep: KeepFn = KeepRule(own, rule)
            if is_markdown(chosen):
                keep = kept_by_format(keep, chosen)
            report = store.purge(window.retention, floor, now, dry_run=dry_run, entries=own, keep=keep)
            if not dry_run:
                purged = {e.id for e in report.purged}
                checked = end_check(
                    agent_dir, store, Census.of(entries), scan_map(store), tags_in(()), words, purged=purged
                )
            return report

        if yes and is_markdown(chosen):
            with unit_session(agent_dir, chosen, "purge"):  # the agent's latest files first
                report = run(dry_run=False)
        elif yes:
            with CycleLock(agent_dir, "purge"):
                report = run(dry_run=False)
        else:
            report = run(dry_run=True)
    if as_json:
        emit_json(
            {
                "dryRun": report.dry_run,
                "retentionDays": retention_days,
                "purged": [entry.to_json_obj() for entry in report.purged],
                "keptAboveFloor": [entry.id for entry in report.kept_above_floor],
                "keptLastRecord": [{"id": entry.id, "reason": why} for entry, why in report.kept_by_rule],
                "notDue": report.not_due,
                "conflicts": report.conflicts,
            }
        )
    elif retention_days == 0:
        out.print("retention 0: archived entries are kept forever; nothing purged")
    else:
        verb = "would purge" if report.dry_run else "purged"
        for entry in report.purged:
            out.print(f"{verb} {escape(entry_summary(entry))}: {escape(entry.content)}", soft_wrap=True)
        for entry, why in report.kept_by_rule:
            out.print(f"kept {escape(entry_summary(entry))}: {escape(why)}", soft_wrap=True)
        out.print(
            f"{verb} {len(report.purged)}; kept {len(report.kept_above_floor)} above the high-value floor, "
            f"{len(report.kept_by_rule)} as last records, "
            f"{report.not_due} archived less than {retention_days} days ago"
            + (f", {report.conflicts} changed meanwhile (kept)" if report.conflicts else "")
        )
        if report.dry_run and report.purged:
            out.print("dry run: nothing was deleted; re-run with --yes to purge")
    if checked is not None:
        for note in checked.notes:
            err.print(f"[red]error:[/red] {escape(note)}")
    if report.conflicts or (checked is not None and invariant_error(checked.counts) is not None):
        raise typer.Exit(1)


def restore_command(
    agent_dir: Path = AGENT_DIR_ARG,
    entry_ids: list[str] = typer.Argument(..., metavar="ID...", help="Archived entries to bring back."),
    memory_dir: Path | None = MEMORY_DIR_OPT,
) -> None:
    """Bring archived entries back to live, for good: a restored entry is never merged or pruned again. Under the
    cycle lock; announced in the reversals log before the first write, so no cycle takes it for a stale copy. An id
    is the file's own (case01 and CASE01 are two entries); exit 1 when an entry was not restored (it is then
    exactly as it was)."""
    failed = 0
    with expected_errors():
        for entry_id in entry_ids:
            validate_id(entry_id)
        store = open_store(agent_dir, memory_dir)
        with CycleLock(agent_dir, "restore"):
            check_state_files(agent_dir)
            scan = store.scan()
            before = Census.of(scan.entries)
            wanted: list[StoredEntry] = []
            for entry_id in entry_ids:
                try:
                    stored = store.require(entry_id)
                except MemoryStoreError as exc:
                    err.print(f"[red]error:[/red] {escape(str(exc))}")
                    failed += 1
                    continue
                if not stored.entry.is_archived:
                    out.print(f"{stored.id}: not archived; left as it is", soft_wrap=True)
                elif stored.id not in {w.id for w in wanted}:
                    wanted.append(stored)
            # Said before the first write (issue 22: a restore whose log line failed after it had happened was
            # reverted by the next cycle's stale write-back repair). If it cannot be said, nothing is restored.
            note_restored(agent_dir, [s.id for s in wanted])
            now = utcnow()
            for stored in wanted:
                try:
                    store.restore(stored, by_hand=now)
                except MemoryStoreError as exc:
                    err.print(f"[red]error:[/red] {escape(str(exc))}; {stored.id} was left as it is")
                    failed += 1
                    continue
                out.print(
                    f"restored {escape(entry_summary(stored.entry))}: {escape(stored.entry.content)}", soft_wrap=True
                )
            checked = end_check(agent_dir, store, before, scan_map(store), tags_in(()), _words(agent_dir))
    for note in checked.notes:
        err.print(f"[red]error:[/red] {escape(note)}")
    if failed:
        err.print(f"{failed} of {len(entry_ids)} not restored")
    if failed or invariant_error(checked.counts) is not None:
        raise typer.Exit(1)


def _words(agent_dir: Path) -> Vocabulary:
    return agent_vocabulary(agent_dir, VOCABULARY_FILE)


__all__ = ["list_command", "purge_command", "register"]
