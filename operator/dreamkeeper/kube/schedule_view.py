"""What a reconcile pass reads: the DreamSchedule parsed once (``ScheduleView``), its persisted status, readiness.

Moved out of ``reconcile.py`` unchanged (a module per concern); the rules are in ``reconcile.py``'s docstring.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError

from dreamkeeper.kube.jobspec import VocabularySource, cycle_settings, format_section
from dreamkeeper.kube.models import (
    DreamScheduleSpec,
    DreamScheduleStatus,
)
from dreamkeeper.kube.objects import (
    Body,
    DreamSchedule,
    parse_time,
)
from dreamkeeper.kube.slots import CronSchedule, Due, ScheduleError, due_at

log = logging.getLogger(__name__)


class NotReadyError(Exception):
    """The schedule cannot start a cycle now; ``reason`` becomes Ready=False's reason."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


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
