"""The vectors of issue 24 (``data/rockbot-citizen-vectors.json``): from RockBot's tests where it has one, else from
its source, each with the file and commit it was read at. ``cite`` claims a vector; ``test_parity_complete`` checks
that every one is claimed by a test."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "rockbot-citizen-vectors.json"
DOCUMENT: dict[str, Any] = json.loads(DATA.read_text(encoding="utf-8"))
VECTORS: list[dict[str, Any]] = DOCUMENT["vectors"]


def key(vector: dict[str, Any]) -> str:
    return f"{vector['suite']}:{vector['test']}"


def cite(suite: str, test: str) -> dict[str, Any]:
    """The vector, by suite and RockBot test (or source rule) name."""
    (vector,) = [v for v in VECTORS if v["suite"] == suite and v["test"] == test]
    return vector


__all__ = ["DOCUMENT", "VECTORS", "cite", "key"]
