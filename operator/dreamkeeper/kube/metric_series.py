"""Every per-schedule Prometheus series in one compact row per schedule, exposed by a custom collector.

Why not ``prometheus_client``'s labelled metrics: each labelled child is a Python object with its own lock and
value objects (~700 bytes; a histogram's ~3 KB), and a schedule has ~50 of them, so 5,000 schedules cost ~180 MB
of the operator's resident memory for numbers that fit in 400 bytes each (issue 27: bench/results/operator-scale-
5000.md). Here a schedule's counters and gauges are one ``array('d')`` (a gauge that is absent holds NaN), its
histograms a list of bucket counts each, made only once observed. The exposition is the same families, names,
labels and values as before (``tests/kube/test_metric_series.py`` compares both byte for byte); a scrape builds one
family's samples at a time, not all of them.
"""

from __future__ import annotations

import math
import threading
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

Ident = tuple[str, str]  # (schedule name, schedule namespace): the order of the series' labels
ABSENT = math.nan


@dataclass(frozen=True)
class SeriesFamily:
    """A counter or gauge family with the schedule's labels and, optionally, one more label with fixed values."""

    name: str
    help: str
    kind: str  # "counter" | "gauge"
    label: str | None = None
    values: tuple[str, ...] = ()  # the extra label's values; () for an unlabelled family


@dataclass(frozen=True)
class HistogramFamily:
    name: str
    help: str
    buckets: tuple[float, ...]  # upper bounds, without +Inf


class ScheduleSeries(Collector):
    """The per-schedule families. Counters of a schedule exist (at zero) from its first update; gauges from their
    first ``set``; a histogram from its first ``touch`` or ``observe``."""

    def __init__(
        self, labels: Sequence[str], families: Sequence[SeriesFamily], histograms: Sequence[HistogramFamily]
    ) -> None:
        self.labels = list(labels)
        self.families = list(families)
        self.histograms = {h.name: h for h in histograms}
        self._slots: dict[tuple[str, str | None], int] = {}
        for family in self.families:
            for value in family.values or (None,):
                self._slots[(family.name, value)] = len(self._slots)
        self._template = array(
            "d",
            [0.0 if f.kind == "counter" else ABSENT for f in self.families for _ in f.values or (None,)],
        )
        self._rows: dict[Ident, array[float]] = {}
        self._observed: dict[Ident, dict[str, list[float]]] = {}  # bucket counts (+Inf last), then the sum
        self._lock = threading.Lock()

    # ---- updates ----------------------------------------------------------------------------------------------

    def _row(self, ident: Ident) -> array[float]:
        row = self._rows.get(ident)
        if row is None:
            row = self._rows[ident] = array("d", self._template)
        return row

    def inc(self, ident: Ident, family: str, amount: float = 1.0, value: str | None = None) -> None:
        if amount < 0:
            raise ValueError(f"counters can only be incremented by non-negative amounts (got {amount} for {family})")
        slot = self._slots[(family, value)]
        with self._lock:
            self._row(ident)[slot] += amount

    def set(self, ident: Ident, family: str, amount: float, value: str | None = None) -> None:
        slot = self._slots[(family, value)]
        with self._lock:
            self._row(ident)[slot] = float(amount)

    def clear(self, ident: Ident, family: str, value: str | None = None) -> None:
        """Remove a gauge's series (it is absent until set again)."""
        slot = self._slots[(family, value)]
        with self._lock:
            row = self._rows.get(ident)
            if row is not None:
                row[slot] = ABSENT

    def touch(self, ident: Ident, histogram: str) -> None:
        """Make a histogram's series exist at zero (as ``Histogram.labels(...)`` did)."""
        with self._lock:
            self._row(ident)
            self._buckets(ident, histogram)

    def observe(self, ident: Ident, histogram: str, amount: float) -> None:
        bounds = self.histograms[histogram].buckets
        with self._lock:
            self._row(ident)
            counts = self._buckets(ident, histogram)
            index = next((i for i, bound in enumerate(bounds) if amount <= bound), len(bounds))
            counts[index] += 1
            counts[-1] += amount

    def _buckets(self, ident: Ident, histogram: str) -> list[float]:
        per = self._observed.setdefault(ident, {})
        counts = per.get(histogram)
        if counts is None:
            counts = per[histogram] = [0.0] * (len(self.histograms[histogram].buckets) + 2)
        return counts

    def drop(self, ident: Ident) -> None:
        """Every series of the schedule (it was deleted)."""
        with self._lock:
            self._rows.pop(ident, None)
            self._observed.pop(ident, None)

    def value(self, ident: Ident, family: str, value: str | None = None) -> float | None:
        with self._lock:
            row = self._rows.get(ident)
            found = None if row is None else row[self._slots[(family, value)]]
        return None if found is None or math.isnan(found) else found

    def __len__(self) -> int:
        return len(self._rows)

    # ---- exposition -------------------------------------------------------------------------------------------

    def describe(self) -> Iterator[Metric]:
        """The families without samples: what the registry checks names against (no scrape at registration)."""
        for family in self.families:
            yield self._family(family)
        for histogram in self.histograms.values():
            yield HistogramMetricFamily(histogram.name, histogram.help, labels=self.labels)

    def _family(self, family: SeriesFamily) -> Metric:
        labels = [*self.labels, family.label] if family.label else self.labels
        if family.kind == "counter":
            return CounterMetricFamily(family.name, family.help, labels=labels)
        return GaugeMetricFamily(family.name, family.help, labels=labels)

    def collect(self) -> Iterator[Metric]:
        """One family at a time (a scrape at 5,000 schedules holds one family's samples, not all of them)."""
        for family in self.families:
            metric = self._family(family)
            slots = [(value, self._slots[(family.name, value)]) for value in family.values or (None,)]
            with self._lock:
                picked = [(ident, value, row[slot]) for ident, row in self._rows.items() for value, slot in slots]
            for ident, value, amount in picked:
                if not math.isnan(amount):
                    metric.add_metric([*ident, value] if value is not None else list(ident), amount)  # type: ignore[attr-defined]
            yield metric
        for histogram in self.histograms.values():
            metric = HistogramMetricFamily(histogram.name, histogram.help, labels=self.labels)
            with self._lock:
                observed = [(i, list(c)) for i, per in self._observed.items() if (c := per.get(histogram.name))]
            bounds = [*(floatToGoString(b) for b in histogram.buckets), "+Inf"]  # type: ignore[no-untyped-call]
            for ident, counts in observed:
                cumulative, total = [], 0.0
                for bound, count in zip(bounds, counts[:-1], strict=True):
                    total += count
                    cumulative.append((bound, total))
                metric.add_metric(list(ident), cumulative, counts[-1])
            yield metric
