"""What each request asks to get back: the output mode, negotiated from the server's answers, and ``max_tokens``,
sized from what the request shows — and the one retry a reply cut off at that limit gets (the batch in halves).

Negotiation: ``json_schema`` first (strict structured output), then ``json_object`` carrying the schema (servers
of the llama.cpp family constrain output to it there), then plain ``json_object``, then no ``response_format``
(tolerant parsing only). A server that rejects a step (any status whose body names ``response_format``) moves
the proposer to the next step at once, for the rest of its cycle.

Sizing: without ``max_tokens`` a small model can generate until the client times out, and a non-streaming
request cannot be cancelled on the server, so the retry queues behind the runaway. A reply needs at most the
shown text again (merges restate their sources) plus its ids and JSON keys; the budget is that with a margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from dreamkeeper.consolidation import Batch, Proposal
from dreamkeeper.proposers.prompts import OUTPUT_MODES, OutputMode, RequestKind, response_format, shown_groups

REPLY_TEXT_FACTOR = 1.5  # output tokens per token of shown content
REPLY_TOKENS_PER_ENTRY = 40  # its id in sourceIds or toDelete, and a share of a merge's keys
REPLY_TOKENS_BASE = 128  # the object itself, and room for a short preamble the parser strips


@dataclass
class OutputNegotiation:
    """Where in the fallback order the proposer is; shared by every request of a cycle."""

    mode: OutputMode
    object_schema: bool = True  # json_object carries the schema until a server refuses it

    @property
    def step(self) -> tuple[OutputMode, bool]:
        return self.mode, self.object_schema

    def response_format(self, kind: RequestKind) -> dict[str, Any] | None:
        return response_format(self.mode, kind, self.object_schema)

    def describe(self) -> str:
        return "json_object with schema" if self.mode == "json_object" and self.object_schema else self.mode

    def downgrade(self) -> bool:
        """Move to the next step; False when there is none (no response_format is sent any more)."""
        if self.mode == "json_object" and self.object_schema:
            self.object_schema = False
            return True
        index = OUTPUT_MODES.index(self.mode)
        if index + 1 >= len(OUTPUT_MODES):
            return False
        self.mode = OUTPUT_MODES[index + 1]
        return True


def reply_tokens(content_tokens: int, entries: int, fixed: int | None) -> int:
    """``max_tokens`` for a request showing ``entries`` entries of ``content_tokens`` tokens; ``fixed`` (the
    config's ``max_output_tokens``) wins when set, for models that need more (reasoning) or less."""
    if fixed is not None:
        return fixed
    return math.ceil(content_tokens * REPLY_TEXT_FACTOR) + entries * REPLY_TOKENS_PER_ENTRY + REPLY_TOKENS_BASE


def halves(batch: Batch, singletons: bool) -> tuple[Batch, Batch] | None:
    """The batch's shown groups in two parts (clusters stay whole); None when there is only one group."""
    groups = shown_groups(batch, singletons)
    if len(groups) < 2:
        return None
    middle = len(groups) // 2
    parts = []
    for part in (groups[:middle], groups[middle:]):
        ids = {i for g in part for i in g.ids}
        parts.append(Batch(batch.index, tuple(part), tuple(o for o in batch.entries if o.entry.id in ids), batch.shape))
    return parts[0], parts[1]


def joined(first: Proposal, second: Proposal) -> Proposal:
    return Proposal(to_delete=[*first.to_delete, *second.to_delete], to_save=[*first.to_save, *second.to_save])
