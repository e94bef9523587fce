"""The Grafana dashboard of the operator, built with grafana-foundation-sdk.

Why the SDK rather than a hand-rolled model: it is Grafana's own typed builder (generated from the dashboard
schema of the Grafana version it is pinned to), pure Python with no dependencies, installs from PyPI and works
offline; so field names, enums and defaults are Grafana's, not our guesses, and mypy checks the calls. It is a
dev dependency only: the output is committed JSON, and this module is not part of the package the image ships.

Provisioning-safe by construction: the data source is a ``datasource`` template variable (``${datasource}``), and
the output has no ``__inputs``/``${DS_...}`` placeholders, which break under the Grafana sidecar. Every query uses
only metric names and labels from ``dreamkeeper.kube.metrics``; schedule filters use ``dreamschedule`` and
``dreamschedule_namespace`` (never ``namespace``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from grafana_foundation_sdk.builders import bargauge, dashboard, prometheus, stat, timeseries
from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DataSourceRef,
    GridPos,
    Threshold,
    ThresholdsMode,
    VariableRefresh,
    VariableSort,
)

from codegen.observability import SCHEDULE_LABELS

UID = "dreamkeeper"
TITLE = "dreamkeeper"
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")
SEL = 'dreamschedule_namespace=~"$namespace", dreamschedule=~"$dreamschedule"'
WHO = "{{dreamschedule_namespace}}/{{dreamschedule}}"
WIDTH = 24

PanelKind = Literal["stat", "timeseries", "bargauge"]


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str = ""
    instant: bool = False


@dataclass(frozen=True)
class PanelSpec:
    title: str
    kind: PanelKind
    queries: tuple[Query, ...]
    description: str
    width: int
    height: int = 8
    unit: str = "short"
    # (value, color) steps above the base color; empty: no thresholds colouring.
    red_from: float | None = None
    base_color: str = "green"
    no_value: str | None = None
    stacked: bool = False


@dataclass(frozen=True)
class RowSpec:
    title: str
    panels: tuple[PanelSpec, ...] = field(default_factory=tuple)


def _inc(metric: str, window: str = "$__interval", extra: str = "") -> str:
    selector = f"{SEL}, {extra}" if extra else SEL
    return f"increase({metric}{{{selector}}}[{window}])"


ROWS: tuple[RowSpec, ...] = (
    RowSpec(
        "Nothing lost",
        (
            PanelSpec(
                "Hard deletes (must stay 0)",
                "stat",
                (Query(f"sum(dreamkeeper_hard_deletes_total{{{SEL}}})"),),
                "Entries deleted without an archive, ever (from the schedules' persisted totals). dreamkeeper's "
                "policy is zero; anything else pages (DreamkeeperHardDelete).",
                width=6,
                height=5,
                red_from=1,
            ),
            PanelSpec(
                "Specifics lost",
                "stat",
                (Query(f"sum({_inc('dreamkeeper_specifics_lost_total', '$__range')})"),),
                "Specifics (names, numbers, dates...) that no live entry carries any more after a cycle, in the "
                "time range. They are still in archived entries until the retention purge.",
                width=6,
                height=5,
                red_from=1,
            ),
            PanelSpec(
                "Entries protected",
                "stat",
                (Query(f"sum({_inc('dreamkeeper_entries_protected_total', '$__range')})"),),
                "Prunes the high-value floor or a protected category refused, in the time range.",
                width=6,
                height=5,
                base_color="blue",
            ),
            PanelSpec(
                "Ephemeral archives",
                "stat",
                (Query("sum(" + _inc("dreamkeeper_archived_total", "$__range", 'kind="ephemeral"') + ")"),),
                "Entries archived with no replacement (the only removal that discards content from the live "
                "view; recoverable for the retention period), in the time range.",
                width=6,
                height=5,
                red_from=6,
            ),
        ),
    ),
    RowSpec(
        "Cycles",
        (
            PanelSpec(
                "Cycles by result",
                "timeseries",
                (Query(f"sum by (result) ({_inc('dreamkeeper_cycles_total')})", "{{result}}"),),
                "Finished cycle Jobs: completed, skipped (nothing to do or the agent's cycle lock was held), failed.",
                width=12,
                stacked=True,
            ),
            PanelSpec(
                "Reviewed vs withheld",
                "timeseries",
                (
                    Query(f"sum({_inc('dreamkeeper_entries_reviewed_total')})", "reviewed"),
                    Query(f"sum({_inc('dreamkeeper_entries_withheld_total')})", "withheld"),
                ),
                "Entries offered to the proposer vs withheld as reviewed-and-unchanged (the gate). Withholding "
                "around half the corpus is the steady state.",
                width=12,
            ),
            PanelSpec(
                "Archives: with replacement vs ephemeral",
                "timeseries",
                (Query(f"sum by (kind) ({_inc('dreamkeeper_archived_total')})", "{{kind}}"),),
                "with_replacement: folded or merged into a successor that carries the content. ephemeral: pruned "
                "with nothing in its place; the number to watch.",
                width=12,
                stacked=True,
            ),
            PanelSpec(
                "Merges rejected / repaired",
                "timeseries",
                (
                    Query(f"sum({_inc('dreamkeeper_merges_rejected_total')})", "rejected"),
                    Query(f"sum({_inc('dreamkeeper_merges_repaired_total')})", "repaired"),
                ),
                "Merges refused by the coverage check for dropping specifics (sources kept) and merges repaired "
                "to restore them.",
                width=12,
            ),
            PanelSpec(
                "Cycle duration",
                "timeseries",
                (
                    Query(
                        f"sum by ({SCHEDULE_LABELS}) ({_inc('dreamkeeper_cycle_duration_seconds_sum')})"
                        f" / sum by ({SCHEDULE_LABELS}) ({_inc('dreamkeeper_cycle_duration_seconds_count')})",
                        f"{WHO} mean",
                    ),
                    Query(
                        f"histogram_quantile(0.95, sum by (le) ({_inc('dreamkeeper_cycle_duration_seconds_bucket')}))",
                        "p95 (all selected)",
                    ),
                ),
                "Wall time of counted cycles.",
                width=12,
                unit="s",
            ),
            PanelSpec(
                "LLM tokens",
                "timeseries",
                (Query(f"sum by (direction) ({_inc('dreamkeeper_llm_tokens_total')})", "{{direction}}"),),
                "Proposer tokens (input + output); zero with the offline proposer.",
                width=12,
                stacked=True,
            ),
        ),
    ),
    RowSpec(
        "Corpus and schedules",
        (
            PanelSpec(
                "Live vs archived entries",
                "timeseries",
                (
                    Query(f"sum by ({SCHEDULE_LABELS}) (dreamkeeper_live_entries{{{SEL}}})", f"{WHO} live"),
                    Query(f"sum by ({SCHEDULE_LABELS}) (dreamkeeper_archived_entries{{{SEL}}})", f"{WHO} archived"),
                ),
                "Entries after the last cycle. A live corpus more than 10% below its 24 h maximum (or 20% below "
                "its 7-day maximum) pages.",
                width=12,
            ),
            PanelSpec(
                "Duplicate backlog",
                "timeseries",
                (Query(f"sum by ({SCHEDULE_LABELS}) (dreamkeeper_duplicate_backlog{{{SEL}}})", WHO),),
                "Near-duplicate clusters still whole after the last cycle (the engine's own clustering): waiting to "
                "reopen, declined or undecided. A backlog that never falls is consolidation doing nothing.",
                width=12,
            ),
            PanelSpec(
                "Skipped and missed slots",
                "timeseries",
                (
                    Query(f"sum by (reason) ({_inc('dreamkeeper_skipped_slots_total')})", "skipped: {{reason}}"),
                    Query(f"sum({_inc('dreamkeeper_missed_slots_total')})", "missed"),
                ),
                "Slots not run: concurrent (a cycle was active on the same claim), suspended, not_ready, "
                "name_conflict; missed: passed while the operator was down or past startingDeadlineSeconds.",
                width=12,
                stacked=True,
            ),
            PanelSpec(
                "Last success age per schedule",
                "bargauge",
                (Query(f"time() - dreamkeeper_last_success_timestamp_seconds{{{SEL}}}", WHO, instant=True),),
                "Time since each schedule's last completed (or skipped) cycle.",
                width=12,
                unit="s",
            ),
            PanelSpec(
                "Periods since last success",
                "bargauge",
                (
                    Query(
                        f"(time() - dreamkeeper_last_success_timestamp_seconds{{{SEL}}})"
                        f" / dreamkeeper_schedule_interval_seconds{{{SEL}}}",
                        WHO,
                        instant=True,
                    ),
                ),
                "The same age counted in each schedule's own periods; 3 or more pages (DreamkeeperNoSuccessfulCycle).",
                width=12,
                red_from=3,
            ),
        ),
    ),
    RowSpec(
        "Operator",
        (
            PanelSpec(
                "Operator up",
                "stat",
                (Query("sum(dreamkeeper_operator_info)"),),
                "Operators exposing metrics. No value: the operator is down or not scraped.",
                width=4,
                height=6,
                base_color="red",
                no_value="down",
            ),
            PanelSpec(
                "Schedules not ready",
                "stat",
                (Query(f"sum(1 - dreamkeeper_schedule_ready{{{SEL}}})"),),
                "Schedules whose Ready condition is not True (invalid spec, missing claim or vocabulary); see "
                "`kubectl describe dreamschedule`.",
                width=4,
                height=6,
                red_from=1,
            ),
            PanelSpec(
                "Vocabulary fallbacks",
                "stat",
                (Query(f"sum({_inc('dreamkeeper_vocabulary_fallbacks_total', '$__range')})"),),
                "Cycles that fell back to the built-in vocabulary because the file was malformed, in the range.",
                width=4,
                height=6,
                red_from=1,
            ),
            PanelSpec(
                "Handler errors",
                "timeseries",
                (Query("sum by (handler) (increase(dreamkeeper_handler_errors_total[$__interval]))", "{{handler}}"),),
                "Unexpected errors in the operator's handlers and reconcile loops (each is retried with backoff).",
                width=12,
                height=6,
            ),
        ),
    ),
)


def _thresholds(spec: PanelSpec) -> dashboard.ThresholdsConfig:
    steps = [Threshold(value=None, color=spec.base_color)]
    if spec.red_from is not None:
        steps.append(Threshold(value=spec.red_from, color="red"))
    elif spec.base_color == "red":  # "up" style: red until there is at least one
        steps.append(Threshold(value=1, color="green"))
    return dashboard.ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps)


def _target(query: Query, ref_id: str) -> prometheus.Dataquery:
    target = prometheus.Dataquery().expr(query.expr).ref_id(ref_id).datasource(DATASOURCE)
    if query.legend:
        target = target.legend_format(query.legend)
    return target.instant() if query.instant else target.range()


def _panel(spec: PanelSpec, panel_id: int, pos: GridPos) -> Any:
    builder: Any
    last = common_builders.ReduceDataOptions().calcs(["lastNotNull"]).values(False)
    if spec.kind == "stat":
        builder = (
            stat.Panel()
            .graph_mode(common.BigValueGraphMode.NONE)
            .color_mode(common.BigValueColorMode.VALUE)
            .reduce_options(last)
        )
    elif spec.kind == "bargauge":
        builder = (
            bargauge.Panel()
            .orientation(common.VizOrientation.HORIZONTAL)
            .display_mode(common.BarGaugeDisplayMode.BASIC)
            .reduce_options(last)
        )
    else:
        builder = (
            timeseries.Panel()
            .draw_style(common.GraphDrawStyle.BARS if spec.stacked else common.GraphDrawStyle.LINE)
            .fill_opacity(60 if spec.stacked else 10)
            .legend(
                common_builders.VizLegendOptions()
                .display_mode(common.LegendDisplayMode.LIST)
                .placement(common.LegendPlacement.BOTTOM)
                .show_legend(True)
            )
        )
        if spec.stacked:
            builder = builder.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    builder = (
        builder.id(panel_id)
        .title(spec.title)
        .description(spec.description)
        .datasource(DATASOURCE)
        .grid_pos(pos)
        .unit(spec.unit)
        .thresholds(_thresholds(spec))
    )
    if spec.no_value is not None:
        builder = builder.no_value(spec.no_value)
    for index, query in enumerate(spec.queries):
        # A stat shows one number: ask for it at the range's end rather than a series to reduce.
        instant = query.instant or spec.kind == "stat"
        builder = builder.with_target(_target(Query(query.expr, query.legend, instant), chr(ord("A") + index)))
    return builder


def _variables(board: dashboard.Dashboard) -> dashboard.Dashboard:
    datasource = dashboard.DatasourceVariable("datasource").label("Data source").type("prometheus")
    namespace = (
        dashboard.QueryVariable("namespace")
        .label("Namespace")
        .datasource(DATASOURCE)
        .query("label_values(dreamkeeper_schedule_ready, dreamschedule_namespace)")
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )
    schedule = (
        dashboard.QueryVariable("dreamschedule")
        .label("DreamSchedule")
        .datasource(DATASOURCE)
        .query('label_values(dreamkeeper_schedule_ready{dreamschedule_namespace=~"$namespace"}, dreamschedule)')
        .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(VariableSort.ALPHABETICAL_ASC)
        .multi(True)
        .include_all(True)
        .all_value(".*")
    )
    return board.with_variable(datasource).with_variable(namespace).with_variable(schedule)


def build() -> dict[str, Any]:
    """The dashboard as a JSON-ready dict (what Grafana's "import" and the sidecar read)."""
    board = (
        dashboard.Dashboard(TITLE)
        .uid(UID)
        .description("dreamkeeper: dream consolidation that never loses a memory. Safeguards, cycles, corpus.")
        .tags(["dreamkeeper", "kubernetes", "operator"])
        .editable()
        .time("now-7d", "now")
        .refresh("5m")
        .timezone("browser")
    )
    board = _variables(board)
    panel_id, y = 1, 0
    for row in ROWS:
        board = board.with_row(dashboard.Row(row.title).id(panel_id).grid_pos(GridPos(h=1, w=WIDTH, x=0, y=y)))
        panel_id, y, x, row_height = panel_id + 1, y + 1, 0, 0
        for spec in row.panels:
            if x + spec.width > WIDTH:
                x, y, row_height = 0, y + row_height, 0
            board = board.with_panel(_panel(spec, panel_id, GridPos(h=spec.height, w=spec.width, x=x, y=y)))
            panel_id, x, row_height = panel_id + 1, x + spec.width, max(row_height, spec.height)
        y += row_height
    encoded: dict[str, Any] = json.loads(json.dumps(board.build(), cls=JSONEncoder))
    return encoded


def render() -> str:
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"
