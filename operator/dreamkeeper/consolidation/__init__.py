"""The consolidation engine: one cycle (snapshot, fold, gating, proposal, validation, apply), its counts and report.

The rest of dreamkeeper uses only what this module exports; the submodules are the engine's own.
"""

from dreamkeeper.consolidation.count_phrases import sentence, value_of
from dreamkeeper.consolidation.counts import COUNTS, SUMMED, Count, Family
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.directives import compose
from dreamkeeper.consolidation.dryrun import render_plan, render_report
from dreamkeeper.consolidation.embeddings import Embedder, EmbeddingError, Vector
from dreamkeeper.consolidation.journal import incomplete_journals
from dreamkeeper.consolidation.proposal import (
    Batch,
    BatchReply,
    MergeProposal,
    OfferedEntry,
    OfferGroup,
    Proposal,
    ProposalRequest,
    Proposer,
    ProposerUsage,
    RepairRequest,
    ReplyFault,
)
from dreamkeeper.consolidation.report import CycleReport, cycles_dir
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.units_cli import FORMAT_OPT, FORMAT_SECTION, PROFILE_OPT, format_of

__all__ = [
    "COUNTS",
    "FORMAT_OPT",
    "FORMAT_SECTION",
    "PROFILE_OPT",
    "SUMMED",
    "Batch",
    "BatchReply",
    "Count",
    "CycleOptions",
    "CycleReport",
    "CycleSettings",
    "Embedder",
    "EmbeddingError",
    "Family",
    "MergeProposal",
    "OfferGroup",
    "OfferedEntry",
    "Proposal",
    "ProposalRequest",
    "Proposer",
    "ProposerUsage",
    "RepairRequest",
    "ReplyFault",
    "Vector",
    "compose",
    "cycles_dir",
    "format_of",
    "incomplete_journals",
    "render_plan",
    "render_report",
    "run_cycle",
    "sentence",
    "value_of",
]
