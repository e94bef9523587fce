"""A finished cycle Job -> its RunSummary, and the arithmetic that adds it to the schedule's totals.

The dream container writes ``CycleReport.summary_json()`` to its termination message (≤ 4 KiB); the seed init
container writes a ``SeedReport``. Everything here is a pure function of the Job and its pods' status, so the
counting rule (once per Job UID) lives in one place (``reconcile.py``) and this is unit-tested directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from pydantic.alias_generators import to_camel

from dreamkeeper.consolidation.counts import SUMMED, value_of
from dreamkeeper.kube import (
    ANNOTATION_RUN_NOW_TOKEN,
    ANNOTATION_SLOT,
    DREAM_CONTAINER,
    LABEL_TRIGGER,
    SEED_CONTAINER,
)
from dreamkeeper.kube.models import RunSummary, Totals, count_fields
from dreamkeeper.kube.seed import SeedReport

Obj = dict[str, Any]

EXIT_FAILED, EXIT_USAGE, EXIT_LOCKED = 1, 2, 3  # `dreamkeeper dream` exit codes (proposers/cli.py)


class DreamSummaryBase(BaseModel):
    """The dream container's termination message. Lenient: the failure path writes only result and error."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore")

    result: str = "failed"
    cycle_id: str | None = None
    skip_reason: str | None = None
    error: str | None = None
    started_at: datetime | None = None
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
        return self.run.result in ("completed", "skipped") and self.run.reason != "LockHeld"


def _conditions(job: Obj) -> dict[str, Obj]:
    return {
        c.get("type", ""): c for c in (job.get("status") or {}).get("conditions") or [] if c.get("status") == "True"
    }


def job_finished(job: Obj) -> bool:
    conditions = _conditions(job)
    return "Complete" in conditions or "Failed" in conditions


def job_active(job: Obj) -> bool:
    return not job_finished(job) and not (job.get("metadata") or {}).get("deletionTimestamp")


def _terminated(pod: Obj, container: str, init: bool) -> Obj | None:
    key = "initContainerStatuses" if init else "containerStatuses"
    for status in (pod.get("status") or {}).get(key) or []:
        if status.get("name") == container:
            state = status.get("state") or {}
            terminated = state.get("terminated") or (status.get("lastState") or {}).get("terminated")
            return dict(terminated) if terminated else None
    return None


def _latest_pod(pods: list[Obj]) -> Obj | None:
    if not pods:
        return None
    return max(pods, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp") or ""))


def _parse_time(value: Any) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None


def _clip(text: str | None, limit: int = 1000) -> str | None:
    if text is None:
        return None
    text = text.strip()
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def parse_dream_message(message: str | None) -> DreamSummary | None:
    if not message:
        return None
    try:
        data = json.loads(message)
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


def outcome_of(job: Obj | None, pods: list[Obj], *, job_name: str, job_uid: str, trigger: str) -> JobOutcome:
    """What a finished Job (or a Job that vanished: ``job=None``) did."""
    meta = (job or {}).get("metadata") or {}
    annotations = meta.get("annotations") or {}
    trigger = (meta.get("labels") or {}).get(LABEL_TRIGGER, trigger)
    if trigger not in ("schedule", "run-now"):
        trigger = "run-now" if ANNOTATION_RUN_NOW_TOKEN in annotations else "schedule"
    base: dict[str, Any] = {
        "job_name": job_name,
        "job_uid": job_uid,
        "trigger": trigger,
        "slot": _parse_time(annotations.get(ANNOTATION_SLOT)),
    }
    if job is None:
        return JobOutcome(
            RunSummary(**base, result="failed", reason="JobLost", error="the Job was deleted before it was counted"),
            None,
        )
    pod = _latest_pod(pods)
    seed_state = _terminated(pod, SEED_CONTAINER, init=True) if pod else None
    seed = parse_seed_message(seed_state.get("message")) if seed_state else None
    dream_state = _terminated(pod, DREAM_CONTAINER, init=False) if pod else None
    summary = parse_dream_message(dream_state.get("message")) if dream_state else None
    conditions = _conditions(job)
    timing = {
        "started_at": _parse_time((dream_state or {}).get("startedAt"))
        or _parse_time((job.get("status") or {}).get("startTime")),
        "finished_at": _parse_time((dream_state or {}).get("finishedAt"))
        or _parse_time((job.get("status") or {}).get("completionTime"))
        or _parse_time((conditions.get("Failed") or conditions.get("Complete") or {}).get("lastTransitionTime")),
    }
    if summary is not None:
        counts = summary.model_dump(
            exclude={"result", "error", "skip_reason", "started_at", "finished_at", "duration_seconds", "cycle_id"}
        )
        base |= counts
        base |= {
            "cycle_id": summary.cycle_id,
            "skip_reason": _clip(summary.skip_reason),
            "duration_seconds": summary.duration_seconds,
            "started_at": summary.started_at or timing["started_at"],
            "finished_at": summary.finished_at or timing["finished_at"],
        }
    else:
        base |= timing
        if base["started_at"] and base["finished_at"]:
            base["duration_seconds"] = max(0.0, (base["finished_at"] - base["started_at"]).total_seconds())
    exit_code = (dream_state or {}).get("exitCode")

    if "Complete" in conditions:
        if summary is None:
            return JobOutcome(
                RunSummary(
                    **base, result="completed", reason="NoSummary", error=_clip((dream_state or {}).get("message"))
                ),
                seed,
            )
        result = "skipped" if summary.result == "skipped" else "completed"
        return JobOutcome(RunSummary(**base, result=result, reason=result.capitalize()), seed)

    # Failed (or finished without a terminal condition we know): find the most specific reason.
    if seed_state is not None and seed_state.get("exitCode", 0) != 0:
        message = seed.message if seed else _clip(seed_state.get("message"))
        return JobOutcome(RunSummary(**base, result="failed", reason="VocabularySeedFailed", error=message), seed)
    if exit_code == EXIT_LOCKED:
        return JobOutcome(
            RunSummary(
                **base,
                result="skipped",
                reason="LockHeld",
                skip_reason="another process holds the agent's cycle lock",
            ),
            seed,
        )
    failed = conditions.get("Failed") or {}
    if failed.get("reason") == "DeadlineExceeded":
        message = f"stopped after activeDeadlineSeconds: {failed.get('message', '')}".strip()
        return JobOutcome(RunSummary(**base, result="failed", reason="DeadlineExceeded", error=_clip(message)), seed)
    if exit_code == EXIT_USAGE:
        error = (summary.error if summary else None) or (dream_state or {}).get("message")
        return JobOutcome(RunSummary(**base, result="failed", reason="InvalidSettings", error=_clip(error)), seed)
    if dream_state is None:
        reason = failed.get("reason") or "PodFailed"
        message = failed.get("message") or "the cycle container never ran"
        if pod is not None:
            message = (pod.get("status") or {}).get("message") or message
        return JobOutcome(
            RunSummary(**base, result="failed", reason="PodFailed", error=_clip(f"{reason}: {message}")), seed
        )
    error = (summary.error if summary else None) or (dream_state or {}).get("message") or f"exit code {exit_code}"
    return JobOutcome(RunSummary(**base, result="failed", reason="CycleFailed", error=_clip(error)), seed)


def add_run(totals: Totals, run: RunSummary) -> Totals:
    """The totals after counting ``run`` once."""
    data = totals.model_dump()
    data[f"cycles_{run.result}"] += 1
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
