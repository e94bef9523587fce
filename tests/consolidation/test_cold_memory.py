"""What a cold cycle keeps in memory until its end (issue 27: peak RSS at 100,000 entries). A cycle keeps its
journals to fold them into the write-back index at its end; a decay journal names every decayed entry, and the
index reads nothing of a decay step, so only its id, time and state are kept."""

from __future__ import annotations

import asyncio
import gc
import itertools
from pathlib import Path

from dreamkeeper.consolidation.cycle import Cycle, CycleOptions
from dreamkeeper.consolidation.journal import DECAY_JOURNAL_SUFFIX, Journal, journal_path
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.writeback import WriteBackIndex
from dreamkeeper.consolidation.writeback.ingest import ingest
from dreamkeeper.consolidation.writes import Writes
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import ROCKBOT_SHAPE
from tests.consolidation.test_decay import NOTHING, NOW, old
from tests.parity import rockbot_files


def test_a_cycle_keeps_no_step_of_its_decay_journal_and_folds_it_in_alike(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    # Unrelated facts, reviewed and unchanged: the plan writes none of them, so each decay is written alone, in the
    # decay journal (a decay of an entry the plan stamps or archives is carried by that step: test_decay_carried.py).
    words = ["amber", "basil", "cedar", "delta", "ember", "fjord", "garnet", "harbor", "indigo", "juniper", "kestrel"]
    words.append("lagoon")
    for n, word in enumerate(words):
        rockbot_files.write(root, old(f"e{n:02d}", f"The {word} code is {n * 7919}.", 0.6 + n / 100))
    options = CycleOptions(agent_dir=tmp_path, settings=CycleSettings(min_interval_hours=0, **ROCKBOT_SHAPE), now=NOW)
    cycle = Cycle(options, ScriptedProposer(lambda b, r: NOTHING))
    report = asyncio.run(cycle.run()).report
    assert report.decayed == 12
    effects = cycle.effects
    assert isinstance(effects, Writes)
    decay_id = cycle.cycle_id + DECAY_JOURNAL_SUFFIX
    kept = effects._journals[decay_id]
    assert kept.complete and not kept.undone and kept.header.steps == []
    on_disk = Journal.load(journal_path(tmp_path, decay_id))
    assert len(on_disk.header.steps) == 12 and on_disk.complete  # the journal itself is whole (undo, recovery)
    # Nothing of a decay journal is folded into the write-back index, from what was kept or from the whole journal
    # (not even its id: a steady cycle, whose only journal it is, leaves the index alone).
    saved = WriteBackIndex.load(tmp_path)
    assert decay_id not in saved.journals
    whole, light = WriteBackIndex(), WriteBackIndex()
    ingest(whole, on_disk)
    ingest(light, on_disk.as_folded())
    assert whole.journals == light.journals == {} and len(whole) == len(light) == 0


def test_only_a_journal_of_decays_alone_is_lightened(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    rockbot_files.write(root, old("rose", "Rose is Jordan's sister in Portland.", 0.6))
    options = CycleOptions(agent_dir=tmp_path, settings=CycleSettings(min_interval_hours=0, **ROCKBOT_SHAPE), now=NOW)
    cycle = Cycle(options, ScriptedProposer(lambda b, r: NOTHING))
    asyncio.run(cycle.run())
    decay = Journal.load(journal_path(tmp_path, cycle.cycle_id + DECAY_JOURNAL_SUFFIX))
    mixed = Journal(decay.path, decay.header.model_copy(update={"steps": [*decay.header.steps, *decay.header.steps]}))
    mixed.header.steps[1] = mixed.header.steps[1].model_copy(update={"op": "stamp", "metadata": {}})
    assert mixed.as_folded() is mixed


def test_a_constructed_decay_step_is_the_validated_one_and_costs_less(tmp_path: Path) -> None:
    import gc
    import tracemalloc

    from dreamkeeper.consolidation.decay import plan_decay
    from dreamkeeper.consolidation.journal import Step
    from dreamkeeper.consolidation.journal_steps import decay_step
    from dreamkeeper.consolidation.plan import DecayAction
    from dreamkeeper.consolidation.settings import DecaySettings
    from dreamkeeper.memory import HighValueFloor, MemoryStore
    from tests.consolidation.test_journal_steps import validated_decay_step

    root = tmp_path / "memory"
    for n in range(300):
        rockbot_files.write(root, old(f"e{n:03d}", f"Fact {n} about Milo.", 0.6 + n / 1000))
    store = MemoryStore(root)
    plan = plan_decay(store.scan().live, DecaySettings(), HighValueFloor(), NOW)
    assert len(plan.actions) == 300

    def validated(action: DecayAction, group: int) -> Step:
        return validated_decay_step(store, action, group)  # the step as pydantic validates it

    for group, action in enumerate(plan.actions, start=1):
        built, checked = decay_step(store, action, group), validated(action, group)
        assert built.model_dump_json() == checked.model_dump_json()
        assert Step.model_validate_json(built.model_dump_json()) == checked == built
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        lean = [decay_step(store, a, g) for g, a in enumerate(plan.actions, start=1)]
        lean_bytes = tracemalloc.get_traced_memory()[0] - before
        before = tracemalloc.get_traced_memory()[0]
        full = [validated(a, g) for g, a in enumerate(plan.actions, start=1)]
        full_bytes = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(lean) == len(full) and lean_bytes < 0.8 * full_bytes, (lean_bytes, full_bytes)


def test_what_each_stage_keeps_is_frozen_with_the_snapshot_and_all_thawed_at_the_end(tmp_path: Path) -> None:
    """The cyclic collector's full collections walked every memo and structure the stages had built, again and
    again (issue 27: 0.7 of a cold 10k cycle's CPU, finding 10 objects): each stage freezes what the ones before it
    kept. The cycle thaws everything when it ends, as it always did."""
    root = tmp_path / "memory"
    for n in range(12):
        rockbot_files.write(root, old(f"e{n:02d}", f"The code {n} is {n * 7919} at Contoso.", 0.6 + n / 100))
    frozen: list[int] = []
    keep: list[object] = []

    def progress(stage: str) -> None:
        frozen.append(gc.get_freeze_count())
        keep.append([{"stage": stage}])  # something built meanwhile, alive until the cycle ends

    settings = CycleSettings(min_interval_hours=0, **ROCKBOT_SHAPE)
    options = CycleOptions(agent_dir=tmp_path, settings=settings, now=NOW, progress=progress)
    gc.unfreeze()
    asyncio.run(Cycle(options, ScriptedProposer(lambda b, r: NOTHING)).run())
    grown = [b - a for a, b in itertools.pairwise(frozen)]
    assert sum(1 for g in grown if g > 0) >= 3  # not one freeze for the whole cycle: one per stage
    assert gc.get_freeze_count() == 0
