"""Deterministic names for the objects the operator creates.

A cycle Job's name is a pure function of (schedule, slot) or (schedule, run-now token), so a crash between
"create the Job" and "record it in status" is harmless: the retry gets AlreadyExists and adopts the Job.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime

MAX_JOB_NAME = 63  # the job-name label on its pods must be a valid label value
MAX_LABEL_VALUE = 63
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


def _digest(text: str, length: int) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:length]


def dns_label(base: str, suffix: str, limit: int = MAX_JOB_NAME) -> str:
    """``<base>-<suffix>`` as a DNS-1123 label of at most ``limit`` characters.

    When ``base`` must be changed (dots, case, length), a short hash of the original keeps distinct bases distinct.
    """
    clean = re.sub(r"[^a-z0-9-]", "-", base.lower()).strip("-") or "x"
    if clean == base and len(base) + 1 + len(suffix) <= limit:
        return f"{base}-{suffix}"
    tag = _digest(base, 8)
    room = limit - len(suffix) - len(tag) - 2
    head = clean[:room].rstrip("-") or "x"
    return f"{head}-{tag}-{suffix}"


def slot_suffix(slot: datetime) -> str:
    """Unix minutes of the slot: cron has minute resolution, so this is unique per slot."""
    return str(int(slot.timestamp()) // 60)


def scheduled_job_name(schedule_name: str, slot: datetime) -> str:
    return dns_label(schedule_name, slot_suffix(slot))


def run_now_job_name(schedule_name: str, token: str, generation: int) -> str:
    """Per (token, generation): a retried pass finds and adopts its Job; a token reused later (A, B, A) runs again."""
    return dns_label(schedule_name, "now-" + _digest(f"{token}\x00{generation}", 10))


def label_value(value: str) -> str:
    """``value`` when it is a valid label value, else a stable hash of it (object names can be 253 chars)."""
    if len(value) <= MAX_LABEL_VALUE and _LABEL_VALUE.match(value):
        return value
    return "h-" + _digest(value, 40)


def vocabulary_config_map_name(vocabulary_name: str) -> str:
    """The ConfigMap a MemoryVocabulary is rendered into (names are DNS subdomains, up to 253 characters)."""
    name = f"{vocabulary_name}-memvocab"
    if len(name) <= 253:
        return name
    return f"{vocabulary_name[:200]}-{_digest(vocabulary_name, 12)}-memvocab"
