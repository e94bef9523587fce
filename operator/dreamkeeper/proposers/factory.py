"""Build the proposer a cycle was asked for."""

from __future__ import annotations

from typing import Any

from dreamkeeper.consolidation.proposal import Proposer
from dreamkeeper.coverage import Vocabulary


def make_proposer(kind: str, vocabulary: Vocabulary | None = None, **openai_options: Any) -> Proposer:
    if kind == "offline":
        from dreamkeeper.proposers.offline import OfflineProposer

        return OfflineProposer(vocabulary)
    if kind == "openai":
        from dreamkeeper.proposers.openai import OpenAIProposer, OpenAIProposerConfig

        return OpenAIProposer(OpenAIProposerConfig(**{k: v for k, v in openai_options.items() if v is not None}))
    raise ValueError(f"unknown proposer {kind!r}: choose offline or openai")
