"""Proposers: the untrusted suggesters of merges and prunes (offline, scripted, OpenAI-compatible)."""

from dreamkeeper.proposers.config import PRICE_FILE, PROPOSER_KINDS, PROPOSER_SECTION, ProposerConfig
from dreamkeeper.proposers.embeddings import (
    EMBEDDINGS_API_KEY_ENV,
    EMBEDDINGS_SECTION,
    EmbeddingsConfig,
    OpenAIEmbedder,
    make_embedder,
)
from dreamkeeper.proposers.factory import make_proposer
from dreamkeeper.proposers.offline import OfflineProposer
from dreamkeeper.proposers.scripted import ScriptedProposer

__all__ = [
    "EMBEDDINGS_API_KEY_ENV",
    "EMBEDDINGS_SECTION",
    "PRICE_FILE",
    "PROPOSER_KINDS",
    "PROPOSER_SECTION",
    "EmbeddingsConfig",
    "OfflineProposer",
    "OpenAIEmbedder",
    "ProposerConfig",
    "ScriptedProposer",
    "make_embedder",
    "make_proposer",
]
