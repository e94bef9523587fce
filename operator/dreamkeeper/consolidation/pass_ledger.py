"""RockBot's record of its dream passes, ``{profile}/dream-pass-ledger.json``, kept true beside it.

RockBot's ``DreamPassLedger`` (RockBot.Host/DreamPassLedger.cs @9685fbec) is a JSON object, pass name → ``{
"fingerprint", "lastRunAt" }`` (System.Text.Json, camelCase property names, pass names as keys verbatim, indented,
written atomically); a missing or unreadable file reads as empty. Its consolidation pass records ``"memory
consolidation"`` with the constant fingerprint ``"completed"`` on a pass that reviewed something
(``ConsolidationLedgerPassName`` / ``ConsolidationLedgerFingerprint``, DreamService.cs @05346ff0). Its memory audit
reads the whole ledger (``MemoryAuditService.ReadPassLedgerAsync`` @0969bf1f): ``DreamPassesRunSinceLast`` counts
the passes whose ``lastRunAt`` is after its previous run, and ``ConsolidationLastRunAt`` is the ``memory
consolidation`` record's. RockBot's own consolidation gate (its 6-hour minimum interval) reads that record too.

With RockBot's consolidation switched off, dreamkeeper is what consolidates, so each cycle that reviewed entries
records itself there exactly as RockBot's pass would: RockBot's view of when memory was last consolidated stays
right, and a RockBot whose consolidation is switched back on waits its minimum interval after dreamkeeper's cycle.
Every other record (RockBot's other passes) is kept as it is. RockBot loads the ledger at the start of its dream
cycle and saves it at the end only when a pass recorded something, so a cycle of ours that finishes during one of
RockBot's can be overwritten; the next cycle records again (with the ``Stop`` coordination policy the agent is
down while dreamkeeper runs, and this cannot happen).
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dreamkeeper.memory import (
    MUST_NOT_EXIST,
    ConflictError,
    Fingerprint,
    loads_json,
    read_with_fingerprint,
    replace_file,
)

log = logging.getLogger(__name__)

LEDGER_FILE = "dream-pass-ledger.json"
CONSOLIDATION_PASS = "memory consolidation"
CONSOLIDATION_FINGERPRINT = "completed"
LEDGER_LIMIT = 1 << 20  # RockBot's ledger holds a few dozen records; more than this is not read


class LedgerUnusable(OSError):
    """RockBot's ledger is there but is nothing to read or replace (a symlink, a special or oversized file)."""


def stj_datetime(value: datetime) -> str:
    """System.Text.Json's DateTimeOffset: ``yyyy-MM-ddTHH:mm:ss[.FFFFFFF]zzz`` (fraction without trailing zeros)."""
    value = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    offset = value.utcoffset()
    minutes = int(offset.total_seconds() // 60) if offset is not None else 0
    sign = "+" if minutes >= 0 else "-"
    zone = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    fraction = f"{value.microsecond * 10:07d}".rstrip("0")
    return value.strftime("%Y-%m-%dT%H:%M:%S") + (f".{fraction}" if fraction else "") + zone


def read_ledger(agent_dir: Path) -> tuple[dict[str, Any], Fingerprint | None]:
    """The ledger's records as written, and the fingerprint of the bytes read (None: no file)."""
    path = agent_dir / LEDGER_FILE
    try:
        data, fingerprint = read_with_fingerprint(path, LEDGER_LIMIT)
    except FileNotFoundError:
        return {}, None
    except OSError as exc:  # a symlink, a special file, an oversized one: never read, never replaced
        raise LedgerUnusable(f"{path} not read ({exc}); RockBot's ledger left as it is") from exc
    try:
        records = loads_json(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        # RockBot reads a ledger it cannot parse as empty, and its next save replaces it: so do we.
        log.warning("%s is not JSON (%s); RockBot reads it as empty, and it is rewritten with this cycle", path, exc)
        return {}, fingerprint
    if not isinstance(records, dict):
        log.warning("%s is not a JSON object; RockBot reads it as empty, and it is rewritten with this cycle", path)
        return {}, fingerprint
    return records, fingerprint


def record_consolidation(agent_dir: Path, at: datetime) -> None:
    """Record a completed consolidation in RockBot's ledger (its other records kept), atomically and guarded:
    a ledger RockBot wrote meanwhile is read again, once."""
    path = agent_dir / LEDGER_FILE
    for attempt in (1, 2):
        records, fingerprint = read_ledger(agent_dir)
        # RockBot's dictionary ignores case: an existing record of the pass is replaced where it is.
        key = next((k for k in records if k.lower() == CONSOLIDATION_PASS), CONSOLIDATION_PASS)
        records[key] = {"fingerprint": CONSOLIDATION_FINGERPRINT, "lastRunAt": stj_datetime(at)}
        data = json.dumps(records, indent=2, ensure_ascii=False).encode("utf-8")
        try:
            replace_file(path, data, fingerprint if fingerprint is not None else MUST_NOT_EXIST)
        except ConflictError:
            if attempt == 2:
                raise
            continue
        log.info("recorded this cycle in %s: %r last ran at %s", path, key, records[key]["lastRunAt"])
        return


__all__ = [
    "CONSOLIDATION_FINGERPRINT",
    "CONSOLIDATION_PASS",
    "LEDGER_FILE",
    "LedgerUnusable",
    "read_ledger",
    "record_consolidation",
    "stj_datetime",
]
