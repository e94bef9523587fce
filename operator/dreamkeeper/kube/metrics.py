"""Prometheus metrics of the operator, served on their own port at ``/metrics``.

Every per-schedule series carries ``dreamschedule`` and ``dreamschedule_namespace`` (never ``namespace``,
which collides with the scrape target's own label). Counters are created at zero when a schedule is first
seen — seeded from its persisted ``status.totals``, so they equal the CR's totals and survive restarts — and
every series of a schedule is removed when the schedule is deleted. Each Job is counted exactly once (by UID,
see ``reconcile.py``). ``_created`` series are disabled.

The table of every metric is ``METRIC_DOCS`` below, rendered into docs/operator-metrics.md by
``python -m dreamkeeper.kube.generate`` (a test keeps both in step with the registered families).
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
from dreamkeeper.kube.models import RunSummary, Totals


@dataclass(frozen=True)
class MetricDoc:
    name: str
    type: str
    extra_labels: str
    meaning: str


METRIC_DOCS: tuple[MetricDoc, ...] = (
    MetricDoc(
        "dreamkeeper_cycles_total",
        "counter",
        "result=completed,skipped,failed",
        "finished cycle Jobs by outcome (skipped: engine skipped, or the agent's cycle lock was held)",
    ),
    MetricDoc("dreamkeeper_entries_reviewed_total", "counter", "", "entries offered to the proposer"),
    MetricDoc(
        "dreamkeeper_entries_withheld_total", "counter", "", "entries withheld as reviewed-and-unchanged (the gate)"
    ),
    MetricDoc(
        "dreamkeeper_archived_total",
        "counter",
        "kind=with_replacement,ephemeral",
        "entries archived (reversible): folded/merged into a successor, or pruned with no replacement",
    ),
    MetricDoc(
        "dreamkeeper_merges_rejected_total", "counter", "", "merges refused for dropping specifics (sources kept)"
    ),
    MetricDoc("dreamkeeper_merges_repaired_total", "counter", "", "merges repaired to restore missing specifics"),
    MetricDoc(
        "dreamkeeper_entries_protected_total",
        "counter",
        "",
        "prunes refused by the high-value floor or protected categories",
    ),
    MetricDoc(
        "dreamkeeper_conflicts_total",
        "counter",
        "",
        "changes skipped because the agent wrote the entry during the cycle",
    ),
    MetricDoc("dreamkeeper_hard_deletes_total", "counter", "", "entries deleted without an archive (policy: always 0)"),
    MetricDoc("dreamkeeper_purged_total", "counter", "", "archived entries purged after the retention period"),
    MetricDoc(
        "dreamkeeper_specifics_lost_total",
        "counter",
        "",
        "specifics no live entry carries any more after a cycle (census)",
    ),
    MetricDoc(
        "dreamkeeper_vocabulary_fallbacks_total",
        "counter",
        "",
        "cycles that fell back to the built-in vocabulary (file malformed)",
    ),
    MetricDoc("dreamkeeper_llm_tokens_total", "counter", "direction=input,output", "proposer tokens"),
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
    MetricDoc("dreamkeeper_live_entries", "gauge", "", "live entries after the last cycle"),
    MetricDoc("dreamkeeper_archived_entries", "gauge", "", "archived entries after the last cycle"),
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


def metrics_markdown() -> str:
    lines = [
        "# dreamkeeper operator metrics",
        "",
        "Served by `dreamkeeper operator` on `--metrics-port` (default 8080) at `/metrics`. Every per-schedule",
        "series has the labels `dreamschedule` and `dreamschedule_namespace` (never `namespace`); counters start",
        "at zero (seeded from the DreamSchedule's `status.totals`) when the schedule is first seen, and all of a",
        "schedule's series are removed when it is deleted. Generated from `operator/dreamkeeper/kube/metrics.py`.",
        "",
        "| metric | type | extra labels | meaning |",
        "|---|---|---|---|",
    ]
    lines += [f"| `{d.name}` | {d.type} | {d.extra_labels} | {d.meaning} |" for d in METRIC_DOCS]
    return "\n".join(lines) + "\n"


SCHEDULE_LABELS = ("dreamschedule", "dreamschedule_namespace")
RESULTS = ("completed", "skipped", "failed")
ARCHIVE_KINDS = ("with_replacement", "ephemeral")
DIRECTIONS = ("input", "output")
SKIP_REASONS = ("concurrent", "suspended", "not_ready", "name_conflict")
HANDLERS = ("schedule", "vocabulary", "schedule_deleted", "startup")
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
AGENT_BUCKETS = (5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)

# (name without _total, help, field of Totals / RunSummary)
_PLAIN_COUNTERS = (
    ("dreamkeeper_entries_reviewed", "Entries offered to the proposer.", "reviewed", "reviewed"),
    ("dreamkeeper_entries_withheld", "Entries withheld as reviewed-and-unchanged.", "withheld", "withheld"),
    ("dreamkeeper_merges_rejected", "Merges refused for dropping specifics.", "merges_rejected", "rejected"),
    ("dreamkeeper_merges_repaired", "Merges repaired to restore specifics.", "merges_repaired", "repaired"),
    (
        "dreamkeeper_entries_protected",
        "Prunes refused by the floor or protected categories.",
        "entries_protected",
        "protected",
    ),
    ("dreamkeeper_conflicts", "Changes skipped: the agent wrote the entry mid-cycle.", "conflicts", "conflicts"),
    ("dreamkeeper_hard_deletes", "Entries deleted without an archive.", "hard_deletes", "hard_deletes"),
    ("dreamkeeper_purged", "Archived entries purged after retention.", "purged", "purged"),
    (
        "dreamkeeper_specifics_lost",
        "Specifics no live entry carries after a cycle.",
        "specifics_lost",
        "specifics_lost",
    ),
    (
        "dreamkeeper_vocabulary_fallbacks",
        "Cycles that fell back to the built-in vocabulary.",
        "vocabulary_fallbacks",
        "vocabulary_fallback",
    ),
)


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
        self.archived = Counter("dreamkeeper_archived", "Entries archived, by kind.", [*labels, "kind"], registry=r)
        self.tokens = Counter("dreamkeeper_llm_tokens", "Proposer tokens.", [*labels, "direction"], registry=r)
        self.skipped = Counter("dreamkeeper_skipped_slots", "Slots not run.", [*labels, "reason"], registry=r)
        self.missed = Counter("dreamkeeper_missed_slots", "Slots that passed unrun.", labels, registry=r)
        self.plain = {
            field: (Counter(name, doc, labels, registry=r), run_field)
            for name, doc, field, run_field in _PLAIN_COUNTERS
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
        self.live_entries = Gauge("dreamkeeper_live_entries", "Live entries after the last cycle.", labels, registry=r)
        self.archived_entries = Gauge(
            "dreamkeeper_archived_entries", "Archived entries after the last cycle.", labels, registry=r
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
            self.cycles.labels(*ident, result).inc(getattr(t, f"cycles_{result}"))
        self.archived.labels(*ident, "with_replacement").inc(t.archived_with_replacement)
        self.archived.labels(*ident, "ephemeral").inc(t.archived_ephemeral)
        self.tokens.labels(*ident, "input").inc(t.llm_input_tokens)
        self.tokens.labels(*ident, "output").inc(t.llm_output_tokens)
        for reason in SKIP_REASONS:
            self.skipped.labels(*ident, reason).inc(t.skipped_slots.get(reason, 0))
        self.missed.labels(*ident).inc(t.missed_slots)
        for field, (counter, _) in self.plain.items():
            counter.labels(*ident).inc(getattr(t, field))
        self.duration.labels(*ident)
        self.running.labels(*ident).set(0)
        return True

    def remove_schedule(self, namespace: str, name: str) -> None:
        with self._lock:
            self._seen.discard((namespace, name))
        ident = (name, namespace)
        extra: list[tuple[Any, Iterable[str]]] = [
            (self.cycles, RESULTS),
            (self.archived, ARCHIVE_KINDS),
            (self.tokens, DIRECTIONS),
            (self.skipped, SKIP_REASONS),
        ]
        for family, values in extra:
            for value in values:
                _remove(family, (*ident, value))
        singles = [
            self.missed,
            self.duration,
            self.last_success,
            self.next_run,
            self.interval,
            self.live_entries,
            self.archived_entries,
            self.ready,
            self.running,
            self.vocabulary_in_sync,
            self.agent_stopped,
            self.agent_downtime,
            self.agent_stale_window,
            *(counter for counter, _ in self.plain.values()),
        ]
        for family in singles:
            _remove(family, ident)

    # ---- updates ----------------------------------------------------------------------------------------------

    def record_run(self, namespace: str, name: str, run: RunSummary) -> None:
        """Count one finished cycle. Call only after its UID was persisted as counted."""
        ident = (name, namespace)
        self.cycles.labels(*ident, run.result).inc()
        self.archived.labels(*ident, "with_replacement").inc(run.archived_with_replacement)
        self.archived.labels(*ident, "ephemeral").inc(run.ephemeral)
        self.tokens.labels(*ident, "input").inc(run.input_tokens)
        self.tokens.labels(*ident, "output").inc(run.output_tokens)
        for counter, run_field in self.plain.values():
            counter.labels(*ident).inc(getattr(run, run_field))
        if run.duration_seconds is not None:
            self.duration.labels(*ident).observe(run.duration_seconds)
        if run.live_entries is not None:
            self.live_entries.labels(*ident).set(run.live_entries)
        if run.archived_entries is not None:
            self.archived_entries.labels(*ident).set(run.archived_entries)

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
        live_entries: int | None = None,
        archived_entries: int | None = None,
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
        if live_entries is not None:
            self.live_entries.labels(*ident).set(live_entries)
        if archived_entries is not None:
            self.archived_entries.labels(*ident).set(archived_entries)
        if agent_stopped is None:
            _remove(self.agent_stopped, ident)
        else:
            self.agent_stopped.labels(*ident).set(1 if agent_stopped else 0)

    def handler_error(self, handler: str) -> None:
        self.handler_errors.labels(handler).inc()


def _remove(family: Any, labels: tuple[str, ...]) -> None:
    with contextlib.suppress(KeyError):
        family.remove(*labels)
