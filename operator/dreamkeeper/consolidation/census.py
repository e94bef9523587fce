"""The corpus-wide specifics census: after validation, no accepted merge or prune may make a specific vanish from
the live corpus (issue 18). Refusing only adds text back, so one pass in plan order is sound (``census``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from dreamkeeper.consolidation.decisions import ValidationState, reject_merge
from dreamkeeper.consolidation.plan import MergeAction, PruneAction
from dreamkeeper.consolidation.report import Protection
from dreamkeeper.consolidation.successor_gaps import successor_gaps
from dreamkeeper.coverage import (
    IDENTITY_KINDS,
    CoverageIndex,
    Inventory,
    Specific,
    Vocabulary,
    extract_specifics,
)
from dreamkeeper.memory import StoredEntry, shown, shown_all

log = logging.getLogger("dreamkeeper.consolidation.validate")  # the census is validation's last check


def census(live: Sequence[StoredEntry], state: ValidationState) -> None:
    """Corpus-wide specifics census: no accepted action may make a specific vanish from the live corpus.

    Refusing an action only adds text back to the corpus, so one pass in plan order is sound.

    Successor first: a merge's successor is a live entry of the plan for as long as the merge stands, so a
    source specific its inventory covers is covered by the corpus (coverage is membership in token sets, which
    only grow as texts are added). Only what the successor does not cover, and the specifics of prunes, are
    looked up in the corpus index, which is built the first time that happens: `_CensusCorpus`.
    """
    plan = state.plan
    leaving = {s.id for m in plan.merges for s in m.sources} | {p.target.id for p in plan.prunes}
    leaving |= {c.id for f in plan.folds for c in f.copies}
    if not leaving:
        return
    corpus = _CensusCorpus(live, leaving, plan.merges)
    kept: list[MergeAction] = []
    for merge in plan.merges:
        gaps = state.gaps.get(merge.successor.id)
        if gaps is None or not gaps.answers_for(merge, state.vocabulary):
            gaps = successor_gaps(merge, state.vocabulary)
        lost = _still_said(gaps.uncovered, corpus)
        if lost:
            state.census_refusals += 1
            corpus.refuse(merge)
            for s in merge.sources:
                state.consumed.discard(s.id)
            reject_merge(
                state, merge.sources, lost, "census: would vanish from the live corpus", merge.successor.content
            )
            continue
        kept.append(merge)
    plan.merges = kept
    plan.prunes = [p for p in plan.prunes if _census_prune(p, corpus, state)]
    state.census_index = corpus.index


def _census_prune(prune: PruneAction, corpus: _CensusCorpus, state: ValidationState) -> bool:
    """Whether a prune stands (#18 finding 6: a prune took Tomasz, his e-mail and a date out of the live corpus
    while merges were held to the census). The specifics it would make vanish: any of the kinds
    ``prune_census`` refuses ("identity": names, acronyms, e-mails, phones, account ids; "all"; "off": none)
    refuses the prune (the entry stays live, stamped reviewed); the others are counted and logged."""
    target = prune.target
    vanishing = _vanishing_specifics([target], corpus, state.vocabulary, None)
    refusing = [s.text for s in vanishing if _census_refuses(state.settings.prune_census, s)]
    if refusing:
        corpus.keep(target)
        why = f"census: the last live mention of {len(refusing)} specific(s)"
        log.info(
            "refused to prune %s (%s) — %s: %s. Kept: %s",
            target.id,
            target.entry.category or "uncategorized",
            why,
            shown_all(refusing),
            shown(target.entry.content),
        )
        state.refused_prunes.append(Protection(id=target.id, reason=why, census=refusing))
        return False
    if vanishing:
        prune.lost_specifics = [s.text for s in vanishing]
        log.info(
            "ephemeral prune of %s removes %d specific(s) from the live corpus (kept in the archive): %s",
            target.id,
            len(vanishing),
            shown_all(prune.lost_specifics),
        )
    return True


def _census_refuses(mode: str, specific: Specific) -> bool:
    return mode == "all" or (mode == "identity" and specific.kind in IDENTITY_KINDS)


class _CensusCorpus:
    """The census's view of the planned live corpus, indexed only when a question needs the whole corpus.

    The single pass's index starts as: live entries not leaving, plus every merge's successor; each refusal
    swaps a successor for its sources. A refusal needs a specific the index does not cover, so none can happen
    before the index exists: built lazily it is the starting multiset (hence gives the same answers), and from
    then on `refuse` keeps it current exactly as the single pass did.
    """

    def __init__(self, live: Sequence[StoredEntry], leaving: set[str], merges: Sequence[MergeAction]) -> None:
        self._live = live
        self._leaving = leaving
        self._successors = [m.successor.content for m in merges]
        self.index: CoverageIndex | None = None

    def covers(self, specific: Specific) -> bool:
        if self.index is None:
            self.index = self._build()
        return self.index.covers(specific)

    def keep(self, stored: StoredEntry) -> None:
        """A prune is refused: its entry stays live."""
        if self.index is None:  # not reached: a refusal follows a question only the index answers
            self.index = self._build()
        self.index.add(stored.entry.content)

    def refuse(self, merge: MergeAction) -> None:
        """The merge is refused: its successor leaves the plan, its sources stay live."""
        if self.index is None:  # not reached: a refusal follows a question only the index answers
            self.index = self._build()
        self.index.remove(merge.successor.content)
        for source in merge.sources:
            self.index.add(source.entry.content)

    def _build(self) -> CoverageIndex:
        index = CoverageIndex()
        for stored in self._live:
            if stored.id not in self._leaving:
                index.add(stored.entry.content)
        for text in self._successors:
            index.add(text)
        log.debug("census: indexed the planned live corpus (%d texts)", len(index))
        return index


def _still_said(uncovered: Sequence[Specific], corpus: _CensusCorpus) -> list[str]:
    """Of the specifics a merge's successor does not hold (in the census's order), those the planned corpus no
    longer says, first spelling once each: `_vanishing_specifics` with the successor's answers already known."""
    lost: dict[str, None] = {}
    for specific in uncovered:
        if specific.text not in lost and not corpus.covers(specific):
            lost[specific.text] = None
    return list(lost)


def _vanishing_specifics(
    entries: Sequence[StoredEntry], corpus: _CensusCorpus, vocabulary: Vocabulary, successor: Inventory | None
) -> list[Specific]:
    """Specifics of ``entries`` the planned corpus no longer says, first spelling once each, in order (their kinds
    decide a prune).

    ``successor`` (the inventory of a live text of the plan) answers first: what it covers, the corpus covers.
    """
    lost: dict[str, Specific] = {}
    for stored in entries:
        for specific in extract_specifics(stored.entry.content, stored.entry.category, vocabulary):
            if successor is not None and successor.covers(specific):
                continue
            if specific.text not in lost and not corpus.covers(specific):
                lost[specific.text] = specific
    return list(lost.values())


__all__ = ["census"]
