"""How a cycle keeps CPython's cyclic collector from walking what it built (issue 27).

A cycle's stages build long-lived, acyclic structures: the parsed snapshot, memos, clusters, inventories, the plan.
Reference counting frees what a stage drops; the cyclic collector finds almost nothing in them (a 100k-entry cold
cycle: 0 objects in every stage but gating's few hundred) yet walked them again and again:

- **Frozen at each stage's start** (``gc.freeze``): what the stages so far kept lives as long as the snapshot, so
  full collections stop walking it (a cold 10k cycle: 7 full collections cost 0.7 CPU s and found 10 objects).
- **A larger young generation while the cycle runs** (``YOUNG_THRESHOLD`` allocations between young collections,
  against CPython's 700): the collections inside a long stage walk what that stage makes, and most of it lives until
  the stage ends. At 100,000 entries the collector took 4.5 of a cold cycle's ~90 CPU s in ~7,100 young and 34 full
  collections; with 10,000 it takes about half, in ~600 young and 1 full (bench/results/micro-s34.md). The young
  collections still run, so cyclic garbage made meanwhile (an exception's traceback, a client's callbacks) is
  still found within the stage, ten thousand allocations later at most instead of seven hundred.

Everything is put back when the cycle ends: thawed, and the thresholds the process had. Cycles run one after the
other in a process, or concurrently (a library's caller): the first to start saves the thresholds, the last to end
restores them.
"""

from __future__ import annotations

import gc
from typing import Final

YOUNG_THRESHOLD: Final = 10_000  # allocations less deallocations between young collections while a cycle runs


class _Running:
    """The cycles of this process that hold the collector's settings, and the thresholds from before the first."""

    count = 0
    saved: tuple[int, int, int] | None = None


class CycleCollector:
    """One cycle's hold on the collector: ``freeze`` (each stage's start, once the snapshot is read) and ``thaw``
    (the cycle's end, whatever happened). Idempotent both ways."""

    def __init__(self) -> None:
        self.held = False

    def freeze(self) -> None:
        gc.freeze()
        if self.held:
            return
        self.held = True
        if _Running.count == 0:
            _Running.saved = thresholds = gc.get_threshold()
            young = thresholds[0]
            # 0 turns automatic collection off (the caller's choice): left so. A larger one is the caller's too.
            if 0 < young < YOUNG_THRESHOLD:
                gc.set_threshold(YOUNG_THRESHOLD, *thresholds[1:])
        _Running.count += 1

    def thaw(self) -> None:
        if not self.held:
            return
        self.held = False
        gc.unfreeze()
        _Running.count -= 1
        if _Running.count == 0 and _Running.saved is not None:
            gc.set_threshold(*_Running.saved)
            _Running.saved = None


__all__ = ["YOUNG_THRESHOLD", "CycleCollector"]
