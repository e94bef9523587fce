"""A cycle's counts: one model, and on each of its fields the one row of the table that says where the count goes.

Every place a count appears is derived from ``COUNTS`` by code: the cycle report and its JSON, the Job's
termination summary, a DreamSchedule's ``status.lastRun`` and ``status.totals`` (``kube/models.py``), the
Prometheus series (``kube/metrics.py``), the Events of a counted cycle (``kube/reconcile.py``), the cycle's
closing log lines and the ``dreamkeeper dream`` table. To add a count, add a field here (or, for a decision about
entries before any write, in ``DecisionCounts``, count_decisions.py, whose fields come first); its row decides how far
it travels (``reach``) and what it shows in each place.

The fields' order is the order of every derived sentence (Event, log lines); the CLI table has its own layout
(``Row``, in ``count_spec.py`` with the shape of a row).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Annotated

from pydantic import ConfigDict
from pydantic.alias_generators import to_camel

from dreamkeeper.consolidation.count_decisions import ARCHIVED as ARCHIVED
from dreamkeeper.consolidation.count_decisions import REFUSED as REFUSED
from dreamkeeper.consolidation.count_decisions import DecisionCounts
from dreamkeeper.consolidation.count_spec import Cell as Cell
from dreamkeeper.consolidation.count_spec import Count as Count
from dreamkeeper.consolidation.count_spec import Event as Event
from dreamkeeper.consolidation.count_spec import Family as Family
from dreamkeeper.consolidation.count_spec import Metric as Metric
from dreamkeeper.consolidation.count_spec import Phrase as Phrase
from dreamkeeper.consolidation.count_spec import Reach as Reach
from dreamkeeper.consolidation.count_spec import Row as Row
from dreamkeeper.consolidation.count_spec import metric as metric

TOKENS = Family("dreamkeeper_llm_tokens", "proposer tokens", label="direction")
BATCHES = Family(
    "dreamkeeper_proposer_batches",
    "batches the proposer's model was asked about, by outcome: a usable reply, an unusable one (the model "
    "answered; nothing could be used), a failed request (or one never sent)",
    label="outcome",
)


class CycleCounts(DecisionCounts):
    """What one cycle counted. RockBot's vocabulary: archived = folded + merged sources + ephemeral prunes.

    A stage returns the counts it knows, the rest zero; the cycle's counts are the sum of its stages' (``+``).
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    write_failures: Annotated[
        int,
        Count(
            "changes the filesystem would not let the cycle write (permissions, I/O): the cycle fails",
            reach="run",
            logged=Phrase("{} write failures"),
            cli=Cell(Row.WRITE_FAILURES),
        ),
    ] = 0
    stale_write_backs: Annotated[
        int,
        Count(
            "stale copies an agent wrote back over earlier cycles' changes, repaired (consolidation/writeback)",
            reach="totals",
            metric=metric("dreamkeeper_stale_write_backs"),
            event=Event(
                "Warning",
                "StaleWriteBacks",
                "stale write-back(s) repaired: the agent wrote cached copies back over earlier cycles' changes",
            ),
            logged=Phrase("{} stale write-backs"),
            safeguard=Phrase("{} stale write-back(s) repaired"),
            cli=Cell(Row.STALE),
        ),
    ] = 0
    resurrected: Annotated[
        int,
        Count(
            "archived entries an agent's stale copy made live again, archived again (of the stale write-backs)",
            reach="totals",
            metric=metric("dreamkeeper_resurrected"),
            cli=Cell(Row.STALE, detail=True),
        ),
    ] = 0
    reinforcements_carried: Annotated[
        int,
        Count(
            "reinforcement increments of stale copies carried into their successors (each counted once)",
            reach="run",
            cli=Cell(Row.STALE, detail=True),
        ),
    ] = 0
    stale_edits: Annotated[
        int, Count("copies written back with changed content: kept live as new facts, reviewed as new")
    ] = 0
    paused: Annotated[
        int,
        Count(
            "cycles skipped because the agent's pause marker (memory-audit/consolidation-paused.json) was present",
            reach="totals",
            metric=metric("dreamkeeper_paused_cycles"),
        ),
    ] = 0
    hard_deletes: Annotated[
        int,
        Count(
            "entries this cycle wrote that were gone without an archive after it (policy: always 0)",
            reach="totals",
            metric=metric("dreamkeeper_hard_deletes"),
            event=Event("Warning", "HardDeletes", "entry(ies) deleted without an archive"),
            logged=Phrase("{} hard deletes"),
            cli=Cell(Row.HARD_DELETES),
        ),
    ] = 0
    agent_deletes: Annotated[
        int,
        Count(
            "entries gone after the cycle that it never wrote: the agent's own deletions (not ours, not alerted)",
            reach="run",
            cli=Cell(Row.AGENT_DELETES),
        ),
    ] = 0
    units_ingested: Annotated[
        int, Count("Markdown formats: units found new in the agent's files (their records created)")
    ] = 0
    units_kept_for_agent: Annotated[
        int,
        Count(
            "Markdown formats: units the agent removed or changed in its files, kept in the archive (restorable)",
            reach="run",
        ),
    ] = 0
    units_written: Annotated[
        int,
        Count("Markdown formats: units written into the agent's files (merge successors, restored units)", reach="run"),
    ] = 0
    units_taken_out: Annotated[
        int,
        Count(
            "Markdown formats: archived units taken out of the agent's files (their text kept in the archive first)",
            reach="run",
        ),
    ] = 0
    units_refused: Annotated[
        int,
        Count(
            "Markdown formats: units that could not be written (a cap, the agent's lock, a file that would not parse "
            "back): a successor's merge undone, a restore left pending"
        ),
    ] = 0
    stale_units: Annotated[
        int, Count("Markdown formats: archived units a stale writer put back in a file, taken out again")
    ] = 0
    temps_removed: Annotated[int, Count("temp files of an interrupted write of ours, removed at the start")] = 0
    conflict_copies: Annotated[
        int, Count("conflict copies present: versions of the agent's a swap displaced, kept (see the notes)")
    ] = 0
    held: Annotated[
        int,
        Count(
            "entries a plan over the blast-radius cap would have taken out of the live corpus (nothing archived; "
            "the plan waits for approval)",
            reach="totals",
            metric=metric("dreamkeeper_archives_held"),
            event=Event(
                "Warning",
                "ArchivesHeld",
                "entry(ies) would leave the live corpus, over the blast-radius cap: nothing archived, the plan waits "
                "on the volume for spec.approveHold",
            ),
            said=Phrase("held {}"),
            cli=Cell(Row.HELD),
        ),
    ] = 0
    purged: Annotated[
        int,
        Count(
            "archived entries purged after the retention period",
            reach="totals",
            metric=metric("dreamkeeper_purged"),
            event=Event("Normal", "Purged", "archived entry(ies) purged after the retention period"),
            cli=Cell(Row.PURGED),
        ),
    ] = 0
    purge_kept_above_floor: Annotated[int, Count("archived entries past retention kept by the floor")] = 0
    purge_kept_last_record: Annotated[
        int,
        Count(
            "archived entries past retention kept as the last record of a specific no live entry says",
            reach="totals",
            cli=Cell(Row.PURGED, detail=True),
        ),
    ] = 0
    purge_kept_chain: Annotated[
        int, Count("archived entries past retention kept because an archived entry names them as merge successor")
    ] = 0
    purge_held: Annotated[
        int,
        Count(
            "archived entries dreamkeeper keeps, held above RockBot's high-value floor before its purge could "
            "delete them",
            safeguard=Phrase("{} archived entr(ies) held from RockBot's purge"),
        ),
    ] = 0
    purge_released: Annotated[int, Count("purge holds released (nothing keeps the entry any more)")] = 0
    fold_paced: Annotated[
        int, Count("exact-duplicate copies left for a later cycle to stay within RockBot's audit loss limit")
    ] = 0
    embeddings_generated: Annotated[
        int, Count("vectors generated by the embeddings endpoint (missing ones, and entries the cycle wrote)")
    ] = 0
    embeddings_failed: Annotated[
        int, Count("vectors the embeddings endpoint failed to produce (those entries compared by Jaccard)")
    ] = 0
    live_entries: Annotated[
        int,
        Count(
            "live entries after the last cycle",
            reach="run",
            state=True,
            metric=metric("dreamkeeper_live_entries"),
            said=Phrase("live {}"),
            logged=Phrase("live {}"),
            cli=Cell(Row.LIVE),
        ),
    ] = 0
    archived_entries: Annotated[
        int,
        Count(
            "archived entries after the last cycle",
            reach="run",
            state=True,
            metric=metric("dreamkeeper_archived_entries"),
            logged=Phrase("archived {}"),
            cli=Cell(Row.LIVE),
        ),
    ] = 0
    duplicate_backlog: Annotated[
        int,
        Count(
            "near-duplicate clusters of the live corpus still whole after the cycle (the engine's own clustering): "
            "waiting to reopen, declined, or not yet decided",
            reach="run",
            state=True,
            metric=metric("dreamkeeper_duplicate_backlog"),
            logged=Phrase("duplicate backlog {}"),
            cli=Cell(Row.BACKLOG),
        ),
    ] = 0
    specifics_lost: Annotated[
        int,
        Count(
            "specifics of the live corpus before the cycle that no live entry says after it, ephemeral prunes apart "
            "(the end-of-run invariant's census, after any reversal)",
            reach="totals",
            metric=metric("dreamkeeper_specifics_lost"),
            event=Event("Warning", "SpecificsLost", "specific(s) no live entry carries any more"),
            cli=Cell(Row.SPECIFICS_LOST),
        ),
    ] = 0
    orphaned: Annotated[
        int,
        Count(
            "entries live before the cycle whose merged-into chain ends in no live entry after it (end-of-run "
            "invariant, after any reversal)",
            reach="totals",
            metric=metric("dreamkeeper_orphaned"),
            event=Event("Warning", "Orphaned", "entry(ies) live before the cycle reach no live entry after it"),
            cli=Cell(Row.SPECIFICS_LOST, detail=True),
        ),
    ] = 0
    losses_reversed: Annotated[
        int,
        Count(
            "entries the cycle archived and the end-of-run invariant brought back: they carried a fact no live "
            "entry said any more, or reached no live entry (a stage slipped: the cycle fails)",
            reach="totals",
            metric=metric("dreamkeeper_losses_reversed"),
            event=Event(
                "Warning",
                "LossesReversed",
                "entry(ies) the cycle archived brought back by the end-of-run invariant (a fact would have been lost)",
            ),
            cli=Cell(Row.SPECIFICS_LOST, detail=True),
        ),
    ] = 0
    clock_refusals: Annotated[
        int,
        Count(
            "stages (purge, decay) refused because the clock disagrees with the newest ledger or journal time (run "
            "with --trust-clock to override)",
            reach="totals",
            metric=metric("dreamkeeper_clock_refusals"),
            event=Event(
                "Warning",
                "ClockDisagrees",
                "stage(s) refused: the clock disagrees with the newest ledger or journal time (purge, decay skipped)",
            ),
            cli=Cell(Row.CLOCK),
        ),
    ] = 0
    ephemeral_specifics: Annotated[int, Count("specifics that ephemeral prunes took out of the live corpus")] = 0
    census_refusals: Annotated[int, Count("merges the corpus-wide census refused")] = 0
    sourceless_saved: Annotated[
        int, Count("source-less toSave items saved as new entries (derivedFrom: feedback), as RockBot does")
    ] = 0
    sourceless_refused: Annotated[
        int,
        Count(
            "source-less toSave items refused (no feedback shown, the per-cycle cap, an identity specific from "
            "nowhere)",
            safeguard=Phrase("{} source-less save(s) refused"),
        ),
    ] = 0
    vocabulary_fallback: Annotated[
        int,
        Count(
            "cycles that fell back to the built-in vocabulary (file malformed)",
            reach="totals",
            totals_key="vocabularyFallbacks",
            metric=metric("dreamkeeper_vocabulary_fallbacks"),
        ),
    ] = 0
    invalid_replies: Annotated[int, Count("proposer replies that could not be used")] = 0
    batches_usable: Annotated[
        int,
        Count(
            "batches the model answered usably",
            reach="totals",
            metric=BATCHES.series("usable"),
            cli=Cell(Row.BATCHES),
        ),
    ] = 0
    batches_unusable: Annotated[
        int,
        Count(
            "batches whose reply could not be used (unparseable, cut off, refused, or naming no offered id)",
            reach="totals",
            metric=BATCHES.series("unusable"),
            cli=Cell(Row.BATCHES),
        ),
    ] = 0
    batches_failed: Annotated[
        int,
        Count(
            "batches whose request failed or was never sent (endpoint down, budget)",
            reach="totals",
            metric=BATCHES.series("failed"),
            event=Event("Warning", "ProposerRequestsFailed", "proposer batch(es) failed or not sent"),
            cli=Cell(Row.BATCHES),
        ),
    ] = 0
    invented_replies: Annotated[
        int,
        Count(
            "replies naming only ids that were not offered: they decided nothing (among the unusable)",
            safeguard=Phrase("{} repl(ies) naming no offered id decided nothing"),
        ),
    ] = 0
    backed_off: Annotated[
        int,
        Count(
            "entries stamped for back-off: their batch's reply was unusable, or left their cluster undecided "
            "(backoff.py)"
        ),
    ] = 0
    llm_calls: Annotated[int, Count("requests made to the proposer's model", cli=Cell(Row.PROPOSER))] = 0
    failed_calls: Annotated[int, Count("proposer requests that failed")] = 0
    format_refusals: Annotated[
        int,
        Count(
            "requests the server refused only for their response_format: the output mode moved on and the same "
            "request was sent again (the negotiation; not among the failed)"
        ),
    ] = 0
    input_tokens: Annotated[
        int,
        Count(
            "proposer input tokens",
            reach="totals",
            totals_key="llmInputTokens",
            metric=TOKENS.series("input"),
            cli=Cell(Row.PROPOSER),
        ),
    ] = 0
    output_tokens: Annotated[
        int,
        Count(
            "proposer output tokens",
            reach="totals",
            totals_key="llmOutputTokens",
            metric=TOKENS.series("output"),
            cli=Cell(Row.PROPOSER),
        ),
    ] = 0

    def __add__(self, other: CycleCounts) -> CycleCounts:
        return CycleCounts(**{c.name: getattr(self, c.name) + getattr(other, c.name) for c in COUNTS})

    @staticmethod
    def total_of(parts: Iterable[CycleCounts]) -> CycleCounts:
        total = CycleCounts()
        for part in parts:
            total = total + part
        return total


def _table() -> tuple[Count, ...]:
    rows = []
    for name, info in CycleCounts.model_fields.items():
        (spec,) = (m for m in info.metadata if isinstance(m, Count))
        rows.append(dataclasses.replace(spec, name=name))
    return tuple(rows)


COUNTS: tuple[Count, ...] = _table()
SUMMED: tuple[Count, ...] = tuple(c for c in COUNTS if c.summed)
