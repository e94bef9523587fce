"""The cyclic collector while a cycle runs (collector.py, issue 27): young collections less often, cyclic garbage
still found within a stage, and the process's own settings put back however the cycle ends."""

from __future__ import annotations

import asyncio
import gc
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from dreamkeeper.consolidation.collector import YOUNG_THRESHOLD, CycleCollector
from dreamkeeper.consolidation.cycle import Cycle, CycleOptions
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import ROCKBOT_SHAPE
from tests.consolidation.test_decay import NOTHING, NOW, old
from tests.parity import rockbot_files


@pytest.fixture(autouse=True)
def _thresholds() -> Iterator[None]:
    """Every test starts from thresholds of its own choosing, with automatic collection on (what the tests assume:
    a test run by a harness that turned it off would otherwise see nothing collected), and leaves the process's
    thresholds and collection as they were."""
    before, enabled = gc.get_threshold(), gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()
        if not enabled:
            gc.disable()


def _cycle(tmp_path: Path, progress: Callable[[str], None]) -> Cycle:
    root = tmp_path / "memory"
    for n in range(12):
        rockbot_files.write(root, old(f"e{n:02d}", f"The code {n} is {n * 7919} at Contoso.", 0.6 + n / 100))
    settings = CycleSettings(min_interval_hours=0, **ROCKBOT_SHAPE)
    options = CycleOptions(agent_dir=tmp_path, settings=settings, now=NOW, progress=progress)
    return Cycle(options, ScriptedProposer(lambda b, r: NOTHING))


def test_the_young_generation_is_larger_from_the_snapshot_to_the_end_and_put_back_after(tmp_path: Path) -> None:
    gc.set_threshold(500, 7, 9)  # the process's own, not CPython's defaults: put back as they were
    seen: dict[str, tuple[int, int, int]] = {}
    cycle = _cycle(tmp_path, lambda stage: seen.setdefault(stage, gc.get_threshold()))
    report = asyncio.run(cycle.run()).report
    assert report.result == "completed" and report.decayed == 12
    assert seen["purge"] == (500, 7, 9)  # before the snapshot is read: the scan turns the collector off itself
    later = [stage for stage in seen if stage not in ("recover", "vocabulary", "purge", "snapshot")]
    assert {"decay", "gating", "apply", "report"} <= set(later)
    assert {seen[stage] for stage in later} == {(YOUNG_THRESHOLD, 7, 9)}  # the older generations' as they were
    assert gc.get_threshold() == (500, 7, 9)
    assert gc.get_freeze_count() == 0


def test_cyclic_garbage_made_in_a_stage_is_still_collected_in_that_stage(tmp_path: Path) -> None:
    """The young collections still run, ``YOUNG_THRESHOLD`` allocations apart: a cycle of objects dropped in one
    stage (an exception's traceback, a client's callbacks) is freed before the next stage, not kept to the end."""
    collected: dict[str, bool] = {}
    garbage: list[weakref.ref[object]] = []

    class Node:
        pass

    def progress(stage: str) -> None:
        if garbage:
            collected.setdefault(stage, garbage[-1]() is None)
        if stage == "gating":
            node = Node()
            node.self = node  # type: ignore[attr-defined]  # a reference cycle: reference counting cannot free it
            garbage.append(weakref.ref(node))
            del node
            kept = [[n] for n in range(3 * YOUNG_THRESHOLD)]  # allocations, as a stage's own work makes them
            assert len(kept) == 3 * YOUNG_THRESHOLD

    asyncio.run(_cycle(tmp_path, progress).run())
    after_gating = list(collected)
    assert after_gating and collected[after_gating[0]] is True, collected


def test_automatic_collection_turned_off_by_the_process_stays_off(tmp_path: Path) -> None:
    gc.set_threshold(0, 10, 10)
    seen: list[tuple[int, int, int]] = []
    asyncio.run(_cycle(tmp_path, lambda stage: seen.append(gc.get_threshold())).run())
    assert set(seen) == {(0, 10, 10)} and gc.get_threshold() == (0, 10, 10)


def test_a_failed_cycle_puts_the_collector_back_too(tmp_path: Path) -> None:
    gc.set_threshold(600, 10, 10)

    def progress(stage: str) -> None:
        if stage == "gating":
            assert gc.get_threshold()[0] == YOUNG_THRESHOLD
            raise RuntimeError("a stage failed")

    with pytest.raises(RuntimeError, match="a stage failed"):
        asyncio.run(_cycle(tmp_path, progress).run())
    assert gc.get_threshold() == (600, 10, 10) and gc.get_freeze_count() == 0


def test_concurrent_cycles_restore_the_thresholds_only_when_the_last_one_ends() -> None:
    gc.set_threshold(700, 10, 10)
    first, second = CycleCollector(), CycleCollector()
    first.freeze()
    second.freeze()
    second.freeze()  # each stage's start freezes again: still one hold
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    first.thaw()
    first.thaw()  # idempotent: the other cycle's hold is not released by it
    assert gc.get_threshold() == (YOUNG_THRESHOLD, 10, 10)
    second.thaw()
    assert gc.get_threshold() == (700, 10, 10)
    third = CycleCollector()
    third.freeze()  # a cycle after them saves the thresholds afresh
    gc_during = gc.get_threshold()
    third.thaw()
    assert gc_during == (YOUNG_THRESHOLD, 10, 10) and gc.get_threshold() == (700, 10, 10)
