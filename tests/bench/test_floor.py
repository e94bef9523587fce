"""The floor bench (bench/floor.py): its writers make exactly the files the cycle made, and its end-to-end run
reports what it says it does (no timing assertions: the figures live in bench/results/)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from bench.floor import MODES, TreeDiff, _is_entry_file, files_of, main, stat_walk, tree_diff, write_floor
from bench.scale import child_cycle
from bench.sim.world import write_synthetic_corpus


def entry_files(root: Path) -> dict[str, bytes]:
    return {k: v for k, v in files_of(root).items() if _is_entry_file(k)}


@pytest.fixture(scope="module")
def cycled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, TreeDiff]:
    """A pristine 60-entry corpus, a copy after one applied cold cycle, and the diff between them."""
    root = tmp_path_factory.mktemp("floor")
    pristine, agent = root / "pristine", root / "agent"
    write_synthetic_corpus(pristine / "memory", 60, 7)
    shutil.copytree(pristine, agent, symlinks=True)
    child_cycle(agent, apply=True)
    return pristine, agent, tree_diff(files_of(pristine), files_of(agent))


def test_the_diff_names_the_cycle_s_writes_and_keeps_its_state_apart(cycled: tuple[Path, Path, TreeDiff]) -> None:
    pristine, agent, diff = cycled
    before, after = entry_files(pristine), entry_files(agent)
    assert diff.changed > 0 and diff.created > 0  # decay rewrote entries; merges created successors
    assert diff.changed == sum(1 for k in diff.writes if k in before)
    assert diff.created == sum(1 for k in diff.writes if k not in before)
    assert all(after[k] == v for k, v in diff.writes.items())
    assert all(_is_entry_file(k) for k in diff.writes) and not any("/." in k for k in diff.writes)
    assert diff.state_files > 0  # the journal, the report, the corpus index ... counted, never floor-written
    assert diff.summary()["entryBytesWritten"] == sum(len(v) for v in diff.writes.values())


@pytest.mark.parametrize("mode", MODES)
def test_each_floor_writer_leaves_the_entry_files_byte_identical_to_the_cycle_s(
    cycled: tuple[Path, Path, TreeDiff], tmp_path: Path, mode: str
) -> None:
    pristine, agent, diff = cycled
    target = tmp_path / "target"
    shutil.copytree(pristine, target, symlinks=True)
    assert entry_files(target) != entry_files(agent)
    run = write_floor(target, diff, mode)
    assert entry_files(target) == entry_files(agent)  # the proof that the floor writes what the cycle wrote
    assert run["files"] == len(diff.writes) + len(diff.removed)
    assert (run["directoriesSynced"] > 0) == (mode != "nofsync")
    assert not [p for p in target.rglob(".*.floor")]  # no temp left behind


def test_a_removed_entry_file_is_removed_by_the_floor_writer(tmp_path: Path) -> None:
    root = tmp_path / "tree"
    write_synthetic_corpus(root / "memory", 10, 3)
    before = files_of(root)
    gone = sorted(k for k in before if _is_entry_file(k))[0]
    after = {k: v for k, v in before.items() if k != gone}
    diff = tree_diff(before, after)
    assert diff.removed == [gone] and not diff.writes
    write_floor(root, diff, "posix")
    assert files_of(root) == after


def test_the_stat_walk_counts_every_entry_file_and_nothing_hidden(cycled: tuple[Path, Path, TreeDiff]) -> None:
    _, agent, _ = cycled
    hidden = agent / "memory" / ".embeddings"
    hidden.mkdir(exist_ok=True)
    (hidden / "x.json").write_text("{}")
    assert stat_walk(agent / "memory")["files"] == len(entry_files(agent))


def test_the_bench_end_to_end_reports_both_phases_with_their_ratios(tmp_path: Path) -> None:
    out = tmp_path / "results"
    assert main(["--sizes", "120", "--repeat", "1", "--workdir", str(tmp_path), "--out", str(out), "--name", "f"]) == 0
    result = json.loads((out / "f.json").read_text())
    (row,) = result["sizes"]
    read = row["readCpuSeconds"]
    assert row["size"] == 120 and read > 0
    for phase in ("cold", "steady"):
        part = row[phase]
        assert part["cycleCpuSeconds"] > 0
        # The ratio is of the unrounded seconds, each recorded to the millisecond: a 120-entry read takes a few (since
        # the benches' children run one BLAS thread, no longer ~0.1 s of a spinning worker's), so rounding alone moves
        # the quotient of the recorded values by several percent; the ratio must lie within what rounding allows.
        cycle, half = part["cycleCpuSeconds"], 0.0005
        assert (cycle - half) / (read + half) - half <= part["cycleOverRead"] <= (cycle + half) / (read - half) + half
        assert set(part["floor"]) == set(MODES)
        assert part["entryFilesChanged"] > 0  # decay writes on a cold start and on every later cycle
    assert row["steady"]["statWalk"]["files"] >= 120
    assert result["command"].startswith("python -m bench floor --sizes 120")
    assert "| 120 cold |" in (out / "f.md").read_text() and "| 120 steady |" in (out / "f.md").read_text()
