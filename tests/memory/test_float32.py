"""memory/float32.py against numpy, value for value: ``to_float32`` is ``float(np.float32(x))`` and
``shortest_float32`` is ``float(str(np.float32(x)))`` (what decay writes), over every exponent's power-of-two
boundary, the subnormals, random bit patterns and random doubles, and the floor comparison of ``HighValueFloor``."""

from __future__ import annotations

import math
import random
import struct

import numpy as np
import pytest

from dreamkeeper.memory import Entry, HighValueFloor
from dreamkeeper.memory.float32 import shortest_float32, to_float32

_F32 = struct.Struct("<f")
_BITS = struct.Struct("<I")


def _single(bits: int) -> float:
    return float(_F32.unpack(_BITS.pack(bits))[0])


def _numpy(value: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def _numpy_written(value: float) -> float:
    with np.errstate(over="ignore"):
        return float(str(np.float32(value)))


def _values() -> list[float]:
    rng = random.Random(27)
    values: list[float] = []
    for exponent in range(255):  # each binade's first values and the last of the one below: the asymmetric gaps
        values += [_single((exponent << 23) + d) for d in range(-3, 4) if 0 < (exponent << 23) + d < 0x7F800000]
    values += [_single(bits) for bits in range(1, 2000)]  # the smallest subnormals
    values += [_single(rng.randrange(1, 0x7F800000)) for _ in range(40_000)]  # any float32
    values += [to_float32(rng.random()) for _ in range(20_000)]  # importances
    values += [rng.random() * 2 for _ in range(20_000)]  # doubles, rounded on the way in
    values += [rng.uniform(1e7, 1e10) for _ in range(5_000)]  # where the gap is wider than 1: ties at halfway points
    values += [0.8, 0.7999999999, 0.1, 1 / 3, 2.0, 16777217.0, 3.4028235e38, 3.4028236e38, 1e39, 1e-46, 8e-46]
    return values + [-value for value in values]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))


def test_to_float32_is_numpys_float32() -> None:
    values = [*_values(), math.inf, -math.inf, math.nan, 0.0, -0.0, 1e308, -1e308]
    wrong = [v for v in values if not _same(to_float32(v), _numpy(v))]
    assert wrong == []


def test_shortest_float32_writes_what_numpy_writes() -> None:
    values = [*_values(), math.inf, -math.inf, math.nan, 0.0, -0.0]
    wrong = [
        (v, shortest_float32(v), _numpy_written(v)) for v in values if not _same(shortest_float32(v), _numpy_written(v))
    ]
    assert wrong == []
    # The same text once written: what RockBot reads back is this float32, in as few digits as numpy writes it.
    assert repr(shortest_float32(to_float32(0.1))) == "0.1"
    assert repr(shortest_float32(52461632.0)) == "52461630.0"  # a halfway point, taken as the mantissa is even


@pytest.mark.parametrize(
    ("importance", "floor"),
    [(0.7999999999, 0.8), (0.79999995, 0.8), (0.8, 0.8), (math.inf, 0.8), (1e39, 0.8), (math.nan, 0.8), (0.3, 0.0)],
)
def test_the_high_value_floor_compares_in_float32_as_numpy_does(importance: float, floor: float) -> None:
    entry = Entry.model_construct(id="a", content="x", importance_score=importance, reinforcement_count=0)
    with np.errstate(over="ignore"):
        expected = bool(np.float32(importance) >= np.float32(floor))
    assert HighValueFloor(importance=floor, reinforcement=5).protects(entry) is expected
