"""Parity with RockBot's ``ImportanceDecayTests`` (20512da1): every vector through dreamkeeper's decay formula (the
one the cycle's decay stage applies; its cycle-level behaviour is in tests/consolidation/test_decay.py).

RockBot's setup: ``RunImportanceDecayPassAsync([entry])``; lastSeenAt defaults to createdAt, updatedAt is null
unless set; the decay anchors elapsed time on updatedAt and grace on lastSeenAt, in float32.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pytest

from dreamkeeper.consolidation.decay import decayed_importance
from dreamkeeper.consolidation.settings import DecaySettings
from dreamkeeper.memory import Entry
from tests.parity.vectors import NOW, take, when


def settings_of(options: Any) -> DecaySettings:
    if isinstance(options, str) and options.startswith("defaults"):
        return DecaySettings()
    return DecaySettings(grace_days=options["grace"], half_life_days=options["halfLife"], floor=options["floor"])


def entry_of(spec: dict[str, Any], importance: float, now: datetime = NOW) -> Entry:
    created = when(spec["createdAt"], now)
    return Entry(
        id="e",
        content="a fact",
        created_at=created,
        last_seen_at=when(spec.get("lastSeenAt", spec["createdAt"]), now),
        updated_at=when(spec.get("updatedAt"), now),
        reinforcement_count=spec.get("reinforcementCount", 1),
        importance_score=importance,
    )


def one_pass(entry: Entry, settings: DecaySettings, now: datetime = NOW) -> float:
    decayed = decayed_importance(entry, settings, now)
    return entry.importance_score if decayed is None else decayed


def passes(spec: dict[str, Any], start: float, count: int, settings: DecaySettings) -> float:
    """RockBot's multi-pass tests: each pass sees the entry as the previous one left it (updatedAt = now - 0.5 d)."""
    importance = start
    for _ in range(count):
        importance = one_pass(entry_of(spec, importance), settings)
    return importance


_NUMBER = re.compile(r"[0-9.]+")


def expectation(text: str) -> tuple[float, float]:
    """A vector's expected importance, "0.8*0.5^(1/30) = 0.78173 (+-0.001)" → (value, tolerance)."""
    tolerance = 1e-6
    if "(+-" in text:
        text, rest = text.split("(+-", 1)
        tolerance = float(rest.rstrip(") "))
    text = text.split("=")[-1].strip()
    if not _NUMBER.fullmatch(text):
        expression = text.replace("^", "**")
        assert re.fullmatch(r"[0-9.*/()+\- ]+", expression), expression
        return float(eval(expression, {"__builtins__": {}})), tolerance  # a formula of literals, from our data file
    return float(text), tolerance


@pytest.mark.parametrize("vector", take("decay", "decay"))
def test_decay(vector: dict[str, Any]) -> None:
    inputs, expected = vector["inputs"], vector["expected"]
    settings = settings_of(inputs.get("options"))
    if "pathA" in inputs:  # calendar-time invariant: one pass over 10 days equals twenty half-day passes
        a, b = inputs["pathA"], inputs["pathB"]
        one = one_pass(entry_of(a["entry"], a["entry"]["importance"]), settings)
        twenty = passes(b["each"], a["entry"]["importance"], b["passes"], settings)
        assert abs(one - twenty) <= 0.01
        return
    if "passes" in inputs:  # a dream rewrite every half day does not protect against cumulative decay
        value, tolerance = expectation(expected["importance"])
        assert abs(passes(inputs["each"], 0.9, inputs["passes"], settings) - value) <= tolerance
        return
    entry = entry_of(inputs["entry"], inputs["entry"]["importance"])
    result = one_pass(entry, settings)
    wanted = expected["importance"]
    if expected.get("written") is False:
        assert decayed_importance(entry, settings, NOW) is None  # at the floor: not touched, nothing written
    if isinstance(wanted, str) and wanted.startswith("<="):
        assert result <= float(wanted[2:])
        assert result >= settings.floor
    elif isinstance(wanted, str):
        value, tolerance = expectation(wanted)
        assert abs(result - value) <= tolerance, (result, value)
    else:
        assert result == pytest.approx(wanted, abs=1e-6)
