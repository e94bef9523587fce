"""Decay's float32 arithmetic in Python floats (issue 27, steady cycle: numpy's per-scalar cost was most of the decay
plan, asked of every live entry past its grace period) is numpy's float32 arithmetic bit for bit: the reference
below is the numpy formulation decay.py used before, step for step."""

from __future__ import annotations

import random
from datetime import datetime, timedelta

import numpy as np

from dreamkeeper.consolidation.decay import decayed_importance, float32
from dreamkeeper.consolidation.settings import DecaySettings
from dreamkeeper.memory import Entry
from tests.consolidation.test_decay import NOW
from tests.parity import rockbot_files

_DAY = timedelta(days=1)


def numpy_decayed(entry: Entry, settings: DecaySettings, now: datetime) -> float | None:
    """The numpy formulation (decay.py before the Python-float path), kept as the reference."""
    since_seen = (now - entry.seen_at) / _DAY
    if since_seen < settings.grace_days:
        return None
    with np.errstate(over="ignore"):
        floor = np.float32(settings.floor)
        importance = np.float32(entry.importance_score)
    if not importance > floor:
        return None
    last_touch = entry.updated_at or entry.created_at
    since_touch = max(0.0, (now - last_touch) / _DAY)
    elapsed = min(since_seen - settings.grace_days, since_touch)
    if elapsed <= 0:
        return None
    factor = np.float32(0.5 ** (elapsed / float(np.float32(settings.half_life_days))))
    lowered = max(floor, np.float32(importance * factor))
    if not lowered < importance:
        return None
    return float32(float(lowered))


def make(importance: float, seen_days: float, touched_days: float) -> Entry:
    raw = rockbot_files.entry(
        "e1",
        "a fact",
        createdAt=NOW - timedelta(days=seen_days),
        updatedAt=NOW - timedelta(days=touched_days),
        importanceScore=0.5,
    )
    # set after the parse: a value beyond float32 (never screened in) is no JSON RockBot writes
    return Entry.from_json_bytes(rockbot_files.dumps(raw).encode()).evolve(importance_score=importance)


def test_the_python_float32_path_equals_numpys_bit_for_bit() -> None:
    rng = random.Random(27)
    edges = [0.0, 1e-45, 1e-40, 0.1, 0.10000000149011612, 0.1000001, 0.5, 0.8, 0.79999995, 1.0, 3.4e38, 1e39]
    importances = edges + [rng.random() for _ in range(600)] + [rng.uniform(0.09, 0.11) for _ in range(200)]
    # seconds apart (a steady cycle's drop of an ulp or two) to years
    spans = [0.0, 1e-7, 5e-6, 1e-5, 1e-3, 0.5, 1.0, 29.9, 30.0, 31.0, 45.0, 400.0, 5000.0]
    settings = [DecaySettings(), DecaySettings(grace_days=0.0, half_life_days=0.3, floor=0.0), DecaySettings(floor=0.5)]
    compared = decayed = 0
    for importance in importances:
        for seen in (rng.choice(spans) + 30.0, rng.choice(spans)):
            touched = min(seen, rng.choice(spans))
            entry = make(importance, seen, touched)
            for setting in settings:
                mine, reference = decayed_importance(entry, setting, NOW), numpy_decayed(entry, setting, NOW)
                assert mine == reference, (importance, seen, touched, setting)
                assert (mine is None) == (reference is None)
                compared += 1
                decayed += mine is not None
    assert decayed > compared // 4  # the grid decays many entries, not only skips them
