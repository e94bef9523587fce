"""One reconcile pass's record (``_Pass``: what it read and decided) and what the reconciler's parts share.

Moved out of ``reconcile.py`` unchanged (a module per concern): ``ScheduleReconciler`` (``reconcile.py``) is built
from ``Counting`` (``counting.py``: finished Jobs counted once per UID) and ``Launching`` (``launching.py``: what
is due, started); ``ReconcilerBase`` declares the state they share.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from dreamkeeper.kube import (
    ANNOTATION_COUNTED,
    ANNOTATION_SLOT,
    LABEL_TRIGGER,
)
from dreamkeeper.kube.api import ApiError, ClusterApi, event_body
from dreamkeeper.kube.conditions import (
    READY,
    Status,
    get_condition,
    set_condition,
)
from dreamkeeper.kube.coordinator import AgentCoordinator
from dreamkeeper.kube.jobspec import JobDefaults
from dreamkeeper.kube.metrics import OperatorMetrics
from dreamkeeper.kube.models import (
    DreamScheduleStatus,
    JobRef,
)
from dreamkeeper.kube.objects import (
    Job,
    annotations_of,
    labels_of,
    parse_time,
)
from dreamkeeper.kube.results import (
    JobOutcome,
    job_active,
)
from dreamkeeper.kube.schedule_view import ScheduleView

if TYPE_CHECKING:
    from dreamkeeper.kube.caches import ClaimSource, JobSource

if TYPE_CHECKING:
    from dreamkeeper.kube.reconcile import ClaimLocks, ReconcileSettings

log = logging.getLogger(__name__)


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


def _ready_of(status: DreamScheduleStatus) -> tuple[str, str] | None:
    ready = get_condition(status.conditions, READY)
    return None if ready is None else (ready.status, ready.reason)


class ReconcilerBase:
    """The reconciler's state, as its parts (``counting.py``, ``launching.py``, ``reconcile.py``) use it."""

    api: ClusterApi
    metrics: OperatorMetrics
    defaults: JobDefaults
    settings: ReconcileSettings
    claim_locks: ClaimLocks
    clock: Callable[[], datetime]
    agents: AgentCoordinator
    jobs: JobSource  # a claim's Jobs: listed, or from the watched cache (caches.py)
    claims: ClaimSource
    _visited: set[str]
    _deferred_events: set[tuple[str, str]]

    def _post(self, p: _Pass, kind: str, reason: str, message: str) -> None:
        try:
            self.api.create_event(p.namespace, event_body(p.schedule.body, kind, reason, message, p.now))
        except ApiError as exc:
            log.warning("%s/%s: event %s not posted: %s", p.namespace, p.name, reason, exc)
