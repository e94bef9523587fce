"""What a proposer is offered and what it may answer. The proposer is untrusted: everything here is data.

The reply schema is RockBot's, so existing dream prompts and models fit:
``{"toDelete": [ids], "toSave": [{"content", "category", "tags", "sourceIds", "importance"?}]}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from dreamkeeper.consolidation.directives import FeedbackSignal
from dreamkeeper.memory import Entry


class MergeProposal(BaseModel):
    """One ``toSave`` item: a merged text and the ids it replaces."""

    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    content: str = ""
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    source_ids: list[str] = Field(default_factory=list, validation_alias=AliasChoices("sourceIds", "source_ids"))
    importance: float | None = None

    @field_validator("tags", "source_ids", mode="before")
    @classmethod
    def _null_list(cls, value: object) -> object:
        if value is None:
            return []
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("content", mode="before")
    @classmethod
    def _null_content(cls, value: object) -> object:
        return "" if value is None else value

    @field_validator("importance", mode="before")
    @classmethod
    def _importance(cls, value: object) -> object:
        if value in (None, ""):
            return None
        return value


class Proposal(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")

    to_delete: list[str] = Field(default_factory=list, validation_alias=AliasChoices("toDelete", "to_delete"))
    to_save: list[MergeProposal] = Field(default_factory=list, validation_alias=AliasChoices("toSave", "to_save"))

    @field_validator("to_delete", mode="before")
    @classmethod
    def _null_list(cls, value: object) -> object:
        return [] if value is None else value

    @field_validator("to_save", mode="before")
    @classmethod
    def _null_saves(cls, value: object) -> object:
        return [] if value is None else value


@dataclass(frozen=True, slots=True)
class OfferedEntry:
    """An eligible entry as shown to the proposer. ``merge_only`` members came from a reopened cluster."""

    entry: Entry
    merge_only: bool = False


@dataclass(frozen=True, slots=True)
class OfferGroup:
    """A near-duplicate cluster, or a single unclustered entry offered for review."""

    ids: tuple[str, ...]
    is_cluster: bool
    reopened: bool = False


# What a batch asks (gating.make_batches): "cluster", one near-duplicate component (every chunk of it), asked
# whether its entries state one fact; "review", lone entries offered for prune review; "batch", RockBot's layout
# (clusters and lone entries together). Proposers that do not shape requests may ignore it.
BatchShape = Literal["cluster", "review", "batch"]


@dataclass(frozen=True, slots=True)
class Batch:
    """One request's worth: the proposer's reply to a batch may only name ids offered in it."""

    index: int
    groups: tuple[OfferGroup, ...]
    entries: tuple[OfferedEntry, ...]
    shape: BatchShape = "batch"

    @property
    def ids(self) -> frozenset[str]:
        return frozenset(o.entry.id for o in self.entries)


@dataclass(frozen=True, slots=True)
class ProposalRequest:
    batches: tuple[Batch, ...]
    total_entries: int
    withheld: int
    now: datetime
    directive: str | None = None  # the profile's dream.md (None: the proposer's built-in directive)
    degraded: bool = False  # clustering failed: every entry looks lone
    memory_rules: str | None = None  # the profile's memory-rules.md, put before the directive as RockBot does
    feedback: tuple[FeedbackSignal, ...] = ()  # the agent's feedback signals of the last 7 days (oldest 50)


# Why a batch has no proposal: the model answered and the answer cannot be used ("reply": unparseable, cut off,
# refused), or the request failed or was never sent ("request": HTTP errors, timeouts, the budget).
ReplyFault = Literal["reply", "request"]


@dataclass(slots=True)
class BatchReply:
    """The proposer's answer to one batch. ``proposal`` None means the reply was unusable: nothing applies,
    and the batch's entries are not stamped reviewed; ``fault`` says whose it was. ``asked`` is False when the
    proposer answered without consulting its model (nothing worth showing, or deferred to a later cycle)."""

    batch_index: int
    proposal: Proposal | None
    error: str | None = None
    fault: ReplyFault = "reply"
    asked: bool = True


@dataclass(slots=True)
class RepairRequest:
    """One more try at a merge: restore ``missing`` (source specifics it dropped) and remove ``invented``
    (specifics no source states)."""

    merge: MergeProposal
    sources: list[Entry]
    missing: list[str]
    invented: list[str] = field(default_factory=list)
    shape: BatchShape = "batch"  # how the merge was asked for: a shaped request is repaired in the same shape


@dataclass(slots=True)
class ProposerUsage:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    invalid_replies: int = 0
    failed_calls: int = 0
    format_refusals: int = 0  # requests refused only for their response_format (the negotiation), sent again
    budget_exhausted: bool = False
    estimated_cost: float | None = None
    notes: list[str] = field(default_factory=list)


@runtime_checkable
class Proposer(Protocol):
    """Suggests merges and prunes. Never trusted: the engine validates every word of every reply."""

    name: str

    async def propose(self, request: ProposalRequest) -> list[BatchReply]: ...

    async def repair(self, request: RepairRequest) -> str | None:
        """One more try at a rejected merge; returns revised merged text or None (declined/failed)."""
        ...

    def usage(self) -> ProposerUsage: ...

    async def aclose(self) -> None: ...
