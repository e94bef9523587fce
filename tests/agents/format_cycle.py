"""A dream cycle on an agent's Markdown memory, and a proposer that merges every offered cluster (test helpers).

``dream`` runs the real engine through the format seam: the format ingests the agent's files into its unit
records, the cycle consolidates the records, the format renders the result into the files. ``Joiner`` is an
honest proposer over the real proposal protocol: for each near-duplicate cluster it is offered it proposes one merge:
the shortest member that keeps every member's specifics, else the members' sentences joined (list markers dropped,
repeated sentences once), so every specific survives and the engine's coverage check lets it through.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from dreamkeeper.consolidation import CycleOptions, CycleReport, CycleSettings, run_cycle
from dreamkeeper.consolidation.cycle import CycleOutcome
from dreamkeeper.consolidation.proposal import Batch, ProposalRequest
from dreamkeeper.coverage import SourceText, find_missing_specifics
from dreamkeeper.formats import MemoryFormat, get_format
from dreamkeeper.proposers import ScriptedProposer

# Subsumption (issue 23) is off: these cycles are about how a model's successor is written back into the agent's
# files, and a cluster one member already covers would be settled before the scripted model saw it. The product's
# default (on) through the seam: tests/formats/test_cli.py and tests/bench/test_year_sim_quick.py.
SETTINGS = {
    "min_interval_hours": 0,
    "retention_days": 0,
    "similarity_threshold": 0.5,
    "archive_cap": 1.0,
    "subsume": False,
}
_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_COMMENT = re.compile(r"\s*<!--.*?-->", re.S)


def joined(texts: list[str]) -> str:
    sentences: list[str] = []
    for text in texts:
        for line in text.splitlines():
            clean = _COMMENT.sub("", _MARKER.sub("", line)).strip()
            if clean and clean not in sentences:
                sentences.append(clean)
    return " ".join(sentences)


def merged_text(texts: list[str]) -> str:
    """The shortest member that keeps every member's specifics (what a good model writes for restatements), else
    the members joined."""
    sources = [SourceText(text=t, category=None) for t in texts]
    for candidate in sorted(texts, key=len):
        plain = joined([candidate])
        if not find_missing_specifics(sources, plain):
            return plain
    return joined(texts)


def joiner() -> ScriptedProposer:
    def script(batch: Batch, request: ProposalRequest) -> dict[str, Any]:
        by_id = {o.entry.id: o.entry for o in batch.entries}
        saves = [
            {"content": merged_text([by_id[i].content for i in group.ids]), "sourceIds": list(group.ids)}
            for group in batch.groups
            if group.is_cluster and len(group.ids) >= 2
        ]
        return {"toSave": saves, "toDelete": []}

    return ScriptedProposer(script)


@dataclass(frozen=True)
class Dreamt:
    outcome: CycleOutcome

    @property
    def report(self) -> CycleReport:
        return self.outcome.report


def dream(
    agent_dir: Path,
    fmt: MemoryFormat | str,
    *,
    proposer: ScriptedProposer | None = None,
    now: datetime | None = None,
    settings: dict[str, Any] | None = None,
) -> Dreamt:
    """One cycle through the format seam (``CycleOptions.format``): ingest, the engine, render, under one lock."""
    chosen = get_format(fmt) if isinstance(fmt, str) else fmt
    options = CycleOptions(
        agent_dir=agent_dir,
        settings=CycleSettings.model_validate({**SETTINGS, **(settings or {})}),
        now=now,
        force=True,
        format=chosen,
    )
    outcome = asyncio.run(run_cycle(options, proposer or joiner()))
    return Dreamt(outcome)
