"""Proposers: the untrusted suggesters of merges and prunes (offline, scripted, OpenAI-compatible)."""

from dreamkeeper.proposers.config import PRICE_FILE, PROPOSER_KINDS, PROPOSER_SECTION, ProposerConfig
from dreamkeeper.proposers.factory import make_proposer
from dreamkeeper.proposers.offline import OfflineProposer
from dreamkeeper.proposers.scripted import ScriptedProposer

__all__ = [
    "PRICE_FILE",
    "PROPOSER_KINDS",
    "PROPOSER_SECTION",
    "OfflineProposer",
    "ProposerConfig",
    "ScriptedProposer",
    "make_proposer",
]
