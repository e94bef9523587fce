"""Build the proposer a cycle was asked for."""

from __future__ import annotations

from dreamkeeper.consolidation import Proposer
from dreamkeeper.coverage import Vocabulary
from dreamkeeper.proposers.config import ProposerConfig


def make_proposer(config: ProposerConfig, vocabulary: Vocabulary | None = None) -> Proposer:
    if config.type == "openai":
        from dreamkeeper.proposers.openai import OpenAIProposer

        return OpenAIProposer(config)
    from dreamkeeper.proposers.offline import OfflineProposer

    return OfflineProposer(vocabulary)
