"""RockBot's circuit breaker: ``AGENT_DIR/memory-audit/consolidation-paused.json`` stops every cycle.

RockBot's memory audit (``MemoryAuditService.MaybePauseConsolidationAsync``, MarimerLLC/rockbot) writes the marker
when live entries vanished (hard deletes outside the purge, or a drop beyond its loss threshold); its own dream
checks only that the file exists (``File.Exists``: a regular file, symlinks followed) and ignores the content; the
``resume_memory_consolidation`` tool deletes it. dreamkeeper does the same: the file's existence pauses, and its
content (``{"reason", "snapshotId", "pausedAt"}``) is shown as far as it can be read, bounded, whatever it holds.
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from dreamkeeper.memory import loads_json

PAUSE_MARKER = Path("memory-audit") / "consolidation-paused.json"
READ_LIMIT = 4096  # RockBot writes ~150 bytes; more than this is not read (it still pauses)
FIELD_LIMIT = 160


class PauseMarker(BaseModel):
    """What the marker said (each field clipped to one line of 160 characters), or why it could not be read."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    path: str
    reason: str | None = None
    snapshot_id: str | None = None
    paused_at: str | None = None
    unreadable: str | None = None  # why the content is not shown (the marker pauses all the same)

    def describe(self) -> str:
        said = [
            f"{label} {value!r}"
            for label, value in (("reason", self.reason), ("snapshot", self.snapshot_id), ("paused at", self.paused_at))
            if value
        ]
        detail = "; ".join(said) if said else (self.unreadable or "no content")
        return (
            f"paused by the agent's memory audit ({self.path}: {detail}); remove the marker (RockBot: "
            "resume_memory_consolidation) to let cycles run again"
        )


def read_pause_marker(agent_dir: Path, path: Path | None = None) -> PauseMarker | None:
    """The marker, when present (a regular file: what ``File.Exists`` answers true for). ``path``: where the agent's
    audit writes it (``{MemoryAudit:BasePath}/consolidation-paused.json``, agent_view.py); default
    ``AGENT_DIR/memory-audit/``."""
    path = path if path is not None else agent_dir / PAUSE_MARKER
    if not path.is_file():
        return None
    try:
        with open(path, "rb") as handle:
            data = handle.read(READ_LIMIT + 1)
    except OSError as exc:
        return PauseMarker(path=str(path), unreadable=f"unreadable: {exc.strerror or exc}")
    if len(data) > READ_LIMIT:
        return PauseMarker(path=str(path), unreadable=f"content over {READ_LIMIT} bytes, not shown")
    if not data.strip():
        return PauseMarker(path=str(path), unreadable="empty")
    try:
        content = loads_json(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        return PauseMarker(path=str(path), unreadable=f"not JSON ({_clip(str(exc))})")
    if not isinstance(content, dict):
        return PauseMarker(path=str(path), unreadable=f"a JSON {type(content).__name__}, not an object")
    lowered = {str(k).lower(): v for k, v in content.items()}  # RockBot reads JSON case-insensitively
    return PauseMarker(
        path=str(path),
        reason=_field(lowered.get("reason")),
        snapshot_id=_field(lowered.get("snapshotid")),
        paused_at=_field(lowered.get("pausedat")),
    )


def _field(value: object) -> str | None:
    if value is None:
        return None
    return _clip(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))


def _clip(text: str) -> str:
    flat = "".join(c if c.isprintable() else " " for c in " ".join(text.split()))
    return flat if len(flat) <= FIELD_LIMIT else flat[: FIELD_LIMIT - 1] + "…"


__all__ = ["PAUSE_MARKER", "PauseMarker", "read_pause_marker"]
