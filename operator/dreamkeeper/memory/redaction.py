"""Memory content in logs, or only its size: for clusters that ship pod logs to a shared aggregator.

Every destructive step is logged at INFO with the content it touched (so a human can follow and undo it). A
memory holds what the agent knows about people (names, addresses, health); where container logs leave the
cluster, ``dreamkeeper dream --redact-logs`` (the operator's ``--redact-logs``) turns every such argument into
``[redacted: N chars]``: ids, categories' absence of content, counts and reasons stay. The content itself is
still on the volume (entries, archives, the cycle report), where it always was.

Log calls pass content through ``shown(...)`` (``shown_all`` for a list of specifics or names).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

_redacting = False


def set_redaction(on: bool) -> None:
    global _redacting
    _redacting = on


def redacting() -> bool:
    return _redacting


@contextmanager
def redacted_logs(on: bool) -> Iterator[None]:
    """Redact (or not) for the duration of one cycle, then put back what was there."""
    before = _redacting
    set_redaction(on)
    try:
        yield
    finally:
        set_redaction(before)


def shown(text: object) -> str:
    """A piece of memory content as a log argument: itself, or its size when redacting. Decided when the log call
    is made (a record formatted later, by a buffering handler, still says what the setting was then)."""
    value = "" if text is None else str(text)
    return f"[redacted: {len(value)} chars]" if _redacting else value


def shown_all(texts: Iterable[object], separator: str = ", ") -> str:
    """Several pieces (specifics, names) joined: their number when redacting."""
    items = [str(t) for t in texts]
    return f"[redacted: {len(items)} item(s)]" if _redacting else separator.join(items)
