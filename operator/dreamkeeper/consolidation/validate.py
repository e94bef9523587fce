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

from dreamkeeper.consolidation.census import census
from dreamkeeper.consolidation.decisions import Decisions, ValidationState, joined_ids, reject_merge
from dreamkeeper.consolidation.fold import LiveTexts, fold_merge_into, reinforcement_sum
from dreamkeeper.consolidation.gating import GatingResult
from dreamkeeper.consolidation.plan import MergeAction, PruneAction
from dreamkeeper.consolidation.proposal import Batch, BatchReply, MergeProposal, Proposer, RepairRequest
from dreamkeeper.consolidation.quarantine import displayable, unencodable
from dreamkeeper.consolidation.refusals import REASON_PREFIX, Refusal, in_offer_notation, useless
from dreamkeeper.consolidation.replies import BatchOutcome, batch_outcome, id_key
from dreamkeeper.consolidation.report import Protection, Rejection
from dreamkeeper.consolidation.sourceless import log_refused, log_saved, sourceless_entry
from dreamkeeper.consolidation.successor_gaps import successor_gaps
from dreamkeeper.coverage import (
    SourceText,
    find_invented_specifics,
    find_missing_specifics,
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
        reject_merge(state, sources, [], f"could not be checked ({type(exc).__name__}: {exc})", merge.content)


async def _validate_merge(
    merge: MergeProposal,
    offered: dict[str, StoredEntry],
    batch: Batch,
    proposer: Proposer,
    state: ValidationState,
) -> None:
    sources = _resolve(merge.source_ids, offered, "merge")
    if not merge.content.strip():
        log.warning(
            "dropping merge with blank content; its %d source(s) are kept: [%s]", len(sources), joined_ids(sources)
        )
        state.shielded.update(s.id for s in sources)
        return
    if not sources:
        _save_sourceless(merge, batch, state)
        return
    if any(unencodable(text) for text in (merge.content, merge.category or "", *merge.tags)):
        reject_merge(state, sources, [], "merged text holds a lone surrogate, which UTF-8 cannot hold", merge.content)
        return
    refusal = useless(
        merge.content, merge.source_ids, sources, offered_ids(offered), _restates_live(merge, sources, state)
    )
    if refusal is not None:
        _refuse(state, sources, *refusal, merge.content)
        return
    overlap = [s for s in sources if s.id in state.consumed or s.id in state.fold_targets]
    if overlap:
        reject_merge(state, sources, [], f"sources [{joined_ids(overlap)}] already merged this cycle", merge.content)
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
                    joined_ids(sources),
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
                log.info(
                    "repair of [%s] still fails its checks; the first proposal was: %s", joined_ids(sources), first
                )
                content, missing, invented = revised, still, still_invented
    suffix = " after repair" if attempted else ""
    if missing:
        reject_merge(state, sources, missing, f"dropped {len(missing)} specific(s){suffix}", content, invented)
        return
    if invented:
        state.invented_merges += 1
        reason = f"states {len(invented)} specific(s) no source states{suffix}"
        reject_merge(state, sources, [], reason, content, invented)
        return
    successor = _successor(merge, content, sources, state)
    state.consumed.update(s.id for s in sources)
    if _fold_into_live(MergeAction(successor, sources, repaired, batch.index), state):
        return
    action = MergeAction(successor, sources, repaired, batch.index)
    state.plan.merges.append(action)
    state.gaps[successor.id] = successor_gaps(action, state.vocabulary)  # its inventory is at hand now


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
        joined_ids(sources),
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
    log.info(
        "refused merge of [%s] — %s. Sources kept. Merged text was: %s", joined_ids(sources), reason, shown(content)
    )
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
