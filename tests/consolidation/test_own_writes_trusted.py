"""A cycle does not read back the files it just wrote (issue 27: "the report built from what the stages returned").

The report's final-state check and the fold's snapshot take the entry a create, update or archive of this cycle
wrote while the file's size and mtime are still that write's (``Writes._own``, ``final_state.own_version``); a file
changed since is read as before, and a file whose size and mtime match both the snapshot's version and ours is read
too. What it concludes is what reading every file concludes (docs/architecture.md, "The final-state check")."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, FinalState, Writes, run_cycle
from dreamkeeper.consolidation.final_state import own_version, write_stat
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import Fingerprint, MemoryStore, StoredEntry
from dreamkeeper.memory.entry import CREATED_BY_CYCLE, Entry
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus

pytestmark = pytest.mark.usefixtures("corpus_index_mode")

SEEDS = [
    Seed("s1", "Allen Conway works at Xebia."),
    Seed("s2", "Allen Conway works at Xebia."),  # an exact duplicate: folded (an update and an archive)
    Seed("n1", "Trish prefers concise notes about Kubernetes 1.36."),
    Seed("d1", "Marta Quist joined Initech in 2021."),
    Seed("d2", "Marta Quist works at Initech."),
]
NOTHING: dict[str, list[Any]] = {"toSave": [], "toDelete": []}
MERGE = {"toSave": [{"content": "Marta Quist joined Initech in 2021.", "sourceIds": ["d1", "d2"]}], "toDelete": []}


def cycle(agent_dir: Path, proposer: ScriptedProposer) -> CycleOutcome:
    options = CycleOptions(agent_dir=agent_dir, settings=CycleSettings(min_interval_hours=0), now=BASE_TIME)
    return asyncio.run(run_cycle(options, proposer))


class Watch:
    """The cycle's ``Writes``, the files read back during its final-state check, and the final states it built."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, before_final: Any = None) -> None:
        self.writes: Writes | None = None
        self.finals: list[FinalState] = []
        self.read: list[str] = []
        self._checking = False
        original_final, original_read = Writes._final_state, MemoryStore.read_file
        watch = self

        def final_state(self: Writes, snapshot: Any, **how: bool) -> FinalState:
            if watch.writes is None:
                watch.writes = self
                if before_final is not None:
                    before_final(self)
            watch._checking = True
            try:
                final = original_final(self, snapshot, **how)
            finally:
                watch._checking = False
            watch.finals.append(final)
            return final

        def read_file(self: MemoryStore, path: Path) -> Any:
            if watch._checking:
                watch.read.append(str(path))
            return original_read(self, path)

        monkeypatch.setattr(Writes, "_final_state", final_state)
        monkeypatch.setattr(MemoryStore, "read_file", read_file)


def as_read(root: Path) -> dict[str, tuple[str, bool, dict[str, str] | None]]:
    """Every entry as a fresh scan parses it: id -> (content, live, metadata)."""
    return {s.id: (s.entry.content, s.entry.is_live, s.entry.metadata) for s in MemoryStore(root).scan().entries}


def test_the_final_state_takes_what_the_cycle_wrote_and_concludes_what_a_full_read_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = write_corpus(tmp_path, SEEDS)
    watch = Watch(monkeypatch)
    # Each executor's made entries, checked the moment it has run against a parse of what is on disk then: the
    # fold's survivor update (later stamped over), its copy's archive, the merge's create and archives.
    note_own, checked = Writes._note_own, []

    def check_made(self: Writes, executor: Any) -> None:
        for name, made in executor.made.items():
            parsed = MemoryStore(store.root).read_file(Path(name))
            assert isinstance(parsed, StoredEntry)
            assert (made.entry, made.fingerprint, made.path) == (parsed.entry, parsed.fingerprint, parsed.path)
            checked.append(Path(name).stem)
        note_own(self, executor)

    monkeypatch.setattr(Writes, "_note_own", check_made)
    outcome = cycle(tmp_path, ScriptedProposer([MERGE]))
    assert outcome.report.result == "completed" and outcome.report.specifics_lost == 0
    assert {"s1", "s2", "d1", "d2"} <= set(checked) and len(checked) == 5  # and the successor
    assert outcome.report.folded == 1 and outcome.report.archived == 3  # s2 folded; d1, d2 merged
    writes = watch.writes
    assert writes is not None
    made = {name for name, record in writes._own.items() if isinstance(record, StoredEntry)}
    # The successor created and three sources archived: none of them read back. The fold's survivor was updated,
    # then stamped reviewed by apply: its newest write is the stamp (the snapshot's parse stands for it).
    created = [name for name in made if writes._own[name].entry.meta(CREATED_BY_CYCLE)]  # type: ignore[union-attr]
    assert len(created) == 1 and {Path(name).stem for name in made} == {"s2", "d1", "d2", Path(created[0]).stem}
    assert not made & set(watch.read)
    survivor = str(store.require("s1").path)
    assert isinstance(writes._own[survivor], tuple) and survivor not in watch.read
    final = watch.finals[-1]
    disk = as_read(store.root)
    assert final.ids == set(disk)
    assert final.live == {i: content for i, (content, live, _) in disk.items() if live}
    assert final.archived == sum(1 for _, live, _ in disk.values() if not live)
    for entry_id, stored in final.entries.items():
        if str(stored.path) in made:  # the entry written is the entry a parse of its bytes gives, field for field
            assert stored.entry == MemoryStore(store.root).read_file(stored.path).entry  # type: ignore[union-attr]
            assert stored.fingerprint == MemoryStore(store.root).read_file(stored.path).fingerprint  # type: ignore[union-attr]
            assert (stored.entry.content, stored.entry.is_live, stored.entry.metadata) == disk[entry_id]


def test_a_file_the_agent_rewrote_after_the_cycle_wrote_it_is_read_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_corpus(tmp_path, SEEDS)
    successor: list[Path] = []

    def agent_edits_the_successor(writes: Writes) -> None:
        (name,) = [n for n, r in writes._own.items() if isinstance(r, StoredEntry) and r.entry.meta(CREATED_BY_CYCLE)]
        path = Path(name)
        text = path.read_text(encoding="utf-8")
        assert "in 2021." in text
        path.write_text(text.replace("in 2021.", "in March 2021, in Leeds."), encoding="utf-8")  # in place
        successor.append(path)

    watch = Watch(monkeypatch, agent_edits_the_successor)
    outcome = cycle(tmp_path, ScriptedProposer([MERGE]))
    assert outcome.report.result == "completed" and outcome.report.specifics_lost == 0
    (path,) = successor
    assert str(path) in watch.read  # its size is no longer the write's: read, not taken
    final = watch.finals[-1]
    assert any("in Leeds" in text for text in final.live.values())
    assert final.live == {i: c for i, (c, live, _) in as_read(tmp_path / "memory").items() if live}


def _stored(content: str, size: int, mtime_ns: int) -> StoredEntry:
    entry = Entry(id="e1", content=content, created_at=BASE_TIME)
    return StoredEntry(entry, Path("/m/e1.json"), Fingerprint("0" * 64, size, mtime_ns))


def _stat(size: int, mtime_ns: int, mode: int = 0o100644) -> os.stat_result:
    return os.stat_result((mode, 1, 1, 1, 0, 0, size, 0, 0, 0, 0, 0, mtime_ns, mtime_ns, mtime_ns))


def test_own_version_takes_a_version_only_when_size_and_mtime_name_exactly_one() -> None:
    seen = _stored("before", 10, 1_000)
    ours = _stored("archived by us", 20, 2_000)
    made = ours
    stamp = write_stat(ours.fingerprint)  # what the check keeps of a stamp's or a decay's write
    assert stamp == (20, 2_000)
    assert own_version(_stat(10, 1_000), seen, seen.fingerprint, made) is seen  # unchanged since the snapshot
    assert own_version(_stat(20, 2_000), seen, seen.fingerprint, made) is ours  # still what we wrote
    assert own_version(_stat(20, 2_000), None, None, made) is ours  # a file we created
    assert own_version(_stat(20, 2_001), seen, seen.fingerprint, made) is None  # changed since: read
    assert own_version(_stat(21, 2_000), None, None, made) is None
    assert own_version(_stat(20, 2_000), seen, seen.fingerprint, stamp) is seen  # a stamp: the snapshot's parse
    assert own_version(_stat(20, 2_000), None, None, stamp) is None  # a stamp of a file the snapshot lacks: read
    assert own_version(_stat(10, 1_000), seen, seen.fingerprint, None) is seen
    assert own_version(_stat(11, 1_000), seen, seen.fingerprint, None) is None
    # Two versions with one size and one mtime (two writes in one clock tick): which is there is unknown: read.
    twin = StoredEntry(_stored("archived by us", 10, 1_000).entry, Path("/m/e1.json"), Fingerprint("1" * 64, 10, 1_000))
    assert own_version(_stat(10, 1_000), seen, seen.fingerprint, twin) is None
    assert own_version(_stat(10, 1_000), seen, seen.fingerprint, write_stat(twin.fingerprint)) is seen  # no count
    assert own_version(_stat(20, 2_000, 0o120777), None, None, made) is None  # a symlink in its place: read (refused)
    # The snapshot already holds this cycle's write (the fold's, read back into the later stages' snapshot).
    assert own_version(_stat(20, 2_000), ours, ours.fingerprint, made) is ours


def test_the_race_a_stat_cannot_see_miscounts_at_most_and_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An agent's same-size rewrite in the clock tick of our write (forced here: its mtime put back with utime) is the
    one change size and mtime cannot see. This cycle's final state takes what we wrote; the agent's bytes stay on
    disk untouched, and the next cycle reads them (the corpus index forgets every file a cycle wrote)."""
    write_corpus(tmp_path, SEEDS)
    rewritten: list[tuple[Path, str]] = []

    def same_size_same_tick(writes: Writes) -> None:
        (name,) = [n for n, r in writes._own.items() if isinstance(r, StoredEntry) and r.entry.meta(CREATED_BY_CYCLE)]
        path = Path(name)
        st = os.lstat(path)
        text = path.read_text(encoding="utf-8")
        agent = text.replace("Marta Quist", "Marta Qvist")  # same length, in place
        assert len(agent.encode()) == st.st_size and agent != text
        with open(path, "r+", encoding="utf-8") as handle:
            handle.write(agent)
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        rewritten.append((path, agent))

    watch = Watch(monkeypatch, same_size_same_tick)
    outcome = cycle(tmp_path, ScriptedProposer([MERGE]))
    assert outcome.report.result == "completed"
    (path, agent) = rewritten[0]
    assert str(path) not in watch.read  # taken as ours: the documented blind spot
    assert path.read_text(encoding="utf-8") == agent  # nothing of ours went over the agent's version
    monkeypatch.undo()
    again = Watch(monkeypatch)
    second = cycle(tmp_path, ScriptedProposer([NOTHING]))
    assert second.report.result == "completed"
    # The next cycle works from the agent's text: its final state holds it, and so does the file.
    assert any("Marta Qvist" in text for text in again.finals[-1].live.values())
    assert "Marta Qvist" in path.read_text(encoding="utf-8")
