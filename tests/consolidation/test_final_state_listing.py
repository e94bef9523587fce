"""The report's final-state check (``Writes._final_state``) of a cycle whose writes all went through its own plans
reads only the files it wrote plus a directory listing (no second ``stat`` of every file), and still sees what it
exists to see: an entry gone (the agent's deletion), a file of ours changed, and, whenever the end-of-run invariant
has something of ours to charge, every file as it is now (docs/architecture.md, "The final-state check")."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, FinalState, Writes, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore, StoredEntry
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus

# The same answers with the corpus index cold, warm, stale and corrupt (tests/corpus_index_modes.py).
pytestmark = pytest.mark.usefixtures("corpus_index_mode")

SEEDS = [
    Seed("s1", "Allen Conway works at Xebia."),
    Seed("s2", "Allen Conway lives in Austin."),
    Seed("s3", "Allen Conway of Xebia flew to Austin.", reinforcement=9),
    Seed("n1", "Trish prefers concise notes about Kubernetes 1.36."),
    Seed("n2", "The staging cluster runs in eu-west-3 since 2024-05-02."),
]

NOTHING: dict[str, list[Any]] = {"toSave": [], "toDelete": []}


def cycle(agent_dir: Path, proposer: ScriptedProposer) -> CycleOutcome:
    options = CycleOptions(agent_dir=agent_dir, settings=CycleSettings(min_interval_hours=0), now=BASE_TIME)
    return asyncio.run(run_cycle(options, proposer))


def spy_reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The files the final-state check stats or reads (``_read_final``), by path."""
    read: list[str] = []
    original = Writes._read_final

    def spying(self: Writes, child: os.DirEntry[str], seen: StoredEntry | None) -> Any:
        read.append(child.path)
        return original(self, child, seen)

    monkeypatch.setattr(Writes, "_read_final", spying)
    return read


def after_apply(monkeypatch: pytest.MonkeyPatch, action: Callable[[Writes], None]) -> list[Writes]:
    """Run ``action`` once, just before the report's final-state check (an agent writing in between)."""
    original = Writes._final_state
    seen: list[Writes] = []

    def patched(self: Writes, snapshot: Any, **how: bool) -> FinalState:
        if not seen:
            seen.append(self)
            action(self)
        return original(self, snapshot, **how)

    monkeypatch.setattr(Writes, "_final_state", patched)
    return seen


def rewrite_in_place(path: Path, old: str, new: str) -> None:
    """The agent's own kind of write: the file opened and rewritten where it is (same inode)."""
    text = path.read_text(encoding="utf-8")
    assert old in text
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(text.replace(old, new))
        handle.truncate()


def test_a_cycle_that_merges_nothing_reads_only_the_files_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_corpus(tmp_path, SEEDS)
    cycle(tmp_path, ScriptedProposer([NOTHING]))  # reviews and decays them all: the next cycle writes (almost) none
    read = spy_reads(monkeypatch)
    seen = after_apply(monkeypatch, lambda _: None)
    outcome = cycle(tmp_path, ScriptedProposer([NOTHING]))
    assert outcome.report.result == "completed" and outcome.report.archived == 0
    (writes,) = seen
    # Main read (stat) every one of the five files here; only what this cycle's plans touched is looked at now.
    assert len(read) < len(SEEDS)
    assert set(read) <= writes._touched
    assert outcome.report.live_entries == len(SEEDS)


def test_the_agent_deleting_an_entry_during_such_a_cycle_is_seen_by_the_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = write_corpus(tmp_path, SEEDS)
    cycle(tmp_path, ScriptedProposer([NOTHING]))
    victim = store.require("n2").path
    after_apply(monkeypatch, lambda _: victim.unlink())
    outcome = cycle(tmp_path, ScriptedProposer([NOTHING]))
    assert outcome.report.result == "completed"
    assert outcome.report.agent_deletes == 1 and outcome.report.hard_deletes == 0
    assert outcome.report.live_entries == len(SEEDS) - 1


def test_the_agent_editing_an_entry_during_such_a_cycle_loses_nothing_and_is_read_next_cycle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = write_corpus(tmp_path, SEEDS)
    cycle(tmp_path, ScriptedProposer([NOTHING]))
    path = store.require("n1").path
    after_apply(monkeypatch, lambda _: rewrite_in_place(path, "concise", "detailed"))
    outcome = cycle(tmp_path, ScriptedProposer([NOTHING]))
    assert outcome.report.result == "completed" and outcome.report.specifics_lost == 0
    monkeypatch.undo()
    again = MemoryStore(store.root)
    assert "detailed" in again.require("n1").entry.content
    second = cycle(tmp_path, ScriptedProposer([NOTHING]))
    assert second.report.result == "completed" and second.report.specifics_lost == 0


def test_a_cycle_that_archives_checks_every_file_as_it_is_now(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A merge archives its sources with this cycle's tag: departures the end-of-run invariant charges, whose
    specifics it may look for in any live text. Such a cycle checks every file as it is now, the ones it never
    wrote included (an agent's edit of one of them is seen: test_census_successor_first.py's after-apply cases)."""
    store = write_corpus(tmp_path, SEEDS)
    cycle(tmp_path, ScriptedProposer([NOTHING]))  # reviews the first five: the next cycle offers only the newcomers
    write_corpus(
        tmp_path, [Seed("d1", "Marta Quist joined Initech in 2021."), Seed("d2", "Marta Quist works at Initech.")]
    )
    merge = {"toSave": [{"content": "Marta Quist joined Initech in 2021.", "sourceIds": ["d1", "d2"]}], "toDelete": []}
    read = spy_reads(monkeypatch)
    seen = after_apply(monkeypatch, lambda _: None)
    outcome = cycle(tmp_path, ScriptedProposer([merge]))
    assert outcome.report.archived == 2 and outcome.report.result == "completed"
    (writes,) = seen
    untouched = {str(s.path) for s in MemoryStore(store.root).scan().entries} - writes._touched
    assert untouched and untouched <= set(read)
