"""Content fingerprints for review stamps and cluster identities, RockBot-compatible.

The one definition: store statistics, gating, validation, the proposers and the demo sample all stamp or compare
with these (a stamp written by one and checked by another must agree byte for byte).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable


def review_hash(content: str) -> str:
    """SHA-256 of the UTF-8 content, first 8 bytes as 16 uppercase hex (RockBot's consolidationReviewedHash)."""
    return hashlib.sha256(content.encode("utf-8")).hexdigest()[:16].upper()


def cluster_hash(ids: Iterable[str]) -> str:
    """SHA-256 of ordinal-sorted ids joined by ',' → 16 hex, as RockBot stamps rejected/declined clusters."""
    joined = ",".join(sorted(ids))
    return hashlib.sha256(joined.encode("utf-8")).hexdigest()[:16].upper()


def fold_key(category: str | None, content: str) -> tuple[str, str]:
    """Exact-duplicate key: category trimmed+lowercased, whitespace runs collapsed; content stays case-sensitive."""
    return ((category or "").strip().lower(), " ".join(content.split()))
