"""One consolidation cycle, as stages that take and return values (``stages.py``):

    (pause) → (recover) → (ingest) → vocabulary → (purge) → snapshot → repair → [held plan?] → fold → decay → gate
    → subsume → propose → validate → cap (blast radius) → apply | plan → (render) → measure

A memory format (``CycleOptions.format``) decides where the entries are: RockBot's files are the store, and ingest
and render do nothing; a Markdown profile's units are records in ``AGENT_DIR/.dreamkeeper/units``, ingested from the
agent's files first and rendered back into them after apply (``dreamkeeper.formats``).

The proposer is consulted once per batch and trusted with nothing. What touches the disk is the cycle's
``Effects``: ``Writes`` (``writes.py``), or the dry run's ``DryRun`` (``dryrun.py``), which changes nothing — the
only place a dry run differs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from dreamkeeper.consolidation.agent_view import agent_view
from dreamkeeper.consolidation.blast import HeldPlan, exceeds, live_drop
from dreamkeeper.consolidation.census import census
from dreamkeeper.consolidation.clock import ClockCheck, check_clock
from dreamkeeper.consolidation.cluster_cache import ClusterCache, cache_path
from dreamkeeper.consolidation.clustering import Cluster
from dreamkeeper.consolidation.collector import CycleCollector
from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.cycle_options import CycleOptions, CycleOutcome, new_cycle_id
from dreamkeeper.consolidation.cycle_proposal import ProposalStages
from dreamkeeper.consolidation.decay_dues import plan_decay_due
from dreamkeeper.consolidation.decisions import Decisions
from dreamkeeper.consolidation.dryrun import DryRun
from dreamkeeper.consolidation.embed_stage import embed_missing, embed_written
from dreamkeeper.consolidation.final_state import FinalState
from dreamkeeper.consolidation.fold import plan_folds
from dreamkeeper.consolidation.gating import select_candidates
from dreamkeeper.consolidation.invariant import invariant_error
from dreamkeeper.consolidation.journal import (
    incomplete_journals,
)
from dreamkeeper.consolidation.pacing import LossBudget, loss_budget, pace_folds
from dreamkeeper.consolidation.pause import PauseMarker, read_pause_marker
from dreamkeeper.consolidation.plan import FoldAction, Plan
from dreamkeeper.consolidation.proposal import Proposer
from dreamkeeper.consolidation.quarantine import screened
from dreamkeeper.consolidation.quiet import DECAY, FOLD, QuietMemo
from dreamkeeper.consolidation.recovery import read_ledger, recover, sweep_leftovers
from dreamkeeper.consolidation.report import CycleResult, duplicate_backlog, log_summary
from dreamkeeper.consolidation.scope import scope_ids, scoped
from dreamkeeper.consolidation.stages import (
    Applied,
    Approved,
    Capped,
    CycleContext,
    Decayed,
    Effects,
    Embedded,
    Folded,
    Gated,
    ReportHead,
    Skipped,
    Snapshot,
    Stages,
    Validated,
    VocabularyLoaded,
    compose_report,
    unusable_files,
)
from dreamkeeper.consolidation.writes import Writes
from dreamkeeper.coverage import load_vocabulary
from dreamkeeper.formats import ROCKBOT
from dreamkeeper.memory import (
    RESTORED_BY_HAND,
    MemoryStore,
    StoredEntry,
    embedding_file_name,
    open_corpus_index,
    utcnow,
)

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger(__name__)


class Cycle(ProposalStages):
    def __init__(self, options: CycleOptions, proposer: Proposer) -> None:
        self.options = options
        self.proposer = proposer
        self.settings = options.settings
        self.agent_dir = options.agent_dir
        # Unchanged files are not parsed again (memory/corpus_index.py); ``corpus_index=False`` reads every file.
        index = open_corpus_index(self.agent_dir, options.memory_root) if options.corpus_index else None
        self.store = MemoryStore(options.memory_root, index)
        if index is not None:
            index.on_scanned = self._freeze  # the snapshot's objects, frozen as soon as they are read
        self.now = options.now or utcnow()
        self.cycle_id = new_cycle_id(self.now)
        rockbot = self.settings.rockbot
        if options.memory_format.name != ROCKBOT:
            # Another agent's directory: RockBot's configuration files are not read there (its defaults stand).
            rockbot = rockbot.model_copy(update={"read_agent_settings": False})
        self.agent = agent_view(self.agent_dir, rockbot)
        for note in self.agent.notes:
            log.warning("agent settings: %s", note)
        self.context = CycleContext(
            cycle_id=self.cycle_id,
            agent_dir=self.agent_dir,
            store=self.store,
            settings=self.settings,
            now=self.now,
            clock_given=options.now is not None,
            stage=self._stage,
            memory_format=options.memory_format,
            agent=self.agent,
        )
        self.effects: Effects = DryRun(self.context) if options.dry_run else Writes(self.context)
        self.stages = Stages()
        self._head = ReportHead(self.cycle_id, str(self.agent_dir), proposer.name, self.now, self.agent.described())
        self._collector = CycleCollector()  # the cyclic collector kept off what the stages build (collector.py)
        self.clock = ClockCheck(self.now)  # checked once recovery is done (``check_clock``)
        self._budget: LossBudget | None = None  # RockBot's audit's loss budget for this cycle (pacing.py)
        self._fold_waiting = 0
        self._clusters_cached: ClusterCache | None = None
        self._quiet: QuietMemo | None = None  # created by the first stage given the snapshot's live list
        self._contents: list[tuple[list[StoredEntry], str]] = []  # the lists whose content generation is known
        self._scanned: str | None = None  # the content generation of the snapshot's scan, once worked out

    def _stage(self, name: str) -> None:
        log.debug("cycle %s: %s", self.cycle_id, name)
        if self._collector.held:
            # What the stages so far built and kept (memos, clusters, the plan) lives on as long as the snapshot:
            # frozen with it, so the cyclic collector's full collections stop walking it again and again (a cold
            # 10k cycle: 7 full collections cost 0.7 CPU s and found 10 objects; issue 27). Reference counting
            # still frees what a stage drops; only cyclic garbage made before this point waits for the thaw.
            self._collector.freeze()
        if self.options.progress:
            self.options.progress(name)

    async def run(self) -> CycleOutcome:
        memory_format = self.context.memory_format
        if memory_format.name != ROCKBOT:
            memory_format.check(self.agent_dir)  # the agent's Markdown directory (the records are made by ingest)
        elif not self.options.memory_root.is_dir():
            raise FileNotFoundError(f"no memory directory at {self.options.memory_root}; nothing was changed")
        with self.effects.hold():
            try:
                return await self._run_stages()
            except Exception as exc:
                failed = compose_report(
                    self._head,
                    self.stages,
                    "failed",
                    finished_at=utcnow(),
                    error=f"{type(exc).__name__}: {exc}",
                    first_write_at=self.effects.first_write_at,
                )
                self.effects.record_failure(failed, exc)
                raise
            finally:
                self._thaw()
                await self.proposer.aclose()
                if self.options.embedder is not None:
                    await self.options.embedder.aclose()

    async def _run_stages(self) -> CycleOutcome:
        s, effects = self.stages, self.effects
        if (marker := read_pause_marker(self.agent_dir, self.agent.pause_marker)) is not None:
            return self._paused(marker)
        s.recovered = effects.recover()
        self.clock = check_clock(
            self.agent_dir,
            self.now,
            read_ledger(self.agent_dir),
            timedelta(days=self.settings.clock_max_gap_days) if self.settings.clock_max_gap_days > 0 else None,
            trust=self.options.trust_clock,
        )
        if not self.options.force and (reason := effects.too_soon()) is not None:
            return self._skipped(reason)
        s.ingested = effects.ingest()
        s.vocabulary = self._load_vocabulary()
        s.purged = effects.purge(s.vocabulary.vocabulary, self.clock)
        s.snapshot = effects.snapshot(s.purged)
        self._freeze()  # the snapshot lives for the whole cycle
        # The repair first: it only puts the agent's own write-backs right, and a held plan is judged against the
        # corpus as repaired (a repair that touched what the plan read makes the plan stale, so it is planned afresh).
        s.repaired = effects.repair(s.snapshot, self._memo(), self._scan_generation(s.snapshot))
        waiting = effects.pending_hold()
        if waiting is not None and (outcome := self._resolve_hold(waiting, s.repaired.snapshot)) is not None:
            return outcome
        if s.approved is not None and s.approved.apply:
            repaired = s.repaired.snapshot
            s.folded = Folded(repaired.scan, repaired.live)
            held_plan = s.approved.held.plan(repaired.live)
            s.validated = Validated(Decisions(), held_plan, s.vocabulary.vocabulary)
            s.capped = Capped(s.validated)
        else:
            s.folded = self._fold(s.repaired.snapshot)
            s.decayed = self._decay(s.folded)
            s.embedded = await self._embed_missing(s.decayed)
            s.gated = self._gate(s.decayed)
            s.subsumed = self._subsume(s.gated, s.vocabulary.vocabulary)
            s.proposed = await self._propose(s.gated, s.decayed, s.subsumed)
            s.validated = await self._validate(s.gated, s.proposed, s.decayed, s.vocabulary.vocabulary, s.subsumed)
            s.capped = self._cap(s.decayed.live, s.validated)
        s.usage = self._usage()
        s.applied = effects.apply(s.folded, s.capped.validated)
        s.reembedded = await self._embed_written(s.folded, s.applied)
        s.rendered = effects.render()
        s.measured = effects.measure(s.snapshot, s.folded, s.applied, s.validated)
        # An approved hold gated nothing: its corpus is clustered for the backlog alone.
        clusters = s.gated.gating.all_clusters if s.gated else self._clusters(s.folded.live)
        backlog = duplicate_backlog(clusters, s.applied.plan)
        s.measured = replace(s.measured, counts=s.measured.counts + CycleCounts(duplicate_backlog=backlog))
        report = compose_report(
            self._head, s, self._result(s.validated), finished_at=utcnow(), first_write_at=effects.first_write_at
        )
        broken = invariant_error(report)
        if report.write_failures or broken is not None:
            # Every change that could be made was, and the journal is complete; but a cycle the filesystem would not
            # let write (a read-only tree, files it may not replace) has failed, and says so. An entry that cannot be
            # written back (its own content) only fails its own step: one bad entry never stops a cycle. So has a
            # cycle whose end-of-run invariant found a loss (even one it reversed): a stage slipped.
            first = next((n for n in report.notes if n.startswith("not written: ")), "")
            error = f"{report.write_failures} change(s) could not be written; {first}".rstrip("; ")
            if broken is not None:
                error = broken if not report.write_failures else f"{error}; {broken}"
            report = compose_report(
                self._head,
                s,
                "failed",
                finished_at=report.finished_at,
                error=error,
                first_write_at=effects.first_write_at,
            )
        path = effects.record(report)
        index = self.store.corpus_index
        if self._quiet is not None and report.result == "completed" and not self.options.dry_run and index:
            self._quiet.save(index.generation)  # a files generation's answers: only if the next load sees it
        log_summary(report)
        decided = s.validated.plan if s.validated else None
        return CycleOutcome(report, s.applied.plan, s.gated.gating if s.gated else None, path, decided)

    # ---- the blast radius (blast.py) -----------------------------------------------------------------------

    def _cap(self, live: list[StoredEntry], validated: Validated) -> Capped:
        """A plan taking too much of the live corpus out is not applied: kept for a human, nothing archived.
        ``live`` is the corpus the plan was made from (after the fold and the decay); a held plan remembers it as
        the decay's writes leave it (written here, alone), so that an approval finds it unchanged."""
        self._stage("blast-radius")
        settings, plan = self.settings, validated.plan
        drop = live_drop(plan)
        # Paced (pacing.py): past what RockBot's audit allows before its next run, the plan is held as well.
        paced = self._budget is not None and drop > self._budget.left
        if not paced and not exceeds(drop, len(live), settings.archive_cap, settings.archive_cap_min_entries):
            return Capped(validated)
        live = self.effects.write_decays(live)
        held = HeldPlan.of(self.cycle_id, self.now, plan, live, settings.archive_cap)
        self.effects.keep_hold(held)
        why = f" (paced: {self._budget.describe()}, {self._budget.left} left)" if paced and self._budget else ""
        note = f"held for approval: {held.describe()}{why}; approve with approve_hold={held.cycle_id}"
        log.warning("blast radius: %s", note)
        nothing = Validated(
            validated.decisions,
            Plan(),
            validated.vocabulary,
            validated.declined,
            undecided=validated.undecided,
            undecided_entries=validated.undecided_entries,
        )
        return Capped(nothing, held, CycleCounts(held=drop), (note,))

    def _resolve_hold(self, waiting: HeldPlan, snapshot: Snapshot) -> CycleOutcome | None:
        """A plan waits: applied when approved and the corpus is unchanged; discarded when the corpus changed (the
        cycle plans afresh); otherwise the cycle is skipped (no proposer is asked again for the same corpus)."""
        changed = waiting.changed(snapshot.live)
        if changed:
            note = f"held plan of cycle {waiting.cycle_id} discarded: {len(changed)} entr(ies) changed since"
            log.warning("blast radius: %s (%s)", note, ", ".join(changed[:5]))
            self.effects.settle_hold(waiting, "stale")
            self.stages.approved = Approved(waiting, apply=False, notes=(note,))
            return None
        if self.options.approve_hold == waiting.cycle_id:
            note = f"applied the plan held by cycle {waiting.cycle_id} (approved; the corpus was unchanged)"
            log.info("blast radius: %s", note)
            self.stages.approved = Approved(waiting, notes=(note,))
            self.effects.settle_hold(waiting, "applied")
            return None
        return self._skipped(
            f"a plan is held for approval: {waiting.describe()}; approve it with approve_hold={waiting.cycle_id}"
        )

    def _result(self, validated: Validated) -> CycleResult:
        """What a cycle that ran to the end reports: proposer-failed when the model was asked and no reply was
        usable (#18: every request failed and the cycle said completed, exit 0); a dry run stays a dry run."""
        result = self.effects.result
        if result == "completed" and validated.decisions.batches.failure is not None:
            return "proposer-failed"
        return result

    # ---- stages shared by a real cycle and a dry run ----------------------------------------------------------

    def _paused(self, marker: PauseMarker) -> CycleOutcome:
        """The agent's memory audit paused consolidation: nothing is written under memory/, not even recovery.

        The marker means entries vanished and a person has to look; the files are left exactly as the audit saw
        them. A cycle interrupted earlier stays half-applied, which loses nothing (successors are created before
        their sources are archived): it is finished by the first cycle after the marker is removed, or by
        ``dreamkeeper recover`` run by hand."""
        log.warning("memory consolidation %s", marker.describe())
        notes = tuple(
            f"journal {path.name} of an interrupted cycle left unfinished while paused (finished by the next cycle "
            "after the marker is removed, or by `dreamkeeper recover`)"
            for path in incomplete_journals(self.agent_dir)
        )
        return self._skipped(marker.describe(), paused=marker, notes=notes)

    def _skipped(self, reason: str, *, paused: PauseMarker | None = None, notes: tuple[str, ...] = ()) -> CycleOutcome:
        log.info("memory consolidation skipped — %s", reason)
        # Skipped for a held plan, the cycle has just read the corpus (and repaired it): that scan is counted.
        repaired = self.stages.repaired
        scan = repaired.snapshot.scan if repaired is not None else screened(self.store.scan(), self.store.root)
        live = len(scan.live)
        counts = CycleCounts(
            total=live,
            live_entries=live,
            archived_entries=len(scan.archived),
            paused=1 if paused is not None else 0,
        ) + unusable_files(scan)
        self.stages.skipped = Skipped(reason, counts, paused, notes)
        report = compose_report(
            self._head, self.stages, "skipped", finished_at=utcnow(), first_write_at=self.effects.first_write_at
        )
        broken = invariant_error(report)  # what recovery did before the skip is checked all the same
        if broken is not None:
            report = compose_report(
                self._head, self.stages, "failed", finished_at=report.finished_at, error=broken,
                first_write_at=self.effects.first_write_at,
            )  # fmt: skip
        return CycleOutcome(report, report_path=self.effects.record(report))

    def _load_vocabulary(self) -> VocabularyLoaded:
        self._stage("vocabulary")
        path = Path(self.settings.vocabulary_path)
        if not path.is_absolute():
            path = self.agent_dir / path
        loaded = load_vocabulary(path)
        if loaded.status != "fallback":
            return VocabularyLoaded(loaded.vocabulary, loaded.status)
        return VocabularyLoaded(
            loaded.vocabulary,
            loaded.status,
            CycleCounts(vocabulary_fallback=1),
            (f"vocabulary fallback: {loaded.error}",),
        )

    def _fold(self, snapshot: Snapshot) -> Folded:
        """Exact duplicates, planned here; executed (or, in a dry run, only taken out of the corpus) by the effects."""
        self._stage("fold")
        folds = self._plan_folds(snapshot)
        paced = CycleCounts(fold_paced=self._fold_waiting)
        if not folds:
            return Folded(snapshot.scan, snapshot.live, counts=paced)
        folded = self.effects.fold(snapshot, folds)
        return replace(folded, counts=folded.counts + paced)

    def _plan_folds(self, snapshot: Snapshot) -> list[FoldAction]:
        # Restored by a person: never folded again, so the restore sticks (issue 22).
        quiet, generation = self._memo(), self._content_generation(snapshot.live)
        if quiet is not None and quiet.unchanged(FOLD, generation, self.now):
            folds: list[FoldAction] = []  # the last cycle over this very corpus found no exact duplicate (quiet.py)
        else:
            unrestored = [s for s in snapshot.live if RESTORED_BY_HAND not in (s.entry.metadata or {})]
            folds = plan_folds(scoped(unrestored, self.settings.scope), self.settings, self.now)
            if not folds and quiet is not None:
                quiet.found_nothing(FOLD, generation)
        if self.settings.rockbot.pace_audit_loss:
            self._budget = loss_budget(
                self.agent_dir, self.agent, len(snapshot.live), self.settings.rockbot.read_agent_settings
            )
        folds, self._fold_waiting = pace_folds(folds, self._budget)
        for fold in folds:
            log.info(
                "folded %d exact duplicate(s) [%s] into %s",
                len(fold.copies),
                ", ".join(c.id for c in fold.copies),
                fold.survivor.id,
            )
        if folds:
            n_copies = sum(len(f.copies) for f in folds)
            log.info("exact-duplicate fold — %d copy(s) folded across %d group(s)", n_copies, len(folds))
        return folds

    def _decay(self, folded: Folded) -> Decayed:
        """Importance decay, planned here and written with the plan's writes (or, in a dry run, only shown) by the
        effects; the report counts what was written."""
        self._stage("decay")
        if self.settings.decay.active and not self.clock.allows:
            refusal = self.clock.refusal("decay")
            log.warning("importance decay pass — %s", refusal)
            return Decayed(folded.live, counts=CycleCounts(clock_refusals=1), notes=(refusal,))
        quiet, files = self._memo(), self._generation(folded.live)
        if quiet is not None and quiet.unchanged(DECAY, files, self.now):
            return Decayed(folded.live)  # the last cycle over this very corpus showed no write due before now
        live, settings = scoped(folded.live, self.settings.scope), self.settings
        # Only the entries whose due the corpus index says has come (decay_dues.py).
        plan, quiet_until = plan_decay_due(live, settings.decay, settings.floor, self.now, self.store.corpus_index)
        if not plan.actions:
            if quiet is not None and (until := quiet_until()) != self.now:
                quiet.found_nothing(DECAY, files, until=until, files=True)
            return Decayed(folded.live)
        decayed = self.effects.decay(folded, plan)
        log.info(
            "importance decay pass — %d entries decayed (%d left the high-value floor)",
            len(plan.actions),
            len(plan.left_floor),
        )
        return decayed

    def _gate(self, decayed: Decayed) -> Gated:
        self._stage("gating")
        live = decayed.live
        in_scope = scope_ids(live, self.settings.scope)
        # Restored by a person: never offered again (merged or pruned), so the restore sticks (issue 22).
        restored = {s.id for s in live if s.restored_by_hand}
        if restored:
            log.info("%d entr(ies) restored by hand are not offered for merging or pruning", len(restored))
            in_scope = frozenset((in_scope if in_scope is not None else {s.id for s in live}) - restored)
        gating = select_candidates(
            live,
            self.settings,
            self.now,
            self._embedding_loader(),
            in_scope,
            self._cluster_cache(),
            self._content_generation(live),
            self._memo(),
        )
        log.info(
            "consolidation reviewing %d of %d entries (%d withheld as reviewed-and-unchanged)",
            len(gating.eligible),
            len(live) if in_scope is None else len(in_scope),
            gating.withheld,
        )
        counts = CycleCounts(
            reviewed=len(gating.eligible),
            withheld=gating.withheld,
            backoff_held=gating.held,
            clusters=len(gating.clusters),
            reopened=len(gating.reopened),
        )
        return Gated(gating, counts)

    def _generation(self, live: list[StoredEntry]) -> str | None:
        """The corpus index's generation of the snapshot's scan, when ``live`` is that scan's live list itself
        (no stage changed the corpus since: a repair, a fold or a decay makes a new list)."""
        snapshot = self.stages.snapshot
        return snapshot.scan.generation if snapshot is not None and live is snapshot.live else None

    def _memo(self) -> QuietMemo | None:
        """The memo of what earlier cycles found nothing to do about (quiet.py); None without a corpus index (no
        generation can be known)."""
        if self.store.corpus_index is None:
            return None
        if self._quiet is None:
            self._quiet = QuietMemo(self.agent_dir, self.settings)
        return self._quiet

    def _content_generation(self, entries: list[StoredEntry]) -> str | None:
        """The content generation of ``entries`` (memory/content_digests.py): what they say but decay's two values,
        so a cycle after decay's own rewrites names the corpus as the one before it did. The snapshot's own live list
        is its scan's live part (``live_of``: a function of what the entries say), so it is named by the scan's
        content generation (one pass over the corpus, not two)."""
        snapshot = self.stages.snapshot
        if snapshot is not None and entries is snapshot.live:
            generation = self._scan_generation(snapshot)
            if generation is not None and not any(base is entries for base, _ in self._contents):
                self._contents.append((entries, generation))  # a list decay makes of it is derived from it
            return generation
        return self._asked_content(entries, None)

    def _scan_generation(self, snapshot: Snapshot) -> str | None:
        """The content generation of every file the snapshot's scan parsed (its entries, then its duplicates); for
        the cycle's own snapshot, worked out once."""
        own = snapshot is self.stages.snapshot
        if own and self._scanned is not None:
            return self._scanned
        generation = self._asked_content([*snapshot.scan.entries, *snapshot.scan.duplicates], "scan" if own else None)
        if own:
            self._scanned = generation
        return generation

    def _asked_content(self, entries: list[StoredEntry], name: str | None) -> str | None:
        index, memo = self.store.corpus_index, self._memo()
        if index is None or memo is None:
            return None
        known = self._contents
        for base, generation in known:
            if base is entries:
                return generation
        snapshot = self.stages.snapshot
        files = snapshot.scan.generation if snapshot is not None and name is not None else None
        found = memo.contents(files).get(name) if files is not None and name is not None else None
        # A cycle over these very files worked it out; else a list decay made from one already known (its copies
        # differ in importance and updatedAt alone); else digested.
        for base, generation in known if found is None else ():
            found = index.derived_generation(entries, base, generation)
            if found is not None:
                break
        if found is None:
            found = index.content_generation(entries)
        if files is not None and name is not None:
            memo.learn_contents(files, name, found)
        known.append((entries, found))  # held, so its identity stays its own for the cycle
        return found

    def _clusters(self, live: list[StoredEntry]) -> list[Cluster]:
        loader = self._embedding_loader()
        return select_candidates(live, self.settings, self.now, loader, cache=self._cluster_cache()).all_clusters

    def _cluster_cache(self) -> ClusterCache:
        """The clusters of the last cycle's corpus, reused while it is unchanged (cluster_cache.py); a dry run
        reads it and never writes it."""
        if self._clusters_cached is None:
            generated = self.stages.embedded.vectors if self.stages.embedded is not None else {}
            self._clusters_cached = ClusterCache(
                cache_path(self.agent_dir), self.store.embeddings_dir, generated, read_only=self.options.dry_run
            )
        return self._clusters_cached

    def _embedding_loader(self) -> Callable[[str], np.ndarray | None]:
        listed: list[frozenset[str]] = []  # the vector directory, listed on the first load (a settled cycle loads none)
        generated = self.stages.embedded.vectors if self.stages.embedded is not None else {}

        def load(entry_id: str) -> np.ndarray | None:
            if entry_id in generated:  # this cycle's (in a dry run, never written)
                return generated[entry_id]
            if not listed:
                listed.append(self.store.embedding_files())
            # Listed first: most entries of a corpus may have no embedding, and a failed open costs more than a read.
            present = listed[0]
            return self.store.load_embedding(entry_id) if embedding_file_name(entry_id).casefold() in present else None

        return load

    async def _embed_missing(self, decayed: Decayed) -> Embedded:
        if self.options.embedder is None:
            return Embedded()
        self._stage("embeddings")
        return await embed_missing(self.store, decayed.live, self.options.embedder, self.effects.write_embeddings)

    async def _embed_written(self, folded: Folded, applied: Applied) -> Embedded | None:
        if self.options.embedder is None:
            return None
        self._stage("embeddings")
        return await embed_written(folded, applied, self.options.embedder, self.effects.write_embeddings)

    def _freeze(self) -> None:
        """Move everything alive (the parsed snapshot above all) out of the cyclic collector's reach until the cycle
        ends: the snapshot lives for the whole cycle, and every full collection walked all of it again (about a
        sixth of a 100k-entry scan's CPU). Reference counting still frees whatever is dropped meanwhile. From here
        on the young collections run less often too (collector.py)."""
        if not self._collector.held:
            self._collector.freeze()

    def _thaw(self) -> None:
        self._collector.thaw()


async def run_cycle(options: CycleOptions, proposer: Proposer) -> CycleOutcome:
    memory_format = options.memory_format
    if options.dry_run and memory_format.name != ROCKBOT:
        # A dry run writes nothing, the records included: it plans on a throwaway copy of them, ingested.
        memory_format.check(options.agent_dir)
        with memory_format.preview(options.agent_dir, options.now or utcnow()) as records:
            preview = replace(options, format=None, memory_dir=records)
            return await Cycle(preview, proposer).run()
    return await Cycle(options, proposer).run()


__all__ = [
    "Cycle",
    "CycleOptions",
    "CycleOutcome",
    "FinalState",
    "Writes",
    "census",
    "read_ledger",
    "recover",
    "run_cycle",
    "sweep_leftovers",
]
