"""Proposers: the untrusted suggesters of merges and prunes (offline, scripted, OpenAI-compatible)."""

from dreamkeeper.proposers.offline import OfflineProposer
from dreamkeeper.proposers.scripted import ScriptedProposer

__all__ = ["OfflineProposer", "ScriptedProposer"]
