"""What the cycle needs of a memory format besides ingest and render themselves: its counts as the cycle's, and the
purge's keep rule joined with the format's (``writes.Writes``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.formats import FormatCounts, MemoryFormat
from dreamkeeper.memory import StoredEntry

KeepFn = Callable[[Sequence[StoredEntry]], Mapping[str, str]]  # MemoryStore.purge's ``keep``


def format_counts(counts: FormatCounts) -> CycleCounts:
    """A format's counts as the cycle's."""
    return CycleCounts(
        units_ingested=counts.units_ingested,
        units_kept_for_agent=counts.units_kept_for_agent,
        units_written=counts.units_written,
        units_taken_out=counts.units_taken_out,
        units_refused=counts.units_refused,
        stale_units=counts.stale_units,
    )


def kept_by_format(last_records: KeepFn, memory_format: MemoryFormat) -> KeepFn:
    """The purge's keep rule with a Markdown format's own: a record whose unit is still in the agent's files (an
    append-only log's consolidated line) is kept, or the next ingest would take its unit for new."""

    def keep(due: Sequence[StoredEntry]) -> Mapping[str, str]:
        kept = dict(memory_format.keep(due))
        rest = [s for s in due if s.id not in kept]
        if rest:
            kept.update(last_records(rest))
        return kept

    return keep


__all__ = ["KeepFn", "format_counts", "kept_by_format"]
