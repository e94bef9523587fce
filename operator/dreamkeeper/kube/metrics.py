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

import threading
from dataclasses import dataclass
from datetime import datetime

from prometheus_client import CollectorRegistry, Counter, Gauge, disable_created_metrics

from dreamkeeper import __version__
from dreamkeeper.consolidation import COUNTS, SUMMED, Count, Family, value_of
from dreamkeeper.kube.metric_series import HistogramFamily, ScheduleSeries, SeriesFamily
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
    """All metric families on one registry (a fresh one per operator, so tests can run several). The per-schedule
    families live in one compact collector (``metric_series.py``); the operator's own are prometheus_client's."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry or CollectorRegistry(auto_describe=True)
        self._seen: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        r = self.registry
        self.series = ScheduleSeries(SCHEDULE_LABELS, _schedule_families(), _schedule_histograms())
        r.register(self.series)
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
        ident, series = (name, namespace), self.series
        for result in RESULTS:
            series.inc(ident, CYCLES, getattr(t, f"cycles_{result.replace('-', '_')}"), result)
        self._count(ident, t)
        for reason in SKIP_REASONS:
            series.inc(ident, SKIPPED, t.skipped_slots.get(reason, 0), reason)
        series.inc(ident, MISSED, t.missed_slots)
        series.touch(ident, DURATION)
        series.set(ident, RUNNING, 0)
        return True

    def remove_schedule(self, namespace: str, name: str) -> None:
        with self._lock:
            self._seen.discard((namespace, name))
        self.series.drop((name, namespace))

    # ---- updates ----------------------------------------------------------------------------------------------

    def record_run(self, namespace: str, name: str, run: RunSummary) -> None:
        """Count one finished cycle. Call only after its UID was persisted as counted."""
        ident = (name, namespace)
        self.series.inc(ident, CYCLES, 1, run.result)
        self._count(ident, run)
        if run.duration_seconds is not None:
            self.series.observe(ident, DURATION, run.duration_seconds)
        self._set_states(ident, run)

    def _count(self, ident: tuple[str, str], source: Totals | RunSummary) -> None:
        """Add each summed count of ``source`` (a run, or the persisted totals) to its series."""
        for count in SUMMED:
            if count.metric is not None:
                amount = value_of(source, count) or 0
                self.series.inc(ident, count.metric.family.name, amount, count.metric.label_value)

    def _set_states(self, ident: tuple[str, str], run: RunSummary) -> None:
        """The corpus after the run, where the run knows it."""
        for count in COUNTS:
            if count.state and count.metric is not None and (value := value_of(run, count)) is not None:
                self.series.set(ident, count.metric.family.name, value, count.metric.label_value)

    def record_agent(
        self, namespace: str, name: str, *, downtime: float | None = None, stale_window: float | None = None
    ) -> None:
        """A Stop ended (its downtime) or a RestartAfter restart happened (its stale window)."""
        ident = (name, namespace)
        if downtime is not None:
            self.series.observe(ident, AGENT_DOWNTIME, downtime)
        if stale_window is not None:
            self.series.observe(ident, AGENT_STALE_WINDOW, stale_window)

    def record_slots(self, namespace: str, name: str, *, missed: int = 0, skipped_reason: str | None = None) -> None:
        ident = (name, namespace)
        if missed:
            self.series.inc(ident, MISSED, missed)
        if skipped_reason is not None:
            self.series.inc(ident, SKIPPED, 1, skipped_reason)

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
        ident, series = (name, namespace), self.series
        series.set(ident, READY, 1 if ready else 0)
        series.set(ident, RUNNING, 1 if running else 0)
        _set_or_clear(series, ident, NEXT_RUN, None if next_run is None else _ts(next_run))
        _set_or_clear(series, ident, INTERVAL, interval_seconds)
        if last_success is not None:
            series.set(ident, LAST_SUCCESS, _ts(last_success))
        _set_or_clear(
            series, ident, VOCABULARY_IN_SYNC, None if vocabulary_in_sync is None else int(vocabulary_in_sync)
        )
        if last_run is not None:
            self._set_states(ident, last_run)
        _set_or_clear(series, ident, AGENT_STOPPED, None if agent_stopped is None else int(agent_stopped))

    def handler_error(self, handler: str) -> None:
        self.handler_errors.labels(handler).inc()


CYCLES = "dreamkeeper_cycles"
SKIPPED = "dreamkeeper_skipped_slots"
MISSED = "dreamkeeper_missed_slots"
LAST_SUCCESS = "dreamkeeper_last_success_timestamp_seconds"
NEXT_RUN = "dreamkeeper_next_run_timestamp_seconds"
INTERVAL = "dreamkeeper_schedule_interval_seconds"
READY = "dreamkeeper_schedule_ready"
RUNNING = "dreamkeeper_cycle_running"
VOCABULARY_IN_SYNC = "dreamkeeper_vocabulary_in_sync"
AGENT_STOPPED = "dreamkeeper_agent_stopped"
DURATION = "dreamkeeper_cycle_duration_seconds"
AGENT_DOWNTIME = "dreamkeeper_agent_downtime_seconds"
AGENT_STALE_WINDOW = "dreamkeeper_agent_stale_window_seconds"


def _schedule_families() -> list[SeriesFamily]:
    """The per-schedule counters and gauges, with the help texts they have always had."""
    counts = [
        SeriesFamily(
            family.name,
            _help(family, members),
            "counter" if counters else "gauge",
            family.label,
            tuple(value for c in members for value in _series(c)),
        )
        for counters in (True, False)
        for family, members in _families(counters=counters).items()
    ]
    return [
        SeriesFamily(CYCLES, "Finished cycle Jobs by result.", "counter", "result", RESULTS),
        SeriesFamily(SKIPPED, "Slots not run.", "counter", "reason", SKIP_REASONS),
        SeriesFamily(MISSED, "Slots that passed unrun.", "counter"),
        *counts,
        SeriesFamily(LAST_SUCCESS, "Last successful cycle end.", "gauge"),
        SeriesFamily(NEXT_RUN, "Next scheduled slot.", "gauge"),
        SeriesFamily(INTERVAL, "Seconds from the next slot to the one after.", "gauge"),
        SeriesFamily(READY, "1 when Ready is True.", "gauge"),
        SeriesFamily(RUNNING, "1 while a cycle Job is active.", "gauge"),
        SeriesFamily(VOCABULARY_IN_SYNC, "1 when the volume's vocabulary matches the CR.", "gauge"),
        SeriesFamily(AGENT_STOPPED, "1 while the agent's workload is held at 0 for a cycle.", "gauge"),
    ]


def _schedule_histograms() -> list[HistogramFamily]:
    return [
        HistogramFamily(DURATION, "Cycle wall time.", DURATION_BUCKETS),
        HistogramFamily(AGENT_DOWNTIME, "Agent downtime per Stop.", AGENT_BUCKETS),
        HistogramFamily(
            AGENT_STALE_WINDOW, "From a changing cycle's start to the agent's restart (RestartAfter).", AGENT_BUCKETS
        ),
    ]


def _set_or_clear(series: ScheduleSeries, ident: tuple[str, str], family: str, value: float | None) -> None:
    if value is None:
        series.clear(ident, family)
    else:
        series.set(ident, family, value)
