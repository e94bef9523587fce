"""The operator's Prometheus alerts: one typed source for the plain rules file (promtool) and the PrometheusRule.

Every alert carries ``probes``: the sub-expressions that return one series per counted schedule in a *healthy*
system. An alert expression itself is empty when all is well (that is the point of an alert), so the live
Prometheus test checks that each expression parses and that each of its probes returns series for a schedule
that has run; a unit test checks that the probes name every metric the expression uses.

Thresholds, and why:

- hard deletes, specifics lost: any at all (the policy is zero; the census is exact, not sampled).
- live corpus: more than 10% below its 24 h maximum, or more than 20% below its 7-day maximum. The seed's
  incident (148 -> 109 entries, -26% in 3.5 days of twice-daily cycles) is about -8% a day, which a 24 h rule
  alone would miss; the 7-day rule pages on it (tests/packaging/alerts_test.yaml replays it).
- no success: longer than ``NO_SUCCESS_PERIODS`` of the schedule's own cadence
  (``dreamkeeper_schedule_interval_seconds``), or that many failed/missed/skipped slots and never a success.
- ephemeral archives (removal with no replacement, "the number to watch" in the seed): more than 5 in 24 h and
  more than 3x the 7-day daily average (seed cycle 1 archived 13 ephemerally through a bug; healthy cycles 0-2).
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from codegen.observability import RUNBOOK_BASE_URL, SCHEDULE_LABELS

GROUP_NAME = "dreamkeeper"
NO_SUCCESS_PERIODS = 3
DROP_24H = 0.10
DROP_7D = 0.20
EPHEMERAL_MIN = 5
EPHEMERAL_FACTOR = 3
HANDLER_ERRORS_15M = 5

WHO = "{{ $labels.dreamschedule_namespace }}/{{ $labels.dreamschedule }}"
METRIC = re.compile(r"\b(dreamkeeper_[a-z_]+)\b")


class AlertRule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    alert: str = Field(pattern=r"^Dreamkeeper[A-Za-z]+$")
    expr: str
    for_: str = Field(pattern=r"^\d+[smh]$")
    severity: Literal["critical", "warning"]
    summary: str
    description: str
    runbook: str = Field(pattern=r"^[a-z0-9-]+$", description="anchor of its section in docs/runbooks.md")
    probes: tuple[str, ...] = Field(min_length=1)

    def metrics(self) -> set[str]:
        return set(METRIC.findall(self.expr))

    def rule(self, runbook_base_url: str = RUNBOOK_BASE_URL) -> dict[str, Any]:
        return {
            "alert": self.alert,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook_url": f"{runbook_base_url}#{self.runbook}",
            },
        }


def _one_line(expr: str) -> str:
    return " ".join(expr.split())


def _drop(window: str, fraction: float) -> str:
    peak = f"max_over_time(dreamkeeper_live_entries[{window}])"
    return f"({peak} - dreamkeeper_live_entries) > {fraction} * {peak}"


_NOT_SUCCEEDED = (
    f'sum by ({SCHEDULE_LABELS}) (dreamkeeper_cycles_total{{result=~"failed|proposer-failed"}})',
    f"sum by ({SCHEDULE_LABELS}) (dreamkeeper_missed_slots_total)",
    f'sum by ({SCHEDULE_LABELS}) (dreamkeeper_skipped_slots_total{{reason!="suspended"}})',
)
_EPHEMERAL_24H = 'increase(dreamkeeper_archived_total{kind="ephemeral"}[24h])'
_EPHEMERAL_7D = 'increase(dreamkeeper_archived_total{kind="ephemeral"}[7d])'

ALERTS: tuple[AlertRule, ...] = (
    AlertRule(
        alert="DreamkeeperHardDelete",
        expr="increase(dreamkeeper_hard_deletes_total[6h]) > 0",
        for_="0m",
        severity="critical",
        summary=f"{WHO}: a memory entry was deleted without an archive",
        description=(
            "{{ $value }} entries of " + WHO + " were removed outside the retention purge in the last 6 h. "
            "dreamkeeper never hard-deletes: the only deleting path is the purge of entries archived longer "
            "than the retention (counted separately). Treat as data loss until proven otherwise."
        ),
        runbook="dreamkeeperharddelete",
        probes=("increase(dreamkeeper_hard_deletes_total[6h])",),
    ),
    AlertRule(
        alert="DreamkeeperSpecificsLost",
        expr="increase(dreamkeeper_specifics_lost_total[6h]) > 0",
        for_="0m",
        severity="critical",
        summary=f"{WHO}: specifics no live entry carries any more",
        description=(
            "The corpus-wide census after a cycle of " + WHO + " found {{ $value }} specifics (names, numbers, "
            "dates...) that no live entry holds any more. They are still in archived entries: restore them "
            "before the retention purge."
        ),
        runbook="dreamkeeperspecificslost",
        probes=("increase(dreamkeeper_specifics_lost_total[6h])",),
    ),
    AlertRule(
        alert="DreamkeeperLossReversed",
        expr=("increase(dreamkeeper_losses_reversed_total[6h]) > 0 or increase(dreamkeeper_orphaned_total[6h]) > 0"),
        for_="0m",
        severity="critical",
        summary=f"{WHO}: a run's end-of-run invariant found a live fact orphaned or lost",
        description=(
            "A cycle of " + WHO + " archived entries that left a fact unreachable from the live corpus "
            "({{ $value }} in the last 6 h): the end-of-run invariant brought them back (lossesReversed) or could "
            "not (orphaned). A stage slipped: the cycle failed; find out which before the next one."
        ),
        runbook="dreamkeeperlossreversed",
        probes=("increase(dreamkeeper_losses_reversed_total[6h])", "increase(dreamkeeper_orphaned_total[6h])"),
    ),
    AlertRule(
        alert="DreamkeeperLiveCorpusDropped",
        expr=_drop("24h", DROP_24H),
        for_="0m",
        severity="critical",
        summary=f"{WHO}: live memory dropped more than {DROP_24H:.0%} in 24 h",
        description=(
            "The live entries of " + WHO + " are {{ $value }} entries below their 24 h maximum "
            f"(more than {DROP_24H:.0%}). Every removal is an archive; find out which cycle did it."
        ),
        runbook="dreamkeeperlivecorpusdropped",
        probes=("max_over_time(dreamkeeper_live_entries[24h])", "dreamkeeper_live_entries"),
    ),
    AlertRule(
        alert="DreamkeeperLiveCorpusEroding",
        expr=_drop("7d", DROP_7D),
        for_="0m",
        severity="critical",
        summary=f"{WHO}: live memory dropped more than {DROP_7D:.0%} in 7 days",
        description=(
            "The live entries of " + WHO + " are {{ $value }} entries below their 7-day maximum "
            f"(more than {DROP_7D:.0%}): slow erosion, the shape of the incident dreamkeeper exists for "
            "(-26% in 3.5 days)."
        ),
        runbook="dreamkeeperlivecorpusdropped",
        probes=("max_over_time(dreamkeeper_live_entries[7d])", "dreamkeeper_live_entries"),
    ),
    AlertRule(
        alert="DreamkeeperNoSuccessfulCycle",
        expr=_one_line(
            f"""
            (time() - dreamkeeper_last_success_timestamp_seconds)
              > {NO_SUCCESS_PERIODS} * dreamkeeper_schedule_interval_seconds
            or on ({SCHEDULE_LABELS})
            (
              ({" + ".join(_NOT_SUCCEEDED)}) >= {NO_SUCCESS_PERIODS}
              unless on ({SCHEDULE_LABELS}) dreamkeeper_last_success_timestamp_seconds
            )
            """
        ),
        for_="10m",
        severity="warning",
        summary=f"{WHO}: no successful cycle for {NO_SUCCESS_PERIODS} periods",
        description=(
            f"{WHO} has not completed a cycle for more than {NO_SUCCESS_PERIODS} of its scheduling periods "
            "(or has never completed one after that many failed, missed or skipped slots). Duplicates pile up "
            "and the agent's memory is not being consolidated."
        ),
        runbook="dreamkeepernosuccessfulcycle",
        probes=(
            "time() - dreamkeeper_last_success_timestamp_seconds",
            "dreamkeeper_schedule_interval_seconds",
            *_NOT_SUCCEEDED,
        ),
    ),
    AlertRule(
        alert="DreamkeeperEphemeralArchivesSpiking",
        expr=_one_line(
            f"""
            {_EPHEMERAL_24H} > {EPHEMERAL_MIN}
            and {_EPHEMERAL_24H} > {EPHEMERAL_FACTOR} * {_EPHEMERAL_7D} / 7
            """
        ),
        for_="0m",
        severity="warning",
        summary=f"{WHO}: many entries archived with no replacement",
        description=(
            "{{ $value }} entries of " + WHO + " were archived in 24 h with no successor carrying their content "
            f"(more than {EPHEMERAL_MIN} and {EPHEMERAL_FACTOR}x the 7-day daily average). They are recoverable; "
            "check that they really were noise."
        ),
        runbook="dreamkeeperephemeralarchivesspiking",
        probes=(_EPHEMERAL_24H, _EPHEMERAL_7D),
    ),
    AlertRule(
        alert="DreamkeeperVocabularyFallback",
        expr="increase(dreamkeeper_vocabulary_fallbacks_total[24h]) > 0",
        for_="0m",
        severity="warning",
        summary=f"{WHO}: the coverage vocabulary file was malformed",
        description=(
            "A cycle of " + WHO + " could not read merge-coverage-vocabulary.json and used the built-in "
            "baseline: words the deployment marked alwaysSpecific (character names such as May, Will, Rose) lost "
            "their protection for that cycle."
        ),
        runbook="dreamkeepervocabularyfallback",
        probes=("increase(dreamkeeper_vocabulary_fallbacks_total[24h])",),
    ),
    AlertRule(
        alert="DreamkeeperOperatorDown",
        expr="absent(dreamkeeper_operator_info)",
        for_="10m",
        severity="warning",
        summary="the dreamkeeper operator is not being scraped",
        description=(
            "No dreamkeeper operator has exposed metrics for 10 minutes: it is down, crash-looping, or its "
            "metrics endpoint is not scraped. No cycle runs and no safeguard counter is visible meanwhile."
        ),
        runbook="dreamkeeperoperatordown",
        probes=("dreamkeeper_operator_info",),
    ),
    AlertRule(
        alert="DreamkeeperOperatorErrors",
        expr=f"sum by (handler) (increase(dreamkeeper_handler_errors_total[15m])) > {HANDLER_ERRORS_15M}",
        for_="15m",
        severity="warning",
        summary="the dreamkeeper operator keeps failing in {{ $labels.handler }}",
        description=(
            "More than " + str(HANDLER_ERRORS_15M) + " unexpected errors in 15 min in the operator's "
            "{{ $labels.handler }} handler, for 15 min. It retries with backoff; schedules may not be reconciled."
        ),
        runbook="dreamkeeperoperatorerrors",
        probes=("sum by (handler) (increase(dreamkeeper_handler_errors_total[15m]))",),
    ),
)


def rule_groups(runbook_base_url: str = RUNBOOK_BASE_URL) -> dict[str, Any]:
    """The Prometheus rules-file document (``groups:``), the same body a PrometheusRule's ``spec`` takes."""
    return {"groups": [{"name": GROUP_NAME, "rules": [a.rule(runbook_base_url) for a in ALERTS]}]}


def alert(name: str) -> AlertRule:
    for rule in ALERTS:
        if rule.alert == name:
            return rule
    raise KeyError(f"no alert named {name!r}; known: {[a.alert for a in ALERTS]}")
