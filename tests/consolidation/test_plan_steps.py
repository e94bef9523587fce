"""A large plan's journal (consolidation/plan_steps.py): streamed to its file, the same bytes as ``write_journal``
writes, its steps the same as ``steps_from_plan``'s, built when needed and never all held; a real cold cycle whose plan
takes that path writes the same files, journal, report and write-back index as one that holds its steps (issue 27:
the steps of a cold start's plan at 100,000 entries were ~220 MB of its peak RSS, bench/results/micro-s32.md)."""

from __future__ import annotations

import asyncio
import gc
import itertools
import json
import re
import shutil
import tracemalloc
import uuid
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from bench.sim.world import write_synthetic_corpus

from dreamkeeper.consolidation import cycle_options, plan_steps, validate
from dreamkeeper.consolidation import writes as writes_module
from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.journal import Journal, Step, journal_dir
from dreamkeeper.consolidation.journal_steps import FoldedStamp, plan_recipes, steps_from_plan, write_journal
from dreamkeeper.consolidation.plan import Plan
from dreamkeeper.consolidation.plan_steps import PlanSteps, write_plan_journal
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore
from dreamkeeper.proposers import OfflineProposer

NOW = datetime(2026, 12, 7, 6, 0, tzinfo=UTC)


def _deterministic_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same cycle id and successor ids on every run (both are random in the product)."""
    counter = itertools.count()
    monkeypatch.setattr(validate, "uuid", SimpleNamespace(uuid4=lambda: uuid.UUID(int=(next(counter) + 1) << 80)))
    monkeypatch.setattr(cycle_options, "secrets", SimpleNamespace(token_hex=lambda n: "ab" * n))


def _cold_cycle(agent: Path) -> Any:
    options = CycleOptions(agent_dir=agent, settings=CycleSettings(archive_cap=1.0), force=True, now=NOW)
    return asyncio.run(run_cycle(options, OfflineProposer()))


def _captured_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Plan, MemoryStore, Journal]:
    """A real cold cycle's plan (folds, carried decays, merges with their creates and archives, prunes, stamps) as
    the cycle journaled it with every plan streamed (``KEEP_MAX`` 0)."""
    monkeypatch.setattr(plan_steps, "KEEP_MAX", 0)
    seen: list[tuple[Plan, MemoryStore, Journal]] = []

    def spy(agent_dir: Path, journal_id: str, plan: Plan, store: MemoryStore, now: datetime) -> Journal:
        journal = write_plan_journal(agent_dir, journal_id, plan, store, now)
        seen.append((plan, store, journal))
        return journal

    monkeypatch.setattr(writes_module, "write_plan_journal", spy)
    agent = tmp_path / "agent"
    write_synthetic_corpus(agent / "memory", 400, 3)
    assert _cold_cycle(agent).report.result == "completed"
    plan, store, journal = max(seen, key=lambda s: len(s[2].header.steps))  # the plan's (a fold's is shorter)
    assert isinstance(journal.header.steps, PlanSteps)
    ops = {step.op for step in journal.header.steps}
    assert {"create", "archive", "stamp"} <= ops, ops
    return plan, store, journal


def test_a_streamed_plan_journal_is_the_journal_write_journal_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, store, streamed = _captured_plan(tmp_path, monkeypatch)
    (tmp_path / "b").mkdir()
    created = write_journal(tmp_path / "b", streamed.header.cycle_id, plan, store, NOW)
    on_disk = streamed.path.read_bytes().split(b"\n")[0] + b"\n"  # the header line: outcomes follow it
    assert on_disk == created.path.read_bytes()
    steps = streamed.header.steps
    expected = steps_from_plan(plan, store)
    assert list(steps) == created.header.steps == expected == Journal.load(streamed.path).header.steps
    assert [steps[i] for i in range(len(steps) - 1, -1, -1)] == expected[::-1]  # any order, the same steps
    assert list(steps[3:9]) == expected[3:9] and steps[-1] == expected[-1]
    assert isinstance(steps, PlanSteps) and steps.ops_groups() == [(s.op, s.group) for s in expected]
    assert any(s.before is not None for s in expected if s.op == "stamp")  # decays carried by stamps among them
    assert streamed.as_folded() is streamed  # a plan's journal is folded in whole
    # What the write-back fold reads: a stamp's id, metadata and previous values; an archive without the decay it
    # carries; anything else whole.
    for i, step in enumerate(expected):
        view = steps.for_fold(i)
        if step.op == "stamp":
            assert isinstance(view, FoldedStamp)
            assert (view.id, view.metadata, view.previous) == (step.id, step.metadata, step.previous)
        elif step.op == "archive":
            assert isinstance(view, Step) and view.before is None and view.after is None
            assert view.model_copy(update={"before": step.before, "after": step.after}) == step
        else:
            assert view == step
    with pytest.raises(IndexError):
        steps[len(steps)]
    with pytest.raises(IndexError):
        steps[-len(steps) - 1]
    assert steps[-len(steps)] == expected[0]


def test_a_short_plan_keeps_its_steps_and_a_long_one_holds_at_most_a_window_of_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, store, _ = _captured_plan(tmp_path, monkeypatch)
    n = len(plan_recipes(plan))
    monkeypatch.setattr(plan_steps, "KEEP_MAX", n)  # exactly at the threshold: kept, as before
    (tmp_path / "c").mkdir()
    assert isinstance(write_plan_journal(tmp_path / "c", "c1", plan, store, NOW).header.steps, list)
    monkeypatch.setattr(plan_steps, "KEEP_MAX", n - 1)
    monkeypatch.setattr(plan_steps, "_RECENT", 16)
    (tmp_path / "d").mkdir()
    steps = write_plan_journal(tmp_path / "d", "c1", plan, store, NOW).header.steps
    assert isinstance(steps, PlanSteps) and not steps._recent  # written without keeping one
    for index in range(len(steps)):
        steps[index]
    assert len(steps._recent) == 16 and set(steps._recent) == set(range(len(steps) - 16, len(steps)))


def test_a_streamed_plan_holds_a_fraction_of_the_memory_of_its_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plan, store, _ = _captured_plan(tmp_path, monkeypatch)
    held, files = {}, {}
    for name, keep in (("streamed", 0), ("created", 10**9)):
        monkeypatch.setattr(plan_steps, "KEEP_MAX", keep)
        (tmp_path / name).mkdir()
        gc.collect()
        tracemalloc.start()
        try:
            journal = write_plan_journal(tmp_path / name, "c1", plan, store, NOW)
            held[name] = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        files[name] = journal.path.read_bytes()
    assert files["streamed"] == files["created"]
    assert held["streamed"] < 0.3 * held["created"], held


def _outcome(agent: Path, keep: int, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.setattr(plan_steps, "KEEP_MAX", keep)
    _deterministic_ids(monkeypatch)
    outcome = _cold_cycle(agent)
    report = outcome.report
    files = {str(p.relative_to(agent / "memory")): p.read_bytes() for p in sorted((agent / "memory").rglob("*.json"))}
    # A journal names its memory root, the mtimes of the files the fold wrote before the plan was made, and when it
    # closed, by the wall clock: those alone may differ.
    journals = {
        p.name: re.sub(rb'"kind": "complete", "at": "[^"]*"|"mtime_ns":\d+', b"", p.read_bytes()).replace(
            bytes(agent), b"AGENT"
        )
        for p in sorted(journal_dir(agent).glob("*.jsonl"))
    }
    index = json.loads((agent / ".dreamkeeper" / "writeback-index.json").read_text())
    when = {"cycle_id", "started_at", "first_write_at", "finished_at"}  # and where: the rest is what it did
    counts = report.model_dump(exclude=when | {"agent_dir", "agent_settings"})
    return {"files": files, "journals": journals, "index": index, "counts": counts, "result": report.result}


@pytest.mark.parametrize("recent", [4_096, 2])
def test_a_cold_cycle_whose_plan_is_streamed_does_what_one_holding_its_steps_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recent: int
) -> None:
    """``recent`` 2: the executor's windows look at steps again (their groups' bounds, their heads, then their
    archives, a group's head from its archive), and with a look-back far shorter than a window every look builds the
    step again: the same run."""
    monkeypatch.setattr(plan_steps, "_RECENT", recent)
    write_synthetic_corpus(tmp_path / "pristine" / "memory", 400, 5)
    runs = {}
    for name, keep in (("held", 10**9), ("streamed", 0)):
        agent = tmp_path / name
        shutil.copytree(tmp_path / "pristine", agent)
        runs[name] = _outcome(agent, keep, monkeypatch)
    held, streamed = runs["held"], runs["streamed"]
    assert held["result"] == streamed["result"] == "completed"
    assert held["counts"] == streamed["counts"] and held["counts"]["saved"] and held["counts"]["archived"]
    assert held["files"] == streamed["files"]
    assert held["journals"] == streamed["journals"]  # the same steps and the same outcomes, in the same order
    assert held["index"] == streamed["index"] and held["index"]["records"]  # the write-back fold alike


def test_a_built_steps_sequence_must_say_how_it_builds_a_step() -> None:
    """``BuiltSteps._step`` is abstract: a journal's steps without it cannot be made, rather than failing at the
    executor's first look."""
    from dreamkeeper.consolidation.decay_journal import BuiltSteps

    class NoBuilder(BuiltSteps):
        def __len__(self) -> int:
            return 1

    with pytest.raises(TypeError, match="_step"):
        NoBuilder()  # type: ignore[abstract]
