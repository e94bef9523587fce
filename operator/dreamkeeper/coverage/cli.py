"""`dreamkeeper coverage`: run the merge coverage check by hand, e.g. to try a vocabulary before a cycle trusts it.

Exit codes: 0 every specific is kept, 1 at least one is missing, 2 usage error (including a vocabulary file that
is missing, unreadable or malformed: here, unlike in a cycle, the point is to find out).
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from dreamkeeper.coverage.check import SourceText, required_specifics
from dreamkeeper.coverage.inventory import Inventory
from dreamkeeper.coverage.vocabulary import DEFAULT_VOCABULARY, Vocabulary, load_vocabulary

USAGE_ERROR = 2


def _vocabulary(path: Path | None) -> Vocabulary:
    if path is None:
        return DEFAULT_VOCABULARY
    loaded = load_vocabulary(path)
    if loaded.status == "absent" and not path.exists():
        raise typer.BadParameter(f"{path} does not exist", param_hint="--vocabulary")
    if loaded.status == "fallback":
        raise typer.BadParameter(
            f"{loaded.error}; a cycle would use the built-in vocabulary", param_hint="--vocabulary"
        )
    return loaded.vocabulary


def coverage(
    source: list[str] = typer.Option(..., "--source", "-s", help="A source entry's text; repeat for each source."),
    merged: str = typer.Option(..., "--merged", "-m", help="The proposed merged text."),
    category: str | None = typer.Option(
        None, "--category", "-c", help="Category of the sources (decides numeric exemption)."
    ),
    vocabulary_path: Path | None = typer.Option(
        None, "--vocabulary", help="A merge-coverage-vocabulary.json to apply (default: the built-in baseline)."
    ),
    json_output: bool = typer.Option(False, "--json", help='Print {"missing": [...], "specifics": [...]}.'),
) -> None:
    """Check that MERGED keeps every specific (name, number, date, address, code...) of every SOURCE."""
    vocabulary = _vocabulary(vocabulary_path)
    specifics = required_specifics([SourceText(text, category) for text in source], vocabulary)
    inventory = Inventory.of(merged)
    kept = {specific.key: inventory.covers(specific) for specific in specifics}
    missing = sorted((s.text for s in specifics if not kept[s.key]), key=lambda t: (t.casefold(), t))
    if json_output:
        payload = {
            "missing": missing,
            "specifics": [{**s.as_dict(), "covered": kept[s.key]} for s in specifics],
        }
        typer.echo(json.dumps(payload, ensure_ascii=False, indent=2))
    else:
        console = Console()
        if specifics:
            table = Table("specific", "kind", "kept")
            for specific in specifics:
                table.add_row(
                    specific.text, specific.kind, "[green]yes[/green]" if kept[specific.key] else "[red]NO[/red]"
                )
            console.print(table)
        if missing:
            console.print(f"[red]missing {len(missing)} of {len(specifics)} specific(s):[/red] {', '.join(missing)}")
        else:
            console.print(f"[green]covered:[/green] all {len(specifics)} specific(s) kept")
    if missing:
        raise typer.Exit(code=1)


def register(app: typer.Typer) -> None:
    app.command("coverage")(coverage)
