"""What the agent's profile tells its dream: ``memory-rules.md`` and ``dream.md``, and its recent feedback signals.

Both as RockBot reads them (DreamService ``LoadDirectives`` and the consolidation prompt, DreamService.cs @05346ff0;
``FileFeedbackStore`` @1fb7f521, ``FeedbackEntry``/``FeedbackSignalType`` @64e82ccc):

* ``{profile}/memory-rules.md``, when the file exists and is not empty, is put before the directive:
  ``rules + "\\n\\n---\\n\\n" + directive`` (a whitespace-only file still counts, as in RockBot). The directive is
  ``{profile}/dream.md``, or the built-in one when it is missing (RockBot also uses an *empty* dream.md as-is;
  dreamkeeper uses its built-in directive then, since an empty system prompt tells the model nothing).
* Feedback signals are the agent's session logs ``{profile}/feedback/**/*.jsonl``, one JSON object per line:
  ``{"id", "sessionId", "signalType", "summary", "detail", "timestamp"}`` with a numeric ``signalType`` (0
  Correction, 1 ToolFailure, 2 SessionSummary, 3 UserThumbsUp, 4 UserThumbsDown; names accepted too). The prompt
  carries the signals of the last 7 days, ordered by time, the **oldest** 50 (RockBot's ``QueryRecentAsync(since,
  50)`` takes them ascending). Bad lines and unreadable files are skipped.

The profile is the agent directory (memory is ``{profile}/memory``). Reading is bounded: files not written since the
window opened cannot hold a signal inside it, and at most ``MAX_FEEDBACK_BYTES`` are read per cycle.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import BinaryIO

from dreamkeeper.consolidation.declines import parse_time
from dreamkeeper.consolidation.quarantine import displayable
from dreamkeeper.memory import loads_json, open_regular, read_regular

log = logging.getLogger(__name__)

DIRECTIVE_FILE = "dream.md"
MEMORY_RULES_FILE = "memory-rules.md"
RULES_SEPARATOR = "\n\n---\n\n"
FEEDBACK_DIR = "feedback"
FEEDBACK_WINDOW = timedelta(days=7)
FEEDBACK_MAX = 50
MAX_FEEDBACK_BYTES = 64 << 20  # a hostile or runaway log must not make a cycle read gigabytes
MAX_LINE_BYTES = 64 << 10
SIGNAL_TYPES = ("Correction", "ToolFailure", "SessionSummary", "UserThumbsUp", "UserThumbsDown")


@dataclass(frozen=True)
class Directives:
    """The agent's own directive texts; None where the profile has none."""

    dream: str | None = None
    memory_rules: str | None = None


DIRECTIVE_LIMIT = 256 * 1024  # a directive goes into every prompt: a larger file is not read (with a warning)


def _read_text(path: Path) -> str | None:
    """A directive file's text; None when there is none or it is not a regular file within the limit (a FIFO
    named dream.md must not hang the cycle: it is refused without being opened)."""
    try:
        return read_regular(path, DIRECTIVE_LIMIT).decode("utf-8-sig", errors="replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.warning("cannot read %s: %s", path, exc.strerror or exc)
        return None


def load_directives(agent_dir: Path, directive: Path | None = None) -> Directives:
    """``dream.md`` (or the agent's ``Dream:DirectivePath``, agent_view.py) and ``memory-rules.md`` of the profile,
    read at the start of every cycle (RockBot reads memory-rules.md from the profile whatever the directive path)."""
    directive = directive if directive is not None else agent_dir / DIRECTIVE_FILE
    dream = _read_text(directive)
    rules = _read_text(agent_dir / MEMORY_RULES_FILE)
    if dream is None and os.path.lexists(directive):
        log.warning("cannot read %s; using the built-in directive", directive)
    return Directives(dream=dream if dream and dream.strip() else None, memory_rules=rules or None)


def compose(rules: str | None, directive: str) -> str:
    """RockBot's composition: ``string.IsNullOrEmpty(rules) ? directive : rules + "\\n\\n---\\n\\n" + directive``."""
    return directive if not rules else rules + RULES_SEPARATOR + directive


@dataclass(frozen=True, slots=True)
class FeedbackSignal:
    session_id: str
    signal_type: str  # the enum's name, as RockBot prints it ("Correction"); an unknown number as its digits
    summary: str
    detail: str | None
    timestamp: datetime

    def line(self) -> str:
        """The prompt line: ``- [{SignalType}] session {SessionId}: {Summary}{ ("{Detail}")}``."""
        detail = f' ("{self.detail}")' if self.detail and self.detail.strip() else ""
        return f"- [{self.signal_type}] session {self.session_id}: {self.summary}{detail}"


def _signal_type(value: object) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return SIGNAL_TYPES[value] if 0 <= value < len(SIGNAL_TYPES) else str(value)
    if isinstance(value, str):
        by_name = {name.lower(): name for name in SIGNAL_TYPES}
        if value.strip().lower() in by_name:
            return by_name[value.strip().lower()]
        if value.strip().isdigit():
            return _signal_type(int(value.strip()))
    return None


def parse_signal(line: str) -> FeedbackSignal | None:
    """One JSONL line as RockBot's serializer writes it (names matched case-insensitively); None if unusable."""
    try:
        obj = loads_json(line)
    except ValueError:
        return None
    if not isinstance(obj, dict):
        return None
    fields = {str(k).lower(): v for k, v in obj.items()}
    signal_type = _signal_type(fields.get("signaltype"))
    timestamp = fields.get("timestamp")
    when = parse_time(timestamp) if isinstance(timestamp, str) else None
    summary, session, detail = fields.get("summary"), fields.get("sessionid"), fields.get("detail")
    if signal_type is None or when is None or not isinstance(summary, str) or not isinstance(session, str):
        return None
    return FeedbackSignal(
        session_id=displayable(session),
        signal_type=signal_type,
        summary=displayable(summary),
        detail=displayable(detail) if isinstance(detail, str) else None,
        timestamp=when,
    )


def _feedback_files(root: Path) -> list[Path]:
    found: list[Path] = []
    for directory, subdirs, files in os.walk(root, onerror=lambda exc: log.warning("feedback: %s", exc)):
        subdirs.sort()
        found += [Path(directory) / name for name in sorted(files) if name.endswith(".jsonl")]
    return found


def _bounded_lines(handle: BinaryIO, size: int) -> Iterator[bytes | None]:
    """The lines of the first ``size`` bytes (what the file held when listed), None for each line over
    ``MAX_LINE_BYTES``: never more than that held in memory, whatever the file grows to or holds."""
    left = size
    while left > 0:
        raw = handle.readline(min(left, MAX_LINE_BYTES + 1))
        if not raw:
            return
        left -= len(raw)
        if len(raw) <= MAX_LINE_BYTES:
            yield raw
            continue
        while left > 0 and not raw.endswith(b"\n"):  # the rest of the overlong line, dropped as it is read
            raw = handle.readline(min(left, MAX_LINE_BYTES + 1))
            if not raw:
                break
            left -= len(raw)
        yield None


def load_feedback(agent_dir: Path, now: datetime, root: Path | None = None) -> tuple[FeedbackSignal, ...]:
    """The signals of the last 7 days, oldest first, at most 50; () when the profile keeps none. ``root``: the
    agent's ``Feedback:BasePath`` (agent_view.py); default ``AGENT_DIR/feedback``."""
    root = root if root is not None else agent_dir / FEEDBACK_DIR
    if not root.is_dir():
        return ()
    since = now - FEEDBACK_WINDOW
    signals: list[FeedbackSignal] = []
    skipped = budget = 0
    for path in _feedback_files(root):
        try:
            st = path.stat()
            if st.st_mtime < since.timestamp() - 3600:  # appended to before the window (an hour for clock skew)
                continue
            if budget + st.st_size > MAX_FEEDBACK_BYTES:
                log.warning("feedback: read limit of %d bytes reached; %s and later files not read", budget, path)
                break
            budget += st.st_size
            # A regular file only (a FIFO or /dev/zero would block or never end), read no further than its size
            # when listed, a line at a time and each line bounded.
            fd, _ = open_regular(path, MAX_FEEDBACK_BYTES)
            with os.fdopen(fd, "rb") as handle:
                for raw in _bounded_lines(handle, st.st_size):
                    if raw is None:
                        skipped += 1
                        continue
                    signal = parse_signal(raw.decode("utf-8", errors="replace"))
                    if signal is None:
                        skipped += 1 if raw.strip() else 0
                    elif signal.timestamp >= since:
                        signals.append(signal)
        except OSError as exc:
            log.warning("feedback: cannot read %s (%s); skipped", path, exc)
    if skipped:
        log.warning("feedback: %d malformed line(s) skipped under %s", skipped, root)
    signals.sort(key=lambda s: s.timestamp)  # stable: file order, then line order, for equal times
    return tuple(signals[:FEEDBACK_MAX])


__all__ = [
    "DIRECTIVE_FILE",
    "FEEDBACK_MAX",
    "MEMORY_RULES_FILE",
    "RULES_SEPARATOR",
    "Directives",
    "FeedbackSignal",
    "compose",
    "load_directives",
    "load_feedback",
    "parse_signal",
]
