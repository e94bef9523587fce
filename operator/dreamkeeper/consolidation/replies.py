"""What a proposer's reply to one batch amounts to, before any of it is validated (#18 finding 5).

A reply that names no offered id decides nothing: before this, a reply of invented ids (SmolLM2 copied the
contract's ``"<id>"``) was a valid answer that changed nothing, so all 39 clusters of the sample agent were stamped
declined from it. The tally of the batches' outcomes decides whether a cycle is ``proposer-failed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from dreamkeeper.consolidation.proposal import BatchReply, Proposal
from dreamkeeper.memory import StoredEntry

# What became of one batch: a usable reply; the model answered and nothing could be used ("unusable"), or it
# answered with ids none of which was offered ("invented"); the request failed or was never sent ("failed");
# the proposer answered without its model ("unasked": nothing worth showing, or deferred).
BatchOutcome = Literal["usable", "unusable", "invented", "failed", "unasked"]


@dataclass(frozen=True)
class BatchTally:
    """How the batches the model was asked about ended; ``failure`` says why none was usable, when so."""

    usable: int = 0
    unusable: int = 0  # invented included
    invented: int = 0
    failed: int = 0

    @property
    def asked(self) -> int:
        return self.usable + self.unusable + self.failed

    @property
    def failure(self) -> str | None:
        """Why the cycle is proposer-failed: asked about at least one batch, and no reply was usable."""
        if self.asked == 0 or self.usable:
            return None
        parts = []
        if self.failed:
            parts.append(f"{self.failed} request(s) failed or not sent")
        if self.unusable:
            named = f", {self.invented} naming no offered id" if self.invented else ""
            parts.append(f"{self.unusable} unusable repl(ies){named}")
        return f"no usable reply to any of the {self.asked} batch(es) asked ({'; '.join(parts)})"

    def add(self, outcome: BatchOutcome) -> BatchTally:
        return BatchTally(
            usable=self.usable + (outcome == "usable"),
            unusable=self.unusable + (outcome in ("unusable", "invented")),
            invented=self.invented + (outcome == "invented"),
            failed=self.failed + (outcome == "failed"),
        )


def id_key(raw: object) -> str:
    """The offer's key for an id a reply names: case-insensitive, and the offer's own "[ID:…]" notation around it
    tolerated (Gemma wrote "id:78053206c63b"). Only offered ids resolve, so this can name nothing new."""
    text = str(raw).strip().strip("[]").strip()
    if text[:3].lower() == "id:":
        text = text[3:].strip()
    return text.lower()


def batch_outcome(reply: BatchReply | None, offered: Mapping[str, StoredEntry]) -> BatchOutcome:
    if reply is None:
        return "failed"  # the proposer returned nothing for it
    if not reply.asked:
        return "unasked"
    if reply.proposal is None:
        return "unusable" if reply.fault == "reply" else "failed"
    return "usable" if decides(reply.proposal, offered) else "invented"


def decides(proposal: Proposal, offered: Mapping[str, StoredEntry]) -> bool:
    """Whether a parsed reply is a decision about this batch (#18 finding 5: a reply of invented ids stamped all
    39 clusters declined). "Nothing should change" (both lists empty) is one; otherwise at least one prune must
    name an offered id, or one merge must name an offered source and carry text (SmolLM2 copied the contract's
    ``{"content": "...", "sourceIds": ["<id>"]}`` placeholder)."""
    if not proposal.to_save and not proposal.to_delete:
        return True

    def named(raw: object) -> bool:
        return id_key(raw) in offered

    if any(named(raw) for raw in proposal.to_delete):
        return True
    # A save naming no source at all (sourceIds empty) is a decision too: a new entry written from the feedback
    # shown, as RockBot's directive asks (sourceless.py). Ids that resolve to nothing are not.
    return any(
        _has_text(m.content) and (not m.source_ids or any(named(raw) for raw in m.source_ids)) for m in proposal.to_save
    )


def _has_text(content: str) -> bool:
    return any(ch.isalnum() for ch in content)
