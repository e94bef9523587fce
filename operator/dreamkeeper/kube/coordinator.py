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
from dreamkeeper.kube.api import ClusterApi, ConflictError, NotFoundError
from dreamkeeper.kube.conditions import AGENT_STOPPED
from dreamkeeper.kube.coordination import (
    ClaimView,
    StopDecision,
    StopRecord,
    WorkloadView,
    cycle_changed_files,
    decide_stop,
    downtime_seconds,
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
from dreamkeeper.kube.objects import Job
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


# The reconciler's Job creation: (stop, placement, activeDeadlineSeconds) -> None when the Job exists now, else why
# it cannot be started (not ready, name conflict).
StartCycle = Callable[[AgentStop, Placement, int], "str | None"]


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
        if view.holder is not None:
            return f"{view.ref} is held by another stop ({view.holder}); remove its {ANNOTATION_AGENT_STOP} if stale"
        if view.record is not None:
            if view.record.job_name != intent.job_name:
                return f"{view.ref} is stopped for cycle {view.record.job_name}"
            record = view.record  # written by a pass whose status write was lost: adopt it
        else:
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
        decision = decide_stop(stop, view, claim, limits, deadline, p.now)
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
                _set_agent(p, stop=stop.model_copy(update={"reason": "CycleNotStarted"}))
                p.event("Warning", "AgentCycleNotStarted", f"cycle {stop.job_name} not started: {refused}")
                p.condition(AGENT_STOPPED, "True", "Restoring", f"cycle not started ({refused}); restoring")
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
        # The record's request was being handled by the pass whose status write was lost: mark it handled now,
        # or the next pass would stop the agent a second time for the same token or slot.
        if adopted.trigger == "run-now" and adopted.run_now_token is not None:
            p.update(last_run_now_token=adopted.run_now_token)
        elif adopted.trigger == "schedule":
            last = p.status.last_schedule_time
            p.update(last_schedule_time=adopted.slot if last is None else max(last, adopted.slot))
        p.event(
            "Normal",
            "AgentStopping",
            f"stopping {adopted.kind}/{adopted.name} for cycle {adopted.job_name}: {adopted.replicas} replica(s) "
            "recorded (adopted from the workload's annotation)",
        )

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


__all__ = ["CRASH_ENV", "AgentCoordinator", "CycleIntent", "StartCycle", "crash_point", "stop_of"]
