"""A decay carried into the cycle's other write of the same entry (issue 27: a cold cycle wrote ~6,000 of 10,000
entries twice, decayed and then stamped or archived; docs/architecture.md, "Decay carried into the cycle's write").

What a crash leaves, at each new point:

- stopped after the decay stage, before apply: nothing on disk changed and nothing journaled; the next cycle decays
  the same entries to the same values (decay is calendar-time invariant);
- killed during apply, before or after any step (its write done, its journal line lost): recovery finishes the
  journals; every entry ends either not decayed at all (its plan never journaled: the next cycle decays it) or
  decayed exactly as an uninterrupted cycle decays it; never stamped or archived by the cycle without its decay;
  and nothing is lost.
- undo puts importance and updatedAt back with the stamp or the archive that carried them.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import textwrap
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, recover, run_cycle
from dreamkeeper.consolidation.journal import Journal, journal_dir
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.undo import undo_cycle
from dreamkeeper.consolidation.writes import Writes
from dreamkeeper.memory import ARCHIVED_BY_CYCLE, REVIEWED_HASH, MemoryStore
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation import kill_child
from tests.consolidation.corpus import BASE_TIME, Seed, entry_files, write_corpus
from tests.consolidation.kill_child import KILL_HOOKS
from tests.consolidation.test_crash_recovery import PROPOSAL, SEEDS, check_invariants

NOW = BASE_TIME + timedelta(days=60)  # every seed past its grace period: each one above the floor decays
FIELDS = ("importanceScore", "updatedAt")


def _settings() -> CycleSettings:
    return CycleSettings(min_interval_hours=0, exact_fold=False)


def _cycle(agent: Path, proposal: dict[str, Any] = PROPOSAL) -> Any:
    options = CycleOptions(agent_dir=agent, settings=_settings(), now=NOW)
    return asyncio.run(run_cycle(options, ScriptedProposer([proposal]))).report


def _files(agent: Path) -> dict[str, dict[str, Any]]:
    """Every entry file (seeds and successors) as JSON, by id."""
    return {p.stem: json.loads(p.read_bytes()) for p in sorted((agent / "memory").rglob("*.json"))}


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The seeds as one uninterrupted cycle leaves them."""
    agent = tmp_path_factory.mktemp("control")
    write_corpus(agent, SEEDS)
    report = _cycle(agent)
    assert report.decayed >= 2 and report.archived == 5 and report.saved == 2
    files = _files(agent)
    # Every seed above the decay floor decayed (n1 is at it), none down to the floor: values a test can tell apart.
    assert all(0.1 < files[s.id]["importanceScore"] < s.importance for s in SEEDS if s.id != "n1")
    return {s.id: files[s.id] for s in SEEDS}


def test_each_decayed_entry_the_plan_writes_is_written_once_with_its_decay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, control: dict[str, dict[str, Any]]
) -> None:
    from dreamkeeper.memory import store as store_module

    write_corpus(tmp_path, SEEDS)
    writes: dict[str, int] = {}
    replace = store_module.replace_file

    def counted(path: Path, *args: Any, **kwargs: Any) -> Any:
        writes[path.stem] = writes.get(path.stem, 0) + 1
        return replace(path, *args, **kwargs)

    monkeypatch.setattr(store_module, "replace_file", counted)
    _cycle(tmp_path)
    # m1, m2, c1, c2 merged (archived), n1 pruned, k1 stamped: one write each, decay included (main: two).
    assert {s.id: writes.get(s.id) for s in SEEDS} == {s.id: 1 for s in SEEDS}
    files = _files(tmp_path)
    for seed in SEEDS:
        assert {k: files[seed.id][k] for k in FIELDS} == {k: control[seed.id][k] for k in FIELDS}, seed.id


def test_a_cycle_stopped_before_apply_changes_nothing_and_the_next_decays_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, control: dict[str, dict[str, Any]]
) -> None:
    write_corpus(tmp_path, SEEDS)
    before = {p: p.read_bytes() for p in (tmp_path / "memory").rglob("*.json")}

    def stopped(self: Writes, *args: Any) -> Any:
        raise RuntimeError("stopped before apply")

    with monkeypatch.context() as patch:
        patch.setattr(Writes, "apply", stopped)
        with pytest.raises(RuntimeError, match="stopped before apply"):
            _cycle(tmp_path)
    assert {p: p.read_bytes() for p in (tmp_path / "memory").rglob("*.json")} == before  # nothing written
    assert not list(journal_dir(tmp_path).glob("*.jsonl"))  # nothing journaled: nothing to recover
    _cycle(tmp_path)
    files = _files(tmp_path)
    for seed in SEEDS:
        assert {k: files[seed.id][k] for k in FIELDS} == {k: control[seed.id][k] for k in FIELDS}, seed.id


CHILD = (
    textwrap.dedent(
        """
        import asyncio, json, os, signal, sys
        from datetime import timedelta
        from pathlib import Path
        from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
        from dreamkeeper.consolidation.settings import CycleSettings
        from dreamkeeper.proposers import ScriptedProposer
        from tests.consolidation.corpus import BASE_TIME

        agent, kill_at, phase, proposal = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4])
        """
    )
    + KILL_HOOKS
    + textwrap.dedent(
        """
        X.STAMP_BATCH = 2  # flushes inside the plan: kills land inside and between batches
        settings = CycleSettings(min_interval_hours=0, exact_fold=False)
        options = CycleOptions(agent_dir=agent, settings=settings, now=BASE_TIME + timedelta(days=60))
        asyncio.run(run_cycle(options, ScriptedProposer([proposal])))
        """
    )
)


def _run_child(agent: Path, kill_at: int, phase: str) -> int:
    return kill_child.run_child(CHILD, str(agent), str(kill_at), phase, json.dumps(PROPOSAL))


@pytest.mark.parametrize("phase", ["before", "after"])
def test_a_kill_at_any_step_of_apply_leaves_each_decay_whole_or_undone_and_recovery_finishes_it(
    tmp_path: Path, phase: str, control: dict[str, dict[str, Any]]
) -> None:
    probe = tmp_path / "probe"
    write_corpus(probe, SEEDS)
    assert _run_child(probe, 10_000, phase) == 0
    steps = sum(len(Journal.load(p).header.steps) for p in journal_dir(probe).glob("*.jsonl"))
    assert steps >= 8
    pristine = {s.id: _files(probe)[s.id] for s in SEEDS}
    shutil.rmtree(probe)
    for kill_at in range(steps):
        agent = tmp_path / f"{phase}-{kill_at}"
        write_corpus(agent, SEEDS)
        original = _files(agent)
        assert _run_child(agent, kill_at, phase) == -signal.SIGKILL, f"the child did not die at step {kill_at}"
        check_invariants(agent)  # nothing lost, even before recovery
        recover(agent, agent / "memory")
        check_invariants(agent)
        assert all(Journal.load(p).complete for p in journal_dir(agent).glob("*.jsonl"))
        assert recover(agent, agent / "memory") == []  # idempotent
        files = _files(agent)
        for seed in SEEDS:
            values = {k: files[seed.id][k] for k in FIELDS}
            decayed = {k: control[seed.id][k] for k in FIELDS}
            assert values in ({k: original[seed.id][k] for k in FIELDS}, decayed), (kill_at, seed.id, values)
            written = files[seed.id].get("metadata") or {}
            if REVIEWED_HASH in written or ARCHIVED_BY_CYCLE in written:
                assert values == decayed, (kill_at, seed.id)  # stamped or archived only with its decay
        # The next cycle decays whatever the killed one had not: the same values as one uninterrupted cycle.
        _cycle(agent, {"toSave": [], "toDelete": []})
        files = _files(agent)
        for seed in SEEDS:
            assert {k: files[seed.id][k] for k in FIELDS} == {k: control[seed.id][k] for k in FIELDS}
        assert entry_files(agent) >= {s.id for s in SEEDS}
    assert pristine  # the probe ran the whole cycle: its seeds are the control's
    assert {k: pristine["k1"][k] for k in FIELDS} == {k: control["k1"][k] for k in FIELDS}


def test_undo_puts_back_each_decay_with_the_stamp_or_archive_that_carried_it(
    tmp_path: Path, control: dict[str, dict[str, Any]]
) -> None:
    write_corpus(tmp_path, SEEDS)
    original = _files(tmp_path)
    report = _cycle(tmp_path)
    assert all(_files(tmp_path)[s.id]["importanceScore"] == control[s.id]["importanceScore"] for s in SEEDS)
    result = undo_cycle(tmp_path, tmp_path / "memory", report.cycle_id)
    assert not result.conflicts, result.details
    files = _files(tmp_path)
    store = MemoryStore(tmp_path / "memory")
    for seed in SEEDS:
        assert {k: files[seed.id][k] for k in FIELDS} == {k: original[seed.id][k] for k in FIELDS}, seed.id
        assert (files[seed.id].get("metadata") or {}).get(REVIEWED_HASH) == (
            original[seed.id].get("metadata") or {}
        ).get(REVIEWED_HASH)
        stored = store.get(seed.id)
        assert stored is not None and stored.entry.is_live  # every archive restored


def test_a_decay_of_the_entry_a_merge_is_folded_into_is_that_update_and_undo_puts_it_all_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A merge whose text is a live entry's is folded into that entry (an update step): its decay is the update's
    (one write; the step's ``before`` is the file as it was, undecayed), and undo puts every file back as it was."""
    from dreamkeeper.consolidation import executor as executor_module
    from dreamkeeper.memory import store as store_module

    text = "Rocky has a dog named Milo; Milo is a Sheltie."
    write_corpus(tmp_path, [*SEEDS, Seed("x1", text, "people")])
    original = _files(tmp_path)
    writes: dict[str, int] = {}

    def counting(replace: Any) -> Any:
        def counted(path: Path, *args: Any, **kwargs: Any) -> Any:
            writes[path.stem] = writes.get(path.stem, 0) + 1
            return replace(path, *args, **kwargs)

        return counted

    with monkeypatch.context() as patch:
        patch.setattr(store_module, "replace_file", counting(store_module.replace_file))  # stamps, archives
        patch.setattr(executor_module, "replace_file", counting(executor_module.replace_file))  # creates, updates
        report = _cycle(tmp_path, {"toSave": [{"content": text, "sourceIds": ["m1", "m2"]}], "toDelete": ["m1", "m2"]})
    assert report.archived >= 1, report  # m2 at least (m1 may be left to a later cycle: its text is in x1)
    journals = [Journal.load(p) for p in journal_dir(tmp_path).glob("*.jsonl")]
    steps = [s for j in journals for s in j.header.steps]
    updates = [s for s in steps if s.op == "update"]
    assert [s.id for s in updates] == ["x1"]
    assert updates[0].before is not None and updates[0].before["importanceScore"] == original["x1"]["importanceScore"]
    assert not [s for s in steps if s.op == "decay"]  # every seed is written by the plan: each decay carried
    ids = [*(seed.id for seed in SEEDS), "x1"]
    assert {i: writes.get(i) for i in ids} == dict.fromkeys(ids, 1)  # one write each, decay included
    result = undo_cycle(tmp_path, tmp_path / "memory", report.cycle_id)
    assert not result.conflicts, result.details
    files = _files(tmp_path)
    for entry_id in ids:
        assert {k: files[entry_id][k] for k in FIELDS} == {k: original[entry_id][k] for k in FIELDS}, entry_id
        assert files[entry_id]["content"] == original[entry_id]["content"]


def test_a_plan_held_by_the_cap_writes_its_decays_and_is_applied_when_approved(
    tmp_path: Path, control: dict[str, dict[str, Any]]
) -> None:
    """A held plan writes nothing else this cycle: its decays are written alone before the hold remembers the
    corpus, so that approving it finds the corpus unchanged (remembered before them, every decay would make it
    stale and discarded)."""
    write_corpus(tmp_path, SEEDS)
    settings = CycleSettings(min_interval_hours=0, exact_fold=False, archive_cap=0.1, archive_cap_min_entries=1)
    held = asyncio.run(
        run_cycle(CycleOptions(agent_dir=tmp_path, settings=settings, now=NOW), ScriptedProposer([PROPOSAL]))
    ).report
    assert held.held > 0 and held.archived == 0, held
    files = _files(tmp_path)
    for seed in SEEDS:  # decayed all the same, alone
        assert {k: files[seed.id][k] for k in FIELDS} == {k: control[seed.id][k] for k in FIELDS}, seed.id
    approved = asyncio.run(
        run_cycle(
            CycleOptions(agent_dir=tmp_path, settings=settings, now=NOW, approve_hold=held.cycle_id),
            ScriptedProposer([]),
        )
    ).report
    assert approved.archived == 5 and approved.saved == 2, approved.notes
    assert any("applied the plan held by" in note for note in approved.notes), approved.notes
