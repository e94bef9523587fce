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
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from dreamkeeper.consolidation.counts import COUNTS, sentence, value_of
from dreamkeeper.kube import (
    ANNOTATION_COUNTED,
    ANNOTATION_SLOT,
    LABEL_CLAIM,
    LABEL_TRIGGER,
)
from dreamkeeper.kube.api import ApiError, ClusterApi, ConflictError, event_body, status_patch
from dreamkeeper.kube.conditions import (
    LAST_RUN_SUCCEEDED,
    READY,
    VOCABULARY_IN_SYNC,
    get_condition,
    set_condition,
)
from dreamkeeper.kube.jobspec import JobDefaults, JobRequest, Trigger, VocabularySource, build_job, cycle_settings
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.models import (
    MAX_COUNTED_UIDS,
    DreamScheduleSpec,
    DreamScheduleStatus,
    JobRef,
    RunSummary,
    Totals,
    VocabularyState,
)
from dreamkeeper.kube.naming import label_value, run_now_job_name, scheduled_job_name
from dreamkeeper.kube.placement import ClaimUnusableError, check_claim, placement_for, selector_string
from dreamkeeper.kube.results import JobOutcome, add_run, add_slots, job_active, job_finished, outcome_of
from dreamkeeper.kube.slots import CronSchedule, ScheduleError, SlotDecision, decide

log = logging.getLogger(__name__)

Obj = dict[str, Any]


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


class ClaimLocks:
    """One lock per (namespace, claim): schedules sharing a claim never decide concurrently in this process."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def get(self, namespace: str, claim: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((namespace, claim), threading.Lock())


def load_status(raw: Obj, where: str) -> DreamScheduleStatus:
    """The persisted status; a field someone corrupted by hand is dropped (and said so), not a crash loop."""
    try:
        return DreamScheduleStatus.model_validate(raw)
    except ValidationError as exc:
        bad = sorted({str(error["loc"][0]) for error in exc.errors() if error.get("loc")})
        log.warning("%s: status fields %s are invalid and are rebuilt: %s", where, bad, exc.errors()[0].get("msg"))
        return DreamScheduleStatus.model_validate({k: v for k, v in raw.items() if k not in bad})


def _ts(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value.replace("Z", "+00:00")) if value else None


def _owner_uid_matches(job: Obj, uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in (job.get("metadata") or {}).get("ownerReferences") or [])


def _created(job: Obj) -> str:
    return str((job.get("metadata") or {}).get("creationTimestamp") or "")


@dataclass
class _Pass:
    """Everything one pass decided; applied to metrics and Events only after the status patch succeeded."""

    namespace: str
    name: str
    body: Obj
    status: DreamScheduleStatus
    generation: int | None
    now: datetime
    counted: list[tuple[Obj | None, JobOutcome]] = field(default_factory=list)
    to_annotate: list[Obj] = field(default_factory=list)
    events: list[tuple[str, str, str]] = field(default_factory=list)
    missed: int = 0
    skipped: list[str] = field(default_factory=list)
    running: bool = False
    owned_jobs: list[Obj] = field(default_factory=list)
    listed: bool = False
    deferred_run_now: bool = False
    announced: list[tuple[str, str]] = field(default_factory=list)

    def event(self, kind: str, reason: str, message: str) -> None:
        self.events.append((kind, reason, message))

    def update(self, **changes: Any) -> None:
        self.status = self.status.model_copy(update=changes)

    def condition(self, type_: str, status: str, reason: str, message: str) -> None:
        conditions = set_condition(
            self.status.conditions,
            type_,
            status,  # type: ignore[arg-type]
            reason,
            message,
            generation=self.generation,
            now=self.now,
        )
        self.update(conditions=conditions)


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
        self._visited: set[str] = set()  # schedule UIDs that had their first (full) pass in this process
        self._deferred_events: set[tuple[str, str]] = set()  # (uid, token) whose deferral was announced
        self.vocabulary_users: dict[tuple[str, str], set[str]] = {}  # (ns, vocabulary) -> schedule names

    # ---- entry point --------------------------------------------------------------------------------------

    def reconcile(self, body: Obj, *, full: bool = False) -> float:
        """One pass on ``body`` (a fresh read of the DreamSchedule). Returns seconds until the next pass.

        ``full`` forces the claim/vocabulary checks (spec changed, vocabulary changed, first pass)."""
        meta = body.get("metadata") or {}
        namespace, name, uid = meta["namespace"], meta["name"], meta["uid"]
        raw_status = body.get("status") or {}
        status = load_status(raw_status, f"{namespace}/{name}")
        self.metrics.ensure_schedule(namespace, name, status.totals)
        first = uid not in self._visited
        p = _Pass(namespace, name, body, status, meta.get("generation"), self.clock())
        claim = str((body.get("spec") or {}).get("claimName") or "")
        lock = self.claim_locks.get(namespace, claim)
        with lock:
            delay = self._pass(p, uid, claim, full=full or first or status.observed_generation != p.generation)
            if p.status != status:
                patch = status_patch(p.status.wire(), raw_status, meta.get("resourceVersion"))
                try:
                    self.api.patch_schedule_status(namespace, name, patch)
                except ConflictError:
                    # Someone (or an earlier pass) changed the CR since this copy was read: nothing was counted;
                    # the next pass works on the fresh copy and any Job created here is adopted by name.
                    log.info("%s/%s: status changed concurrently; retrying the pass", namespace, name)
                    return self.settings.conflict_retry_seconds
        self._visited.add(uid)
        self._after_persist(p, uid)
        return delay

    def forget(self, namespace: str, name: str, uid: str | None) -> None:
        """The schedule is gone: drop its series and caches."""
        self.metrics.remove_schedule(namespace, name)
        if uid:
            self._visited.discard(uid)
        for users in self.vocabulary_users.values():
            users.discard(name)

    # ---- the pass -----------------------------------------------------------------------------------------

    def _pass(self, p: _Pass, uid: str, claim: str, *, full: bool) -> float:
        spec, schedule, problem = self._parse(p)
        active = p.status.active_job
        need_list = full
        if active is not None:
            job = self.api.get_job(p.namespace, active.name)
            if job is not None and (job.get("metadata") or {}).get("uid") == active.uid and job_active(job):
                p.running = True
            else:
                need_list = True
        decision: SlotDecision | None = None
        run_now = None
        if spec is not None and schedule is not None:
            decision = decide(
                schedule,
                last_schedule_time=p.status.last_schedule_time,
                created=_ts((p.body.get("metadata") or {}).get("creationTimestamp")) or p.now,
                now=p.now,
                starting_deadline_seconds=spec.starting_deadline_seconds,
            )
            if spec.run_now_token and spec.run_now_token != p.status.last_run_now_token:
                run_now = spec.run_now_token
            if decision.acted_slot is not None or run_now is not None:
                need_list = True
        claim_jobs: list[Obj] = []
        if need_list and claim:
            claim_jobs = self._account(p, uid, claim)
        if spec is not None and schedule is not None and decision is not None:
            self._act(p, uid, spec, decision, run_now, claim_jobs, full=full or bool(p.counted))
            p.update(next_schedule_time=decision.next_slot)
        elif problem is not None:
            p.condition(READY, "False", problem[0], problem[1])
            p.update(next_schedule_time=None)
        p.update(observed_generation=p.generation)
        if p.status.conditions is None or get_condition(p.status.conditions, LAST_RUN_SUCCEEDED) is None:
            p.condition(LAST_RUN_SUCCEEDED, "Unknown", "NoRunYet", "no cycle has finished yet")
        if get_condition(p.status.conditions, VOCABULARY_IN_SYNC) is None:
            p.condition(VOCABULARY_IN_SYNC, "Unknown", "NotChecked", "no cycle has seeded the vocabulary yet")
        if spec is not None and spec.vocabulary_ref is None:
            p.condition(VOCABULARY_IN_SYNC, "Unknown", "NoVocabularyRef", "no vocabularyRef: the agent's own file")
        return self._delay(p, decision, problem is not None)

    def _parse(self, p: _Pass) -> tuple[DreamScheduleSpec | None, CronSchedule | None, tuple[str, str] | None]:
        try:
            spec = DreamScheduleSpec.model_validate(p.body.get("spec") or {})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(x) for x in first.get("loc", ()))
            return None, None, ("InvalidSpec", f"spec.{where}: {first.get('msg')} ({exc.error_count()} error(s))")
        try:
            schedule = CronSchedule.parse(spec.schedule, spec.time_zone)
        except ScheduleError as exc:
            return spec, None, (exc.reason, str(exc))
        try:
            cycle_settings(spec)
        except ValidationError as exc:
            return spec, None, ("InvalidSafeguards", f"spec.safeguards: {exc.errors()[0].get('msg')}")
        return spec, schedule, None

    # ---- counting ---------------------------------------------------------------------------------------------

    def _account(self, p: _Pass, uid: str, claim: str) -> list[Obj]:
        """Count every finished, uncounted Job of this schedule; adopt an active one. Returns the claim's Jobs."""
        jobs = self.api.list_jobs(p.namespace, f"{LABEL_CLAIM}={label_value(claim)}")
        p.listed = True
        owned = sorted((j for j in jobs if _owner_uid_matches(j, uid)), key=_created)
        p.owned_jobs = owned
        counted_uids = list(p.status.counted_job_uids or [])
        for job in owned:
            meta = job["metadata"]
            if not job_finished(job):
                continue
            already = meta["uid"] in counted_uids or (meta.get("annotations") or {}).get(ANNOTATION_COUNTED) == "true"
            if already:
                if (meta.get("annotations") or {}).get(ANNOTATION_COUNTED) != "true":
                    p.to_annotate.append(job)
                continue
            self._count(p, job)
        active = p.status.active_job
        gone = active is not None and not any(j["metadata"]["uid"] == active.uid for j in owned)
        if gone and active is not None and active.uid not in counted_uids:
            # The Job we were tracking vanished before it was counted: a failed cycle, counted once.
            self._count(p, None, ref=active)
        own_active = [j for j in owned if job_active(j)]
        if own_active:
            p.running = True
            p.update(active_job=self._ref(own_active[-1]))
        else:
            p.running = False
            p.update(active_job=None)
        return jobs

    def _count(self, p: _Pass, job: Obj | None, ref: JobRef | None = None) -> None:
        if job is not None:
            meta = job["metadata"]
            job_uid, job_name = meta["uid"], meta["name"]
            trigger = (meta.get("labels") or {}).get(LABEL_TRIGGER, "schedule")
            pods = self.api.list_pods(p.namespace, f"batch.kubernetes.io/controller-uid={job_uid}")
            if not pods:  # clusters before 1.27 label pods with the legacy key only
                pods = self.api.list_pods(p.namespace, f"controller-uid={job_uid}")
        else:
            assert ref is not None
            job_uid, job_name, trigger, pods = ref.uid, ref.name, ref.trigger, []
        outcome = outcome_of(job, pods, job_name=job_name, job_uid=job_uid, trigger=trigger)
        run = outcome.run
        if job is None and ref is not None:
            run = run.model_copy(update={"slot": ref.slot})
            outcome = JobOutcome(run, None)
        uids = [*(p.status.counted_job_uids or []), job_uid][-MAX_COUNTED_UIDS:]
        totals = add_run(p.status.totals or Totals(), run)
        changes: dict[str, Any] = {"counted_job_uids": uids, "totals": totals, "last_run": run}
        if outcome.succeeded and run.finished_at is not None:
            changes["last_successful_time"] = max(filter(None, [p.status.last_successful_time, run.finished_at]))
        p.update(**changes)
        p.counted.append((job, outcome))
        if job is not None:
            p.to_annotate.append(job)
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
        ref = (p.body.get("spec") or {}).get("vocabularyRef") or {}
        if not ref.get("name"):
            return None
        vocabulary = self.api.get_vocabulary(p.namespace, ref["name"])
        return ((vocabulary or {}).get("status") or {}).get("sha256")

    def _events_for_run(self, p: _Pass, run: RunSummary) -> None:
        if run.result == "failed":
            p.event("Warning", "CycleFailed", f"cycle {run.job_name} failed ({run.reason}): {run.error or ''}".strip())
        elif run.reason == "LockHeld":
            p.event("Warning", "CycleSkipped", f"cycle {run.job_name} skipped: {run.skip_reason}")
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

    @staticmethod
    def _ref(job: Obj) -> JobRef:
        meta = job["metadata"]
        annotations = meta.get("annotations") or {}
        trigger = (meta.get("labels") or {}).get(LABEL_TRIGGER, "schedule")
        return JobRef(
            name=meta["name"],
            uid=meta["uid"],
            trigger="run-now" if trigger == "run-now" else "schedule",
            slot=_ts(annotations.get(ANNOTATION_SLOT)) or _ts(meta.get("creationTimestamp")) or datetime.now(UTC),
            created_at=_ts(meta.get("creationTimestamp")),
        )

    # ---- starting cycles ---------------------------------------------------------------------------------------

    def _act(
        self,
        p: _Pass,
        uid: str,
        spec: DreamScheduleSpec,
        decision: SlotDecision,
        run_now: str | None,
        claim_jobs: list[Obj],
        *,
        full: bool,
    ) -> None:
        busy = any(job_active(j) for j in claim_jobs) or p.running
        vocabulary: VocabularySource | None = None
        not_ready: NotReadyError | None = None
        wants_job = run_now is not None or decision.due is not None
        if full or wants_job:
            try:
                vocabulary = self._check_ready(p, spec)
                p.condition(READY, "True", "Scheduled", f"schedule valid; claim {spec.claim_name} usable")
            except NotReadyError as exc:
                not_ready = exc
                p.condition(READY, "False", exc.reason, str(exc))
            except ClaimUnusableError as exc:
                not_ready = NotReadyError(exc.reason, str(exc))
                p.condition(READY, "False", exc.reason, str(exc))
        elif get_condition(p.status.conditions, READY) is None:
            p.condition(READY, "Unknown", "NotChecked", "not checked yet")
        if p.status.vocabulary is not None and full:
            p.update(
                vocabulary=p.status.vocabulary.model_copy(
                    update={"expected_sha256": vocabulary.sha256 if vocabulary else self._expected_vocabulary_sha(p)}
                )
            )
            self._vocabulary_condition(p)

        if run_now is not None:
            name = run_now_job_name(p.name, run_now, p.generation or 0)
            if self._adopt(p, uid, claim_jobs, name):
                p.update(last_run_now_token=run_now)  # created by a pass whose status write was lost
            elif not_ready is not None:
                self._announce_deferral(p, uid, run_now, f"not ready ({not_ready.reason}): {not_ready}")
            elif busy:
                self._announce_deferral(p, uid, run_now, "a cycle is active on the claim; it runs when that ends")
            elif self._start(p, uid, spec, name, "run-now", p.now, vocabulary, run_now):
                p.update(last_run_now_token=run_now)
                busy = True

        if decision.past_deadline is not None:
            p.missed += decision.missed
            p.update(
                last_schedule_time=decision.past_deadline,
                totals=add_slots(p.status.totals or Totals(), missed=decision.missed),
            )
            p.event(
                "Warning",
                "MissedSlots",
                f"{decision.missed}{'+' if decision.missed_capped else ''} slot(s) passed unrun, the latest "
                f"({decision.past_deadline.isoformat()}) is older than startingDeadlineSeconds="
                f"{spec.starting_deadline_seconds}",
            )
            return
        slot = decision.due
        if slot is None:
            return
        if decision.missed:
            p.missed += decision.missed
            p.update(totals=add_slots(p.status.totals or Totals(), missed=decision.missed))
            p.event(
                "Warning",
                "MissedSlots",
                f"{decision.missed}{'+' if decision.missed_capped else ''} slot(s) passed while the operator was "
                f"not running; only the latest ({slot.isoformat()}) runs (no backlog replay)",
            )
        reason: str | None = None
        if self._adopt(p, uid, claim_jobs, scheduled_job_name(p.name, slot)):
            pass  # this slot's Job exists already (a lost status write): adopted, nothing skipped
        elif spec.suspend:
            reason = "suspended"
        elif not_ready is not None:
            reason = "not_ready"
            p.event("Warning", "SlotSkipped", f"slot {slot.isoformat()} skipped: {not_ready.reason}: {not_ready}")
        elif busy:
            reason = "concurrent"
            p.event(
                "Warning",
                "SlotSkipped",
                f"slot {slot.isoformat()} skipped: another cycle is active on claim {spec.claim_name} "
                "(never two cycles on one volume)",
            )
        elif not self._start(p, uid, spec, scheduled_job_name(p.name, slot), "schedule", slot, vocabulary, None):
            reason = "name_conflict"
        if reason is not None:
            p.skipped.append(reason)
            p.update(totals=add_slots(p.status.totals or Totals(), skipped_reason=reason))
        p.update(last_schedule_time=slot)

    def _announce_deferral(self, p: _Pass, uid: str, token: str, why: str) -> None:
        p.deferred_run_now = True
        if (uid, token) not in self._deferred_events:
            # Remembered as announced only once the pass is persisted and the Event posted (_after_persist).
            p.announced.append((uid, token))
            p.event("Normal", "RunNowDeferred", f"runNowToken {token!r} waits: {why}")

    def _adopt(self, p: _Pass, uid: str, claim_jobs: list[Obj], job_name: str) -> bool:
        """True when this schedule's Job of that deterministic name exists (active or finished)."""
        for job in claim_jobs:
            if job["metadata"]["name"] == job_name and _owner_uid_matches(job, uid):
                if job_active(job):
                    p.running = True
                    p.update(active_job=self._ref(job))
                return True
        return False

    def _check_ready(self, p: _Pass, spec: DreamScheduleSpec) -> VocabularySource | None:
        pvc = self.api.get_pvc(p.namespace, spec.claim_name)
        if pvc is None:
            raise NotReadyError("ClaimNotFound", f"PersistentVolumeClaim {spec.claim_name} not found")
        check_claim(pvc)
        ref = spec.vocabulary_ref
        if ref is None:
            return None
        self.vocabulary_users.setdefault((p.namespace, ref.name), set()).add(p.name)
        vocabulary = self.api.get_vocabulary(p.namespace, ref.name)
        if vocabulary is None:
            raise NotReadyError("VocabularyNotFound", f"MemoryVocabulary {ref.name} not found")
        status = vocabulary.get("status") or {}
        if not status.get("sha256") or not status.get("configMapName"):
            raise NotReadyError("VocabularyNotRendered", f"MemoryVocabulary {ref.name} is not rendered yet")
        if self.api.get_config_map(p.namespace, status["configMapName"]) is None:
            raise NotReadyError(
                "VocabularyNotRendered",
                f"ConfigMap {status['configMapName']} of MemoryVocabulary {ref.name} is missing",
            )
        return VocabularySource(config_map=status["configMapName"], sha256=status["sha256"])

    def _start(
        self,
        p: _Pass,
        uid: str,
        spec: DreamScheduleSpec,
        job_name: str,
        trigger: Trigger,
        slot: datetime,
        vocabulary: VocabularySource | None,
        token: str | None,
    ) -> bool:
        """Create (or adopt) the Job. False when a foreign object holds the name."""
        pods = self.api.list_pods(
            p.namespace, selector_string(spec.agent_selector.wire() if spec.agent_selector else None)
        )
        placement = placement_for(pods, spec.claim_name)
        request = JobRequest(
            schedule_name=p.name,
            schedule_uid=uid,
            namespace=p.namespace,
            spec=spec,
            job_name=job_name,
            trigger=trigger,
            slot=slot,
            placement=placement,
            vocabulary=vocabulary,
            run_now_token=token,
        )
        try:
            job = self.api.create_job(p.namespace, build_job(request, self.defaults))
            # Posted now, not after the status write: the Job exists whatever happens to this pass.
            self._post(
                p,
                "Normal",
                "CycleStarted",
                f"created Job {job_name} ({trigger}, slot {slot.isoformat()}) on {placement.description}",
            )
        except ConflictError as exc:
            if not exc.already_exists:
                raise
            existing = self.api.get_job(p.namespace, job_name)
            if existing is None or not _owner_uid_matches(existing, uid):
                p.event("Warning", "NameConflict", f"Job {job_name} exists and is not this schedule's; slot skipped")
                return False
            job = existing  # created by an earlier pass whose status write was lost: adopt it
        if job_active(job):
            p.running = True
            p.update(active_job=self._ref(job))
        return True

    # ---- after the status write ------------------------------------------------------------------------------

    def _after_persist(self, p: _Pass, uid: str) -> None:
        for _, outcome in p.counted:
            self.metrics.record_run(p.namespace, p.name, outcome.run)
        if p.missed:
            self.metrics.record_slots(p.namespace, p.name, missed=p.missed)
        for reason in p.skipped:
            self.metrics.record_slots(p.namespace, p.name, skipped_reason=reason)
        ready = get_condition(p.status.conditions, READY)
        sync = get_condition(p.status.conditions, VOCABULARY_IN_SYNC)
        last = p.status.last_run
        self.metrics.set_state(
            p.namespace,
            p.name,
            ready=ready is not None and ready.status == "True",
            running=p.running,
            next_run=p.status.next_schedule_time,
            last_success=p.status.last_successful_time,
            vocabulary_in_sync=None if sync is None or sync.status == "Unknown" else sync.status == "True",
            last_run=last,
            interval_seconds=_interval_after(p.body, p.status.next_schedule_time),
        )
        for kind, reason, message in p.events:
            self._post(p, kind, reason, message)
        self._deferred_events.update(p.announced)
        for job in p.to_annotate:
            meta = job["metadata"]
            try:
                self.api.patch_job(
                    p.namespace, meta["name"], {"metadata": {"annotations": {ANNOTATION_COUNTED: "true"}}}
                )
                meta.setdefault("annotations", {})[ANNOTATION_COUNTED] = "true"
            except ApiError as exc:  # the UID list still prevents a recount
                log.warning("%s/%s: could not mark Job %s counted: %s", p.namespace, p.name, meta["name"], exc)
        if p.listed:
            self._prune(p)

    def _post(self, p: _Pass, kind: str, reason: str, message: str) -> None:
        try:
            self.api.create_event(p.namespace, event_body(p.body, kind, reason, message, p.now))
        except ApiError as exc:
            log.warning("%s/%s: event %s not posted: %s", p.namespace, p.name, reason, exc)

    def _prune(self, p: _Pass) -> None:
        spec = p.body.get("spec") or {}
        keep_ok = int(spec.get("successfulJobsHistoryLimit", 3))
        keep_failed = int(spec.get("failedJobsHistoryLimit", 1))
        finished = [
            j
            for j in p.owned_jobs
            if job_finished(j) and (j["metadata"].get("annotations") or {}).get(ANNOTATION_COUNTED) == "true"
        ]
        finished.sort(key=_created, reverse=True)
        succeeded = [j for j in finished if _condition_true(j, "Complete")]
        failed = [j for j in finished if not _condition_true(j, "Complete")]
        for job in succeeded[keep_ok:] + failed[keep_failed:]:
            meta = job["metadata"]
            try:
                self.api.delete_job(p.namespace, meta["name"], meta["uid"])
                log.info("%s/%s: pruned Job %s (history limits)", p.namespace, p.name, meta["name"])
            except ApiError as exc:
                log.warning("%s/%s: could not prune Job %s: %s", p.namespace, p.name, meta["name"], exc)

    def _delay(self, p: _Pass, decision: SlotDecision | None, invalid: bool) -> float:
        s = self.settings
        if p.running or p.deferred_run_now:
            return s.poll_seconds
        if invalid or decision is None:
            return s.max_sleep_seconds
        until = (decision.next_slot - p.now).total_seconds() + 0.5
        return max(1.0, min(s.max_sleep_seconds, until))


def _interval_after(body: Obj, next_slot: datetime | None) -> float | None:
    """Seconds from ``next_slot`` to the slot after it: the cadence alerts count "periods" in."""
    spec = body.get("spec") or {}
    if next_slot is None or not spec.get("schedule"):
        return None
    try:
        schedule = CronSchedule.parse(str(spec["schedule"]), spec.get("timeZone"))
    except ScheduleError:
        return None
    return (schedule.next_after(next_slot) - next_slot).total_seconds()


def _condition_true(job: Obj, type_: str) -> bool:
    return any(
        c.get("type") == type_ and c.get("status") == "True" for c in (job.get("status") or {}).get("conditions") or []
    )


__all__ = ["ClaimLocks", "NotReadyError", "ReconcileSettings", "ScheduleReconciler"]
