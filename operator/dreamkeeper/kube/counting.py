"""Counting finished cycle Jobs: once per Job UID, in the status write that records the UID (see ``reconcile.py``).

Moved out of ``reconcile.py`` unchanged (a module per concern).
"""

from __future__ import annotations

import logging
from typing import Any

from dreamkeeper.consolidation import COUNTS, sentence, value_of
from dreamkeeper.kube import (
    LABEL_TRIGGER,
)
from dreamkeeper.kube.conditions import (
    LAST_RUN_SUCCEEDED,
    VOCABULARY_IN_SYNC,
)
from dreamkeeper.kube.models import (
    MAX_COUNTED_UIDS,
    JobRef,
    RunSummary,
    Totals,
    VocabularyState,
)
from dreamkeeper.kube.objects import (
    Job,
    creation_order,
    labels_of,
    owned_by,
)
from dreamkeeper.kube.passes import ReconcilerBase, _is_counted, _Pass, _ref
from dreamkeeper.kube.results import (
    JobOutcome,
    add_run,
    job_active,
    job_finished,
    outcome_of,
)

log = logging.getLogger(__name__)

# A cycle archiving more than this fraction of the live corpus gets a Warning Event ("a few percent"); the hold
# itself is the engine's archive_cap (consolidation/blast.py, default 10%).
MANY_ARCHIVED_FRACTION = 0.03


class Counting(ReconcilerBase):
    # ---- counting ---------------------------------------------------------------------------------------------

    def _account(self, p: _Pass) -> list[Job]:
        """Count every finished, uncounted Job of this schedule; adopt an active one. Returns the claim's Jobs."""
        jobs = self.jobs.claim_jobs(p.namespace, p.schedule.claim)
        p.listed = True
        owned = sorted((j for j in jobs if owned_by(j, p.schedule.uid)), key=creation_order)
        p.owned_jobs = owned
        counted_uids = set(p.status.counted_job_uids or [])
        for job in owned:
            if job_finished(job):
                self._settle(p, job, counted_uids)
        lost = _vanished(p.status.active_job, owned, counted_uids)
        if lost is not None:
            self._count_lost(p, lost)
        own_active = [j for j in owned if job_active(j)]
        p.running = bool(own_active)
        p.update(active_job=_ref(own_active[-1]) if own_active else None)
        return jobs

    def _settle(self, p: _Pass, job: Job, counted_uids: set[str]) -> None:
        """A finished Job: counted at first sight; re-marked when only its counted annotation was lost."""
        if _is_counted(job):
            return
        if job["metadata"]["uid"] in counted_uids:
            p.to_annotate.append(job)
        else:
            self._count_job(p, job)

    def _count_job(self, p: _Pass, job: Job) -> None:
        meta = job["metadata"]
        job_uid = meta["uid"]
        pods = self.api.list_pods(p.namespace, f"batch.kubernetes.io/controller-uid={job_uid}")
        if not pods:  # clusters before 1.27 label pods with the legacy key only
            pods = self.api.list_pods(p.namespace, f"controller-uid={job_uid}")
        trigger = labels_of(job).get(LABEL_TRIGGER, "schedule")
        self._record(p, job, outcome_of(job, pods, job_name=meta["name"], job_uid=job_uid, trigger=trigger))

    def _count_lost(self, p: _Pass, ref: JobRef) -> None:
        """The Job we were tracking vanished before it was counted: a failed cycle, counted once."""
        outcome = outcome_of(None, [], job_name=ref.name, job_uid=ref.uid, trigger=ref.trigger)
        self._record(p, None, JobOutcome(outcome.run.model_copy(update={"slot": ref.slot}), None))

    def _record(self, p: _Pass, job: Job | None, outcome: JobOutcome) -> None:
        run = outcome.run
        uids = [*(p.status.counted_job_uids or []), run.job_uid][-MAX_COUNTED_UIDS:]
        totals = add_run(p.status.totals or Totals(), run)
        changes: dict[str, Any] = {"counted_job_uids": uids, "totals": totals, "last_run": run}
        if outcome.succeeded and run.finished_at is not None:
            changes["last_successful_time"] = max(filter(None, [p.status.last_successful_time, run.finished_at]))
        p.update(**changes)
        p.counted.append((job, outcome))
        if job is not None:
            p.to_annotate.append(job)
        detail = run.error or run.skip_reason
        log.info(
            "%s/%s: Job %s finished: %s (%s)%s; %s",
            p.namespace, p.name, run.job_name, run.result, run.reason, f": {detail}" if detail else "",
            sentence(run, lambda c: c.said),
        )  # fmt: skip
        self.agents.note_run(p, p.schedule.spec, run)
        self._conditions_for_run(p, outcome)
        self._events_for_run(p, run)

    def _conditions_for_run(self, p: _Pass, outcome: JobOutcome) -> None:
        run = outcome.run
        detail = run.error or run.skip_reason or ""
        message = f"{run.result} ({run.job_name})" + (f": {detail}" if detail else "")
        p.condition(LAST_RUN_SUCCEEDED, "True" if outcome.succeeded else "False", run.reason, message)
        seed = outcome.seed
        if seed is None:
            return
        expected = self._expected_vocabulary_sha(p)
        state = VocabularyState(
            result=seed.result,
            sha256=seed.sha256,
            expected_sha256=expected,
            job_name=run.job_name,
            message=seed.message,
        )
        p.update(vocabulary=state)
        self._vocabulary_condition(p)

    def _vocabulary_condition(self, p: _Pass) -> None:
        state = p.status.vocabulary
        if state is None:
            return
        if state.result == "failed":
            p.condition(VOCABULARY_IN_SYNC, "False", "SeedFailed", state.message or "seeding failed")
        elif state.expected_sha256 is None:
            p.condition(VOCABULARY_IN_SYNC, "Unknown", "VocabularyNotRendered", "the MemoryVocabulary has no render")
        elif state.sha256 == state.expected_sha256:
            how = "seeded by" if state.result == "created" else "checked by"
            p.condition(
                VOCABULARY_IN_SYNC, "True", "InSync", f"the volume's file matches the CR ({how} {state.job_name})"
            )
        else:
            p.condition(
                VOCABULARY_IN_SYNC,
                "False",
                "Differs",
                f"the volume's merge-coverage-vocabulary.json (sha256 {str(state.sha256)[:12]}) differs from the "
                f"MemoryVocabulary (sha256 {state.expected_sha256[:12]}); it is never overwritten: edit or remove "
                "the file on the volume to adopt the CR's version",
            )

    def _expected_vocabulary_sha(self, p: _Pass) -> str | None:
        spec = p.schedule.spec
        if spec is None or spec.vocabulary_ref is None:
            return None
        vocabulary = self.api.get_vocabulary(p.namespace, spec.vocabulary_ref.name)
        return None if vocabulary is None else (vocabulary.get("status") or {}).get("sha256")

    def _events_for_run(self, p: _Pass, run: RunSummary) -> None:
        if run.result == "failed":
            p.event("Warning", "CycleFailed", f"cycle {run.job_name} failed ({run.reason}): {run.error or ''}".strip())
        elif run.result == "proposer-failed":
            # The cycle ran (folds, purge, what needs no model) but consolidated nothing: the endpoint is down,
            # refuses us, or the model never answers usably.
            p.event(
                "Warning", "ProposerFailed", f"cycle {run.job_name}: the proposer failed: {run.error or ''}".strip()
            )
        elif run.reason == "LockHeld":
            p.event("Warning", "CycleSkipped", f"cycle {run.job_name} skipped: {run.skip_reason}")
        elif run.reason == "Paused":
            p.event("Warning", "CyclePaused", f"cycle {run.job_name} skipped: {run.skip_reason}")
        else:
            p.event(
                "Normal",
                "CycleCompleted" if run.result == "completed" else "CycleSkipped",
                f"cycle {run.job_name} {run.result}: {sentence(run, lambda c: c.said)}"
                + (f"; {run.skip_reason}" if run.skip_reason else ""),
            )
        for count in COUNTS:
            if count.event is not None and (n := value_of(run, count)):
                p.event(count.event.type, count.event.reason, f"cycle {run.job_name}: {n} {count.event.what}")
        self._blast_radius_event(p, run)

    @staticmethod
    def _blast_radius_event(p: _Pass, run: RunSummary) -> None:
        """A cycle that archived more than a few percent of the live corpus says so as a Warning, even under the
        cap (folds, merges with successors and prunes alike: what the agent's own audit will see)."""
        total, archived = getattr(run, "total", 0) or 0, getattr(run, "archived", 0) or 0
        if run.result != "completed" or not total or archived / total <= MANY_ARCHIVED_FRACTION:
            return
        p.event(
            "Warning",
            "ManyArchived",
            f"cycle {run.job_name} archived {archived} of {total} live entries ({archived / total:.1%}, over "
            f"{MANY_ARCHIVED_FRACTION:.0%}); every archive is reversible (dreamkeeper undo {run.cycle_id})",
        )


def _vanished(active: JobRef | None, owned: list[Job], counted_uids: set[str]) -> JobRef | None:
    """The Job the status tracks, when it is gone from the list before it was counted."""
    if active is None or active.uid in counted_uids or any(j["metadata"]["uid"] == active.uid for j in owned):
        return None
    return active
