"""metav1.Condition bookkeeping: lastTransitionTime moves only when the status flips."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from dreamkeeper.kube.models import Condition

Status = Literal["True", "False", "Unknown"]

READY = "Ready"
LAST_RUN_SUCCEEDED = "LastRunSucceeded"
VOCABULARY_IN_SYNC = "VocabularyInSync"
AGENT_STOPPED = "AgentStopped"  # spec.agent with Stop: True while the agent's workload is held at 0


def set_condition(
    conditions: list[Condition] | None,
    type_: str,
    status: Status,
    reason: str,
    message: str,
    *,
    generation: int | None,
    now: datetime,
) -> list[Condition]:
    """The list with ``type_`` set; the others kept in order. Message is clipped to the schema's bound."""
    current = list(conditions or [])
    message = message if len(message) <= 32768 else message[:32767] + "…"
    for index, existing in enumerate(current):
        if existing.type == type_:
            moved = existing.status != status
            current[index] = Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message,
                observed_generation=generation,
                last_transition_time=now if moved else existing.last_transition_time,
            )
            return current
    current.append(
        Condition(
            type=type_,
            status=status,
            reason=reason,
            message=message,
            observed_generation=generation,
            last_transition_time=now,
        )
    )
    return current


def get_condition(conditions: list[Condition] | None, type_: str) -> Condition | None:
    return next((c for c in conditions or [] if c.type == type_), None)
