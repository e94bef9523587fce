"""Carrying out what ``coordination.py`` decides: the API calls of a Stop and of a RestartAfter restart.

Each step makes its API call(s) and records the outcome in the pass's status (written once, at the end of the
pass, guarded by the resourceVersion the pass read); the next step is decided by the next pass from what was
persisted. ``crash_point`` is a test seam: ``DREAMKEEPER_TEST_CRASH_AFTER=<step>`` makes the operator SIGKILL
itself right after that step's API call succeeded, so the cluster tests can prove a restart at that instant
restores the agent exactly once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Literal

from dreamkeeper.kube import ANNOTATION_AGENT_STOP, ANNOTATION_RESTARTED_AT, LABEL_CLAIM
from dreamkeeper.kube.api import ApiError, ClusterApi, ConflictError, NotFoundError
from dreamkeeper.kube.conditions import AGENT_STOPPED
from dreamkeeper.kube.coordination import (
    ClaimView,
    StopDecision,
    StopRecord,
    WorkloadView,
    cycle_changed_files,
    decide_stop,
    downtime_seconds,
    record_problem,
    restart_value,
    stale_window_seconds,
    stop_limits,
)
from dreamkeeper.kube.models import (
    AgentRestart,
    AgentSpec,
    AgentStatus,
    AgentStop,
    AgentStopSummary,
    DreamScheduleSpec,
    RunSummary,
)
from dreamkeeper.kube.naming import label_value
from dreamkeeper.kube.objects import Job, owned_by
from dreamkeeper.kube.placement import Placement, unpinned_placement

if TYPE_CHECKING:
    from dreamkeeper.kube.reconcile import _Pass

log = logging.getLogger(__name__)

CRASH_ENV = "DREAMKEEPER_TEST_CRASH_AFTER"
CrashStep = Literal["record", "scale-down", "start-cycle", "restore", "release", "restart"]


def crash_point(step: CrashStep) -> None:
    """Test seam (see the module docstring). Read at each step, so only an operator started with it crashes."""
    if os.environ.get(CRASH_ENV) == step:
        log.warning("%s=%s: killing the operator after this step, as the test asked", CRASH_ENV, step)
        os.kill(os.getpid(), signal.SIGKILL)


@dataclass(frozen=True)
class CycleIntent:
    """The cycle a due slot or run-now token asks for, before the agent is stopped for it."""

    job_name: str
    trigger: Literal["schedule", "run-now"]
    slot: datetime
    run_now_token: str | None


@dataclass(frozen=True)
class NotStarted:
    """Why the cycle of a Stop was not started: ``reason`` ends the stop (``lastStop.reason``)."""

    reason: str  # CycleNotStarted (not ready, a name conflict) or JobRefused (the API server said no)
    message: str


# The reconciler's Job creation: (stop, placement, activeDeadlineSeconds) -> None when the Job exists now, else why
# it cannot be started.
StartCycle = Callable[[AgentStop, Placement, int], "NotStarted | None"]


def _agent(p: _Pass) -> AgentStatus:
    return p.status.agent or AgentStatus()


def _set_agent(p: _Pass, **changes: object) -> None:
    p.update(agent=_agent(p).model_copy(update=changes))


def stop_of(p: _Pass) -> AgentStop | None:
    return _agent(p).stop


class AgentCoordinator:
    def __init__(self, api: ClusterApi) -> None:
        self.api = api

    def workload(self, p: _Pass, kind: str, name: str) -> WorkloadView:
        return self.workload_view(p.namespace, p.schedule.uid, kind, name)

    def workload_view(self, namespace: str, schedule_uid: str, kind: str, name: str) -> WorkloadView:
        return WorkloadView.of(self.api.get_workload(namespace, kind, name), kind, name, schedule_uid)

    # ---- Stop ---------------------------------------------------------------------------------------------------

    def begin(self, p: _Pass, agent: AgentSpec, intent: CycleIntent) -> str | None:
        """Record the replicas (annotation, then status) for ``intent``; None when recorded, else why not now.

        Nothing is scaled here: the scale-down is the next pass's, once the status holds the record."""
        ref = agent.workload_ref
        view = self.workload(p, ref.kind, ref.name)
        if not view.found:
            return f"{view.ref} not found"
        if view.holder is not None and self._held_by_another(p.namespace, view):
            return f"{view.ref} is held by another stop ({view.holder})"
        if view.annotation is not None:
            # Not this stop's (the status holds none): a forgery, a stale record, or ours from a pass whose status
            # write was lost before anything was scaled. Replaced below, in the same guarded patch.
            why = "no schedule holds it" if view.holder is not None else "this schedule's status holds no stop"
            self._ignored(p, view, f"{why}; replaced by the record of cycle {intent.job_name}")
        record = StopRecord(
            schedule_uid=p.schedule.uid,
            schedule=f"{p.namespace}/{p.name}",
            job_name=intent.job_name,
            replicas=view.replicas,
            stopped_at=p.now,
            trigger=intent.trigger,
            slot=intent.slot,
            run_now_token=intent.run_now_token,
        )
        patch = {
            "metadata": {
                "resourceVersion": view.resource_version,  # the replicas recorded are the ones read
                "annotations": {ANNOTATION_AGENT_STOP: record.annotation()},
            }
        }
        try:
            self.api.patch_workload(p.namespace, ref.kind, ref.name, patch)
        except ConflictError:
            return f"{view.ref} changed while its replicas were recorded; retrying"
        except NotFoundError:
            return f"{view.ref} not found"
        crash_point("record")
        _set_agent(p, stop=record.status(ref.kind, ref.name, "Stopping"))
        p.condition(
            AGENT_STOPPED, "True", "Recorded", f"{view.ref}: {record.replicas} replica(s) recorded; scaling to 0 next"
        )
        p.event(
            "Normal",
            "AgentStopping",
            f"stopping {view.ref} for cycle {record.job_name}: {record.replicas} replica(s) recorded (workload "
            f"annotation and status), scaling to 0",
        )
        return None

    def step(self, p: _Pass, spec: DreamScheduleSpec | None, jobs: list[Job], start: StartCycle) -> bool:
        """Advance the stop in progress by one step. True while a stop is (still) in progress."""
        stop = stop_of(p)
        agent = spec.agent if spec is not None else None
        if stop is not None:
            kind, name = stop.kind, stop.name
        elif agent is not None and agent.coordination == "Stop":
            kind, name = agent.workload_ref.kind, agent.workload_ref.name
        else:
            return False
        view = self.workload(p, kind, name)
        if stop is None and view.record is None:
            return False
        job_name = stop.job_name if stop is not None else view.record.job_name if view.record else None
        claim = ClaimView.of(self.api.list_pods(p.namespace), jobs, p.schedule.claim, job_name, p.schedule.uid)
        limits = stop_limits(agent)
        deadline = spec.active_deadline_seconds if spec is not None else 3600
        untrusted = None
        if stop is None and view.record is not None:
            untrusted = record_problem(view.record, claim, p.schedule.cron, p.now)
        decision = decide_stop(stop, view, claim, limits, deadline, p.now, untrusted)
        log.debug("%s/%s: agent stop step %s (%s)", p.namespace, p.name, decision.step, decision.message)
        return self._do(p, decision, stop, view, claim, start)

    def _do(
        self,
        p: _Pass,
        d: StopDecision,
        stop: AgentStop | None,
        view: WorkloadView,
        claim: ClaimView,
        start: StartCycle,
    ) -> bool:
        if d.step == "none":
            return False
        if d.step == "adopt":
            assert d.adopted is not None
            self._adopt(p, d, stop)
            return True
        if d.step == "discard":
            self._ignored(p, view, d.message.partition(": ")[2] or d.message, remove=True)
            return False
        assert stop is not None
        if d.step == "release":
            self._release(p, stop, view)
            return False
        if d.step == "scale-down":
            self.api.scale_workload(p.namespace, view.kind, view.name, 0)
            crash_point("scale-down")
            p.event("Normal", "AgentScaledDown", f"scaled {view.ref} to 0 for cycle {stop.job_name}")
        elif d.step == "start-cycle":
            assert d.deadline_seconds is not None
            refused = start(stop, unpinned_placement(view.template, view.ref), d.deadline_seconds)
            if refused is not None:
                # Persisted first, then the next pass (at once: p.again) restores: a restore is never repeated.
                _set_agent(p, stop=stop.model_copy(update={"reason": refused.reason}))
                p.event("Warning", "AgentCycleNotStarted", f"cycle {stop.job_name} not started: {refused.message}")
                p.condition(AGENT_STOPPED, "True", "Restoring", f"cycle not started ({refused.message}); restoring now")
                p.again = True
                return True
            crash_point("start-cycle")
            _set_agent(p, stop=stop.model_copy(update={"phase": "CycleRunning", "cycle_started_at": p.now}))
        elif d.step == "delete-cycle":
            if claim.job_uid is not None:
                self.api.delete_job(p.namespace, stop.job_name, claim.job_uid)
            p.event("Warning", "AgentDowntimeExceeded", d.message)
        elif d.step == "restore":
            self._restore(p, d, stop, view)
            return True
        p.condition(AGENT_STOPPED, "True", d.reason, d.message)
        return True

    @staticmethod
    def _adopt(p: _Pass, d: StopDecision, stop: AgentStop | None) -> None:
        adopted = d.adopted
        assert adopted is not None
        _set_agent(p, stop=adopted)
        p.condition(AGENT_STOPPED, "True", d.reason, d.message)
        if stop is not None:
            return  # our own record moving on (its Job exists): nothing else to mark
        # Its Job exists (record_problem checked it): the pass's slot and token logic finds that Job by name and
        # marks the request handled; the annotation never moves lastScheduleTime by itself.
        p.event(
            "Normal",
            "AgentStopping",
            f"stopping {adopted.kind}/{adopted.name} for cycle {adopted.job_name}: {adopted.replicas} replica(s) "
            "recorded (adopted from the workload's annotation)",
        )

    def _ignored(self, p: _Pass, view: WorkloadView, why: str, *, remove: bool = False) -> None:
        """A stop record the status does not hold: never acted on; quoted in a Warning Event and the log (it may
        carry the replicas someone wants back), and removed when ``remove`` (else the caller overwrites it)."""
        quoted = view.annotation or ""
        log.info("%s/%s: ignoring the stop record on %s (%s): %s", p.namespace, p.name, view.ref, why, quoted)
        if remove:
            patch = {
                "metadata": {"resourceVersion": view.resource_version, "annotations": {ANNOTATION_AGENT_STOP: None}}
            }
            try:
                self.api.patch_workload(p.namespace, view.kind, view.name, patch)
            except (ConflictError, NotFoundError) as exc:  # changed meanwhile: the next pass reads it again
                log.info("%s/%s: the ignored stop record stays for now: %s", p.namespace, p.name, exc)
                return
        p.event(
            "Warning",
            "StopRecordIgnored",
            f"ignored{' and removed' if remove else ''} the {ANNOTATION_AGENT_STOP} annotation on {view.ref}: {why}. "
            f"Nothing was scaled for it. It said: {quoted[:500]}",
        )

    def _held_by_another(self, namespace: str, view: WorkloadView) -> bool:
        """Whether the foreign record on ``view`` is another schedule's real Stop: that schedule exists with the
        record's uid and its status holds a stop of this workload, or it owns the Job the record names."""
        record = view.foreign
        if record is None:
            return False  # unreadable
        owner_namespace, _, owner_name = record.schedule.partition("/")
        if owner_namespace != namespace or not owner_name:
            return False
        try:
            owner = self.api.get_schedule(namespace, owner_name)
            if owner is None or owner["metadata"].get("uid") != record.schedule_uid:
                return False
            held = ((owner.get("status") or {}).get("agent") or {}).get("stop") or {}
            if (held.get("kind"), held.get("name")) == (view.kind, view.name):
                return True
            job = self.api.get_job(namespace, record.job_name)
        except ApiError as exc:  # cannot tell: treat it as held (never take a workload from a real stop)
            log.info("%s: cannot check the stop record of %s: %s", view.ref, record.schedule, exc)
            return True
        return job is not None and owned_by(job, record.schedule_uid)

    def _restore(self, p: _Pass, d: StopDecision, stop: AgentStop, view: WorkloadView) -> None:
        if d.scale:
            self.api.scale_workload(p.namespace, view.kind, view.name, stop.replicas)
            crash_point("restore")
        _set_agent(p, stop=stop.model_copy(update={"phase": "Restored", "restored_at": p.now, "reason": d.reason}))
        down = downtime_seconds(stop, p.now)
        p.agent_downtime = down
        p.condition(AGENT_STOPPED, "False", d.reason, f"{d.message} after {down:.1f} s down")
        kind = "Normal" if d.reason == "CycleFinished" else "Warning"
        p.event(kind, "AgentRestored", f"{d.message} ({down:.1f} s down; reason {d.reason})")

    def _release(self, p: _Pass, stop: AgentStop, view: WorkloadView) -> None:
        if view.found and view.record is not None:
            annotations: dict[str, str | None] = {ANNOTATION_AGENT_STOP: None}
            with contextlib.suppress(NotFoundError):
                self.api.patch_workload(p.namespace, view.kind, view.name, {"metadata": {"annotations": annotations}})
            crash_point("release")
        restored = stop.restored_at or p.now
        summary = AgentStopSummary(
            job_name=stop.job_name,
            replicas=stop.replicas,
            stopped_at=stop.stopped_at,
            restored_at=restored,
            downtime_seconds=round(downtime_seconds(stop, restored), 3),
            reason=stop.reason or "CycleFinished",
        )
        _set_agent(p, stop=None, last_stop=summary)
        p.condition(
            AGENT_STOPPED,
            "False",
            summary.reason,
            f"{view.ref} running: last stop {summary.downtime_seconds:.1f} s for cycle {summary.job_name}",
        )

    # ---- the schedule is deleted ---------------------------------------------------------------------------------

    def release_deleted(
        self, namespace: str, schedule_uid: str, claim: str, stop: AgentStop, post: Callable[[str, str, str], None]
    ) -> bool:
        """The schedule is being deleted while it holds the agent down: end its cycle, restore the replicas, drop
        the record. False while its cycle is still stopping (the caller retries; the finalizer holds the delete)."""
        jobs = self.api.list_jobs(namespace, f"{LABEL_CLAIM}={label_value(claim)}")
        claim_view = ClaimView.of(self.api.list_pods(namespace), jobs, claim, stop.job_name, schedule_uid)
        if claim_view.job == "active" and claim_view.job_uid is not None:
            self.api.delete_job(namespace, stop.job_name, claim_view.job_uid)
            post("Warning", "AgentCycleDeleted", f"schedule deleted: cycle {stop.job_name} deleted, the agent follows")
            return False
        if claim_view.cycle_pods:
            return False  # never restore beside a cycle pod that may still write
        view = self.workload_view(namespace, schedule_uid, stop.kind, stop.name)
        if stop.phase != "Restored" and view.found and view.replicas == 0:
            self.api.scale_workload(namespace, stop.kind, stop.name, stop.replicas)
        if view.found and view.record is not None:
            annotations: dict[str, str | None] = {ANNOTATION_AGENT_STOP: None}
            with contextlib.suppress(NotFoundError):
                self.api.patch_workload(namespace, stop.kind, stop.name, {"metadata": {"annotations": annotations}})
        post("Normal", "AgentRestored", f"schedule deleted: {view.ref} restored to {stop.replicas} replica(s)")
        return True

    def drop_record(
        self, namespace: str, schedule_uid: str, kind: str, name: str, post: Callable[[str, str, str], None]
    ) -> None:
        """The schedule is being deleted and its status holds no stop: a record naming it on the workload is
        removed (quoted in a Warning Event), never acted on."""
        view = self.workload_view(namespace, schedule_uid, kind, name)
        if view.record is None:
            return
        log.info("%s: removing the stop record of a deleted schedule (it holds no stop): %s", view.ref, view.annotation)
        patch = {"metadata": {"resourceVersion": view.resource_version, "annotations": {ANNOTATION_AGENT_STOP: None}}}
        with contextlib.suppress(ConflictError, NotFoundError):
            self.api.patch_workload(namespace, kind, name, patch)
            post(
                "Warning",
                "StopRecordIgnored",
                f"removed the {ANNOTATION_AGENT_STOP} annotation on {view.ref}: the schedule holds no stop, so "
                f"nothing was scaled for it. It said: {(view.annotation or '')[:500]}",
            )

    # ---- RestartAfter -------------------------------------------------------------------------------------------

    def note_run(self, p: _Pass, spec: DreamScheduleSpec | None, run: RunSummary) -> None:
        """A counted run of a RestartAfter schedule that changed files: a restart is due (persisted with the count,
        so it happens exactly once whatever the operator does in between)."""
        agent = spec.agent if spec is not None else None
        if agent is None or agent.coordination != "RestartAfter" or not cycle_changed_files(run):
            return
        pending = AgentRestart(
            job_name=run.job_name,
            cycle_started_at=run.started_at,
            first_write_at=run.first_write_at,
            requested_at=p.now,
        )
        _set_agent(p, pending_restart=pending)

    def restart(self, p: _Pass, spec: DreamScheduleSpec | None, persisted: AgentStatus | None) -> bool:
        """Do the pending restart of ``persisted`` (the status as the pass read it: a restart noted in this pass
        waits until its record is written, so a lost status write cannot make a second one). True while one is
        pending."""
        pending = persisted.pending_restart if persisted is not None else None
        if pending is None:
            return _agent(p).pending_restart is not None
        agent = spec.agent if spec is not None else None
        if agent is None or agent.coordination != "RestartAfter":
            _set_agent(p, pending_restart=None)  # the policy changed since: nothing to restart
            return False
        ref = agent.workload_ref
        annotations = {ANNOTATION_RESTARTED_AT: restart_value(pending.requested_at)}
        patch = {"spec": {"template": {"metadata": {"annotations": annotations}}}}
        try:
            self.api.patch_workload(p.namespace, ref.kind, ref.name, patch)
        except NotFoundError:
            p.event("Warning", "AgentNotRestarted", f"{ref.kind}/{ref.name} not found: nothing to restart")
            _set_agent(p, pending_restart=None)
            return False
        crash_point("restart")
        window = stale_window_seconds(pending.first_write_at or pending.cycle_started_at, p.now)
        done = pending.model_copy(update={"restarted_at": p.now, "window_seconds": window})
        _set_agent(p, pending_restart=None, last_restart=done)
        p.agent_stale_window = window
        since = "its first write" if pending.first_write_at else "the cycle started"
        said = f"; the agent ran on its stale index for {window:.1f} s since {since}" if window else ""
        p.event(
            "Normal",
            "AgentRestarted",
            f"restarted {ref.kind}/{ref.name} (rollout restart) after cycle {pending.job_name} changed files{said}",
        )
        return False


__all__ = ["CRASH_ENV", "AgentCoordinator", "CycleIntent", "NotStarted", "StartCycle", "crash_point", "stop_of"]
