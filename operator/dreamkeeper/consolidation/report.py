"""The cycle report: what one cycle saw, refused and changed. Written as JSON and summarised in log lines."""

from __future__ import annotations

import json
import logging
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from dreamkeeper.consolidation.count_phrases import any_counted, sentence
from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.pause import PauseMarker

if TYPE_CHECKING:
    from dreamkeeper.consolidation.clustering import Cluster
    from dreamkeeper.consolidation.plan import Plan
from dreamkeeper.memory import UNCHECKED, MiB, ensure_state_dir, read_regular, replace_file, state_dir

# "proposer-failed": the cycle ran to the end, but the proposer was asked about at least one batch and none got a
# usable reply (requests failed, or every answer was unusable); nothing the model should have decided was decided.
CycleResult = Literal["completed", "skipped", "failed", "dry-run", "proposer-failed"]


class Rejection(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    source_ids: list[str]
    missing: list[str]
    reason: str
    content: str = ""
    invented: list[str] = Field(default_factory=list)  # specifics the merged text states and no source does


class Protection(BaseModel):
    """A prune refused: by the floor or a protected category, or (``census``) because the entry holds the last live
    mention of the specifics named."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    id: str
    reason: str
    census: list[str] = Field(default_factory=list)


class _ReportHead(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    cycle_id: str
    agent_dir: str = ""
    result: CycleResult = "completed"
    skip_reason: str | None = None
    error: str | None = None
    proposer: str = "offline"
    started_at: datetime
    # When the cycle first wrote under memory/ (None: it wrote nothing): a caching agent's index is stale from
    # then on, so RestartAfter's stale window is measured from here, not from the start.
    first_write_at: datetime | None = None
    finished_at: datetime | None = None


class CycleReport(CycleCounts, _ReportHead):
    """Who ran, when, what it counted (``CycleCounts``), and what it refused. Composed once, from the values the
    cycle's stages returned. (Bases in this order so the JSON opens with the head, then the counts.)"""

    vocabulary_status: str = "absent"
    budget_exhausted: bool = False
    estimated_cost: float | None = None
    clustering_degraded: bool = False
    proposer_failure: str | None = None  # why the result is proposer-failed
    rejections: list[Rejection] = Field(default_factory=list)
    # Useless or misleading proposals refused before any check (refusals.py), each with its reason.
    refusals: list[Rejection] = Field(default_factory=list)
    protections: list[Protection] = Field(default_factory=list)
    lost_specifics: list[str] = Field(default_factory=list)
    pause_marker: PauseMarker | None = None  # the agent's pause marker, when it stopped the cycle
    # RockBot's paths and purge settings this cycle used, each with its source (agent_view.py): settings, the
    # agent's appsettings*.json / rockbot.env / environment, or RockBot's default.
    agent_settings: dict[str, str] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)

    @property
    def duration_seconds(self) -> float:
        if self.finished_at is None:
            return 0.0
        return (self.finished_at - self.started_at).total_seconds()

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2)

    def summary(self) -> dict[str, Any]:
        """The compact form for a container's termination message (must stay well under 4 KiB)."""
        data = self.model_dump(
            mode="json",
            by_alias=True,
            exclude={
                "rejections",
                "refusals",
                "protections",
                "lost_specifics",
                "notes",
                "agent_dir",
                "pause_marker",
                "agent_settings",
            },
        )
        data["durationSeconds"] = round(self.duration_seconds, 3)
        if self.error:
            data["error"] = self.error[:300]
        return data

    def summary_json(self) -> str:
        text = json.dumps(self.summary(), separators=(",", ":"))
        assert len(text.encode()) < 4096, "termination message summary over 4 KiB"
        return text


CYCLES_DIR = "cycles"


def cycles_dir(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / CYCLES_DIR


REPORT_LIMIT = 64 * MiB


def write_report(agent_dir: Path, report: CycleReport) -> Path:
    ensure_state_dir(agent_dir, CYCLES_DIR)  # a real directory: a symlink would send reports outside the agent dir
    path = cycles_dir(agent_dir) / f"{report.cycle_id}.json"
    replace_file(path, (report.to_json() + "\n").encode("utf-8"), UNCHECKED)
    return path


def read_report(agent_dir: Path, cycle_id: str) -> CycleReport:
    path = cycles_dir(agent_dir) / f"{cycle_id}.json"
    return CycleReport.model_validate_json(read_regular(path, REPORT_LIMIT, follow_symlinks=False))


# The cycle's closing lines keep the cycle's logger name: they are the cycle's, and log filters select on it.
log = logging.getLogger("dreamkeeper.consolidation.cycle")


def duplicate_backlog(clusters: list[Cluster], plan: Plan) -> int:
    """Near-duplicate clusters of the corpus this cycle clustered that are still whole after it: none of their
    members left the live corpus (waiting to reopen, declined, undecided, or held with the plan)."""
    leaving = plan.leaving_ids()
    return sum(1 for c in clusters if not any(i in leaving for i in c.ids))


def log_summary(report: CycleReport) -> None:
    if any_counted(report, lambda c: c.safeguard):
        log.info("consolidation safeguards fired — %s", sentence(report, lambda c: c.safeguard))
    if report.result == "proposer-failed":
        log.warning("dream cycle %s: the proposer failed — %s", report.cycle_id, report.proposer_failure)
    log.info(
        "dream cycle %s %s — %s",
        report.cycle_id,
        {"dry-run": "planned (dry run)", "proposer-failed": "finished without a usable proposer reply"}.get(
            report.result, "complete"
        ),
        sentence(report, lambda c: c.logged),
    )
