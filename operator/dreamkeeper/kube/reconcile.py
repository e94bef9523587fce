"""One reconcile pass of a DreamSchedule: count finished Jobs, start the due one, write status, prune history.

Correctness rests on three rules:

* **State lives in the CR.** Slots come from ``status.lastScheduleTime`` (``slots.py``), run-now tokens from
  ``status.lastRunNowToken``; process memory is only a cache, so a restart loses nothing and replays nothing.
* **Count once per Job UID.** A finished Job's results are added to ``status.totals`` in the same status patch
  that records its UID in ``status.countedJobUIDs``; the patch carries the resourceVersion the pass read, so a
  replayed event or a second pass on a stale copy gets 409 and counts nothing. Metrics are incremented only
  after that patch succeeded; the Job is then annotated counted (the bounded UID list covers the gap).
* **Never two cycles on one volume.** Jobs are labelled with their claim; a pass holds the claim's lock, lists
  the claim's Jobs (across every schedule sharing it) and starts nothing while one is active. The cycle itself
  takes the agent's cycle lock on the volume as the last guard (exit 3, counted as skipped/LockHeld).

A pass reads the CR once into a ``ScheduleView`` (the parsed spec and its ``CronSchedule``), asks
``slots.due_at`` what is due (a pure function of the persisted status), counts the claim's finished Jobs, acts
(run-now token, then the missed or due slot) and writes the status; metrics and Events follow the write.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

from dreamkeeper.kube import (
    ANNOTATION_COUNTED,
    ANNOTATION_STOPPED,
)
from dreamkeeper.kube.api import ApiError, ClusterApi, ConflictError, event_body, status_patch
from dreamkeeper.kube.caches import ClaimSource, FetchedClaims, JobSource, ListedJobs, ScheduleBodies
from dreamkeeper.kube.conditions import (
    LAST_RUN_SUCCEEDED,
    READY,
    VOCABULARY_IN_SYNC,
    get_condition,
)
from dreamkeeper.kube.coordinator import AgentCoordinator, NotStarted, stop_of
from dreamkeeper.kube.jobspec import JobDefaults
from dreamkeeper.kube.launching import Launching
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.models import (
    AgentStop,
    DreamScheduleSpec,
    DreamScheduleStatus,
)
from dreamkeeper.kube.objects import (
    Body,
    DreamSchedule,
    Job,
    annotations_of,
    creation_order,
    parse_time,
)
from dreamkeeper.kube.passes import _is_counted, _Pass, _ready_of
from dreamkeeper.kube.placement import Placement
from dreamkeeper.kube.refusals import POD_REFUSED, Refusal, refused_pod
from dreamkeeper.kube.results import (
    job_active,
    job_finished,
    job_succeeded,
)
from dreamkeeper.kube.schedule_view import NotReadyError, load_status, read_schedule
from dreamkeeper.kube.slots import SlotDecision
from dreamkeeper.kube.stop_hold import has_hold, holds_agent, with_hold, without_hold
from dreamkeeper.kube.stuck import stuck_reason

log = logging.getLogger(__name__)


@dataclass
class ReconcileSettings:
    poll_seconds: float = 5.0  # while a cycle Job is active
    max_sleep_seconds: float = 300.0  # upper bound between passes (a spec change wakes the loop earlier)
    conflict_retry_seconds: float = 1.0
    # A cycle pod waiting this long in a state that never clears (a missing Secret) is stopped (stuck.py).
    stuck_pod_grace_seconds: float = 15.0


class ClaimLocks:
    """One lock per (namespace, claim): schedules sharing a claim never decide concurrently in this process."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, namespace: str, claim: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((namespace, claim), threading.Lock())


class ScheduleReconciler(Launching):
    def __init__(
        self,
        api: ClusterApi,
        metrics: OperatorMetrics,
        defaults: JobDefaults | None = None,
        *,
        settings: ReconcileSettings | None = None,
        claim_locks: ClaimLocks | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        jobs: JobSource | None = None,
        claims: ClaimSource | None = None,
        bodies: ScheduleBodies | None = None,
    ) -> None:
        self.api = api
        self.metrics = metrics
        self.defaults = defaults or JobDefaults()
        self.settings = settings or ReconcileSettings()
        self.claim_locks = claim_locks or ClaimLocks()
        self.clock = clock
        # Where a pass reads its claim's Jobs and its claim: asked of the API server unless a watched cache is given.
        self.jobs = jobs or ListedJobs(api)
        self.claims = claims or FetchedClaims(api)
        self.agents = AgentCoordinator(api, self.jobs)
        self.bodies = bodies  # the newest body of each schedule, kept by the watch handler (handlers.py)
        self._visited: set[str] = set()  # schedule UIDs that had their first (full) pass in this process
        self._deferred_events: set[tuple[str, str]] = set()  # (uid, token) whose deferral was announced

    # ---- entry point --------------------------------------------------------------------------------------

    def reconcile(self, body: DreamSchedule, *, full: bool = False) -> float:
        """One pass on ``body`` (a fresh read of the DreamSchedule). Returns seconds until the next pass.

        ``full`` forces the claim/vocabulary checks (spec changed, vocabulary changed, first pass)."""
        schedule = read_schedule(body)
        namespace, name, uid = schedule.namespace, schedule.name, schedule.uid
        raw_status = body.get("status") or {}
        status = load_status(raw_status, f"{namespace}/{name}")
        self.metrics.ensure_schedule(namespace, name, status.totals)
        first = uid not in self._visited
        p = _Pass(schedule, status, self.clock(), ready_before=_ready_of(status))
        with self.claim_locks.get(namespace, schedule.claim):
            delay = self._pass(p, full=full or first or status.observed_generation != schedule.generation)
            if not self._persist(p, body, raw_status, status):
                return self.settings.conflict_retry_seconds
        self._visited.add(uid)
        self._after_persist(p)
        return delay

    def refuse_namespace(self, body: DreamSchedule) -> None:
        """A schedule in a namespace the operator is told not to serve (--exclude-namespace): it says so in its
        status (Ready=False) and nothing else happens: no Job, no ConfigMap."""
        schedule = read_schedule(body)
        raw_status = body.get("status") or {}
        status = load_status(raw_status, f"{schedule.namespace}/{schedule.name}")
        p = _Pass(schedule, status, self.clock(), ready_before=_ready_of(status))
        p.condition(
            READY,
            "False",
            "NamespaceExcluded",
            f"the operator does not serve namespace {schedule.namespace} (--exclude-namespace); nothing is run "
            "here unless the operator is started with this namespace named",
        )
        p.update(observed_generation=schedule.generation, next_schedule_time=None)
        if self._persist(p, body, raw_status, status):
            self._after_persist(p)

    def _persist(self, p: _Pass, body: DreamSchedule, raw_status: Body, read: DreamScheduleStatus) -> bool:
        """Write the pass's status if it changed; False when the CR changed since it was read (409)."""
        if p.status == read:
            return True
        version = body["metadata"].get("resourceVersion")
        try:
            if holds_agent(p.status) and not has_hold(body):
                # Before the Stop is persisted (its scale-down is a later pass's): deleting the schedule from now
                # on restores the agent first (stop_hold.py).
                held = self.api.patch_schedule(
                    p.namespace, p.name, {"metadata": {"resourceVersion": version, "finalizers": with_hold(body)}}
                )
                version = held["metadata"].get("resourceVersion")
            patch = status_patch(p.status.wire(), raw_status, version)
            written = cast(DreamSchedule, self.api.patch_schedule_status(p.namespace, p.name, patch))
        except ConflictError:
            if self.bodies is not None:
                self.bodies.drop(p.schedule.uid)  # the next pass reads the schedule afresh
            # Someone (or an earlier pass) changed the CR since this copy was read: nothing was counted;
            # the next pass works on the fresh copy and any Job created here is adopted by name.
            log.info("%s/%s: status changed concurrently; retrying the pass", p.namespace, p.name)
            return False
        if self.bodies is not None:
            self.bodies.put(written)  # the next pass starts from what was written, not from a GET
        if not holds_agent(p.status) and has_hold(written):
            self._drop_hold(p.namespace, p.name, written)
        return True

    def _drop_hold(self, namespace: str, name: str, body: DreamSchedule) -> None:
        """The Stop is released: the schedule is deletable at any moment again."""
        patch = {
            "metadata": {"resourceVersion": body["metadata"].get("resourceVersion"), "finalizers": without_hold(body)}
        }
        try:
            released = cast(DreamSchedule, self.api.patch_schedule(namespace, name, patch))
            if self.bodies is not None:
                self.bodies.put(released)  # else the next pass's status write carries a stale version (a 409)
        except ApiError as exc:  # the next pass (or the deletion path) tries again
            log.info("%s/%s: the Stop's finalizer stays for now: %s", namespace, name, exc)

    def release_deleted(self, body: DreamSchedule) -> bool:
        """A schedule being deleted while its finalizer holds it (a Stop): restore the agent, then let it go. True
        when it is gone or released; False while its cycle is still stopping (the caller retries)."""
        if not has_hold(body):
            return True
        if not self.release_agent(body):
            return False
        meta = body["metadata"]
        self._drop_hold(meta["namespace"], meta["name"], body)
        return True

    def forget(self, namespace: str, name: str, uid: str | None) -> None:
        """The schedule is gone: drop its series and caches."""
        self.metrics.remove_schedule(namespace, name)
        if uid:
            self._visited.discard(uid)
        log.info(
            "%s/%s: deleted; its Jobs go with it (owner references), a running cycle stops at a safe point",
            namespace,
            name,
        )

    def release_agent(self, body: DreamSchedule) -> bool:
        """The schedule is being deleted: a Stop it holds ends now (its cycle deleted, the agent restored). True
        when nothing is held any more; False while its cycle pod is still going (retry: the finalizer waits)."""
        schedule = read_schedule(body)
        status = load_status(body.get("status") or {}, f"{schedule.namespace}/{schedule.name}")
        stop = status.agent.stop if status.agent is not None else None

        def post(kind: str, reason: str, message: str) -> None:
            try:
                self.api.create_event(schedule.namespace, event_body(body, kind, reason, message, self.clock()))
            except ApiError as exc:
                log.warning("%s/%s: event %s not posted: %s", schedule.namespace, schedule.name, reason, exc)

        if stop is None:
            if schedule.spec is not None and schedule.spec.agent is not None:
                # A record only on the workload never scaled anything (the scale-down waits for the status to hold
                # it): it is removed, not acted on (coordination.py, "the status is the record").
                ref = schedule.spec.agent.workload_ref
                self.agents.drop_record(schedule.namespace, schedule.uid, ref.kind, ref.name, post)
            return True
        with self.claim_locks.get(schedule.namespace, schedule.claim):
            return self.agents.release_deleted(schedule.namespace, schedule.uid, schedule.claim, stop, post)

    # ---- the pass -----------------------------------------------------------------------------------------

    def _pass(self, p: _Pass, *, full: bool) -> float:
        persisted_agent = p.status.agent
        active_ended = self._active_ended(p)
        due = p.schedule.due(p.status, p.now)
        stopping = stop_of(p) is not None
        claim_jobs: list[Job] = []
        if (full or active_ended or stopping or (due is not None and due.acts)) and p.schedule.claim:
            claim_jobs = self._account(p)
        if stopping or full:
            # A Stop in progress goes one step further before anything new is started beside it (on a full pass
            # the workload is read too: a record on it that the status does not hold is checked against the Job
            # it names, and adopted or removed: coordination.record_problem).
            def start(stop: AgentStop, where: Placement, deadline: int) -> NotStarted | None:
                return self._start_stopped(p, stop, where, deadline)

            p.agent_busy = self.agents.step(p, p.schedule.spec, claim_jobs, start)
        if due is not None:
            self._act(p, due, claim_jobs, full=full or bool(p.counted))
            p.update(next_schedule_time=due.slots.next_slot)
        elif (problem := p.schedule.problem) is not None:
            p.condition(READY, "False", problem.reason, problem.message)
            p.update(next_schedule_time=None)
        p.update(observed_generation=p.schedule.generation)
        if self.agents.restart(p, p.schedule.spec, persisted_agent):
            p.agent_busy = True
        self._default_conditions(p)
        return self._delay(p, due.slots if due is not None else None)

    def _active_ended(self, p: _Pass) -> bool:
        """True when the Job the status tracks finished or vanished (its result is to be counted)."""
        active = p.status.active_job
        if active is None:
            return False
        job = self.api.get_job(p.namespace, active.name)
        # Fresher than the watch, maybe: the claim's Jobs the pass reads next agree with what was just read.
        if job is None:
            self.jobs.forget(p.namespace, active.name)
        else:
            self.jobs.observe(job)
        if job is not None and job["metadata"].get("uid") == active.uid and job_active(job):
            p.running = True
            self._stop_if_stuck(p, job)
            return False
        return True

    def _stop_if_stuck(self, p: _Pass, job: Job) -> None:
        """Stop an active Job whose pod can never start (stuck.py) or was refused by the API server (refusals.py);
        it is counted as failed when it ends."""
        if (job.get("status") or {}).get("ready") or ANNOTATION_STOPPED in annotations_of(job):
            return  # its containers run (or it is being stopped already)
        uid = job["metadata"]["uid"]
        pods = self.api.list_pods(p.namespace, f"batch.kubernetes.io/controller-uid={uid}")
        grace = self.settings.stuck_pod_grace_seconds
        stuck = stuck_reason(pods, p.now, grace)
        name = job["metadata"]["name"]
        if stuck is not None:
            self._stop_job(p, name, stuck.reason, stuck.annotation(), _stuck_message(name, stuck.message))
            return
        created = parse_time(job["metadata"].get("creationTimestamp"))
        if pods or created is None or (p.now - created).total_seconds() < grace:
            return
        refusal = self._pod_refusal(p, uid)
        if refusal is not None:
            self._stop_job(p, name, POD_REFUSED, refusal.annotation(), _stuck_message(name, refusal.text))

    def _pod_refusal(self, p: _Pass, job_uid: str) -> Refusal | None:
        """Why the Job controller cannot create the Job's pod, from its FailedCreate Events."""
        try:
            events = self.api.list_events(p.namespace, f"involvedObject.uid={job_uid}")
        except ApiError as exc:  # an older install without `list events`: the deadline still ends the Job
            log.info("%s/%s: cannot read the Events of Job uid %s: %s", p.namespace, p.name, job_uid, exc)
            return None
        return refused_pod(events)

    def _stop_job(self, p: _Pass, name: str, reason: str, annotation: str, message: str) -> None:
        # The reason first (it is what the Job is counted by), then the deadline cut: the Job controller fails it
        # at once (DeadlineExceeded) and deletes the pod, so the claim is free for the next cycle.
        stopped = self.api.patch_job(
            p.namespace,
            name,
            {"metadata": {"annotations": {ANNOTATION_STOPPED: annotation}}, "spec": {"activeDeadlineSeconds": 1}},
        )
        self.jobs.observe(stopped)
        log.info("%s/%s: stopped Job %s: %s", p.namespace, p.name, name, annotation)
        p.condition(READY, "False", reason, message)
        p.event("Warning", reason, message)

    @staticmethod
    def _default_conditions(p: _Pass) -> None:
        if get_condition(p.status.conditions, LAST_RUN_SUCCEEDED) is None:
            p.condition(LAST_RUN_SUCCEEDED, "Unknown", "NoRunYet", "no cycle has finished yet")
        if get_condition(p.status.conditions, VOCABULARY_IN_SYNC) is None:
            p.condition(VOCABULARY_IN_SYNC, "Unknown", "NotChecked", "no cycle has seeded the vocabulary yet")
        spec = p.schedule.spec
        if spec is not None and spec.vocabulary_ref is None:
            p.condition(VOCABULARY_IN_SYNC, "Unknown", "NoVocabularyRef", "no vocabularyRef: the agent's own file")

    # ---- after the status write ------------------------------------------------------------------------------

    def _after_persist(self, p: _Pass) -> None:
        self._announce_not_ready(p)
        for _, outcome in p.counted:
            self.metrics.record_run(p.namespace, p.name, outcome.run)
        self.metrics.record_agent(p.namespace, p.name, downtime=p.agent_downtime, stale_window=p.agent_stale_window)
        if p.missed:
            self.metrics.record_slots(p.namespace, p.name, missed=p.missed)
        for reason in p.skipped:
            self.metrics.record_slots(p.namespace, p.name, skipped_reason=reason)
        self._set_state(p)
        for kind, reason, message in p.events:
            self._post(p, kind, reason, message)
        self._deferred_events.update(p.announced)
        for job in p.to_annotate:
            self._mark_counted(p, job)
        if p.listed:
            self._prune(p)

    @staticmethod
    def _announce_not_ready(p: _Pass) -> None:
        """Ready turning False (or False for a new reason) is an Event once, not one per pass."""
        ready = get_condition(p.status.conditions, READY)
        if ready is None or ready.status != "False" or _ready_of(p.status) == p.ready_before:
            return
        if not any(reason == ready.reason for _, reason, _ in p.events):
            p.events.insert(0, ("Warning", ready.reason, ready.message))

    def _set_state(self, p: _Pass) -> None:
        ready = get_condition(p.status.conditions, READY)
        sync = get_condition(p.status.conditions, VOCABULARY_IN_SYNC)
        last = p.status.last_run
        cron, next_slot = p.schedule.cron, p.status.next_schedule_time
        self.metrics.set_state(
            p.namespace,
            p.name,
            ready=ready is not None and ready.status == "True",
            running=p.running,
            next_run=next_slot,
            last_success=p.status.last_successful_time,
            vocabulary_in_sync=None if sync is None or sync.status == "Unknown" else sync.status == "True",
            last_run=last,
            interval_seconds=cron.period_after(next_slot) if cron is not None and next_slot is not None else None,
            agent_stopped=_agent_stopped(p),
        )

    def _mark_counted(self, p: _Pass, job: Job) -> None:
        meta = job["metadata"]
        try:
            marked = self.api.patch_job(
                p.namespace, meta["name"], {"metadata": {"annotations": {ANNOTATION_COUNTED: "true"}}}
            )
            meta.setdefault("annotations", {})[ANNOTATION_COUNTED] = "true"
            self.jobs.observe(marked)
        except ApiError as exc:  # the UID list still prevents a recount
            log.warning("%s/%s: could not mark Job %s counted: %s", p.namespace, p.name, meta["name"], exc)

    def _prune(self, p: _Pass) -> None:
        """Delete counted, finished Jobs beyond the spec's history limits (newest kept)."""
        spec = p.schedule.spec
        if spec is None:
            return  # limits unknown while the spec is invalid: keep the history until it is fixed
        for job in _beyond_history(p.owned_jobs, spec):
            meta = job["metadata"]
            try:
                self.api.delete_job(p.namespace, meta["name"], meta["uid"])
                self.jobs.forget(p.namespace, meta["name"])
                log.info("%s/%s: pruned Job %s (history limits)", p.namespace, p.name, meta["name"])
            except ApiError as exc:
                log.warning("%s/%s: could not prune Job %s: %s", p.namespace, p.name, meta["name"], exc)

    def _delay(self, p: _Pass, slots: SlotDecision | None) -> float:
        s = self.settings
        if p.again:
            return 0.0
        if p.running or p.deferred_run_now or p.agent_busy:
            return s.poll_seconds
        if slots is None:  # the spec cannot be used: wait for a change (it wakes the loop)
            return s.max_sleep_seconds
        until = (slots.next_slot - p.now).total_seconds() + 0.5
        return max(1.0, min(s.max_sleep_seconds, until))


def _beyond_history(owned: list[Job], spec: DreamScheduleSpec) -> list[Job]:
    """Counted, finished Jobs past the history limits, newest kept; a Job not yet counted is never pruned."""
    finished = sorted((j for j in owned if job_finished(j) and _is_counted(j)), key=creation_order, reverse=True)
    succeeded = [j for j in finished if job_succeeded(j)]
    failed = [j for j in finished if not job_succeeded(j)]
    return succeeded[spec.successful_jobs_history_limit :] + failed[spec.failed_jobs_history_limit :]


def _stuck_message(job_name: str, why: str) -> str:
    return (
        f"Job {job_name} stopped: its pod can never start ({why}); fix the cause (a Secret the pod can read, an "
        "image that exists, what the quota or policy asks for) and the next slot or a new runNowToken tries again"
    )


def _agent_stopped(p: _Pass) -> bool | None:
    """The agent_stopped gauge: absent without spec.agent Stop, 1 while a Stop holds the workload down."""
    stop = stop_of(p)
    if stop is not None:
        return stop.phase != "Restored"
    spec = p.schedule.spec
    if spec is None or spec.agent is None or spec.agent.coordination != "Stop":
        return None
    return False


__all__ = ["ClaimLocks", "NotReadyError", "ReconcileSettings", "ScheduleReconciler"]
