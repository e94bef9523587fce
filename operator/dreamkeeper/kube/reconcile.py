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
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from pydantic import ValidationError

from dreamkeeper.consolidation import COUNTS, sentence, value_of
from dreamkeeper.kube import (
    ANNOTATION_COUNTED,
    ANNOTATION_SLOT,
    ANNOTATION_STOPPED,
    LABEL_CLAIM,
    LABEL_TRIGGER,
)
from dreamkeeper.kube.api import ApiError, ClusterApi, ConflictError, event_body, status_patch
from dreamkeeper.kube.conditions import (
    LAST_RUN_SUCCEEDED,
    READY,
    VOCABULARY_IN_SYNC,
    Status,
    get_condition,
    set_condition,
)
from dreamkeeper.kube.coordinator import AgentCoordinator, CycleIntent, NotStarted, stop_of
from dreamkeeper.kube.jobspec import (
    JobDefaults,
    JobRequest,
    Trigger,
    VocabularySource,
    build_job,
    cycle_settings,
    format_section,
)
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.models import (
    MAX_COUNTED_UIDS,
    AgentStop,
    DreamScheduleSpec,
    DreamScheduleStatus,
    JobRef,
    RunSummary,
    Totals,
    VocabularyState,
)
from dreamkeeper.kube.naming import label_value, run_now_job_name, scheduled_job_name
from dreamkeeper.kube.objects import (
    Body,
    DreamSchedule,
    Job,
    MemoryVocabularyStatusBody,
    annotations_of,
    creation_order,
    labels_of,
    owned_by,
    parse_time,
)
from dreamkeeper.kube.placement import ClaimUnusableError, Placement, check_claim, placement_for, selector_string
from dreamkeeper.kube.refusals import POD_REFUSED, REFUSAL_REASONS, Refusal, is_refusal, refused_pod
from dreamkeeper.kube.results import (
    JobOutcome,
    add_run,
    add_slots,
    job_active,
    job_finished,
    job_succeeded,
    outcome_of,
)
from dreamkeeper.kube.slots import CronSchedule, Due, ScheduleError, SlotDecision, due_at
from dreamkeeper.kube.stop_hold import has_hold, holds_agent, with_hold, without_hold
from dreamkeeper.kube.stuck import STUCK_REASONS, stuck_reason

log = logging.getLogger(__name__)

# A cycle archiving more than this fraction of the live corpus gets a Warning Event ("a few percent"); the hold
# itself is the engine's archive_cap (consolidation/blast.py, default 10%).
MANY_ARCHIVED_FRACTION = 0.03

NAME_CONFLICT = "name_conflict"  # _launch: a Job of that name exists and is not this schedule's


class NotReadyError(Exception):
    """The schedule cannot start a cycle now; ``reason`` becomes Ready=False's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


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


def load_status(raw: Body, where: str) -> DreamScheduleStatus:
    """The persisted status; a field someone corrupted by hand is dropped (and said so), not a crash loop."""
    try:
        return DreamScheduleStatus.model_validate(raw)
    except ValidationError as exc:
        bad = sorted({str(error["loc"][0]) for error in exc.errors() if error.get("loc")})
        log.warning("%s: status fields %s are invalid and are rebuilt: %s", where, bad, exc.errors()[0].get("msg"))
        return DreamScheduleStatus.model_validate({k: v for k, v in raw.items() if k not in bad})


# ---- what a pass reads --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpecProblem:
    """Why the spec cannot be acted on: Ready=False's reason and message."""

    reason: str
    message: str


@dataclass(frozen=True)
class ScheduleView:
    """The DreamSchedule as one pass read it, parsed once: every step reads this, never the raw spec."""

    body: DreamSchedule  # the Events' involvedObject
    namespace: str
    name: str
    uid: str
    generation: int | None
    created: datetime | None
    claim: str
    spec: DreamScheduleSpec | None  # None: the spec does not validate (``problem`` says why)
    cron: CronSchedule | None  # None: the spec, its schedule, time zone or safeguards cannot be used
    problem: SpecProblem | None  # set exactly when ``cron`` is None

    def due(self, status: DreamScheduleStatus, now: datetime) -> Due | None:
        """What this pass is asked to do; None while the spec cannot be used."""
        if self.spec is None or self.cron is None:
            return None
        return due_at(self.spec, self.cron, status, created=self.created or now, now=now)


def read_schedule(body: DreamSchedule) -> ScheduleView:
    """Parse the spec and its cron schedule once; what cannot be used is said in ``problem``, never raised."""
    meta = body["metadata"]
    raw_spec = body.get("spec") or {}
    spec, cron, problem = _parse_spec(raw_spec)
    # The claim keys the lock and the Job list even when the rest of the spec is invalid, so the Jobs already
    # started on it are still counted (and no cycle is started next to them).
    claim = spec.claim_name if spec is not None else str(raw_spec.get("claimName") or "")
    return ScheduleView(
        body=body,
        namespace=meta["namespace"],
        name=meta["name"],
        uid=meta["uid"],
        generation=meta.get("generation"),
        created=parse_time(meta.get("creationTimestamp")),
        claim=claim,
        spec=spec,
        cron=cron,
        problem=problem,
    )


def _parse_spec(raw: Body) -> tuple[DreamScheduleSpec | None, CronSchedule | None, SpecProblem | None]:
    try:
        spec = DreamScheduleSpec.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(x) for x in first.get("loc", ()))
        message = f"spec.{where}: {first.get('msg')} ({exc.error_count()} error(s))"
        return None, None, SpecProblem("InvalidSpec", message)
    try:
        cron = CronSchedule.parse(spec.schedule, spec.time_zone)
    except ScheduleError as exc:
        return spec, None, SpecProblem(exc.reason, str(exc))
    try:
        cycle_settings(spec)
    except ValidationError as exc:
        return spec, None, SpecProblem("InvalidSafeguards", f"spec.safeguards: {exc.errors()[0].get('msg')}")
    try:
        format_section(spec)
    except ValueError as exc:
        return spec, None, SpecProblem("InvalidFormat", f"spec.formatProfile: {exc}")
    return spec, cron, None


@dataclass(frozen=True)
class Readiness:
    """Whether the claim and the vocabulary let a cycle start now (checked at most once per pass)."""

    vocabulary: VocabularySource | None = None
    not_ready: NotReadyError | None = None


@dataclass
class _Pass:
    """One pass: what it read (``schedule``) and what it decided. Decisions reach the metrics and Events only
    after the status patch succeeded (``_after_persist``)."""

    schedule: ScheduleView
    status: DreamScheduleStatus
    now: datetime
    counted: list[tuple[Job | None, JobOutcome]] = field(default_factory=list)
    to_annotate: list[Job] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    missed: int = 0
    skipped: list[str] = field(default_factory=list)
    running: bool = False
    owned_jobs: list[Job] = field(default_factory=list)
    listed: bool = False
    deferred_run_now: bool = False
    announced: list[tuple[str, str]] = field(default_factory=list)
    ready_before: tuple[str, str] | None = None  # (status, reason) of Ready as read: its changes post Events
    agent_busy: bool = False  # a Stop of the agent is in progress: no other cycle starts, the pass polls
    agent_downtime: float | None = None  # a Stop ended in this pass: seconds the agent was down
    agent_stale_window: float | None = None  # RestartAfter restarted the agent in this pass: the stale window
    again: bool = False  # the next pass must follow at once (a Stop whose cycle was refused: restore now)

    @property
    def namespace(self) -> str:
        return self.schedule.namespace

    @property
    def name(self) -> str:
        return self.schedule.name

    def event(self, kind: str, reason: str, message: str) -> None:
        self.events.append((kind, reason, message))

    def update(self, **changes: Any) -> None:
        self.status = self.status.model_copy(update=changes)

    def condition(self, type_: str, status: Status, reason: str, message: str) -> None:
        conditions = set_condition(
            self.status.conditions,
            type_,
            status,
            reason,
            message,
            generation=self.schedule.generation,
            now=self.now,
        )
        self.update(conditions=conditions)

    def track(self, job: Job) -> None:
        """``job`` is this schedule's and still running: the pass polls it and starts nothing beside it."""
        if job_active(job):
            self.running = True
            self.update(active_job=_ref(job))


def _ref(job: Job) -> JobRef:
    meta = job["metadata"]
    created = parse_time(meta.get("creationTimestamp"))
    return JobRef(
        name=meta["name"],
        uid=meta["uid"],
        trigger="run-now" if labels_of(job).get(LABEL_TRIGGER) == "run-now" else "schedule",
        slot=parse_time(annotations_of(job).get(ANNOTATION_SLOT)) or created or datetime.now(UTC),
        created_at=created,
    )


def _is_counted(job: Job) -> bool:
    return annotations_of(job).get(ANNOTATION_COUNTED) == "true"


class ScheduleReconciler:
    def __init__(
        self,
        api: ClusterApi,
        metrics: OperatorMetrics,
        defaults: JobDefaults | None = None,
        *,
        settings: ReconcileSettings | None = None,
        claim_locks: ClaimLocks | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.api = api
        self.metrics = metrics
        self.defaults = defaults or JobDefaults()
        self.settings = settings or ReconcileSettings()
        self.claim_locks = claim_locks or ClaimLocks()
        self.clock = clock
        self.agents = AgentCoordinator(api)
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
            # Someone (or an earlier pass) changed the CR since this copy was read: nothing was counted;
            # the next pass works on the fresh copy and any Job created here is adopted by name.
            log.info("%s/%s: status changed concurrently; retrying the pass", p.namespace, p.name)
            return False
        if not holds_agent(p.status) and has_hold(written):
            self._drop_hold(p.namespace, p.name, written)
        return True

    def _drop_hold(self, namespace: str, name: str, body: DreamSchedule) -> None:
        """The Stop is released: the schedule is deletable at any moment again."""
        patch = {
            "metadata": {"resourceVersion": body["metadata"].get("resourceVersion"), "finalizers": without_hold(body)}
        }
        try:
            self.api.patch_schedule(namespace, name, patch)
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
        self.api.patch_job(
            p.namespace,
            name,
            {"metadata": {"annotations": {ANNOTATION_STOPPED: annotation}}, "spec": {"activeDeadlineSeconds": 1}},
        )
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

    # ---- counting ---------------------------------------------------------------------------------------------

    def _account(self, p: _Pass) -> list[Job]:
        """Count every finished, uncounted Job of this schedule; adopt an active one. Returns the claim's Jobs."""
        jobs = self.api.list_jobs(p.namespace, f"{LABEL_CLAIM}={label_value(p.schedule.claim)}")
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

    # ---- starting cycles ---------------------------------------------------------------------------------------

    def _act(self, p: _Pass, due: Due, claim_jobs: list[Job], *, full: bool) -> None:
        """Start what is due, in order: the run-now token, then the slot (or record it missed)."""
        busy = _blocking_job(p, claim_jobs)
        ready = self._readiness(p, due, full=full)
        if due.run_now is not None and self._run_now(p, due, due.run_now, ready, claim_jobs, busy=busy):
            busy = f"Job {p.status.active_job.name}" if p.status.active_job else "a run-now cycle"
        if due.slots.past_deadline is not None:
            self._past_deadline(p, due, due.slots.past_deadline)
        elif due.slots.due is not None:
            self._due_slot(p, due, due.slots.due, ready, claim_jobs, busy=busy)

    def _readiness(self, p: _Pass, due: Due, *, full: bool) -> Readiness:
        """Check the claim and the vocabulary when a Job is wanted (or on a full pass); set Ready from it."""
        ready = Readiness()
        if full or due.wants_job:
            try:
                ready = Readiness(vocabulary=self._check_ready(p, due.spec))
                if due.wants_job or not _stuck_still_stands(p):
                    p.condition(READY, "True", "Scheduled", f"schedule valid; claim {due.spec.claim_name} usable")
            except (NotReadyError, ClaimUnusableError) as exc:
                ready = Readiness(not_ready=NotReadyError(exc.reason, str(exc)))
                p.condition(READY, "False", exc.reason, str(exc))
        elif get_condition(p.status.conditions, READY) is None:
            p.condition(READY, "Unknown", "NotChecked", "not checked yet")
        if p.status.vocabulary is not None and full:
            expected = ready.vocabulary.sha256 if ready.vocabulary else self._expected_vocabulary_sha(p)
            p.update(vocabulary=p.status.vocabulary.model_copy(update={"expected_sha256": expected}))
            self._vocabulary_condition(p)
        return ready

    def _run_now(
        self, p: _Pass, due: Due, token: str, ready: Readiness, claim_jobs: list[Job], *, busy: str | None
    ) -> bool:
        """Handle a new runNowToken (also when suspended). True when it started a Job."""
        name = run_now_job_name(p.name, token, p.schedule.generation or 0)
        if self._stopping_for(p, name):
            p.update(last_run_now_token=token)  # the agent is being stopped for this very request
            return True
        if self._adopt(p, claim_jobs, name):
            p.update(last_run_now_token=token)  # created by a pass whose status write was lost
        elif ready.not_ready is not None:
            self._announce_deferral(p, token, f"not ready ({ready.not_ready.reason}): {ready.not_ready}")
        elif busy is not None:
            self._announce_deferral(p, token, f"{busy} is active on the claim; it runs when that ends")
        else:
            refused = self._launch(p, due.spec, CycleIntent(name, "run-now", p.now, token), ready.vocabulary)
            if refused is None:
                p.update(last_run_now_token=token)
                return True
            if isinstance(refused, Refusal):
                p.update(last_run_now_token=token)  # handled: the same request would be refused again
            elif refused != NAME_CONFLICT:
                self._announce_deferral(p, token, refused)
        return False

    def _past_deadline(self, p: _Pass, due: Due, latest: datetime) -> None:
        """The latest slot is older than startingDeadlineSeconds: recorded as missed, with the ones before it."""
        p.missed += due.slots.missed
        p.update(last_schedule_time=latest, totals=add_slots(p.status.totals or Totals(), missed=due.slots.missed))
        p.event(
            "Warning",
            "MissedSlots",
            f"{_slot_count(due.slots)} slot(s) passed unrun, the latest ({latest.isoformat()}) is older than "
            f"startingDeadlineSeconds={due.spec.starting_deadline_seconds}",
        )

    def _due_slot(
        self, p: _Pass, due: Due, slot: datetime, ready: Readiness, claim_jobs: list[Job], *, busy: str | None
    ) -> None:
        """Run the due slot once (no backlog replay), or record why it was skipped; either way it is acted on."""
        if due.slots.missed:
            p.missed += due.slots.missed
            p.update(totals=add_slots(p.status.totals or Totals(), missed=due.slots.missed))
            p.event(
                "Warning",
                "MissedSlots",
                f"{_slot_count(due.slots)} slot(s) passed while the operator was not running; only the latest "
                f"({slot.isoformat()}) runs (no backlog replay)",
            )
        name = scheduled_job_name(p.name, slot)
        reason: str | None = None
        # An existing Job of this slot's name was created by a pass whose status write was lost: adopted, not skipped.
        if not self._adopt(p, claim_jobs, name) and not self._stopping_for(p, name):
            reason = self._slot_refusal(p, due.spec, slot, ready, busy=busy)
            if reason is None:
                refused = self._launch(p, due.spec, CycleIntent(name, "schedule", slot, None), ready.vocabulary)
                if isinstance(refused, Refusal):
                    reason = "refused"
                elif refused == NAME_CONFLICT:
                    reason = "name_conflict"
                elif refused is not None:
                    p.event("Warning", "SlotSkipped", f"slot {slot.isoformat()} skipped: {refused}")
                    reason = "not_ready"
        if reason is not None:
            p.skipped.append(reason)
            p.update(totals=add_slots(p.status.totals or Totals(), skipped_reason=reason))
        p.update(last_schedule_time=slot)

    @staticmethod
    def _slot_refusal(
        p: _Pass, spec: DreamScheduleSpec, slot: datetime, ready: Readiness, *, busy: str | None
    ) -> str | None:
        """Why the due slot may not start (the skipped-slot reason), or None when it may."""
        if spec.suspend:
            return "suspended"
        if ready.not_ready is not None:
            p.event(
                "Warning",
                "SlotSkipped",
                f"slot {slot.isoformat()} skipped: {ready.not_ready.reason}: {ready.not_ready}",
            )
            return "not_ready"
        if busy is not None:
            p.event(
                "Warning",
                "SlotSkipped",
                f"slot {slot.isoformat()} skipped: {busy} is active on claim {spec.claim_name} "
                "(never two cycles on one volume)",
            )
            return "concurrent"
        return None

    def _announce_deferral(self, p: _Pass, token: str, why: str) -> None:
        p.deferred_run_now = True
        key = (p.schedule.uid, token)
        if key not in self._deferred_events:
            # Remembered as announced only once the pass is persisted and the Event posted (_after_persist).
            p.announced.append(key)
            p.event("Normal", "RunNowDeferred", f"runNowToken {token!r} waits: {why}")

    @staticmethod
    def _stopping_for(p: _Pass, job_name: str) -> bool:
        """The Stop in progress is for this cycle (recorded by a pass whose status write was lost, then adopted)."""
        stop = stop_of(p)
        return stop is not None and stop.job_name == job_name

    @staticmethod
    def _adopt(p: _Pass, claim_jobs: list[Job], job_name: str) -> bool:
        """True when this schedule's Job of that deterministic name exists (active or finished)."""
        for job in claim_jobs:
            if job["metadata"]["name"] == job_name and owned_by(job, p.schedule.uid):
                p.track(job)
                return True
        return False

    def _check_ready(self, p: _Pass, spec: DreamScheduleSpec) -> VocabularySource | None:
        pvc = self.api.get_pvc(p.namespace, spec.claim_name)
        if pvc is None:
            raise NotReadyError("ClaimNotFound", f"PersistentVolumeClaim {spec.claim_name} not found")
        check_claim(pvc)
        if spec.agent is not None:
            workload = spec.agent.workload_ref
            if self.api.get_workload(p.namespace, workload.kind, workload.name) is None:
                raise NotReadyError("WorkloadNotFound", f"{workload.kind} {workload.name} (spec.agent) not found")
        ref = spec.vocabulary_ref
        if ref is None:
            return None
        vocabulary = self.api.get_vocabulary(p.namespace, ref.name)
        if vocabulary is None:
            raise NotReadyError("VocabularyNotFound", f"MemoryVocabulary {ref.name} not found")
        status = vocabulary.get("status") or {}
        sha256, config_map = status.get("sha256"), status.get("configMapName")
        if not sha256 or not config_map:
            raise NotReadyError("VocabularyNotRendered", f"MemoryVocabulary {ref.name} {_not_rendered(status)}")
        if self.api.get_config_map(p.namespace, config_map) is None:
            raise NotReadyError(
                "VocabularyNotRendered", f"ConfigMap {config_map} of MemoryVocabulary {ref.name} is missing"
            )
        return VocabularySource(config_map=config_map, sha256=sha256)

    def _launch(
        self, p: _Pass, spec: DreamScheduleSpec, intent: CycleIntent, vocabulary: VocabularySource | None
    ) -> str | Refusal | None:
        """Start the cycle; with ``spec.agent`` Stop, begin stopping the agent for it instead (the Job follows once
        no pod mounts the claim). None when done, else why not (``NAME_CONFLICT``: a foreign Job has the name; a
        ``Refusal``: the API server refused the Job, said in Ready and an Event already)."""
        agent = spec.agent
        if agent is not None and agent.coordination == "Stop":
            refused = self.agents.begin(p, agent, intent)
            p.agent_busy = p.agent_busy or refused is None
            return refused
        return self._start(p, spec, intent.job_name, intent.trigger, intent.slot, vocabulary, intent.run_now_token)

    def _start_stopped(self, p: _Pass, stop: AgentStop, placement: Placement, deadline: int) -> NotStarted | None:
        """The cycle of a Stop, now that no pod mounts the claim: unpinned, its deadline within the downtime bound."""
        spec = p.schedule.spec
        if spec is None:
            return NotStarted("CycleNotStarted", "the spec is invalid")
        try:
            vocabulary = self._check_ready(p, spec)
        except (NotReadyError, ClaimUnusableError) as exc:
            return NotStarted("CycleNotStarted", f"not ready ({exc.reason}): {exc}")
        started = self._start(
            p,
            spec,
            stop.job_name,
            stop.trigger,
            stop.slot,
            vocabulary,
            stop.run_now_token,
            placement=placement,
            deadline=deadline,
            agent_stopped=f"{stop.kind}/{stop.name}",
        )
        if isinstance(started, Refusal):
            return NotStarted(started.reason, started.text)
        if started == NAME_CONFLICT:
            return NotStarted("CycleNotStarted", f"Job {stop.job_name} exists and is not this schedule's")
        return None

    def _start(
        self,
        p: _Pass,
        spec: DreamScheduleSpec,
        job_name: str,
        trigger: Trigger,
        slot: datetime,
        vocabulary: VocabularySource | None,
        token: str | None,
        *,
        placement: Placement | None = None,
        deadline: int | None = None,
        agent_stopped: str | None = None,
    ) -> str | Refusal | None:
        """Create (or adopt) the Job: None when it exists now, ``NAME_CONFLICT`` when a foreign object holds the
        name, a ``Refusal`` when the API server refused it (set in Ready and posted: the pass goes on)."""
        if placement is None:
            selector = selector_string(spec.agent_selector.wire() if spec.agent_selector else None)
            try:
                pods = self.api.list_pods(p.namespace, selector)
            except ApiError as exc:
                if not is_refusal(exc):
                    raise
                return self._refused(p, Refusal.of(f"the agent's pod list (agentSelector {selector!r})", exc))
            placement = placement_for(pods, spec.claim_name)
        request = JobRequest(
            schedule_name=p.name,
            schedule_uid=p.schedule.uid,
            namespace=p.namespace,
            spec=spec,
            job_name=job_name,
            trigger=trigger,
            slot=slot,
            placement=placement,
            vocabulary=vocabulary,
            run_now_token=token,
            agent_stopped=agent_stopped,
            active_deadline_seconds=deadline,
        )
        try:
            job = self.api.create_job(p.namespace, build_job(request, self.defaults))
            message = f"created Job {job_name} ({trigger}, slot {slot.isoformat()}), {_where(placement)}"
            log.info("%s/%s: %s", p.namespace, p.name, message)
            # Posted now, not after the status write: the Job exists whatever happens to this pass.
            self._post(p, "Normal", "CycleStarted", message)
        except ConflictError as exc:
            if not exc.already_exists:
                raise
            existing = self.api.get_job(p.namespace, job_name)
            if existing is None or not owned_by(existing, p.schedule.uid):
                p.event("Warning", "NameConflict", f"Job {job_name} exists and is not this schedule's; slot skipped")
                return NAME_CONFLICT
            job = existing  # created by an earlier pass whose status write was lost: adopt it
        except ApiError as exc:
            if not is_refusal(exc):
                raise
            return self._refused(p, Refusal.of(f"Job {job_name}", exc))
        p.track(job)
        return None

    @staticmethod
    def _refused(p: _Pass, refusal: Refusal) -> Refusal:
        """The API server said no to a cycle's object: Ready=False with its words, and a Warning Event."""
        log.info("%s/%s: %s", p.namespace, p.name, refusal.text)
        message = (
            f"{refusal.text}; fix the schedule (or the namespace's quota or policy) and the next slot or a new "
            "runNowToken tries again"
        )
        p.condition(READY, "False", refusal.reason, message)
        p.event("Warning", refusal.reason, message)
        return refusal

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
            self.api.patch_job(p.namespace, meta["name"], {"metadata": {"annotations": {ANNOTATION_COUNTED: "true"}}})
            meta.setdefault("annotations", {})[ANNOTATION_COUNTED] = "true"
        except ApiError as exc:  # the UID list still prevents a recount
            log.warning("%s/%s: could not mark Job %s counted: %s", p.namespace, p.name, meta["name"], exc)

    def _post(self, p: _Pass, kind: str, reason: str, message: str) -> None:
        try:
            self.api.create_event(p.namespace, event_body(p.schedule.body, kind, reason, message, p.now))
        except ApiError as exc:
            log.warning("%s/%s: event %s not posted: %s", p.namespace, p.name, reason, exc)

    def _prune(self, p: _Pass) -> None:
        """Delete counted, finished Jobs beyond the spec's history limits (newest kept)."""
        spec = p.schedule.spec
        if spec is None:
            return  # limits unknown while the spec is invalid: keep the history until it is fixed
        for job in _beyond_history(p.owned_jobs, spec):
            meta = job["metadata"]
            try:
                self.api.delete_job(p.namespace, meta["name"], meta["uid"])
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


def _vanished(active: JobRef | None, owned: list[Job], counted_uids: set[str]) -> JobRef | None:
    """The Job the status tracks, when it is gone from the list before it was counted."""
    if active is None or active.uid in counted_uids or any(j["metadata"]["uid"] == active.uid for j in owned):
        return None
    return active


def _beyond_history(owned: list[Job], spec: DreamScheduleSpec) -> list[Job]:
    """Counted, finished Jobs past the history limits, newest kept; a Job not yet counted is never pruned."""
    finished = sorted((j for j in owned if job_finished(j) and _is_counted(j)), key=creation_order, reverse=True)
    succeeded = [j for j in finished if job_succeeded(j)]
    failed = [j for j in finished if not job_succeeded(j)]
    return succeeded[spec.successful_jobs_history_limit :] + failed[spec.failed_jobs_history_limit :]


def _ready_of(status: DreamScheduleStatus) -> tuple[str, str] | None:
    ready = get_condition(status.conditions, READY)
    return None if ready is None else (ready.status, ready.reason)


def _blocking_job(p: _Pass, claim_jobs: list[Job]) -> str | None:
    """What holds the claim ("Job <name>", this schedule's first, or the agent's Stop), or None when it is free."""
    if p.running and p.status.active_job is not None:
        return f"Job {p.status.active_job.name}"
    active = sorted((j for j in claim_jobs if job_active(j)), key=creation_order)
    if active:
        return f"Job {active[0]['metadata']['name']}"
    if p.agent_busy:
        stop = stop_of(p)
        return f"the stop of {stop.kind} {stop.name} for cycle {stop.job_name}" if stop else "the agent's stop"
    return None


def _where(placement: Placement) -> str:
    if placement.node_name is None:
        return "not pinned to a node: no running pod mounts the claim"
    return f"pinned to node {placement.node_name} next to pod {placement.agent_pod}"


def _stuck_still_stands(p: _Pass) -> bool:
    """Ready=False from a stopped or refused Job (a missing Secret, a quota) stays until the spec changes or a cycle
    is tried again: the claim being usable says nothing about the Secret the operator cannot read."""
    ready = get_condition(p.status.conditions, READY)
    return (
        ready is not None
        and ready.status == "False"
        and ready.reason in STUCK_REASONS | REFUSAL_REASONS
        and ready.observed_generation == p.schedule.generation
    )


def _stuck_message(job_name: str, why: str) -> str:
    return (
        f"Job {job_name} stopped: its pod can never start ({why}); fix the cause (a Secret the pod can read, an "
        "image that exists, what the quota or policy asks for) and the next slot or a new runNowToken tries again"
    )


def _not_rendered(status: MemoryVocabularyStatusBody) -> str:
    """Why a MemoryVocabulary has no render yet, from its own Ready condition when it says."""
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == READY), None)
    if ready is not None and ready.get("status") == "False":
        return f"cannot be rendered: {ready.get('reason')}: {ready.get('message')}"
    return "is not rendered yet"


def _agent_stopped(p: _Pass) -> bool | None:
    """The agent_stopped gauge: absent without spec.agent Stop, 1 while a Stop holds the workload down."""
    stop = stop_of(p)
    if stop is not None:
        return stop.phase != "Restored"
    spec = p.schedule.spec
    if spec is None or spec.agent is None or spec.agent.coordination != "Stop":
        return None
    return False


def _slot_count(slots: SlotDecision) -> str:
    return f"{slots.missed}{'+' if slots.missed_capped else ''}"


__all__ = ["ClaimLocks", "NotReadyError", "ReconcileSettings", "ScheduleReconciler"]
