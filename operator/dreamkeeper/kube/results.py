"""A finished cycle Job -> its RunSummary, and the arithmetic that adds it to the schedule's totals.

The dream container writes ``CycleReport.summary_json()`` to its termination message (≤ 4 KiB); the seed init
container writes a ``SeedReport``. Everything here is a pure function of the Job and its pods' status, so the
counting rule (once per Job UID) lives in one place (``reconcile.py``) and this is unit-tested directly.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.alias_generators import to_camel

from dreamkeeper.consolidation import SUMMED, value_of
from dreamkeeper.kube import (
    ANNOTATION_RUN_NOW_TOKEN,
    ANNOTATION_SLOT,
    ANNOTATION_STOPPED,
    DREAM_CONTAINER,
    LABEL_TRIGGER,
    SEED_CONTAINER,
)
from dreamkeeper.kube.models import CONDITION_REASON, RunSummary, Totals, count_fields
from dreamkeeper.kube.objects import (
    ContainerStateTerminated,
    Job,
    JobCondition,
    Pod,
    annotations_of,
    creation_order,
    labels_of,
    parse_time,
)
from dreamkeeper.kube.seed import SeedReport
from dreamkeeper.memory import loads_json

# `dreamkeeper dream` exit codes (dream_command.py; kube and the command are siblings, neither imports the other)
EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED, EXIT_PAUSED, EXIT_PROPOSER_FAILED, EXIT_TERMINATED = 1, 2, 3, 4, 5, 143
CONDITION_REASON_RE = re.compile(CONDITION_REASON)


class DreamSummaryBase(BaseModel):
    """The dream container's termination message. Lenient: the failure path writes only result and error."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    result: str = "failed"
    cycle_id: str | None = None
    skip_reason: str | None = None
    error: str | None = None
    proposer_failure: str | None = None
    started_at: datetime | None = None
    first_write_at: datetime | None = None
    finished_at: datetime | None = None
    duration_seconds: float | None = None


# Its counts: every count of the table that reaches a run (``CycleReport.summary()`` writes them all).
if TYPE_CHECKING:
    DreamSummary = DreamSummaryBase
else:
    DreamSummary = create_model(
        "DreamSummary",
        __base__=DreamSummaryBase,
        __module__=__name__,
        __doc__=DreamSummaryBase.__doc__,
        **count_fields(),
    )


@dataclass(frozen=True)
class JobOutcome:
    run: RunSummary
    seed: SeedReport | None

    @property
    def succeeded(self) -> bool:
        return self.run.result in ("completed", "skipped") and self.run.reason not in ("LockHeld", "Paused")


def _conditions(job: Job) -> dict[str, JobCondition]:
    """The Job's conditions that hold, by type."""
    return {
        c.get("type", ""): c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
    }


def job_finished(job: Job) -> bool:
    conditions = _conditions(job)
    return "Complete" in conditions or "Failed" in conditions


def job_succeeded(job: Job) -> bool:
    return "Complete" in _conditions(job)


def job_active(job: Job) -> bool:
    return not job_finished(job) and not job["metadata"].get("deletionTimestamp")


def _terminated(pod: Pod, container: str, *, init: bool) -> ContainerStateTerminated | None:
    """How ``container`` last ended (its current state, else the previous run's), if it did."""
    status = pod.get("status") or {}
    statuses = (status.get("initContainerStatuses") if init else status.get("containerStatuses")) or []
    for entry in statuses:
        if entry.get("name") == container:
            state, last = entry.get("state") or {}, entry.get("lastState") or {}
            return state.get("terminated") or last.get("terminated") or None
    return None


def _latest_pod(pods: list[Pod]) -> Pod | None:
    return max(pods, key=creation_order) if pods else None


def _clip(text: str | None, limit: int = 1000) -> str | None:
    """One line for a condition or an Event: a log tail's line breaks and a console's hard wraps become spaces."""
    if text is None:
        return None
    text = " ".join(text.split())
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def parse_dream_message(message: str | None) -> DreamSummary | None:
    if not message:
        return None
    try:
        data = loads_json(message)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    try:
        return DreamSummary.model_validate(data)
    except ValidationError:
        return None


def parse_seed_message(message: str | None) -> SeedReport | None:
    if not message:
        return None
    try:
        return SeedReport.model_validate_json(message)
    except ValidationError:
        return None


# ---- what a finished Job did -----------------------------------------------------------------------------------


def _counts(summary: DreamSummary) -> dict[str, Any]:
    """The cycle's counters, copied from its summary into the RunSummary (the one place they are carried over)."""
    return summary.model_dump(
        exclude={
            "result",
            "error",
            "skip_reason",
            "proposer_failure",
            "started_at",
            "first_write_at",
            "finished_at",
            "duration_seconds",
            "cycle_id",
        }
    )


def _trigger(job: Job | None, fallback: str) -> str:
    """schedule or run-now: the Job's label, else the caller's guess, else whether a run-now token is annotated."""
    trigger = labels_of(job).get(LABEL_TRIGGER, fallback) if job is not None else fallback
    if trigger in ("schedule", "run-now"):
        return trigger
    return "run-now" if job is not None and ANNOTATION_RUN_NOW_TOKEN in annotations_of(job) else "schedule"


@dataclass(frozen=True)
class _Evidence:
    """What a finished Job left behind, read once: its conditions and its latest pod's two containers."""

    conditions: dict[str, JobCondition]
    stopped: str | None  # the operator's ANNOTATION_STOPPED: why it stopped a pod that could never start
    pod: Pod | None
    seed_state: ContainerStateTerminated | None
    seed: SeedReport | None
    dream_state: ContainerStateTerminated | None
    summary: DreamSummary | None
    fields: dict[str, Any]  # what every RunSummary of this Job carries: identity, counts, timing

    @classmethod
    def of(cls, job: Job, pods: list[Pod], identity: dict[str, Any]) -> _Evidence:
        pod = _latest_pod(pods)
        seed_state = _terminated(pod, SEED_CONTAINER, init=True) if pod else None
        dream_state = _terminated(pod, DREAM_CONTAINER, init=False) if pod else None
        summary = parse_dream_message(dream_state.get("message")) if dream_state else None
        conditions = _conditions(job)
        return cls(
            conditions=conditions,
            stopped=annotations_of(job).get(ANNOTATION_STOPPED),
            pod=pod,
            seed_state=seed_state,
            seed=parse_seed_message(seed_state.get("message")) if seed_state else None,
            dream_state=dream_state,
            summary=summary,
            fields=identity | _results(summary, _timing(job, conditions, dream_state)),
        )

    @property
    def completed(self) -> bool:
        return "Complete" in self.conditions

    @property
    def failed(self) -> JobCondition:
        return self.conditions.get("Failed") or {}

    @property
    def exit_code(self) -> int | None:
        return (self.dream_state or {}).get("exitCode")

    @property
    def dream_message(self) -> str | None:
        return (self.dream_state or {}).get("message")

    @property
    def error(self) -> str | None:
        """The cycle's own error (its summary's), else what its container printed."""
        return (self.summary.error if self.summary else None) or self.dream_message

    def run(self, result: str, reason: str, **fields: Any) -> RunSummary:
        return RunSummary(**(self.fields | {"result": result, "reason": reason} | fields))


def _timing(job: Job, conditions: dict[str, JobCondition], dream: ContainerStateTerminated | None) -> dict[str, Any]:
    """Start and end from the container, else from the Job's status, else from its terminal condition."""
    status, dream = job.get("status") or {}, dream or {}
    terminal = conditions.get("Failed") or conditions.get("Complete") or {}
    return {
        "started_at": parse_time(dream.get("startedAt")) or parse_time(status.get("startTime")),
        "finished_at": parse_time(dream.get("finishedAt"))
        or parse_time(status.get("completionTime"))
        or parse_time(terminal.get("lastTransitionTime")),
    }


def _results(summary: DreamSummary | None, timing: dict[str, Any]) -> dict[str, Any]:
    """The summary's counts and times; without a summary, the times Kubernetes recorded."""
    if summary is None:
        started, finished = timing["started_at"], timing["finished_at"]
        duration = max(0.0, (finished - started).total_seconds()) if started and finished else None
        return timing | ({"duration_seconds": duration} if duration is not None else {})
    return _counts(summary) | {
        "cycle_id": summary.cycle_id,
        "skip_reason": _clip(summary.skip_reason),
        "duration_seconds": summary.duration_seconds,
        "started_at": summary.started_at or timing["started_at"],
        "first_write_at": summary.first_write_at,
        "finished_at": summary.finished_at or timing["finished_at"],
    }


# Each rule answers "does this decide the Job? -> its RunSummary". Most specific first, the first that decides wins;
# the two completion rules come first, so every later rule sees a Job that failed (or ended without a condition
# we know). A new failure cause is a new rule in RULES at its place.


def _completed_without_summary(e: _Evidence) -> RunSummary | None:
    if not e.completed or e.summary is not None:
        return None
    return e.run("completed", "NoSummary", error=_clip(e.dream_message))


def _held(e: _Evidence) -> RunSummary | None:
    # Over the blast-radius cap: the cycle completed and archived nothing of its plan, which waits for a human.
    if not e.completed or e.summary is None or not getattr(e.summary, "held", 0):
        return None
    how = f"set spec.approveHold: {e.summary.cycle_id} (and a new runNowToken) to apply it if the corpus is unchanged"
    return e.run("completed", "Held", skip_reason=f"plan held for approval, over the blast-radius cap: {how}")


def _completed(e: _Evidence) -> RunSummary | None:
    if not e.completed or e.summary is None:
        return None
    result = "skipped" if e.summary.result == "skipped" else "completed"
    return e.run(result, result.capitalize())


def _proposer_failed(e: _Evidence) -> RunSummary | None:
    """The cycle ran to the end but no batch got a usable reply (its summary says so, or exit 5): not a crash."""
    if e.summary is not None:
        if e.summary.result != "proposer-failed":
            return None
        error = e.summary.proposer_failure or e.summary.error or f"exit code {e.exit_code}"
    elif e.exit_code == EXIT_PROPOSER_FAILED:
        error = e.error or "no usable reply from the proposer (exit code 5, no summary)"
    else:
        return None
    return e.run("proposer-failed", "ProposerFailed", error=_clip(error))


def _seed_failed(e: _Evidence) -> RunSummary | None:
    if e.seed_state is None or e.seed_state.get("exitCode", 0) == 0:
        return None
    return e.run(
        "failed", "VocabularySeedFailed", error=e.seed.message if e.seed else _clip(e.seed_state.get("message"))
    )


def _stopped_by_operator(e: _Evidence) -> RunSummary | None:
    if not e.stopped:
        return None
    reason, _, detail = e.stopped.partition(": ")
    if not CONDITION_REASON_RE.fullmatch(reason):
        reason, detail = "PodNeverStarted", e.stopped
    return e.run("failed", reason, error=_clip(f"the pod could never start, so the Job was stopped: {detail}"))


def _memory_limit(pod: Pod | None, container: str, *, init: bool) -> str | None:
    # Read as plain JSON: the typed Pod names only the fields the placement code uses.
    raw: dict[str, Any] = dict(pod) if pod else {}
    spec: dict[str, Any] = dict(raw.get("spec") or {})
    entries: list[dict[str, Any]] = spec.get("initContainers" if init else "containers") or []
    for entry in entries:
        if entry.get("name") == container:
            limit = ((entry.get("resources") or {}).get("limits") or {}).get("memory")
            return None if limit is None else str(limit)
    return None


def _oom_killed(e: _Evidence) -> RunSummary | None:
    """The kernel's OOM killer ended a container at its memory limit (the kubelet says reason OOMKilled, exit 137):
    not the cycle's fault and not a crash of ours; the remedy is a larger spec.resources.limits.memory."""
    for container, state, init in ((SEED_CONTAINER, e.seed_state, True), (DREAM_CONTAINER, e.dream_state, False)):
        if not state or state.get("reason") != "OOMKilled":
            continue
        limit = _memory_limit(e.pod, container, init=init)
        at = f"at its memory limit {limit}" if limit else "(no memory limit of its own: the node ran out of memory)"
        remedy = "; raise spec.resources.limits.memory" if limit and not init else ""
        error = f"the {container} container was killed by the kernel's OOM killer {at}"
        error += f" (exit code {state.get('exitCode')}){remedy}"
        return e.run("failed", "OOMKilled", error=_clip(error))
    return None


def _lock_held(e: _Evidence) -> RunSummary | None:
    if e.exit_code != EXIT_LOCKED:
        return None
    return e.run("skipped", "LockHeld", skip_reason="another process holds the agent's cycle lock")


def _sigterm_stopped(e: _Evidence) -> RunSummary | None:
    # SIGTERM (the pod was deleted: its schedule, the Job, a node drain): the cycle stopped at a safe point.
    if e.exit_code != EXIT_TERMINATED or e.failed.get("reason") == "DeadlineExceeded":
        return None
    return e.run("failed", "Stopped", error=_clip(e.error or "stopped by SIGTERM at a safe point"))


def _paused(e: _Evidence) -> RunSummary | None:
    """The agent's pause marker stopped the cycle before it wrote anything (exit 4, its report says why)."""
    if e.exit_code != EXIT_PAUSED:
        return None
    why = e.summary.skip_reason if e.summary else None
    return e.run("skipped", "Paused", skip_reason=_clip(why or "paused by the agent's pause marker"))


def _deadline_exceeded(e: _Evidence) -> RunSummary | None:
    if e.failed.get("reason") != "DeadlineExceeded":
        return None
    message = f"stopped after activeDeadlineSeconds: {e.failed.get('message', '')}".strip()
    return e.run("failed", "DeadlineExceeded", error=_clip(message))


def _invalid_settings(e: _Evidence) -> RunSummary | None:
    if e.exit_code != EXIT_USAGE:
        return None
    return e.run("failed", "InvalidSettings", error=_clip(e.error))


def _never_ran(e: _Evidence) -> RunSummary | None:
    if e.dream_state is not None:
        return None
    reason = e.failed.get("reason") or "PodFailed"
    message = e.failed.get("message") or "the cycle container never ran"
    if e.pod is not None:
        message = (e.pod.get("status") or {}).get("message") or message
    return e.run("failed", "PodFailed", error=_clip(f"{reason}: {message}"))


def _cycle_failed(e: _Evidence) -> RunSummary:
    return e.run("failed", "CycleFailed", error=_clip(e.error or f"exit code {e.exit_code}"))


RULES: tuple[Callable[[_Evidence], RunSummary | None], ...] = (
    _completed_without_summary,
    _held,
    _completed,
    _stopped_by_operator,
    _oom_killed,
    _proposer_failed,
    _seed_failed,
    _lock_held,
    _sigterm_stopped,
    _paused,
    _deadline_exceeded,
    _invalid_settings,
    _never_ran,
)  # and when none decides: _cycle_failed


def outcome_of(job: Job | None, pods: list[Pod], *, job_name: str, job_uid: str, trigger: str) -> JobOutcome:
    """What a finished Job (or a Job that vanished: ``job=None``) did."""
    identity: dict[str, Any] = {
        "job_name": job_name,
        "job_uid": job_uid,
        "trigger": _trigger(job, trigger),
        "slot": parse_time(annotations_of(job).get(ANNOTATION_SLOT)) if job is not None else None,
    }
    if job is None:
        lost = RunSummary(
            **identity, result="failed", reason="JobLost", error="the Job was deleted before it was counted"
        )
        return JobOutcome(lost, None)
    evidence = _Evidence.of(job, pods, identity)
    verdicts = (rule(evidence) for rule in RULES)
    run = next((verdict for verdict in verdicts if verdict is not None), None)
    return JobOutcome(run if run is not None else _cycle_failed(evidence), evidence.seed)


def add_run(totals: Totals, run: RunSummary) -> Totals:
    """The totals after counting ``run`` once."""
    data = totals.model_dump()
    data[f"cycles_{run.result.replace('-', '_')}"] += 1
    for count in SUMMED:
        data[count.name] += value_of(run, count) or 0
    return Totals.model_validate(data)


def add_slots(totals: Totals, *, missed: int = 0, skipped_reason: str | None = None) -> Totals:
    data = totals.model_dump()
    data["missed_slots"] += missed
    if skipped_reason is not None:
        data["skipped_slots"] = {
            **data["skipped_slots"],
            skipped_reason: data["skipped_slots"].get(skipped_reason, 0) + 1,
        }
    return Totals.model_validate(data)
