"""Starting cycles: the run-now token, then the due slot (or why it is skipped), the Job created or adopted.

Moved out of ``reconcile.py`` unchanged (a module per concern).
"""

from __future__ import annotations

import logging
from datetime import datetime

from dreamkeeper.kube.api import ApiError, ConflictError
from dreamkeeper.kube.conditions import (
    READY,
    get_condition,
)
from dreamkeeper.kube.coordinator import CycleIntent, NotStarted, stop_of
from dreamkeeper.kube.counting import Counting
from dreamkeeper.kube.jobspec import JobRequest, Trigger, VocabularySource, build_job
from dreamkeeper.kube.models import (
    AgentStop,
    DreamScheduleSpec,
    Totals,
)
from dreamkeeper.kube.naming import run_now_job_name, scheduled_job_name
from dreamkeeper.kube.objects import (
    Job,
    MemoryVocabularyStatusBody,
    creation_order,
    owned_by,
)
from dreamkeeper.kube.passes import _Pass
from dreamkeeper.kube.placement import ClaimUnusableError, Placement, check_claim, placement_for, selector_string
from dreamkeeper.kube.refusals import REFUSAL_REASONS, Refusal, is_refusal
from dreamkeeper.kube.results import (
    add_slots,
    job_active,
)
from dreamkeeper.kube.schedule_view import NotReadyError, Readiness
from dreamkeeper.kube.slots import Due, SlotDecision
from dreamkeeper.kube.stuck import STUCK_REASONS

log = logging.getLogger(__name__)

NAME_CONFLICT = "name_conflict"  # _launch: a Job of that name exists and is not this schedule's


class Launching(Counting):
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
        pvc = self.claims.get_claim(p.namespace, spec.claim_name)
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
        # Before the claim's lock is released: the next pass on this claim sees the Job whatever the watch says.
        self.jobs.observe(job)
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


def _not_rendered(status: MemoryVocabularyStatusBody) -> str:
    """Why a MemoryVocabulary has no render yet, from its own Ready condition when it says."""
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == READY), None)
    if ready is not None and ready.get("status") == "False":
        return f"cannot be rendered: {ready.get('reason')}: {ready.get('message')}"
    return "is not rendered yet"


def _slot_count(slots: SlotDecision) -> str:
    return f"{slots.missed}{'+' if slots.missed_capped else ''}"
