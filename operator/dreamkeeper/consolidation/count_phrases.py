"""Counts in words: the sentences of Events and log lines, and the ``dreamkeeper dream`` table's rows, each derived
from ``COUNTS`` (``counts.py``) in table order."""

from __future__ import annotations

from collections.abc import Callable

from dreamkeeper.consolidation.counts import COUNTS, Count, Phrase, Row


def value_of(source: object, count: Count) -> int | None:
    """The count's value in anything carrying counts by name (the report, a Job's run summary, totals)."""
    value = getattr(source, count.name)
    return None if value is None else int(value)


Column = Callable[[Count], Phrase | None]


def sentence(source: object, column: Column) -> str:
    """The counts that have a phrase in that column, in table order: "archived 7 (4 with replacement, ...), ..."."""
    parts = [(p.text.format(value_of(source, c)), p.detail) for c in COUNTS if (p := column(c)) is not None]
    return _joined(parts, ", ", ", ")


def any_counted(source: object, column: Column) -> bool:
    """Whether any count that has a phrase in that column is above zero."""
    return any(value_of(source, c) for c in COUNTS if column(c) is not None)


def cli_rows(source: object) -> list[tuple[str, str]]:
    """The ``dreamkeeper dream`` table's rows: (label, value)."""
    rows = []
    for row in Row:
        cells = [(str(value_of(source, c)), c.cli.detail) for c in COUNTS if c.cli is not None and c.cli.row is row]
        rows.append((row.value, _joined(cells, " / ", " / ")))
    return rows


def _joined(parts: list[tuple[str, bool]], sep: str, detail_sep: str) -> str:
    """Main parts joined by ``sep``; each run of details in parentheses after the part before it."""
    groups: list[tuple[str, list[str]]] = []
    for text, detail in parts:
        if detail and groups:
            groups[-1][1].append(text)
        else:
            groups.append((text, []))
    return sep.join(head + (f" ({detail_sep.join(details)})" if details else "") for head, details in groups)


__all__ = ["Column", "any_counted", "cli_rows", "sentence", "value_of"]
