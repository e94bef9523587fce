"""Pacing against RockBot's memory audit: never drop the live corpus further than its audit allows between two of
its runs.

The audit alerts when live entries fell more than ``MemoryAudit:MaxLossPercentBetweenSnapshots`` (10%) since its
previous run (``loss-percent-threshold``, MemoryAuditInvariants.cs @092f8885), and with the pause breaker on, that
alert writes the pause marker (MemoryAuditService.cs @0969bf1f). Measured: the first dreamkeeper cycle on the year
simulation's cold corpus folded and merged its backlog of duplicates, 15% of the live entries, and the audit ten
minutes later paused dreamkeeper for the rest of the year (bench/results/audit-year-before.md). The blast radius
(blast.py) caps a *plan* at 10% of the entries it works on, after the exact-duplicate fold, and holds it only from
10 entries on: the fold and the plan together, or small corpora, slip past it.

When the audit's last state is visible (``{MemoryAudit:BasePath}/state.json``: it lists every id with whether it
was archived), its live count is the baseline: a cycle may take out at most ``MaxLossPercentBetweenSnapshots`` of
it, counting what left the live corpus since (the agent's own archives included). The exact-duplicate fold folds
whole groups, in order, while they fit (the rest wait for a later cycle: byte-identical copies cost nothing
meanwhile); a plan that would go past what is left is held like one over the blast radius. Without a visible audit
state nothing is paced (the blast radius still holds).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from dreamkeeper.consolidation.agent_config import ConfigValueError, load_agent_config, parse_number
from dreamkeeper.consolidation.agent_view import AgentView
from dreamkeeper.consolidation.plan import FoldAction
from dreamkeeper.memory import MiB, loads_json, read_regular

log = logging.getLogger(__name__)

T = TypeVar("T")

STATE_FILE = "state.json"
STATE_LIMIT = 256 * MiB  # one row per entry, a few hundred bytes each
DEFAULT_MAX_LOSS_PERCENT = 10.0


def audit_live_count(audit_dir: Path) -> int | None:
    """The live entries RockBot's audit counted at its last run (``MemoryAuditState.Entries``, rows not archived);
    None when its state is not there or cannot be read (the audit itself then reports a first run)."""
    try:
        document = loads_json(read_regular(audit_dir / STATE_FILE, STATE_LIMIT).decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(document, dict):
        return None
    fields = {str(k).lower(): v for k, v in document.items()}
    rows = fields.get("entries")
    if not isinstance(rows, list):
        return None
    live = 0
    for row in rows:
        if isinstance(row, dict):
            archived = {str(k).lower(): v for k, v in row.items()}.get("archived")
            live += archived is not True
    return live


@dataclass
class LossBudget:
    """How many more entries may leave the live corpus before the audit's next run sees a loss alert."""

    baseline: int  # live entries at the audit's last run
    max_loss_percent: float
    live_at_start: int  # live entries when this cycle began
    used: int = 0  # taken out by this cycle so far

    @property
    def allowed(self) -> int:
        # The audit alerts when (baseline - live) * 100 / baseline > max: this many may go in all, and no more.
        total = math.floor(self.baseline * self.max_loss_percent / 100 + 1e-9)
        already = max(0, self.baseline - self.live_at_start)
        return max(0, total - already)

    @property
    def left(self) -> int:
        return max(0, self.allowed - self.used)

    def describe(self) -> str:
        return (
            f"RockBot's audit last counted {self.baseline} live entries and alerts past a "
            f"{self.max_loss_percent:g}% drop: {self.allowed} may leave before its next run"
        )


def loss_budget(agent_dir: Path, view: AgentView | None, live_at_start: int, read_settings: bool) -> LossBudget | None:
    if view is None or not view.audit_enabled:
        return None
    baseline = audit_live_count(view.audit_dir.path)
    if baseline is None or baseline <= 0:
        return None
    limit = DEFAULT_MAX_LOSS_PERCENT
    if read_settings:
        found = load_agent_config(agent_dir).get("MemoryAudit:MaxLossPercentBetweenSnapshots")
        if found is not None:
            try:
                limit = parse_number(found.value)
            except ConfigValueError as exc:
                log.warning("MemoryAudit:MaxLossPercentBetweenSnapshots from %s: %s; 10 used", found.source, exc)
    return LossBudget(baseline, limit, live_at_start)


def pace_folds(folds: Sequence[FoldAction], budget: LossBudget | None) -> tuple[list[FoldAction], int]:
    """The fold groups that fit in the budget, in order (whole groups only), and how many copies wait."""
    if budget is None:
        return list(folds), 0
    kept: list[FoldAction] = []
    waiting = 0
    for fold in folds:
        if len(fold.copies) <= budget.left:
            kept.append(fold)
            budget.used += len(fold.copies)
        else:
            waiting += len(fold.copies)
    if waiting:
        log.info("exact-duplicate fold paced: %d copy(s) wait for a later cycle (%s)", waiting, budget.describe())
    return kept, waiting


def pace_subsumptions(found: Sequence[T], size: Callable[[T], int], budget: LossBudget | None) -> tuple[list[T], int]:
    """The subsumptions (subsume.py) that fit in what the fold left of the budget, in order, and how many entries
    wait. Not spent here: the plan's own check (cycle._cap) counts them with the model's merges. Without this, a
    subsumption settled with no model (an exact copy the fold paced, say) went past the budget, held the plan for a
    person, and the held plan stopped the next cycles: a model asked nothing would have held nothing."""
    if budget is None:
        return list(found), 0
    left, kept, waiting = budget.left, [], 0
    for item in found:
        if size(item) <= left:
            kept.append(item)
            left -= size(item)
        else:
            waiting += size(item)
    if waiting:
        log.info("subsumption paced: %d entr(ies) wait for a later cycle (%s)", waiting, budget.describe())
    return kept, waiting


__all__ = ["LossBudget", "audit_live_count", "loss_budget", "pace_folds", "pace_subsumptions"]
