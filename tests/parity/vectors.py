"""RockBot's own test vectors (``data/rockbot-vectors.json``, transcribed from MarimerLLC/rockbot's tests, one commit
per vector) and the bookkeeping that proves every one of them is ported.

A parity test takes its vectors with :func:`take`, which records them as claimed; ``test_every_vector_is_ported``
checks that the claimed set is the whole file. Vectors are data: the test code is dreamkeeper's own.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

DATA = Path(__file__).parent / "data" / "rockbot-vectors.json"
DOCUMENT: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
VECTORS: list[dict[str, Any]] = DOCUMENT["vectors"]
CLAIMED: set[str] = set()

# RockBot's tests use DateTimeOffset.UtcNow; a fixed instant keeps these reproducible.
NOW = datetime(2026, 9, 14, 6, 0, tzinfo=UTC)


def vector_id(vector: dict[str, Any]) -> str:
    return f"{vector['suite']}:{vector['test']}"


def take(suite: str, *kinds: str, tests: tuple[str, ...] = ()) -> list[Any]:
    """The vectors of ``suite`` (of these kinds, or with these test names) as pytest params, claimed."""
    chosen = [
        v
        for v in VECTORS
        if v["suite"] == suite and (not kinds or v["kind"] in kinds) and (not tests or v["test"] in tests)
    ]
    assert chosen, (suite, kinds, tests)
    CLAIMED.update(vector_id(v) for v in chosen)
    return [pytest.param(v, id=vector_id(v)) for v in chosen]


def one(suite: str, test: str) -> dict[str, Any]:
    """A single vector by its RockBot test name, claimed."""
    (vector,) = [v for v in VECTORS if v["suite"] == suite and v["test"] == test]
    CLAIMED.add(vector_id(vector))
    return vector


def when(spec: str | None, now: datetime = NOW) -> datetime | None:
    """``"now"``, ``"now-10d"``, ``"now+1d"``, ``"now-30.5d"`` → a time (None for None)."""
    if spec is None:
        return None
    if spec == "now":
        return now
    assert spec.startswith("now") and spec.endswith("d"), spec
    return now + timedelta(days=float(spec[3:-1]))


def commit_of(vector: dict[str, Any]) -> str:
    """The RockBot commit (or stored version) the vector was read at: every ported test cites it."""
    return str(vector["commit"])
