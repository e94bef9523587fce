"""A merge whose text equals a live entry's folds into that entry at once (issue 15 item 7; RockBot #580, its exact
rule in rockbot-source.md §8; its own vectors in tests/parity/test_parity_fold.py). Here: what dreamkeeper adds
around it — journaled, undoable, never a second live copy, and the target never lost in the same reply."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from dreamkeeper.consolidation.cycle import CycleOptions, run_cycle
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.undo import undo_cycle
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory.entry import DECLINED_CLUSTER, MERGED_FROM
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import ROCKBOT_SHAPE
from tests.parity import rockbot_files

NOW = rockbot_files.datetime(2026, 9, 14, 6, 0, tzinfo=rockbot_files.UTC)
TARGET = "The staging cluster runs a nightly backup at 02:30 and keeps 14 snapshots."


def corpus(root: Path) -> None:
    entries = [
        ("target", TARGET, 40, 5),
        ("s1", "The staging cluster runs a nightly backup at 02:30.", 5, 1),
        ("s2", "The staging cluster keeps 14 snapshots.", 3, 1),
        ("s3", "Nightly backup at 02:30 on the staging cluster; 14 snapshots kept.", 2, 1),
    ]
    for entry_id, content, age, reinforcement in entries:
        rockbot_files.write(
            root,
            rockbot_files.entry(
                entry_id,
                content,
                category="project/infrastructure",
                createdAt=NOW - timedelta(days=age),
                reinforcementCount=reinforcement,
            ),
        )


def merge(*ids: str, content: str = TARGET) -> dict[str, Any]:
    return {"content": content, "category": "project/infrastructure", "sourceIds": list(ids)}


def run(agent: Path, reply: dict[str, Any]) -> Any:
    options = CycleOptions(agent_dir=agent, settings=CycleSettings(min_interval_hours=0, **ROCKBOT_SHAPE), now=NOW)
    return asyncio.run(run_cycle(options, ScriptedProposer([reply]))).report


def test_two_merges_into_one_entry_add_up_and_the_prune_of_it_is_ignored(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    corpus(root)
    report = run(tmp_path, {"toSave": [merge("s1", "s2"), merge("s3")], "toDelete": ["target", "s1", "s2", "s3"]})
    store = MemoryStore(root)
    assert [s.id for s in store.scan().live] == ["target"]
    target = store.require("target").entry
    assert target.content == TARGET and target.reinforcement_count == 5 + 2 + 1
    assert target.meta(MERGED_FROM) == "s1,s2,s3"
    assert (report.saved, report.merged_into_existing, report.archived, report.ephemeral) == (1, 1, 3, 0)
    assert target.meta(DECLINED_CLUSTER) is None  # something was merged into it: its cluster is not declined


def test_a_later_merge_naming_the_target_as_a_source_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    corpus(root)
    later = merge("target", "s3", content=TARGET + " Nightly backup at 02:30; 14 snapshots kept.")
    report = run(tmp_path, {"toSave": [merge("s1", "s2"), later], "toDelete": []})
    assert report.rejected == 1 and "already merged this cycle" in report.rejections[0].reason
    assert MemoryStore(root).require("target").entry.is_live


def test_undo_puts_the_target_back_and_restores_its_sources(tmp_path: Path) -> None:
    root = tmp_path / "memory"
    corpus(root)
    before = {p.name: json.loads(p.read_text()) for p in root.rglob("*.json")}
    report = run(tmp_path, {"toSave": [merge("s1", "s2")], "toDelete": []})
    result = undo_cycle(tmp_path, root, report.cycle_id)
    # One revert: the merge folded into it carries its decay (40 days old) in the same update, whose "before" is the
    # file as it was (docs/architecture.md, "Decay carried into the cycle's write"); main reverted both apart.
    assert result.reverted == ["target"]
    assert sorted(result.restored) == ["s1", "s2"] and result.conflicts == []
    after = {p.name: json.loads(p.read_text()) for p in root.rglob("*.json")}
    assert after["target.json"] == before["target.json"]
    for name in ("s1.json", "s2.json"):
        assert after[name]["archivedAt"] is None and after[name]["content"] == before[name]["content"]


def test_a_held_plan_folding_a_merge_into_an_entry_is_applied_as_that_fold(tmp_path: Path) -> None:
    # The blast radius kept such a merge as a plain create of the successor: approving the hold wrote a second file
    # with the target's id instead of rewriting the target (found with subsumption, whose merges are all folds).
    root = tmp_path / "memory"
    corpus(root)
    settings = CycleSettings(min_interval_hours=0, **ROCKBOT_SHAPE, archive_cap=0.2, archive_cap_min_entries=1)
    reply = {"toSave": [merge("s1", "s2")], "toDelete": []}
    held = asyncio.run(run_cycle(CycleOptions(tmp_path, settings, now=NOW), ScriptedProposer([reply]))).report
    assert (held.held, held.archived) == (2, 0)  # 2 of 4 would leave (the target stays): over the 20% cap
    approval = CycleOptions(tmp_path, settings, now=NOW + timedelta(minutes=1), force=True, approve_hold=held.cycle_id)
    applied = asyncio.run(run_cycle(approval, ScriptedProposer([]))).report
    assert (applied.saved, applied.merged_into_existing, applied.archived, applied.hard_deletes) == (1, 1, 2, 0)
    store = MemoryStore(root)
    assert sorted(s.id for s in store.scan().live) == ["s3", "target"]
    assert len(list(root.rglob("target.json"))) == 1
    target = store.require("target").entry
    assert target.content == TARGET and target.meta(MERGED_FROM) == "s1,s2" and target.reinforcement_count == 7
