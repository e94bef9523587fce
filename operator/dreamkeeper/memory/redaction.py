"""Memory content in logs, or only its size: for clusters that ship pod logs to a shared aggregator.

Every destructive step is logged at INFO with the content it touched (so a human can follow and undo it). A
memory holds what the agent knows about people (names, addresses, health); where container logs leave the
cluster, ``dreamkeeper dream --redact-logs`` (the operator's ``--redact-logs``) turns every such argument into
``[redacted: N chars]``: ids, categories' absence of content, counts and reasons stay. The content itself is
still on the volume (entries, archives, the cycle report), where it always was.

Log calls pass content through ``shown(...)``; the value is rendered only when a record is formatted, so the
switch costs nothing when the message is filtered out.
"""

from __future__ import annotations

from collections.abc import Iterable

_redacting = False


def set_redaction(on: bool) -> None:
    global _redacting
    _redacting = on


def redacting() -> bool:
    return _redacting


class Shown:
    """A piece of memory content as a log argument: itself, or its size when redaction is on."""

    __slots__ = ("text",)

    def __init__(self, text: object) -> None:
        self.text = "" if text is None else str(text)

    def __str__(self) -> str:
        return f"[redacted: {len(self.text)} chars]" if _redacting else self.text

    def __repr__(self) -> str:
        return "'[redacted]'" if _redacting else repr(self.text)


def shown(text: object) -> Shown:
    return Shown(text)


def shown_all(texts: Iterable[object], separator: str = ", ") -> Shown | str:
    """Several pieces (specifics, names) joined: their number when redacting."""
    items = [str(t) for t in texts]
    return f"[redacted: {len(items)} item(s)]" if _redacting else separator.join(items)
