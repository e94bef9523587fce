"""Coordination with the agent's own workload, decided from persisted state only: what one pass must do.

Why it exists: RockBot loads its memory index once per process and never re-reads it; every later save of an
entry writes the whole cached object back (MarimerLLC/rockbot ``src/RockBot.Host/FileMemoryStore.cs`` @8a7e360e
``EnsureIndexAsync``/``SaveAsync``, ``MemoryDeduplicator.cs`` @8a7e360e ``Reinforce``). A cycle that changes files
under a running agent is undone by the agent's next write of the same entry. So a DreamSchedule names the agent's
Deployment or StatefulSet and a policy (``spec.agent``):

* ``Stop``: record the replicas, scale to 0, wait until no pod mounts the claim, run the cycle, restore.
* ``RestartAfter``: run beside the agent, then restart it (``kubectl rollout restart``) if the cycle changed files.
* ``None``: the agent re-reads its files.

A Stop is a state machine whose state is written twice, on the workload (annotation ``dreamkeeper.io/agent-stop``)
and in ``status.agent.stop``, **before** anything is scaled. Each pass reads both, the workload, the pods mounting
the claim and the claim's Jobs, and ``decide_stop`` (a pure function of those, like ``slots.decide``) returns the
one step to take. The rules it enforces:

* the scale-down happens only once the record is in the status the pass read (so it is persisted);
* the cycle Job is created only when no pod mounts the claim;
* the replicas are restored only when no cycle Job is active on the claim and no cycle pod still mounts it, and
  whatever ended the cycle (completed, failed, deadline exceeded, Job deleted) or stopped it from starting
  (scale-down timed out, the downtime budget used up, not ready);
* restoring is idempotent (the recorded count is set only while the workload is still at 0), and the record is
  released afterwards: the annotation first, then the status record. An operator killed between any two API
  calls therefore restores the agent exactly once.

**The status is the record; the annotation is a copy** for people (and the way out with the operator gone). Whoever
may patch the workload may write the annotation (issue 21: a tenant with no rights on schedules forged one naming a
Job of her choice and slot 2999-01-01, and the schedule never ran again). So an annotation the status does not hold
is adopted only when it names a Job the operator created for that schedule (owned by its uid) and the slot that
Job was created for (a slot the cron produced, for a scheduled cycle): the only way one can be genuine, since a
Job is created only after the status holds the record (the status was reset by hand). Any other is a forgery or
a record whose status write was lost before anything was scaled: it is removed, with a Warning Event quoting it,
and never moves ``lastScheduleTime`` or names a Job.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from dreamkeeper.kube import (
    ANNOTATION_AGENT_STOP,
    ANNOTATION_RUN_NOW_TOKEN,
    ANNOTATION_SLOT,
    ANNOTATION_STOPPED,
    LABEL_MANAGED_BY,
    LABEL_TRIGGER,
    MANAGED_BY,
)
from dreamkeeper.kube.models import CONDITION_REASON, AgentSpec, AgentStop, RunSummary
from dreamkeeper.kube.objects import Job, Pod, PodSpec, Workload, annotations_of, labels_of, owned_by, parse_time
from dreamkeeper.kube.placement import mounts_claim
from dreamkeeper.kube.results import job_active
from dreamkeeper.kube.slots import CronSchedule
from dreamkeeper.memory import loads_json

# After maxDowntimeSeconds the Job's own deadline has stopped the cycle; this much later the operator deletes the
# Job itself (a backstop: a Job whose deadline cannot fire, e.g. its pod never leaves Pending on a lost node).
DELETE_GRACE_SECONDS = 60
MIN_CYCLE_SECONDS = 60  # the least time worth starting a cycle with (the CRD's activeDeadlineSeconds minimum)


def stop_limits(agent: AgentSpec | None) -> AgentSpec:
    """The spec's bounds; its defaults when ``spec.agent`` was removed while a stop was in progress."""
    if agent is not None:
        return agent
    return AgentSpec.model_validate({"workloadRef": {"kind": "Deployment", "name": "unset"}})


# ---- the record on the workload --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StopRecord:
    """``dreamkeeper.io/agent-stop`` on the workload: enough to rebuild ``status.agent.stop`` from it alone."""

    schedule_uid: str
    schedule: str  # namespace/name, for people reading the annotation
    job_name: str
    replicas: int
    stopped_at: datetime
    trigger: Literal["schedule", "run-now"]
    slot: datetime
    run_now_token: str | None = None

    def annotation(self) -> str:
        return json.dumps(
            {
                "scheduleUID": self.schedule_uid,
                "schedule": self.schedule,
                "job": self.job_name,
                "replicas": self.replicas,
                "stoppedAt": _stamp(self.stopped_at),
                "trigger": self.trigger,
                "slot": _stamp(self.slot),
                "runNowToken": self.run_now_token,
            },
            separators=(",", ":"),
        )

    @classmethod
    def parse(cls, value: str | None) -> StopRecord | None:
        """None when absent or unreadable (a hand edit): the status record, if any, still decides."""
        if not value:
            return None
        try:
            data = loads_json(value)
            stopped, slot = parse_time(data["stoppedAt"]), parse_time(data["slot"])
            replicas = data["replicas"]
            if stopped is None or slot is None or not isinstance(replicas, int) or replicas < 0:
                return None
            trigger: Literal["schedule", "run-now"] = "run-now" if data.get("trigger") == "run-now" else "schedule"
            token = data.get("runNowToken")
            return cls(
                schedule_uid=str(data["scheduleUID"]),
                schedule=str(data.get("schedule") or ""),
                job_name=str(data["job"]),
                replicas=replicas,
                stopped_at=stopped,
                trigger=trigger,
                slot=slot,
                run_now_token=str(token) if token is not None else None,
            )
        except (ValueError, KeyError, TypeError):
            return None

    def status(self, kind: str, name: str, phase: Literal["Stopping", "CycleRunning"]) -> AgentStop:
        return AgentStop.model_validate(
            {
                "kind": kind,
                "name": name,
                "replicas": self.replicas,
                "phase": phase,
                "stopped_at": self.stopped_at,
                "job_name": self.job_name,
                "trigger": self.trigger,
                "slot": self.slot,
                "run_now_token": self.run_now_token,
            }
        )


def _stamp(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


# ---- what a pass reads ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadView:
    """The agent's workload as one pass read it."""

    kind: str
    name: str
    found: bool
    replicas: int = 0  # spec.replicas (an absent field is 1, as the API server defaults it)
    resource_version: str | None = None
    record: StopRecord | None = None  # this schedule's stop record
    holder: str | None = None  # another schedule holding the workload (its annotation), or "unreadable"
    template: PodSpec | None = None
    annotation: str | None = None  # the annotation as found (quoted when it is ignored)
    foreign: StopRecord | None = None  # the record of ``holder``, when readable

    @property
    def ref(self) -> str:
        return f"{self.kind}/{self.name}"

    @classmethod
    def of(cls, workload: Workload | None, kind: str, name: str, schedule_uid: str) -> WorkloadView:
        if workload is None:
            return cls(kind, name, found=False)
        spec = workload.get("spec") or {}
        raw = annotations_of(workload).get(ANNOTATION_AGENT_STOP)
        record = StopRecord.parse(raw)
        holder: str | None = None
        foreign: StopRecord | None = None
        if raw and record is None:
            holder = "unreadable"
        elif record is not None and record.schedule_uid != schedule_uid:
            holder, foreign, record = record.schedule or record.schedule_uid, record, None
        replicas = spec.get("replicas")
        return cls(
            kind,
            name,
            found=True,
            replicas=1 if replicas is None else int(replicas),
            resource_version=workload["metadata"].get("resourceVersion"),
            record=record,
            holder=holder,
            template=(spec.get("template") or {}).get("spec") or {},
            annotation=raw,
            foreign=foreign,
        )


JobState = Literal["absent", "active", "finished"]


@dataclass(frozen=True)
class ClaimView:
    """Who uses the claim now: pods that mount it (not finished) and the state of the stop's own Job."""

    agent_pods: tuple[str, ...] = ()  # any pod that is not a dreamkeeper cycle pod
    cycle_pods: tuple[str, ...] = ()  # dreamkeeper cycle pods, of any schedule
    job: JobState = "absent"
    job_uid: str | None = None
    other_jobs_active: tuple[str, ...] = ()  # active cycle Jobs on the claim besides the stop's own
    # What the operator wrote on the stop's own Job when it created it (a Job only the operator creates, so this,
    # not the workload's annotation, says which trigger and slot the cycle is for), and why it stopped the Job.
    job_trigger: str | None = None
    job_slot: datetime | None = None
    job_token: str | None = None
    job_stopped: str | None = None  # the reason of ANNOTATION_STOPPED (PodRefused, SecretUnavailable, ...)

    @classmethod
    def of(cls, pods: list[Pod], jobs: list[Job], claim: str, job_name: str | None, schedule_uid: str) -> ClaimView:
        users = [
            p
            for p in pods
            if mounts_claim(p, claim) and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ]
        cycle = tuple(sorted(p["metadata"]["name"] for p in users if labels_of(p).get(LABEL_MANAGED_BY) == MANAGED_BY))
        agents = tuple(sorted(p["metadata"]["name"] for p in users if labels_of(p).get(LABEL_MANAGED_BY) != MANAGED_BY))
        own = next(
            (j for j in jobs if j["metadata"]["name"] == job_name and owned_by(j, schedule_uid)),
            None,
        )
        state: JobState = "absent" if own is None else "active" if job_active(own) else "finished"
        others = tuple(sorted(j["metadata"]["name"] for j in jobs if j is not own and job_active(j)))
        if own is None:
            return cls(agents, cycle, state, None, others)
        notes = annotations_of(own)
        stopped = (notes.get(ANNOTATION_STOPPED) or "").partition(": ")[0]
        return cls(
            agents,
            cycle,
            state,
            own["metadata"]["uid"],
            others,
            job_trigger=labels_of(own).get(LABEL_TRIGGER, "schedule"),
            job_slot=parse_time(notes.get(ANNOTATION_SLOT)),
            job_token=notes.get(ANNOTATION_RUN_NOW_TOKEN),
            job_stopped=stopped if re.fullmatch(CONDITION_REASON, stopped) else None,
        )


def record_problem(record: StopRecord, claim: ClaimView, cron: CronSchedule | None, now: datetime) -> str | None:
    """Why a stop record found on the workload, and not in the status, may not be adopted (None: it may).

    ``claim`` was read for ``record.job_name``. Genuine only with the Job the operator created for it, owned by this
    schedule, for the trigger and slot the record says (and, for a scheduled cycle, a slot the cron produced, not in
    the future): see the module docstring."""
    if claim.job == "absent":
        return (
            f"it names cycle Job {record.job_name!r}, which the operator never created for this schedule (a forged "
            "record, or one whose status write was lost before anything was scaled)"
        )
    if claim.job_trigger != record.trigger or claim.job_slot != record.slot:
        return (
            f"its trigger and slot ({record.trigger}, {_stamp(record.slot)}) are not those of Job {record.job_name} "
            f"({claim.job_trigger}, {_stamp(claim.job_slot) if claim.job_slot else 'none'})"
        )
    if record.trigger == "schedule" and (cron is None or not cron.produced(record.slot, now)):
        return f"slot {_stamp(record.slot)} is not one the schedule's cron produced by now"
    if record.trigger == "run-now" and claim.job_token != record.run_now_token:
        return f"its runNowToken is not the one Job {record.job_name} ran for"
    return None


# ---- the decision ------------------------------------------------------------------------------------------------

Step = Literal["none", "adopt", "discard", "scale-down", "wait", "start-cycle", "delete-cycle", "restore", "release"]


@dataclass(frozen=True)
class StopDecision:
    """The one step a pass takes for a Stop. ``reason``/``message`` become the AgentStopped condition's."""

    step: Step
    reason: str = ""
    message: str = ""
    adopted: AgentStop | None = None  # adopt: the status record rebuilt from the annotation
    scale: bool = False  # restore: set the recorded replicas (False: the workload is gone or was rescaled)
    deadline_seconds: int | None = None  # start-cycle: the Job's activeDeadlineSeconds


def decide_stop(
    stop: AgentStop | None,
    workload: WorkloadView,
    claim: ClaimView,
    limits: AgentSpec,
    active_deadline_seconds: int,
    now: datetime,
    untrusted: str | None = None,
) -> StopDecision:
    """The next step of the stop recorded in ``stop`` (the status) and ``workload.record`` (the annotation).

    ``untrusted``: why the annotation may not be adopted (``record_problem``), when the status holds no stop."""
    if stop is None:
        if workload.record is None:
            return StopDecision("none")
        if untrusted is not None:
            return StopDecision("discard", "RecordIgnored", f"stop record on {workload.ref} ignored: {untrusted}")
        # The status lost a stop whose Job the operator created (reset by hand): the annotation, checked against that
        # Job, rebuilds the record, and the cycle is watched to its end; nothing is scaled from it.
        phase: Literal["Stopping", "CycleRunning"] = "Stopping" if claim.job == "absent" else "CycleRunning"
        return StopDecision(
            "adopt",
            "Recorded",
            f"stop record of {workload.ref} adopted from its annotation (cycle {workload.record.job_name} exists)",
            adopted=workload.record.status(workload.kind, workload.name, phase),
        )
    if stop.phase == "Restored":
        return StopDecision("release", "Restored", f"{workload.ref} restored; releasing the stop record")
    elapsed = (now - stop.stopped_at).total_seconds()
    if stop.phase == "Stopping":
        return _stopping(stop, workload, claim, limits, active_deadline_seconds, elapsed)
    return _cycle_running(stop, workload, claim, limits, elapsed)


def _stopping(
    stop: AgentStop,
    workload: WorkloadView,
    claim: ClaimView,
    limits: AgentSpec,
    active_deadline_seconds: int,
    elapsed: float,
) -> StopDecision:
    if claim.job != "absent":
        # Created by a pass whose status write was lost: the cycle is running (or ran); never restore beside it.
        return StopDecision(
            "adopt", "CycleRunning", f"cycle Job {stop.job_name} exists", adopted=_with(stop, phase="CycleRunning")
        )
    if stop.reason:  # the cycle could not be started (said when it was tried): no Job exists, restore
        return _restore(stop, workload, stop.reason, f"cycle {stop.job_name} not started")
    timeout = limits.scale_down_timeout_seconds
    if elapsed > timeout:
        who = ", ".join(claim.agent_pods + claim.cycle_pods + claim.other_jobs_active) or "the workload"
        reason = "ClaimBusy" if claim.other_jobs_active and not claim.agent_pods else "ScaleDownTimedOut"
        return _restore(stop, workload, reason, f"still in use after {timeout} s ({who}); cycle not run")
    if workload.found and workload.replicas > 0:
        return StopDecision("scale-down", "ScalingDown", f"scaling {workload.ref} from {workload.replicas} to 0")
    if claim.agent_pods or claim.cycle_pods:
        pods = ", ".join(claim.agent_pods + claim.cycle_pods)
        return StopDecision("wait", "WaitingForPods", f"waiting for {pods} to stop ({elapsed:.0f} s of {timeout} s)")
    if claim.other_jobs_active:
        jobs = ", ".join(claim.other_jobs_active)
        return StopDecision("wait", "ClaimBusy", f"waiting for cycle {jobs} on the claim to end")
    budget = int(limits.max_downtime_seconds - elapsed)
    if budget < MIN_CYCLE_SECONDS:
        return _restore(stop, workload, "DowntimeExhausted", f"only {budget} s of maxDowntimeSeconds left")
    return StopDecision(
        "start-cycle",
        "CycleRunning",
        f"no pod mounts the claim: starting cycle {stop.job_name}",
        deadline_seconds=min(active_deadline_seconds, budget),
    )


def _cycle_running(
    stop: AgentStop, workload: WorkloadView, claim: ClaimView, limits: AgentSpec, elapsed: float
) -> StopDecision:
    if claim.job == "active":
        if elapsed > limits.max_downtime_seconds + DELETE_GRACE_SECONDS:
            return StopDecision(
                "delete-cycle", "DowntimeExceeded", f"cycle {stop.job_name} outlived maxDowntimeSeconds: deleting it"
            )
        return StopDecision("wait", "CycleRunning", f"cycle {stop.job_name} running ({elapsed:.0f} s down)")
    if claim.cycle_pods or claim.other_jobs_active:
        # The Job ended (or was deleted) but a cycle pod is still terminating: it may still write.
        busy = ", ".join(claim.cycle_pods + claim.other_jobs_active)
        return StopDecision("wait", "WaitingForCycle", f"waiting for {busy} to stop before restoring")
    if claim.job == "finished":
        if claim.job_stopped:  # the operator stopped it: its pod was refused or could never start
            return _restore(stop, workload, claim.job_stopped, f"cycle {stop.job_name} stopped ({claim.job_stopped})")
        return _restore(stop, workload, "CycleFinished", f"cycle {stop.job_name} finished")
    return _restore(stop, workload, "CycleLost", f"cycle {stop.job_name} is gone (deleted)")


def _restore(stop: AgentStop, workload: WorkloadView, reason: str, why: str) -> StopDecision:
    if not workload.found:
        return StopDecision("restore", reason, f"{why}; {workload.ref} is gone, nothing to restore")
    if workload.replicas == 0:
        return StopDecision(
            "restore", reason, f"{why}; restoring {workload.ref} to {stop.replicas} replica(s)", scale=True
        )
    # Not at 0: restored by a pass whose status write was lost (replicas == recorded), or rescaled by someone
    # during the stop. Either way it is not scaled again: a restore happens exactly once.
    done = "already restored" if workload.replicas == stop.replicas else f"rescaled to {workload.replicas} meanwhile"
    return StopDecision("restore", reason, f"{why}; {workload.ref} {done}, left as it is")


def _with(stop: AgentStop, **changes: object) -> AgentStop:
    return stop.model_copy(update=changes)


def downtime_seconds(stop: AgentStop, restored_at: datetime) -> float:
    return max(0.0, (restored_at - stop.stopped_at).total_seconds())


# ---- RestartAfter ------------------------------------------------------------------------------------------------

# Failures that happen before the cycle touches a file: nothing to reload.
_FAILED_BEFORE_WRITING = frozenset({"VocabularySeedFailed", "InvalidSettings", "PodFailed"})
# Counts that mean files under memory/ were written (stamps go with `reviewed`: reviewed entries are stamped).
_WRITE_COUNTS = (
    "folded",
    "saved",
    "archived",
    "purged",
    "reviewed",
    "conflicts",
    "stale_write_backs",
    "units_written",  # a Markdown format's rewrites of the agent's own files
    "units_taken_out",
)


def cycle_changed_files(run: RunSummary) -> bool:
    """Whether the agent must reload after ``run`` (RestartAfter). When the run cannot say (it failed after it
    may have begun writing, or left no summary), yes: a needless restart costs seconds, a stale cache costs
    the agent's writes."""
    if run.result == "skipped":
        return False
    if run.result == "failed":
        return run.reason not in _FAILED_BEFORE_WRITING
    if run.reason == "NoSummary":
        return True
    counts = run.model_dump()
    return any(int(counts.get(name) or 0) > 0 for name in _WRITE_COUNTS)


def stale_window_seconds(stale_since: datetime | None, restarted_at: datetime) -> float | None:
    """How long the agent ran on a stale index: from the cycle's first write (``firstWriteAt`` of its report), or,
    from a cycle that did not say, from its start (an upper bound), to the restart."""
    if stale_since is None:
        return None
    return max(0.0, (restarted_at - stale_since).total_seconds())


def restart_value(requested_at: datetime) -> str:
    """The restartedAt annotation value: fixed per restart, so patching it twice rolls the workload once."""
    return (requested_at - timedelta(microseconds=requested_at.microsecond)).isoformat().replace("+00:00", "Z")


__all__ = [
    "ClaimView",
    "StopDecision",
    "StopRecord",
    "WorkloadView",
    "cycle_changed_files",
    "decide_stop",
    "downtime_seconds",
    "record_problem",
    "restart_value",
    "stale_window_seconds",
    "stop_limits",
]
