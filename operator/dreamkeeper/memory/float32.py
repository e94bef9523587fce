"""IEEE single precision (C#'s ``float``, numpy's float32) in plain Python floats, without numpy.

RockBot holds importance as a C# ``float``: the floor comparison and decay's arithmetic round to it, and decay writes
the shortest decimal that reads back as the float32 (what .NET's and numpy's float formatting produce). These were
``np.float32`` calls; numpy was then the one reason a steady cycle's process loaded it (~0.08 s of CPU, more with
OpenBLAS's workers: cli.py), so they are done here with ``struct``, and tests/memory/test_float32.py checks them against
numpy's, value for value (every exponent, the power-of-two boundaries, subnormals, random bit patterns).
"""

from __future__ import annotations

import math
import struct
from decimal import Decimal
from typing import Final

_F32: Final = struct.Struct("<f")
_BITS: Final = struct.Struct("<I")
_MAX_DIGITS: Final = 9  # every float32 reads back from 9 significant digits


def to_float32(value: float) -> float:
    """``float(np.float32(value))``: the nearest float32 (ties to even), a finite value beyond its range ±inf."""
    try:
        return float(_F32.unpack(_F32.pack(value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def shortest_float32(value: float) -> float:
    """``float(str(np.float32(value)))``: ``value`` rounded to float32, then written with the fewest significant
    digits that read back as that float32 (among those, the nearest to it) and read as a double."""
    single = to_float32(value)
    if single == 0.0 or not math.isfinite(single):
        return single  # 0.0, -0.0, inf, -inf, nan: written and read back as themselves
    magnitude = abs(single)
    bits = _BITS.unpack(_F32.pack(magnitude))[0]
    below = _F32.unpack(_BITS.pack(bits - 1))[0]
    above = _F32.unpack(_BITS.pack(bits + 1))[0]
    if math.isinf(above):  # the largest float32: the gap above is the gap below (one binade)
        above = magnitude + (magnitude - below)
    # What reads back as it: the decimals strictly between the halfway points to its neighbours (exact in a double),
    # and a halfway point itself when its mantissa is even (the reader rounds ties to even).
    span = _Span((below + magnitude) / 2, (magnitude + above) / 2, not bits & 1)
    # The digit counts that work are all those from the shortest up (p digits are p + 1 with a trailing zero), and a
    # decayed importance needs 8 or 9: counted down from 8 until one does not.
    found: float | None = None
    for digits in range(_MAX_DIGITS - 1, 0, -1):
        shorter = _candidate(magnitude, digits, span)
        if shorter is None:
            break
        found = shorter
    if found is None:
        found = _candidate(magnitude, _MAX_DIGITS, span)
        assert found is not None  # 9 digits always identify a float32
    return math.copysign(found, single)


class _Span:
    __slots__ = ("even", "high", "low")

    def __init__(self, low: float, high: float, even: bool) -> None:
        self.low, self.high, self.even = low, high, even

    def holds(self, parsed: float, text: str) -> bool:
        """Whether the decimal ``text`` (``parsed``: its double) reads back as the float32: its double is compared
        first; only one that rounded onto a halfway point is decided exactly, from the decimal itself."""
        low, high = self.low, self.high
        if low < parsed < high:
            return True
        if parsed != low and parsed != high:
            return False
        exact, low_exact, high_exact = Decimal(text), Decimal(low), Decimal(high)
        if low_exact < exact < high_exact:
            return True
        return self.even and exact in (low_exact, high_exact)


def _candidate(magnitude: float, digits: int, span: _Span) -> float | None:
    """The ``digits``-digit decimal numpy's Dragon4 writes for positive float32 ``magnitude``: the nearer of the two
    around it (ties to even, as both Python's formatting and Dragon4 round) if it reads back as it, else the other
    one if that does; None when neither does."""
    text = f"{magnitude:.{digits - 1}e}"
    nearest = float(text)
    if span.holds(nearest, text):
        return nearest
    mantissa, exponent = text.split("e")
    scale = int(exponent) - (digits - 1)
    units = int(mantissa.replace(".", ""))
    if nearest < magnitude:
        units += 1  # 99..9 + 1 is 10^digits: the same value as the digits-long 1.0..0 of the next decade
    elif units == 10 ** (digits - 1):
        units, scale = 10**digits - 1, scale - 1  # below 1.0..0e(k) is 9.9..9e(k-1), on the finer grid of that decade
    else:
        units -= 1
    if units <= 0:
        return None
    other_text = f"{units}e{scale}"
    other = float(other_text)
    return other if span.holds(other, other_text) else None


__all__ = ["shortest_float32", "to_float32"]
