"""`dreamkeeper undo` and `dreamkeeper recover` (the `dream` command lives with the proposers it chooses).

Exit codes: 0 done (or nothing to do), 1 the operation failed or left something as it was (lock held, conflicts,
an unusable state directory), 2 bad usage (no such agent or memory directory). One line on stderr, no traceback.
Neither ever creates a directory: recovering or undoing into the wrong place must find nothing, not make it.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from dreamkeeper.consolidation.cycle import recover, sweep_leftovers
from dreamkeeper.consolidation.invariant import Census, end_check, invariant_error, scan_map, tags_in
from dreamkeeper.consolidation.purge import agent_vocabulary
from dreamkeeper.consolidation.undo import resume_undos, undo_cycle, undo_tags
from dreamkeeper.consolidation.units_cli import FORMAT_OPT, PROFILE_OPT, format_of, is_markdown, unit_session
from dreamkeeper.coverage import VOCABULARY_FILE
from dreamkeeper.formats import MemoryFormat
from dreamkeeper.memory import (
    CycleLock,
    MemoryStore,
    MemoryStoreError,
    check_state_files,
    ensure_state_dir,
    memory_root,
)

err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_FAILED = 1
EXIT_USAGE = 2


def _fail(message: str, code: int = EXIT_FAILED) -> typer.Exit:
    err.print(f"[red]error:[/red] {escape(message)}")
    return typer.Exit(code)


def _existing_dirs(agent_dir: Path, memory_dir: Path | None) -> Path:
    """The memory root of an existing agent directory; refuses (exit 2) instead of creating anything."""
    if not agent_dir.is_dir():
        raise _fail(f"agent directory {agent_dir} does not exist or is not a directory; nothing was changed", 2)
    root = memory_root(agent_dir, memory_dir)
    if not root.is_dir():
        raise _fail(f"no memory directory at {root}; nothing was changed", EXIT_USAGE)
    return root


def _format(name: str | None, profile_json: str | None, memory_dir: Path | None) -> MemoryFormat:
    try:
        chosen = format_of(name, profile_json)
    except ValueError as exc:
        raise _fail(f"{exc}; nothing was changed", EXIT_USAGE) from None
    if is_markdown(chosen) and memory_dir is not None:
        raise _fail("--memory-dir is RockBot's; a Markdown format's files are named by its profile", EXIT_USAGE)
    return chosen


def register(app: typer.Typer) -> None:
    @app.command("undo")
    def undo_command(
        agent_dir: Path = typer.Argument(..., help="The agent's data directory."),
        cycle_id: str = typer.Argument(..., help="The cycle to reverse (see .dreamkeeper/cycles/)."),
        memory_dir: Path | None = typer.Option(None, help="Memory directory (default AGENT_DIR/memory)."),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        memory_format: str | None = FORMAT_OPT,
        profile_json: str | None = PROFILE_OPT,
    ) -> None:
        """Reverse a whole cycle: restore its archived entries, archive its successors, revert its folds and its
        review stamps. Exits 0 when everything was reversed, 1 when something was kept as the agent changed it.
        For a Markdown format the restored units are written back into the agent's files and the cycle's successors
        taken out of them."""
        chosen = _format(memory_format, profile_json, memory_dir)
        root = _existing_dirs(agent_dir, memory_dir) if not is_markdown(chosen) else chosen.store_root(agent_dir)
        if "/" in cycle_id or cycle_id.startswith("."):
            raise _fail(f"{cycle_id!r} is not a cycle id; nothing was changed", EXIT_USAGE)
        try:
            if ensure_state_dir(agent_dir, create=False) is None:
                raise FileNotFoundError(f"no dreamkeeper state in {agent_dir}: no cycle ran here; nothing was changed")
            if is_markdown(chosen):
                with unit_session(agent_dir, chosen, f"undo {cycle_id}") as session:
                    result = undo_cycle(agent_dir, root, cycle_id)
                for note in session.notes:
                    err.print(f"[yellow]note:[/yellow] {escape(note)}")
            else:
                with CycleLock(agent_dir, f"undo {cycle_id}"):
                    result = undo_cycle(agent_dir, root, cycle_id)
        except (MemoryStoreError, OSError) as exc:
            raise _fail(str(exc)) from None
        if as_json:
            typer.echo(json.dumps(result.__dict__, indent=2))
        else:
            typer.echo(
                f"{'resumed and finished the undo of' if result.resumed else 'undid'} {cycle_id}: "
                f"{len(result.restored)} restored, {len(result.archived)} successor(s) archived, "
                f"{len(result.reverted)} rewrite(s) reverted (folds, decays), {len(result.unstamped)} review stamp(s) "
                f"removed, {len(result.conflicts)} conflict(s), {len(result.kept)} successor(s) kept live as the last "
                f"holder of a specific, {len(result.missing)} archived entr(ies) gone since"
            )
            for detail in result.details:
                err.print(f"[yellow]kept:[/yellow] {escape(detail)}")
        if result.incomplete:
            raise typer.Exit(EXIT_FAILED)

    @app.command("recover")
    def recover_command(
        agent_dir: Path = typer.Argument(..., help="The agent's data directory."),
        memory_dir: Path | None = typer.Option(None, help="Memory directory (default AGENT_DIR/memory)."),
        memory_format: str | None = FORMAT_OPT,
        profile_json: str | None = PROFILE_OPT,
    ) -> None:
        """Finish any cycle a crash interrupted, from its write-ahead journal (idempotent). For a Markdown format
        the agent's files are brought in step with the records too (what a killed render left undone)."""
        chosen = _format(memory_format, profile_json, memory_dir)
        root = _existing_dirs(agent_dir, memory_dir) if not is_markdown(chosen) else chosen.store_root(agent_dir)
        try:
            if ensure_state_dir(agent_dir, create=False) is None:
                typer.echo("nothing to recover")
                return
            session = None
            with contextlib.ExitStack() as stack:
                if is_markdown(chosen):
                    # The agent's latest files first; on leaving, the files are brought in step with the records.
                    session = stack.enter_context(unit_session(agent_dir, chosen, "recover"))
                    sweep_leftovers(agent_dir, root, chosen)
                else:
                    stack.enter_context(CycleLock(agent_dir, "recover"))
                check_state_files(agent_dir)
                store = MemoryStore(root)
                before = Census.of(store.scan().entries)
                done = recover(agent_dir, root)
                undos = resume_undos(agent_dir, root)
                tags = {cycle_id for cycle_id, _ in done} | {t for u in undos for t in undo_tags(u.journals)}
                words = agent_vocabulary(agent_dir, VOCABULARY_FILE)
                checked = end_check(agent_dir, store, before, scan_map(store), tags_in(tags), words, what="recovery")
            if session is not None:
                for note in session.notes:
                    err.print(f"[yellow]note:[/yellow] {escape(note)}")
        except (MemoryStoreError, OSError) as exc:
            raise _fail(str(exc)) from None
        if not done and not undos:
            typer.echo("nothing to recover")
        failed = False
        for cycle_id, tally in done:
            typer.echo(
                f"recovered {cycle_id}: {tally.created} created, {tally.archived} archived, {tally.conflicts} "
                f"conflicts, {tally.failed} failed"
            )
            for error in tally.errors:
                err.print(f"[yellow]skipped:[/yellow] {escape(error)}")
            failed |= tally.failed > 0
        for undo in undos:
            typer.echo(f"finished the interrupted undo of {undo.cycle_id}: {len(undo.restored)} restored")
            for detail in undo.details:
                err.print(f"[yellow]kept:[/yellow] {escape(detail)}")
            failed |= undo.incomplete
        for note in checked.notes:
            err.print(f"[red]error:[/red] {escape(note)}")
        if failed or invariant_error(checked.counts) is not None:
            raise typer.Exit(EXIT_FAILED)
