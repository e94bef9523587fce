"""The blast radius (consolidation/blast.py, issue 17): a plan taking more than 10% of the live corpus out waits
for a human, is applied on approval only if the corpus is unchanged, and a waiting plan costs no proposer call."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.pause import PAUSE_MARKER
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import REASON_EPHEMERAL, MemoryStore
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus

FACTS = [
    "Allen Conway works at Xebia", "Trish Roberts runs PWOP Productions", "the Berlin office moved to Kreuzberg",
    "Milo prefers morning standups", "the staging cluster runs Kubernetes 1.36", "Rose handles the Lisbon accounts",
    "invoices go out on the third Monday", "the VPN certificate expires in March", "Dana owns the billing service",
    "the Atlanta team ships on Thursdays",
]  # fmt: skip


def corpus(tmp_path: Path, n: int = 40) -> MemoryStore:
    return write_corpus(
        tmp_path, [Seed(f"e{i:02d}", f"Note {i}: {FACTS[i % len(FACTS)]} (ref {1000 + i}).") for i in range(n)]
    )


def pruner(ids: list[str]) -> ScriptedProposer:
    """A model that asks to prune these entries, whatever it is shown (each prune passes the safeguards alone)."""
    return ScriptedProposer(lambda batch, request: {"toSave": [], "toDelete": [i for i in ids if i in batch.ids]})


def cycle(agent_dir: Path, proposer: ScriptedProposer, **options: Any) -> CycleOutcome:
    settings = CycleSettings(min_interval_hours=0, **options.pop("settings", {}))
    run = CycleOptions(agent_dir=agent_dir, settings=settings, now=BASE_TIME, **options)
    return asyncio.run(run_cycle(run, proposer))


def live_ids(store: MemoryStore) -> set[str]:
    return {s.id for s in store.scan().live}


def pending(agent_dir: Path) -> dict[str, Any]:
    return dict(json.loads((agent_dir / ".dreamkeeper" / "holds" / "pending.json").read_text()))


STORM = [f"e{i:02d}" for i in range(12)]  # 12 of 40: 30%, the trial's hostile model took a quarter


def test_a_prune_storm_over_the_cap_is_held_and_nothing_is_archived(tmp_path: Path) -> None:
    store = corpus(tmp_path)
    before = live_ids(store)
    outcome = cycle(tmp_path, pruner(STORM))
    report = outcome.report
    assert report.result == "completed" and report.held == 12
    assert (report.archived, report.ephemeral, report.saved) == (0, 0, 0)
    assert live_ids(store) == before  # not one prune applied
    held = pending(tmp_path)
    assert held["cycle_id"] == report.cycle_id and sorted(held["prunes"]) == STORM
    assert (held["live"], held["drop"], held["cap"], held["outcome"]) == (40, 12, 0.1, None)
    assert set(held["corpus"]) == before
    assert any("held for approval" in note and report.cycle_id in note for note in report.notes)


def test_while_a_plan_waits_no_proposer_is_asked_again(tmp_path: Path) -> None:
    corpus(tmp_path)
    held = cycle(tmp_path, pruner(STORM)).report
    again = pruner(STORM)
    report = cycle(tmp_path, again).report
    assert report.result == "skipped" and again.requests == []
    assert report.skip_reason is not None and f"approve_hold={held.cycle_id}" in report.skip_reason


def test_an_approved_plan_is_applied_when_the_corpus_is_unchanged(tmp_path: Path) -> None:
    store = corpus(tmp_path)
    held = cycle(tmp_path, pruner(STORM)).report
    never = pruner(STORM)
    report = cycle(tmp_path, never, approve_hold=held.cycle_id).report
    assert never.requests == []  # the plan a human approved, not a new one
    assert (report.archived, report.ephemeral, report.held) == (12, 12, 0)
    for entry_id in STORM:
        stored = store.require(entry_id)
        assert stored.entry.archive_reason == REASON_EPHEMERAL  # archived, reversible, not deleted
    assert live_ids(store) == {f"e{i:02d}" for i in range(12, 40)}
    record = json.loads((tmp_path / ".dreamkeeper" / "holds" / f"{held.cycle_id}.json").read_text())
    assert record["outcome"] == "applied" and pending(tmp_path)["outcome"] == "applied"
    assert cycle(tmp_path, pruner([])).report.result == "completed"  # nothing waits any more


def test_a_plan_is_stale_once_the_corpus_changed_and_the_cycle_plans_afresh(tmp_path: Path) -> None:
    store = corpus(tmp_path)
    held = cycle(tmp_path, pruner(STORM)).report
    stored = store.require("e03")  # the agent rewrote one of the entries the plan would prune
    store.update(stored, stored.entry.evolve(content=stored.entry.content + " Confirmed again today."))
    fresh = pruner(STORM)
    report = cycle(tmp_path, fresh, approve_hold=held.cycle_id).report
    assert len(fresh.requests) == 1  # planned again over the corpus as it is now
    assert report.archived == 0 and report.held == 12  # the new plan is over the cap too: held again
    assert pending(tmp_path)["cycle_id"] == report.cycle_id != held.cycle_id
    stale = json.loads((tmp_path / ".dreamkeeper" / "holds" / f"{held.cycle_id}.json").read_text())
    assert stale["outcome"] == "stale"
    assert any("discarded: 1 entr(ies) changed" in note for note in report.notes)
    assert len(live_ids(store)) == 40


def test_under_the_cap_and_under_the_floor_plans_are_applied(tmp_path: Path) -> None:
    store = corpus(tmp_path / "big")
    report = cycle(tmp_path / "big", pruner(STORM[:4])).report  # 4 of 40: 10%, not over it
    assert (report.held, report.ephemeral) == (0, 4) and len(live_ids(store)) == 36
    small = corpus(tmp_path / "small", n=8)
    # 37%, but 3 entries: below the floor (8 entries hold each fact once: the prune census would keep them all)
    report = cycle(tmp_path / "small", pruner(["e00", "e01", "e02"]), settings={"prune_census": "off"}).report
    assert (report.held, report.ephemeral) == (0, 3) and len(live_ids(small)) == 5
    lenient = corpus(tmp_path / "lenient")
    report = cycle(tmp_path / "lenient", pruner(STORM), settings={"archive_cap": 0.5}).report
    assert (report.held, report.ephemeral) == (0, 12) and len(live_ids(lenient)) == 28


def test_a_dry_run_shows_the_hold_and_keeps_nothing(tmp_path: Path) -> None:
    corpus(tmp_path)
    report = cycle(tmp_path, pruner(STORM), dry_run=True).report
    assert report.held == 12 and report.ephemeral == 0
    assert not (tmp_path / ".dreamkeeper" / "holds").exists()


def test_the_agents_pause_marker_outranks_a_waiting_plan_and_the_approval_waits_for_its_removal(
    tmp_path: Path,
) -> None:
    """RockBot's audit pausing consolidation (memory-audit/consolidation-paused.json) means a person looks first:
    not even an approved plan is applied while the marker is there; the plan still waits, and is applied after."""
    store = corpus(tmp_path)
    held = cycle(tmp_path, pruner(STORM)).report
    marker = tmp_path / PAUSE_MARKER
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps({"reason": "live entries dropped", "pausedAt": "2026-09-04T04:00:00+00:00"}))
    paused = cycle(tmp_path, pruner(STORM), approve_hold=held.cycle_id).report
    assert (paused.result, paused.paused, paused.archived, paused.held) == ("skipped", 1, 0, 0)
    assert len(live_ids(store)) == 40
    assert pending(tmp_path)["cycle_id"] == held.cycle_id and pending(tmp_path)["outcome"] is None
    marker.unlink()
    applied = cycle(tmp_path, pruner([]), approve_hold=held.cycle_id).report
    assert (applied.result, applied.ephemeral, applied.paused) == ("completed", 12, 0)
    assert pending(tmp_path)["outcome"] == "applied"


def test_a_held_plan_of_a_large_corpus_is_read_back(tmp_path: Path) -> None:
    """Issue 27: a held plan names every live entry with its file's hash, so at 100,000 entries it is ~17 MB; read
    under the 16 MiB small-state bound it wedged every later cycle with a StateFileError."""
    from datetime import UTC, datetime

    from dreamkeeper.consolidation.blast import HeldPlan, keep, read_pending
    from dreamkeeper.memory import SMALL_STATE_LIMIT

    corpus = {f"{i:012x}": f"{i:064x}" for i in range(200_000)}
    held = HeldPlan(
        cycle_id="c1", held_at=datetime(2026, 1, 1, tzinfo=UTC), live=200_000, drop=0, cap=0.1, corpus=corpus
    )
    path = keep(tmp_path, held)
    assert path.stat().st_size > SMALL_STATE_LIMIT  # the case that failed
    back = read_pending(tmp_path)
    assert back is not None
    assert back.corpus == corpus
