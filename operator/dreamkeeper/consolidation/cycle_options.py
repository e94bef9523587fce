"""What a cycle is asked to do (``CycleOptions``) and what it gives back (``CycleOutcome``): the cycle's boundary,
apart from the stages (``cycle.py``) so callers (CLI, Job, benches) and the stages read one small module."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from dreamkeeper.consolidation.embeddings import Embedder
from dreamkeeper.consolidation.gating import GatingResult
from dreamkeeper.consolidation.plan import Plan
from dreamkeeper.consolidation.report import CycleReport
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.formats import ROCKBOT, MemoryFormat, RockBotFormat
from dreamkeeper.memory import memory_root

Progress = Callable[[str], None]


@dataclass
class CycleOptions:
    agent_dir: Path
    settings: CycleSettings = field(default_factory=CycleSettings)
    memory_dir: Path | None = None
    dry_run: bool = False
    force: bool = False
    now: datetime | None = None
    progress: Progress | None = None
    approve_hold: str | None = None  # the cycle id of a held plan a human approved (blast.py)
    trust_clock: bool = False  # purge and decay run even when the clock disagrees with the history (clock.py)
    # Asked while the model is being asked: True stops the proposal stage (it writes nothing), and the next stage's
    # progress call decides what then happens (SIGTERM in the dream command: the cycle stops, its report written).
    stop_requested: Callable[[], bool] | None = None
    # An embeddings endpoint (proposers/embeddings.py): missing vectors are generated before the gate, and the
    # vectors of entries the cycle creates or re-tags after apply, as RockBot's EmbeddingCache does (embeddings.py).
    embedder: Embedder | None = None
    format: MemoryFormat | None = None  # None: RockBot's entry files (dreamkeeper.formats.get_format)
    corpus_index: bool = True  # keep the parse of unchanged files between cycles (memory/corpus_index.py)

    @property
    def memory_format(self) -> MemoryFormat:
        return self.format if self.format is not None else RockBotFormat()

    @property
    def memory_root(self) -> Path:
        if self.format is not None and self.format.name != ROCKBOT:
            return self.format.store_root(self.agent_dir)
        return memory_root(self.agent_dir, self.memory_dir)


@dataclass(repr=False)
class CycleOutcome:
    report: CycleReport
    plan: Plan | None = None
    gating: GatingResult | None = None
    report_path: Path | None = None
    # What validation decided, before the blast radius: the same as ``plan`` unless the plan was held (then what
    # would have been applied, stamps included). For callers that judge the decisions (benchmarks, tests).
    decided: Plan | None = None

    def __repr__(self) -> str:
        # Short on purpose: asyncio.run() reprs its finished main task, result included, when it restores the
        # SIGINT handler; the generated repr walked every entry of the plan (15 s at 100k entries).
        return (
            f"CycleOutcome(cycle_id={self.report.cycle_id!r}, result={self.report.result!r}, "
            f"report_path={self.report_path!r})"
        )


def new_cycle_id(now: datetime) -> str:
    return now.strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


__all__ = ["CycleOptions", "CycleOutcome", "Progress", "new_cycle_id"]
