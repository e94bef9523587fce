"""Prometheus metrics of the operator, served on their own port at ``/metrics``.

Every per-schedule series carries ``dreamschedule`` and ``dreamschedule_namespace`` (never ``namespace``,
which collides with the scrape target's own label). Counters are created at zero when a schedule is first
seen — seeded from its persisted ``status.totals``, so they equal the CR's totals and survive restarts — and
every series of a schedule is removed when the schedule is deleted. Each Job is counted exactly once (by UID,
see ``reconcile.py``). ``_created`` series are disabled.

The table of every metric is ``METRIC_DOCS`` below, rendered into docs/operator-metrics.md by ``make generate``
(codegen/generate.py; a test keeps both in step with the registered families).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, disable_created_metrics

from dreamkeeper import __version__
from dreamkeeper.consolidation import COUNTS, SUMMED, Count, Family, value_of
from dreamkeeper.kube.models import RunSummary, Totals


@dataclass(frozen=True)
class MetricDoc:
    name: str
    type: str
    extra_labels: str
    meaning: str


def _families(*, counters: bool) -> dict[Family, list[Count]]:
    """The Prometheus families of the cycle counts (``consolidation/counts.py``): counters for the summed ones,
    gauges for the corpus state after the last cycle."""
    families: dict[Family, list[Count]] = {}
    for count in COUNTS:
        if count.metric is not None and (count.summed if counters else count.state):
            families.setdefault(count.metric.family, []).append(count)
    return families


def _meaning(family: Family, counts: list[Count]) -> str:
    return family.description or counts[0].description


def _count_docs(*, counters: bool) -> list[MetricDoc]:
    docs = []
    for family, counts in _families(counters=counters).items():
        values = ",".join(value for c in counts for value in _series(c))
        labels = f"{family.label}={values}" if family.label else ""
        name = f"{family.name}_total" if counters else family.name
        docs.append(MetricDoc(name, "counter" if counters else "gauge", labels, _meaning(family, counts)))
    return docs


def _help(family: Family, counts: list[Count]) -> str:
    text = _meaning(family, counts)
    return text[0].upper() + text[1:] + "."


def _series(count: Count) -> tuple[str, ...]:
    """The count's label values after the schedule's."""
    assert count.metric is not None
    return () if count.metric.label_value is None else (count.metric.label_value,)


METRIC_DOCS: tuple[MetricDoc, ...] = (
    MetricDoc(
        "dreamkeeper_cycles_total",
        "counter",
        "result=completed,skipped,failed,proposer-failed",
        "finished cycle Jobs by outcome (skipped: engine skipped, or the agent's cycle lock was held; "
        "proposer-failed: the cycle ran but no batch got a usable reply from the proposer)",
    ),
    *_count_docs(counters=True),
    MetricDoc(
        "dreamkeeper_cycle_duration_seconds", "histogram", "", "wall time of counted cycles (buckets 1 s .. 2 h)"
    ),
    MetricDoc(
        "dreamkeeper_last_success_timestamp_seconds",
        "gauge",
        "",
        "when the last completed/skipped cycle finished (absent until one has)",
    ),
    MetricDoc(
        "dreamkeeper_next_run_timestamp_seconds",
        "gauge",
        "",
        "the next scheduled slot (absent while the spec is invalid)",
    ),
    MetricDoc(
        "dreamkeeper_schedule_interval_seconds",
        "gauge",
        "",
        "seconds from the next slot to the one after it (the cadence the no-success alert counts periods in)",
    ),
    *_count_docs(counters=False),
    MetricDoc(
        "dreamkeeper_skipped_slots_total",
        "counter",
        "reason=concurrent,suspended,not_ready,name_conflict",
        "slots not run (concurrent: a cycle was active on the same claim)",
    ),
    MetricDoc(
        "dreamkeeper_missed_slots_total",
        "counter",
        "",
        "slots that passed unrun (operator down, or past startingDeadlineSeconds)",
    ),
    MetricDoc("dreamkeeper_schedule_ready", "gauge", "", "1 when the Ready condition is True, else 0"),
    MetricDoc("dreamkeeper_cycle_running", "gauge", "", "1 while a cycle Job of the schedule is active"),
    MetricDoc(
        "dreamkeeper_vocabulary_in_sync",
        "gauge",
        "",
        "1 when the volume's vocabulary file matches the MemoryVocabulary, 0 when it differs (absent: unknown)",
    ),
    MetricDoc(
        "dreamkeeper_agent_stopped",
        "gauge",
        "",
        "spec.agent Stop: 1 while the agent's workload is held at 0 replicas for a cycle (absent for other policies)",
    ),
    MetricDoc(
        "dreamkeeper_agent_downtime_seconds",
        "histogram",
        "",
        "spec.agent Stop: from the scale-down request to the restore, per stop (buckets 5 s .. 2 h)",
    ),
    MetricDoc(
        "dreamkeeper_agent_stale_window_seconds",
        "histogram",
        "",
        "spec.agent RestartAfter: from the start of a cycle that changed files to the agent's restart (the agent "
        "ran on a stale index meanwhile)",
    ),
    MetricDoc(
        "dreamkeeper_handler_errors_total",
        "counter",
        "handler (no schedule labels)",
        "unexpected errors in the operator's handlers and reconcile loops",
    ),
    MetricDoc("dreamkeeper_operator_info", "gauge", "version (no schedule labels)", "always 1"),
    MetricDoc(
        "dreamkeeper_schedules_reconciled",
        "gauge",
        "(no schedule labels)",
        "schedules that finished a reconcile pass since the operator started",
    ),
)


SCHEDULE_LABELS = ("dreamschedule", "dreamschedule_namespace")
RESULTS = ("completed", "skipped", "failed", "proposer-failed")
SKIP_REASONS = ("concurrent", "suspended", "not_ready", "name_conflict")
HANDLERS = ("schedule", "vocabulary", "schedule_deleted", "startup")
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
AGENT_BUCKETS = (5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)


def _ts(moment: datetime) -> float:
    return moment.timestamp()


class OperatorMetrics:
    """All metric families on one registry (a fresh one per operator, so tests can run several)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        r, labels = self.registry, SCHEDULE_LABELS
        self.cycles = Counter("dreamkeeper_cycles", "Finished cycle Jobs by result.", [*labels, "result"], registry=r)
        self.skipped = Counter("dreamkeeper_skipped_slots", "Slots not run.", [*labels, "reason"], registry=r)
        self.missed = Counter("dreamkeeper_missed_slots", "Slots that passed unrun.", labels, registry=r)
        # The cycle counts' families, from the table (consolidation/counts.py): counters summed, gauges set.
        self._count_families: dict[str, Any] = {
            family.name: kind(family.name, _help(family, counts), [*labels, *_label(family)], registry=r)
            for kind, counters in ((Counter, True), (Gauge, False))
            for family, counts in _families(counters=counters).items()
        }
        self.duration = Histogram(
            "dreamkeeper_cycle_duration_seconds", "Cycle wall time.", labels, buckets=DURATION_BUCKETS, registry=r
        )
        self.last_success = Gauge(
            "dreamkeeper_last_success_timestamp_seconds", "Last successful cycle end.", labels, registry=r
        )
        self.next_run = Gauge("dreamkeeper_next_run_timestamp_seconds", "Next scheduled slot.", labels, registry=r)
        self.interval = Gauge(
            "dreamkeeper_schedule_interval_seconds", "Seconds from the next slot to the one after.", labels, registry=r
        )
        self.ready = Gauge("dreamkeeper_schedule_ready", "1 when Ready is True.", labels, registry=r)
        self.running = Gauge("dreamkeeper_cycle_running", "1 while a cycle Job is active.", labels, registry=r)
        self.vocabulary_in_sync = Gauge(
            "dreamkeeper_vocabulary_in_sync", "1 when the volume's vocabulary matches the CR.", labels, registry=r
        )
        self.agent_stopped = Gauge(
            "dreamkeeper_agent_stopped", "1 while the agent's workload is held at 0 for a cycle.", labels, registry=r
        )
        self.agent_downtime = Histogram(
            "dreamkeeper_agent_downtime_seconds", "Agent downtime per Stop.", labels, buckets=AGENT_BUCKETS, registry=r
        )
        self.agent_stale_window = Histogram(
            "dreamkeeper_agent_stale_window_seconds",
            "From a changing cycle's start to the agent's restart (RestartAfter).",
            labels,
            buckets=AGENT_BUCKETS,
            registry=r,
        )
        self.handler_errors = Counter(
            "dreamkeeper_handler_errors", "Unexpected errors in handlers and loops.", ["handler"], registry=r
        )
        self.visited = Gauge(
            "dreamkeeper_schedules_reconciled", "Schedules reconciled since the operator started.", registry=r
        )
        info = Gauge("dreamkeeper_operator_info", "Operator build information.", ["version"], registry=r)
        info.labels(__version__).set(1)
        for handler in HANDLERS:
            self.handler_errors.labels(handler)

    # ---- lifecycle of a schedule's series -------------------------------------------------------------------

    def ensure_schedule(self, namespace: str, name: str, totals: Totals | None) -> bool:
        """Create the schedule's series once, seeded from its persisted totals. True when created now."""
        key = (namespace, name)
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
        t = totals or Totals()
        ident = (name, namespace)
        for result in RESULTS:
            self.cycles.labels(*ident, result).inc(getattr(t, f"cycles_{result.replace('-', '_')}"))
        self._count(ident, t)
        for reason in SKIP_REASONS:
            self.skipped.labels(*ident, reason).inc(t.skipped_slots.get(reason, 0))
        self.missed.labels(*ident).inc(t.missed_slots)
        self.duration.labels(*ident)
        self.running.labels(*ident).set(0)
        return True

    def remove_schedule(self, namespace: str, name: str) -> None:
        with self._lock:
            self._seen.discard((namespace, name))
        ident = (name, namespace)
        extra: list[tuple[Any, Iterable[str]]] = [(self.cycles, RESULTS), (self.skipped, SKIP_REASONS)]
        for family, values in extra:
            for value in values:
                _remove(family, (*ident, value))
        for count in COUNTS:
            if count.metric is not None:
                _remove(self._family(count), (*ident, *_series(count)))
        singles = [
            self.missed,
            self.duration,
            self.last_success,
            self.next_run,
            self.interval,
            self.ready,
            self.running,
            self.vocabulary_in_sync,
            self.agent_stopped,
            self.agent_downtime,
            self.agent_stale_window,
        ]
        for family in singles:
            _remove(family, ident)

    # ---- updates ----------------------------------------------------------------------------------------------

    def record_run(self, namespace: str, name: str, run: RunSummary) -> None:
        """Count one finished cycle. Call only after its UID was persisted as counted."""
        ident = (name, namespace)
        self.cycles.labels(*ident, run.result).inc()
        self._count(ident, run)
        if run.duration_seconds is not None:
            self.duration.labels(*ident).observe(run.duration_seconds)
        self._set_states(ident, run)

    def _family(self, count: Count) -> Any:
        assert count.metric is not None
        return self._count_families[count.metric.family.name]

    def _count(self, ident: tuple[str, str], source: Totals | RunSummary) -> None:
        """Add each summed count of ``source`` (a run, or the persisted totals) to its series."""
        for count in SUMMED:
            if count.metric is not None:
                self._family(count).labels(*ident, *_series(count)).inc(value_of(source, count) or 0)

    def _set_states(self, ident: tuple[str, str], run: RunSummary) -> None:
        """The corpus after the run, where the run knows it."""
        for count in COUNTS:
            if count.state and count.metric is not None and (value := value_of(run, count)) is not None:
                self._family(count).labels(*ident, *_series(count)).set(value)

    def record_agent(
        self, namespace: str, name: str, *, downtime: float | None = None, stale_window: float | None = None
    ) -> None:
        """A Stop ended (its downtime) or a RestartAfter restart happened (its stale window)."""
        ident = (name, namespace)
        if downtime is not None:
            self.agent_downtime.labels(*ident).observe(downtime)
        if stale_window is not None:
            self.agent_stale_window.labels(*ident).observe(stale_window)

    def record_slots(self, namespace: str, name: str, *, missed: int = 0, skipped_reason: str | None = None) -> None:
        ident = (name, namespace)
        if missed:
            self.missed.labels(*ident).inc(missed)
        if skipped_reason is not None:
            self.skipped.labels(*ident, skipped_reason).inc()

    def set_state(
        self,
        namespace: str,
        name: str,
        *,
        ready: bool,
        running: bool,
        next_run: datetime | None,
        last_success: datetime | None,
        vocabulary_in_sync: bool | None,
        last_run: RunSummary | None = None,
        interval_seconds: float | None = None,
        agent_stopped: bool | None = None,
    ) -> None:
        ident = (name, namespace)
        self.ready.labels(*ident).set(1 if ready else 0)
        self.running.labels(*ident).set(1 if running else 0)
        if next_run is not None:
            self.next_run.labels(*ident).set(_ts(next_run))
        else:
            _remove(self.next_run, ident)
        if interval_seconds is not None:
            self.interval.labels(*ident).set(interval_seconds)
        else:
            _remove(self.interval, ident)
        if last_success is not None:
            self.last_success.labels(*ident).set(_ts(last_success))
        if vocabulary_in_sync is None:
            _remove(self.vocabulary_in_sync, ident)
        else:
            self.vocabulary_in_sync.labels(*ident).set(1 if vocabulary_in_sync else 0)
        if last_run is not None:
            self._set_states(ident, last_run)
        if agent_stopped is None:
            _remove(self.agent_stopped, ident)
        else:
            self.agent_stopped.labels(*ident).set(1 if agent_stopped else 0)

    def handler_error(self, handler: str) -> None:
        self.handler_errors.labels(handler).inc()


def _label(family: Family) -> list[str]:
    return [family.label] if family.label else []


def _remove(family: Any, labels: tuple[str, ...]) -> None:
    with contextlib.suppress(KeyError):
        family.remove(*labels)
