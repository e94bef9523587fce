"""The decision half of a cycle's counts: what the cycle found and decided about entries, before any write.

``CycleCounts`` (counts.py) subclasses ``DecisionCounts`` and adds what the writes, the purge, the census and the
proposer's requests counted. The split is by size, not by meaning of the whole: pydantic lists a base class's fields
first, so the fields here are, in order, the first of ``COUNTS`` and every derived sentence keeps its order.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from dreamkeeper.consolidation.count_spec import Cell, Count, Event, Family, Phrase, Row, metric

ARCHIVED = Family(
    "dreamkeeper_archived",
    "entries archived (reversible): folded/merged into a successor, or pruned with no replacement",
    label="kind",
)

REFUSED = Family(
    "dreamkeeper_proposals_refused",
    "proposals refused before any check as useless or misleading, by reason: a merge of one entry that only repeats "
    "or rewords it, a text copying the offer's layout, ids written in the offer's notation",
    label="reason",
)


class DecisionCounts(BaseModel):
    """The first fields of ``CycleCounts``: the gate, the proposals and what the safeguards decided about them."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    total: Annotated[int, Count("live entries when the cycle started", reach="run", cli=Cell(Row.ENTRIES))] = 0
    malformed: Annotated[
        int, Count("entry files that could not be parsed or read, or not be acted on safely (left untouched)")
    ] = 0
    quarantined: Annotated[
        int, Count("of the malformed, entry files not where their id and category say (never written)")
    ] = 0
    reviewed: Annotated[
        int,
        Count(
            "entries offered to the proposer",
            reach="totals",
            metric=metric("dreamkeeper_entries_reviewed"),
            said=Phrase("reviewed {}"),
            cli=Cell(Row.REVIEWED),
        ),
    ] = 0
    withheld: Annotated[
        int,
        Count(
            "entries withheld as reviewed-and-unchanged (the gate)",
            reach="totals",
            metric=metric("dreamkeeper_entries_withheld"),
            said=Phrase("withheld {}"),
            cli=Cell(Row.REVIEWED),
        ),
    ] = 0
    backoff_held: Annotated[
        int, Count("unreviewed entries held back after repeatedly unusable replies (back-off), among the withheld")
    ] = 0
    clusters: Annotated[int, Count("near-duplicate clusters offered")] = 0
    reopened: Annotated[int, Count("settled clusters offered again after their back-off")] = 0
    archived: Annotated[
        int,
        Count(
            "entries archived (reversible): folded, merged or pruned",
            reach="run",
            said=Phrase("archived {}"),
            logged=Phrase("{} archived"),
            cli=Cell(Row.ARCHIVED),
        ),
    ] = 0
    archived_with_replacement: Annotated[
        int,
        Count(
            "entries archived with a successor: folded copies and merge sources",
            reach="totals",
            metric=ARCHIVED.series("with_replacement"),
            said=Phrase("{} with replacement", detail=True),
            logged=Phrase("{} with replacement", detail=True),
            cli=Cell(Row.ARCHIVED, detail=True),
        ),
    ] = 0
    ephemeral: Annotated[
        int,
        Count(
            "entries archived with no replacement (standalone prunes)",
            reach="totals",
            totals_key="archivedEphemeral",
            metric=ARCHIVED.series("ephemeral"),
            said=Phrase("{} ephemeral", detail=True),
            logged=Phrase("{} ephemeral", detail=True),
            cli=Cell(Row.ARCHIVED, detail=True),
        ),
    ] = 0
    saved: Annotated[
        int,
        Count(
            "merges saved: successors created, and merges folded into an identical live entry",
            reach="run",
            logged=Phrase("{} saved"),
            cli=Cell(Row.SAVED),
        ),
    ] = 0
    merged_into_existing: Annotated[
        int,
        Count(
            "merges whose text equals a live entry's, folded into it at once (no new entry)",
            logged=Phrase("{} into existing", detail=True),
            cli=Cell(Row.SAVED, detail=True),
        ),
    ] = 0
    subsumed: Annotated[
        int,
        Count(
            "merges decided with no model (subsumptions): a member of a near-duplicate cluster held every specific of "
            "others, which were archived merged into it (among the merges saved)",
            reach="totals",
            metric=metric("dreamkeeper_clusters_subsumed"),
            logged=Phrase("{} subsumed", detail=True),
            cli=Cell(Row.SUBSUMED),
        ),
    ] = 0
    folded: Annotated[
        int,
        Count(
            "exact duplicates folded into their oldest copy",
            reach="run",
            logged=Phrase("{} folded"),
            cli=Cell(Row.FOLDED),
        ),
    ] = 0
    decayed: Annotated[
        int,
        Count(
            "entries whose importance decayed (RockBot's decay pass; importance and updatedAt written)",
            reach="run",
            logged=Phrase("{} decayed"),
            cli=Cell(Row.DECAYED),
        ),
    ] = 0
    decay_left_floor: Annotated[
        int,
        Count(
            "entries decay took below the high-value floor (protected from pruning for the rest of that cycle)",
            reach="run",
            logged=Phrase("{} left the high-value floor", detail=True),
            cli=Cell(Row.DECAYED, detail=True),
        ),
    ] = 0
    rejected: Annotated[
        int,
        Count(
            "merges refused: dropping specifics, stating ones no source states, or by the census (sources kept)",
            reach="totals",
            totals_key="mergesRejected",
            metric=metric("dreamkeeper_merges_rejected"),
            event=Event(
                "Normal", "MergesRejected", "merge(s) rejected for dropping or inventing specifics; sources kept"
            ),
            said=Phrase("rejected {}"),
            safeguard=Phrase("{} merge(s) rejected"),
            cli=Cell(Row.REJECTED),
        ),
    ] = 0
    invented: Annotated[
        int,
        Count(
            "merges refused for stating specifics no source states (among the rejected)",
            reach="totals",
            metric=metric("dreamkeeper_merges_invented"),
            safeguard=Phrase("{} for inventing specifics", detail=True),
            cli=Cell(Row.REJECTED, detail=True),
        ),
    ] = 0
    repaired: Annotated[
        int,
        Count(
            "merges repaired to restore missing specifics",
            reach="totals",
            totals_key="mergesRepaired",
            metric=metric("dreamkeeper_merges_repaired"),
            said=Phrase("repaired {}"),
            safeguard=Phrase("{} merge(s) repaired"),
            cli=Cell(Row.REJECTED),
        ),
    ] = 0
    refused_restating: Annotated[
        int,
        Count(
            "merges refused unchecked: one source, its text only repeated or reworded (nothing consolidated)",
            reach="totals",
            metric=REFUSED.series("restates_source"),
            safeguard=Phrase("{} useless merge(s) refused"),
            cli=Cell(Row.REFUSED),
        ),
    ] = 0
    refused_layout: Annotated[
        int,
        Count(
            "merges refused unchecked: the text copies the offer's layout (header line, [ID:…] marker, an id)",
            reach="totals",
            metric=REFUSED.series("offer_layout"),
            safeguard=Phrase("{} merge(s) copying the offer refused"),
            cli=Cell(Row.REFUSED),
        ),
    ] = 0
    refused_notation: Annotated[
        int,
        Count(
            "merges and prunes refused unchecked: they name ids in the offer's notation (ID:…), not as ids",
            reach="totals",
            metric=REFUSED.series("offer_notation"),
            safeguard=Phrase("{} proposal(s) naming ids as ID:… refused"),
            cli=Cell(Row.REFUSED),
        ),
    ] = 0
    protected: Annotated[
        int,
        Count(
            "prunes refused by the high-value floor or protected categories",
            reach="totals",
            totals_key="entriesProtected",
            metric=metric("dreamkeeper_entries_protected"),
            event=Event("Normal", "EntriesProtected", "prune(s) refused: above the high-value floor or protected"),
            said=Phrase("protected {}"),
            safeguard=Phrase("{} entry(s) protected from pruning"),
            cli=Cell(Row.PROTECTED),
        ),
    ] = 0
    prunes_refused: Annotated[
        int,
        Count(
            "prunes the census refused: the entry held the last live mention of an identity specific",
            reach="totals",
            metric=metric("dreamkeeper_prunes_refused"),
            event=Event("Normal", "PrunesRefused", "prune(s) refused: the last live mention of a name, contact or id"),
            said=Phrase("census-refused {}"),
            safeguard=Phrase("{} prune(s) refused by the census"),
            cli=Cell(Row.PROTECTED),
        ),
    ] = 0
    merge_only_ignored: Annotated[
        int,
        Count(
            "prunes ignored: members of a reopened duplicate cluster (merge-only)",
            safeguard=Phrase("{} prune(s) of reopened duplicates ignored"),
        ),
    ] = 0
    declined: Annotated[int, Count("clusters shown and left intact (declined)")] = 0
    undecided: Annotated[
        int,
        Count(
            "clusters a usable reply left intact without deciding on them (RockBot's batch layout has no way to say "
            "two entries differ): not declined, offered again after a back-off (backoff.py)"
        ),
    ] = 0
    conflicts: Annotated[
        int,
        Count(
            "changes skipped because the agent wrote the entry during the cycle",
            reach="totals",
            metric=metric("dreamkeeper_conflicts"),
            event=Event("Warning", "Conflicts", "change(s) skipped: the agent wrote the entry during the cycle"),
            logged=Phrase("{} conflicts"),
            cli=Cell(Row.CONFLICTS),
        ),
    ] = 0
