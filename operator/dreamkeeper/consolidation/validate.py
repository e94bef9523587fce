"""Validation: turn untrusted proposer replies into a plan that only contains what the safeguards allow.

Order (every step logged): a reply that names no offered id decides nothing → resolve ids against the batch's
offer → blank merges dropped, sources shielded → merges with no offered source not saved → coverage and invention
checks with one repair try → merge arithmetic done by code → standalone prunes against shield, merge-only, floor
and protected categories → corpus-wide specifics census (merges, then prunes).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from dreamkeeper.consolidation.decisions import Decisions, ValidationState
from dreamkeeper.consolidation.fold import LiveTexts, fold_merge_into, reinforcement_sum
from dreamkeeper.consolidation.gating import GatingResult
from dreamkeeper.consolidation.plan import MergeAction, PruneAction
from dreamkeeper.consolidation.proposal import Batch, BatchReply, MergeProposal, Proposer, RepairRequest
from dreamkeeper.consolidation.quarantine import displayable, unencodable
from dreamkeeper.consolidation.refusals import REASON_PREFIX, Refusal, in_offer_notation, useless
from dreamkeeper.consolidation.replies import BatchOutcome, batch_outcome, id_key
from dreamkeeper.consolidation.report import Protection, Rejection
from dreamkeeper.consolidation.sourceless import log_refused, log_saved, sourceless_entry
from dreamkeeper.coverage import (
    IDENTITY_KINDS,
    CoverageIndex,
    Inventory,
    SourceText,
    Specific,
    Vocabulary,
    extract_specifics,
    find_invented_specifics,
    find_missing_specifics,
    merged_inventory,
)
from dreamkeeper.memory import (
    CREATED_BY_CYCLE,
    MERGED_AT,
    MERGED_FROM,
    REVIEWED_AT,
    REVIEWED_HASH,
    Entry,
    InvalidCategoryError,
    StoredEntry,
    format_timestamp,
    review_hash,
    shown,
    shown_all,
    validate_category,
)

log = logging.getLogger(__name__)

SUBJECT_TIME = "subjectTime"
SUBJECT_TIME_START = "subjectTimeStart"
SUBJECT_TIME_END = "subjectTimeEnd"


def new_entry_id() -> str:
    """RockBot's dream-created ids: the first 12 hex chars of a GUID."""
    return uuid.uuid4().hex[:12]


def _ids(stored: Sequence[StoredEntry]) -> str:
    return ", ".join(s.id for s in stored)


async def validate_replies(
    batches: Sequence[Batch],
    replies: Sequence[BatchReply],
    gating: GatingResult,
    live: Sequence[StoredEntry],
    proposer: Proposer,
    state: ValidationState,
) -> Decisions:
    """Every reply through the safeguards, then the census: what is left is what may be applied."""
    eligible = {s.id.lower(): s for s in gating.eligible}
    by_batch = {r.batch_index: r for r in replies}
    if state.live_texts is None:
        state.live_texts = LiveTexts(live, state.settings)
    for batch in batches:
        reply = by_batch.get(batch.index)
        offered = {i.lower(): eligible[i.lower()] for i in batch.ids if i.lower() in eligible}
        outcome = batch_outcome(reply, offered)
        if outcome != "unasked":
            state.batches = state.batches.add(outcome)
        if reply is None or reply.proposal is None or outcome == "invented":
            _decides_nothing(batch, reply, outcome, state)
            continue
        proposal = reply.proposal
        named = [*proposal.to_delete, *(i for m in proposal.to_save for i in m.source_ids)]
        state.named.update(s.id for raw in named if (s := offered.get(id_key(raw))) is not None)
        if batch.shape == "batch":
            state.undecided_batches.add(batch.index)
        for merge in reply.proposal.to_save:
            await _isolated_merge(merge, offered, batch, proposer, state)
        for raw_id in reply.proposal.to_delete:
            try:
                _validate_prune(raw_id, offered, gating, state)
            except Exception as exc:  # one prune that cannot be checked is refused, never the cycle
                log.error("refused prune of %r: it could not be checked (%s: %s)", raw_id, type(exc).__name__, exc)
    census(live, state)
    return state.decisions()


def _decides_nothing(batch: Batch, reply: BatchReply | None, outcome: BatchOutcome, state: ValidationState) -> None:
    """An unusable, failed or unasked batch: nothing applies and nothing is stamped reviewed; a reply the model
    gave that could not be used also stamps the batch's entries for back-off (backoff.py)."""
    state.unstamped.update(batch.ids)
    if outcome in ("unusable", "invented"):
        state.backoff.update(batch.ids)
    if outcome == "invented" and reply is not None and reply.proposal is not None:
        proposal = reply.proposal
        named = [*proposal.to_delete, *(i for m in proposal.to_save for i in m.source_ids)]
        log.warning(
            "batch %d: the reply names no offered id (%s); it decides nothing and its entries are not stamped",
            batch.index,
            shown_all(repr(str(i)) for i in named[:8]) if named else "no ids, only blank merges",
        )
    elif reply is not None and reply.error:
        log.warning(
            "batch %d: unusable proposer reply (%s); its entries change nothing", batch.index, shown(reply.error)
        )


def _resolve(ids: Sequence[str], offered: dict[str, StoredEntry], what: str) -> list[StoredEntry]:
    resolved: list[StoredEntry] = []
    for raw in ids:
        stored = offered.get(id_key(raw))
        if stored is None:
            log.info("%s names %r, which was not offered this cycle; ignored", what, shown(raw))
        elif stored not in resolved:
            resolved.append(stored)
    return resolved


async def _isolated_merge(
    merge: MergeProposal,
    offered: dict[str, StoredEntry],
    batch: Batch,
    proposer: Proposer,
    state: ValidationState,
) -> None:
    """``_validate_merge``, with a failure to check one merge rejecting that merge alone (sources kept)."""
    try:
        await _validate_merge(merge, offered, batch, proposer, state)
    except Exception as exc:
        sources = [s for raw in merge.source_ids if (s := offered.get(id_key(raw))) is not None]
        _reject(state, sources, [], f"could not be checked ({type(exc).__name__}: {exc})", merge.content)


async def _validate_merge(
    merge: MergeProposal,
    offered: dict[str, StoredEntry],
    batch: Batch,
    proposer: Proposer,
    state: ValidationState,
) -> None:
    sources = _resolve(merge.source_ids, offered, "merge")
    if not merge.content.strip():
        log.warning("dropping merge with blank content; its %d source(s) are kept: [%s]", len(sources), _ids(sources))
        state.shielded.update(s.id for s in sources)
        return
    if not sources:
        _save_sourceless(merge, batch, state)
        return
    if any(unencodable(text) for text in (merge.content, merge.category or "", *merge.tags)):
        _reject(state, sources, [], "merged text holds a lone surrogate, which UTF-8 cannot hold", merge.content)
        return
    refusal = useless(
        merge.content, merge.source_ids, sources, offered_ids(offered), _restates_live(merge, sources, state)
    )
    if refusal is not None:
        _refuse(state, sources, *refusal, merge.content)
        return
    overlap = [s for s in sources if s.id in state.consumed or s.id in state.fold_targets]
    if overlap:
        _reject(state, sources, [], f"sources [{_ids(overlap)}] already merged this cycle", merge.content)
        return
    texts = [SourceText(text=s.entry.content, category=s.entry.category) for s in sources]
    about = [_shown_about(s.entry) for s in sources]
    content = merge.content
    missing = find_missing_specifics(texts, content, state.vocabulary)
    invented = find_invented_specifics(texts, content, state.vocabulary, about)
    repaired = attempted = False
    if (missing or invented) and state.repairs_used < state.settings.repair_max_per_cycle:
        state.repairs_used += 1
        attempted = True
        repair = RepairRequest(merge, [s.entry for s in sources], missing, invented, batch.shape)
        revised = await proposer.repair(repair)
        if revised and revised.strip() and not unencodable(revised):
            still = find_missing_specifics(texts, revised, state.vocabulary)
            still_invented = find_invented_specifics(texts, revised, state.vocabulary, about)
            if not still and not still_invented:
                log.info(
                    "repaired merge of [%s] — restored %d specific(s): %s; removed %d invented: %s",
                    _ids(sources),
                    len(missing),
                    shown_all(missing) if missing else "-",
                    len(invented),
                    shown_all(invented) if invented else "-",
                )
                content, missing, invented, repaired = revised, [], [], True
            else:
                # The report shows the text these verdicts are about: the revision, not the first proposal
                # (issue 23: the repair's missing list was shown beside the original text).
                first = shown(content)
                log.info("repair of [%s] still fails its checks; the first proposal was: %s", _ids(sources), first)
                content, missing, invented = revised, still, still_invented
    suffix = " after repair" if attempted else ""
    if missing:
        _reject(state, sources, missing, f"dropped {len(missing)} specific(s){suffix}", content, invented)
        return
    if invented:
        state.invented_merges += 1
        reason = f"states {len(invented)} specific(s) no source states{suffix}"
        _reject(state, sources, [], reason, content, invented)
        return
    successor = _successor(merge, content, sources, state)
    state.consumed.update(s.id for s in sources)
    if _fold_into_live(MergeAction(successor, sources, repaired, batch.index), state):
        return
    state.plan.merges.append(MergeAction(successor, sources, repaired, batch.index))


def _save_sourceless(merge: MergeProposal, batch: Batch, state: ValidationState) -> None:
    """A ``toSave`` naming no offered entry: a new entry, as RockBot saves it, behind sourceless.py's safeguards."""
    gate = state.sourceless
    if gate is None:
        log.warning(
            "merge names no offered entry (sourceIds %s); not saved: %s", shown(merge.source_ids), shown(merge.content)
        )
        return
    content = merge.content.strip()
    why = gate.refusal(content, merge.category, state.vocabulary)
    if why is None and any(unencodable(text) for text in (content, merge.category or "", *merge.tags)):
        why = "its text holds a lone surrogate, which UTF-8 cannot hold"
    if why is not None:
        gate.refused += 1
        log_refused(content, merge.source_ids, why)
        return
    entry = sourceless_entry(
        new_entry_id(), content, merge.category, merge.tags, merge.importance, state.cycle_id, state.now
    )
    gate.saved += 1
    action = MergeAction(entry, [], False, batch.index)
    if not _fold_into_live(action, state):
        state.plan.merges.append(action)
        log_saved(entry)


def _fold_into_live(merge: MergeAction, state: ValidationState) -> bool:
    """A merge whose text equals a live entry's (outside its own sources and what is already leaving) is folded
    into that entry at once (RockBot's ``FindExactDuplicateAsync`` + ``FoldMergeIntoExisting``, DreamService.cs
    @05346ff0): no second copy is created for the next cycle's fold. A second merge into the same entry adds to the
    first. Returns whether it was folded."""
    if state.live_texts is None:
        return False
    successor, sources = merge.successor, merge.sources
    target = state.live_texts.find(successor, _Leaving(state))
    if target is None:
        return False
    ids = [s.id for s in sources]
    earlier = state.fold_targets.get(target.id)
    if earlier is not None:
        earlier.successor = fold_merge_into(earlier.successor, successor, ids, state.now)
        earlier.sources.extend(sources)
        earlier.repaired |= merge.repaired
    else:
        folded = fold_merge_into(target.entry, successor, ids, state.now)
        action = MergeAction(folded, sources, merge.repaired, merge.batch_index, into=target)
        state.plan.merges.append(action)
        state.fold_targets[target.id] = action
    log.info(
        "merge of [%s] folded into existing %s — identical text (%s, reinforced=%dx): %s",
        _ids(sources),
        target.id,
        target.entry.category or "uncategorized",
        state.fold_targets[target.id].successor.reinforcement_count,
        target.entry.content,
    )
    return True


class _Leaving:
    """The lower-cased ids leaving with the plan so far (accepted merges' sources, prunes), asked only about the few
    live entries a merge's text matches. Built as a set for every merge it cost the plan's size per merge, quadratic
    in a 100,000-entry cycle's thousands of merges (issue 27); an id as consumed (RockBot's are lower-case hex)
    answers at once, any other is compared case-insensitively as before."""

    __slots__ = ("_state",)

    def __init__(self, state: ValidationState) -> None:
        self._state = state

    def __contains__(self, key: object) -> bool:
        state = self._state
        if not isinstance(key, str):
            return False
        if key in state.consumed:
            return True
        if any(i.lower() == key for i in state.consumed):
            return True
        return any(p.target.id.lower() == key for p in state.plan.prunes)


def _restates_live(merge: MergeProposal, sources: list[StoredEntry], state: ValidationState) -> bool:
    """The merged text is a live entry's other than its sources' (it would be folded into that entry)."""
    if state.live_texts is None or len(sources) != 1:
        return False
    probe = sources[0].entry.evolve(content=merge.content, category=_category(merge, sources))
    return state.live_texts.find(probe, {sources[0].id.lower()}) is not None


def offered_ids(offered: dict[str, StoredEntry]) -> list[str]:
    return [s.id for s in offered.values()]


def _refuse(state: ValidationState, sources: list[StoredEntry], kind: Refusal, why: str, content: str) -> None:
    """A useless or misleading merge (refusals.py): not checked, not saved, its sources shielded from pruning; no
    decline or rejection stamp (the model decided nothing usable about them)."""
    reason = f"{REASON_PREFIX[kind]}: {why}"
    log.info("refused merge of [%s] — %s. Sources kept. Merged text was: %s", _ids(sources), reason, shown(content))
    state.shielded.update(s.id for s in sources)
    state.refusals.append(
        Rejection(source_ids=[s.id for s in sources], missing=[], reason=reason, content=displayable(content[:500]))
    )


def _shown_about(entry: Entry) -> str:
    """What the offer showed about a source besides its content (its header line's values): a merge may repeat
    them without inventing anything."""
    times = [entry.created_at.strftime("%Y-%m-%d"), entry.seen_at.strftime("%Y-%m-%d")]
    times += [v for key in (SUBJECT_TIME, SUBJECT_TIME_START, SUBJECT_TIME_END) if (v := entry.meta(key))]
    return " ".join([entry.category or "", *entry.tags, *times])


def _reject(
    state: ValidationState,
    sources: list[StoredEntry],
    missing: list[str],
    reason: str,
    content: str,
    invented: list[str] | None = None,
) -> None:
    log.warning(
        "rejected merge of [%s] — %s: %s. Sources kept. Merged text was: %s",
        _ids(sources),
        reason,
        shown_all(missing or invented or []) if (missing or invented) else "-",
        shown(content),
    )
    state.shielded.update(s.id for s in sources)
    ids, kept = [s.id for s in sources], displayable(content[:500])
    state.rejections.append(
        Rejection(source_ids=ids, missing=missing, reason=reason, content=kept, invented=list(invented or []))
    )
    cluster = [s.id for s in sources]
    for s in sources:
        state.rejected_clusters[s.id] = cluster


def _category(merge: MergeProposal, sources: list[StoredEntry]) -> str | None:
    if merge.category:
        try:
            return validate_category(merge.category.strip().strip("/"))
        except InvalidCategoryError as exc:
            log.warning("merge proposed an invalid category (%s); using its first source's", exc)
    return sources[0].entry.category


def _merged_subject_time(sources: list[StoredEntry]) -> dict[str, str]:
    out: dict[str, str] = {}
    points = [v for s in sources if (v := s.entry.meta(SUBJECT_TIME))]
    if points:
        out[SUBJECT_TIME] = max(points, key=lambda p: (len(p), p))
    starts = sorted(v for s in sources if (v := s.entry.meta(SUBJECT_TIME_START)))
    if starts:
        out[SUBJECT_TIME_START] = starts[0]
    ends = sorted(v for s in sources if (v := s.entry.meta(SUBJECT_TIME_END)))
    if ends:
        out[SUBJECT_TIME_END] = ends[-1]
    return out


def _successor(merge: MergeProposal, content: str, sources: list[StoredEntry], state: ValidationState) -> Entry:
    """Merge arithmetic is the host's, never the model's: the model may raise importance, never lower it."""
    entries = [s.entry for s in sources]
    floor_importance = max(e.importance_score for e in entries)
    importance = floor_importance
    if merge.importance is not None:
        importance = max(floor_importance, min(1.0, max(0.0, float(merge.importance))))
    tags: list[str] = []
    for tag in [*merge.tags, *(t for e in entries for t in e.tags)]:
        if isinstance(tag, str) and tag.strip() and tag not in tags:
            tags.append(tag)
    now_text = format_timestamp(state.now)
    metadata = _merged_subject_time(sources)
    metadata.update(
        {
            MERGED_FROM: ",".join(s.id for s in sources),
            MERGED_AT: now_text,
            CREATED_BY_CYCLE: state.cycle_id,
            # Merged outputs are reviewed: re-offering them every cycle built RockBot's merge-of-merge chains.
            REVIEWED_HASH: review_hash(content),
            REVIEWED_AT: now_text,
        }
    )
    return Entry(
        id=new_entry_id(),
        content=content,
        category=_category(merge, sources),
        tags=tags,
        created_at=min(e.created_at for e in entries),
        updated_at=state.now,
        last_seen_at=max(e.seen_at for e in entries),
        reinforcement_count=reinforcement_sum(entries),
        importance_score=importance,
        metadata=metadata,
    )


def _validate_prune(raw_id: str, offered: dict[str, StoredEntry], gating: GatingResult, state: ValidationState) -> None:
    stored = offered.get(id_key(raw_id))
    if stored is not None and in_offer_notation(raw_id):
        reason = f"{REASON_PREFIX['notation']}: a prune naming {shown(raw_id)} in the offer's notation, not as an id"
        log.info("refused prune of %s — %s; kept", stored.id, reason)
        state.shielded.add(stored.id)
        state.refusals.append(Rejection(source_ids=[stored.id], missing=[], reason=reason))
        return
    if stored is None:
        log.info("prune names %r, which was not offered this cycle; ignored", shown(raw_id))
        return
    entry = stored.entry
    if stored.id in state.fold_targets:
        log.info("ignored prune of %s — a merge in this pass was folded into it", stored.id)
        return
    if stored.id in state.consumed or any(p.target.id == stored.id for p in state.plan.prunes):
        return  # already leaving as a merge source (RockBot's prompt lists sources in toDelete too)
    if stored.id in state.shielded:
        log.info("refused to prune %s — source of a rejected merge; kept", stored.id)
        return
    if stored.id in gating.merge_only:
        state.merge_only_ignored += 1
        log.info("ignored prune of %s — member of a reopened duplicate cluster (merge-only)", stored.id)
        return
    floor = state.settings.floor
    if floor.protects(entry):
        _protect(state, stored, f"above the high-value floor ({floor.describe(entry)})")
        return
    if stored.id in state.left_floor:
        # RockBot's prune check reads the snapshot from before its decay pass: protected for the rest of this cycle.
        _protect(state, stored, f"decayed below the high-value floor this cycle ({floor.describe(entry)})")
        return
    if state.settings.is_protected_category(entry.category):
        _protect(state, stored, f"protected category {entry.category}")
        return
    state.plan.prunes.append(PruneAction(stored))


def _protect(state: ValidationState, stored: StoredEntry, why: str) -> None:
    entry = stored.entry
    log.info(
        "refused to prune %s (%s, importance=%.2f, reinforced=%dx) — %s: %s",
        stored.id,
        entry.category or "uncategorized",
        entry.importance_score,
        entry.reinforcement_count,
        why,
        shown(entry.content),
    )
    state.protections.append(Protection(id=stored.id, reason=why))


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
        successor = merged_inventory(merge.successor.content)
        lost = _vanishing(merge.sources, corpus, state.vocabulary, successor)
        if lost:
            state.census_refusals += 1
            corpus.refuse(merge)
            for s in merge.sources:
                state.consumed.discard(s.id)
            _reject(state, merge.sources, lost, "census: would vanish from the live corpus", merge.successor.content)
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


def _vanishing(
    entries: Sequence[StoredEntry], corpus: _CensusCorpus, vocabulary: Vocabulary, successor: Inventory | None
) -> list[str]:
    """Specifics of ``entries`` the planned corpus no longer says, first spelling once each, in order."""
    return [s.text for s in _vanishing_specifics(entries, corpus, vocabulary, successor)]


def _vanishing_specifics(
    entries: Sequence[StoredEntry], corpus: _CensusCorpus, vocabulary: Vocabulary, successor: Inventory | None
) -> list[Specific]:
    """`_vanishing`, as the specifics themselves (their kinds decide a prune).

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
