"""The streamed decay journal (consolidation/decay_journal.py): the same file, byte for byte, and the same steps as
``Journal.create`` gives, never over an existing journal, a killed write's leftover never taken for a journal; and
it holds no step object while it is written or run (issue 27: its decays are written when the cycle holds the most
memory; a cold start journals one per entry of the corpus)."""

from __future__ import annotations

import gc
import tracemalloc
from pathlib import Path

import pytest

from dreamkeeper.consolidation import decay_journal
from dreamkeeper.consolidation.decay import plan_decay
from dreamkeeper.consolidation.decay_journal import PARTIAL, DecaySteps, write_decay_journal
from dreamkeeper.consolidation.executor import Executor
from dreamkeeper.consolidation.journal import Journal, incomplete_journals, journal_dir
from dreamkeeper.consolidation.journal_steps import decay_step, write_journal
from dreamkeeper.consolidation.plan import Plan
from dreamkeeper.consolidation.settings import DecaySettings
from dreamkeeper.memory import ConflictError, HighValueFloor, MemoryStore
from tests.consolidation.test_decay import NOW, old
from tests.parity import rockbot_files


def _store(root: Path, n: int) -> MemoryStore:
    for i in range(n):
        rockbot_files.write(root, old(f"e{i:04d}", f"Fact {i}: the locker code is {i * 37}.", 0.5 + (i % 40) / 100))
    return MemoryStore(root)


def test_the_streamed_decay_journal_is_the_journal_create_writes(tmp_path: Path) -> None:
    store = _store(tmp_path / "a" / "memory", 40)
    actions = plan_decay(store.scan().live, DecaySettings(), HighValueFloor(), NOW).actions
    assert len(actions) == 40
    streamed = write_decay_journal(tmp_path / "a", "c1-decay", actions, store, NOW)
    (tmp_path / "b").mkdir()
    created = write_journal(tmp_path / "b", "c1-decay", Plan(decays=list(actions)), store, NOW)
    assert streamed.path.read_bytes() == created.path.read_bytes()
    loaded = Journal.load(streamed.path)
    assert list(streamed.header.steps) == loaded.header.steps == created.header.steps
    assert streamed.header.steps[-1] == decay_step(store, actions[-1], 40)
    assert list(streamed.header.steps[1:3]) == loaded.header.steps[1:3]
    assert streamed.as_folded().header.steps == []  # decays alone: folded without building the steps again
    assert [p for p in incomplete_journals(tmp_path / "a")] == [streamed.path]  # recovery sees it until done
    assert not list(journal_dir(tmp_path / "a").glob(f".*{PARTIAL}"))


def test_a_decay_journal_never_replaces_one_already_there_and_a_killed_writes_leftover_is_no_journal(
    tmp_path: Path,
) -> None:
    store = _store(tmp_path / "memory", 3)
    actions = plan_decay(store.scan().live, DecaySettings(), HighValueFloor(), NOW).actions
    first = write_decay_journal(tmp_path, "c1-decay", actions, store, NOW)
    before = first.path.read_bytes()
    with pytest.raises(ConflictError):
        write_decay_journal(tmp_path, "c1-decay", actions[:1], store, NOW)
    assert first.path.read_bytes() == before
    leftover = journal_dir(tmp_path) / f".c2-decay.jsonl.999{PARTIAL}"  # what a kill mid-write leaves
    leftover.write_bytes(b'{"cycle_id":"c2-decay","steps":[{"op":"de')
    assert [p for p in incomplete_journals(tmp_path)] == [first.path]  # never loaded as a journal
    write_decay_journal(tmp_path, "c3-decay", actions, store, NOW)
    assert not leftover.exists()  # swept by the next decay journal (written under the cycle lock)


def test_a_streamed_decay_journal_runs_like_a_created_one_and_holds_no_steps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long journal (a cold start's) keeps no step: 300 stands for one past the length a journal keeps them to.
    monkeypatch.setattr(decay_journal, "_KEEP_MAX", 299)
    stores = {name: _store(tmp_path / name / "memory", 300) for name in ("streamed", "created")}
    results = {}
    for name, store in stores.items():
        live = store.scan().live
        actions = plan_decay(live, DecaySettings(), HighValueFloor(), NOW).actions
        gc.collect()
        tracemalloc.start()
        try:
            if name == "streamed":
                journal = write_decay_journal(tmp_path / name, "c1-decay", actions, store, NOW)
            else:
                journal = write_journal(tmp_path / name, "c1-decay", Plan(decays=list(actions)), store, NOW)
            held = tracemalloc.get_traced_memory()[0]
        finally:
            tracemalloc.stop()
        snapshot = {str(a.target.path): a.target for a in actions}
        tally = Executor(store, journal, NOW, snapshot).run()
        assert tally.decayed == 300 and not tally.failed
        assert Journal.load(journal.path).complete
        results[name] = (held, {p.name: p.read_bytes() for p in sorted(store.root.rglob("*.json"))})
    assert results["streamed"][1] == results["created"][1]
    (tmp_path / "x").mkdir()
    assert isinstance(
        write_decay_journal(tmp_path / "x", "c9-decay", (), stores["created"], NOW).header.steps, DecaySteps
    )
    # The created journal holds a step object per decay until it is dropped; the streamed one none.
    assert results["streamed"][0] < 0.2 * results["created"][0], (results["streamed"][0], results["created"][0])


@pytest.mark.parametrize("long", [False, True])
def test_a_short_decay_journal_builds_each_step_once_and_runs_the_steps_it_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, long: bool
) -> None:
    """A steady cycle's decay journal (a few percent of the corpus) hands the executor the steps it was written from
    instead of building each again; a long one (a cold start's) builds them again and holds none. Either way the
    files written and the journal are the same as ``Journal.create``'s."""
    if long:
        monkeypatch.setattr(decay_journal, "_KEEP_MAX", 29)
    built: list[int] = []

    def counted(store: MemoryStore, action: object, group: int) -> object:
        built.append(group)
        return decay_step(store, action, group)  # type: ignore[arg-type]

    monkeypatch.setattr(decay_journal, "decay_step", counted)
    store = _store(tmp_path / "a" / "memory", 30)
    actions = plan_decay(store.scan().live, DecaySettings(), HighValueFloor(), NOW).actions
    journal = write_decay_journal(tmp_path / "a", "c1-decay", actions, store, NOW)
    (tmp_path / "b").mkdir()
    created = write_journal(tmp_path / "b", "c1-decay", Plan(decays=list(actions)), store, NOW)
    assert journal.path.read_bytes() == created.path.read_bytes()
    tally = Executor(store, journal, NOW, {str(a.target.path): a.target for a in actions}).run()
    assert tally.decayed == 30 and not tally.failed and Journal.load(journal.path).complete
    assert sorted(built) == sorted(list(range(1, 31)) * (2 if long else 1))
    steps = journal.header.steps
    assert isinstance(steps, DecaySteps) and not steps._kept  # nothing left held after the run
