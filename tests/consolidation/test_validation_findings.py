"""Whole cycles for #18's validation findings, with scripted replies: invented ids decide nothing and back off
(finding 5), the census covers prunes (finding 6), inventive merges are rejected or repaired (finding 7), and a
cycle whose every reply was unusable is proposer-failed (item 3)."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from dreamkeeper.consolidation.backoff import held_until
from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, run_cycle
from dreamkeeper.consolidation.proposal import Batch, BatchReply, ProposalRequest
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.memory import MemoryStore
from dreamkeeper.memory.entry import DECLINED_CLUSTER, REVIEWED_HASH, UNUSABLE_AT, UNUSABLE_COUNT, UNUSABLE_HASH
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import ASK_EVERY_CLUSTER, BASE_TIME, Seed, write_corpus

TOMASZ_1 = "Met Tomasz Whitfield on 2026-04-19 about the Tailspin renewal; tomasz.whitfield@tailspin.example."
TOMASZ_2 = "Met Tomasz Whitfield on 2026-04-19 about the Tailspin renewal (tomasz.whitfield@tailspin.example)."
PAIR = [Seed("t1", TOMASZ_1, "people/tomasz", 0.39), Seed("t2", TOMASZ_2, "people/tomasz", 0.38)]


def cycle(agent_dir: Path, proposer: ScriptedProposer, now: datetime = BASE_TIME, **settings: Any) -> CycleOutcome:
    options = CycleOptions(
        agent_dir=agent_dir, settings=CycleSettings(min_interval_hours=0, **ASK_EVERY_CLUSTER, **settings), now=now
    )
    return asyncio.run(run_cycle(options, proposer))


def live(store: MemoryStore) -> set[str]:
    return {s.id for s in store.scan().live}


def offered(proposer: ScriptedProposer) -> list[set[str]]:
    return [{o.entry.id for b in r.batches for o in b.entries} for r in proposer.requests]


# ---- finding 5: invented ids ----------------------------------------------------------------------------------


def placeholder(_batch: Batch, _request: ProposalRequest) -> dict[str, Any]:
    return {"toDelete": [], "toSave": [{"content": "...", "category": "...", "sourceIds": ["<id>"]}]}


def test_finding5_invented_ids_stamp_no_decline_and_repeated_unusable_replies_back_off(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, PAIR)
    first = ScriptedProposer(placeholder)
    outcome = cycle(tmp_path, first)
    report = outcome.report
    assert (report.result, report.invented_replies, report.declined, report.backed_off) == ("proposer-failed", 1, 0, 2)
    for stored in store.scan().live:
        assert stored.entry.meta(REVIEWED_HASH) is None and stored.entry.meta(DECLINED_CLUSTER) is None
        assert stored.entry.meta(UNUSABLE_COUNT) == "1"
    # The first unusable reply is retried next cycle; the second starts the back-off (1 day, then 2, ...).
    second = ScriptedProposer(placeholder)
    cycle(tmp_path, second, BASE_TIME + timedelta(hours=12))
    assert offered(second) == [{"t1", "t2"}]
    t1 = store.require("t1")
    assert t1.entry.meta(UNUSABLE_COUNT) == "2"
    assert held_until(t1, CycleSettings()) == BASE_TIME + timedelta(hours=12, days=1)
    held = ScriptedProposer(placeholder)
    quiet = cycle(tmp_path, held, BASE_TIME + timedelta(hours=24))
    assert held.requests == [] and (quiet.report.backoff_held, quiet.report.result) == (2, "completed")  # nothing asked
    third = ScriptedProposer(placeholder)
    cycle(tmp_path, third, BASE_TIME + timedelta(hours=37))  # the day is over: offered again, then 2 days
    assert offered(third) == [{"t1", "t2"}]
    assert held_until(store.require("t1"), CycleSettings()) == BASE_TIME + timedelta(hours=37, days=2)


def test_a_usable_reply_or_a_changed_content_ends_the_backoff(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, PAIR)
    for hours in (0, 12):
        cycle(tmp_path, ScriptedProposer(placeholder), BASE_TIME + timedelta(hours=hours))
    assert held_until(store.require("t1"), CycleSettings()) is not None
    # The agent rewrites t2: its stamp no longer matches, so it (and its cluster) is offered at once.
    changed = store.require("t2").entry.evolve(content=TOMASZ_2.replace("(", ": ").replace(").", "!"))
    store.rewrite(store.require("t2"), changed)
    answer = ScriptedProposer([{"toDelete": [], "toSave": []}])
    outcome = cycle(tmp_path, answer, BASE_TIME + timedelta(hours=14))
    assert offered(answer) == [{"t1", "t2"}] and outcome.report.result == "completed"
    for stored in store.scan().live:  # reviewed now, and the back-off keys are gone
        metadata = stored.entry.metadata or {}
        assert stored.entry.meta(REVIEWED_HASH) is not None
        assert not {UNUSABLE_HASH, UNUSABLE_AT, UNUSABLE_COUNT} & set(metadata)


class EndpointDown(ScriptedProposer):
    """Every request fails (the proposer's "request" fault): the model never saw the entries."""

    async def propose(self, request: ProposalRequest) -> list[BatchReply]:
        self.requests.append(request)
        return [BatchReply(b.index, None, "HTTP 502: bad gateway", fault="request") for b in request.batches]


def test_a_failed_request_stamps_no_backoff(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, PAIR)
    for hours in (0, 12, 24):
        down = EndpointDown([])
        outcome = cycle(tmp_path, down, BASE_TIME + timedelta(hours=hours))
        assert outcome.report.result == "proposer-failed" and outcome.report.batches_failed == 1
        assert offered(down) == [{"t1", "t2"}]  # offered again every cycle: nothing held
    for stored in store.scan().live:
        assert stored.entry.metadata is None  # no review, no back-off stamp


def test_nothing_eligible_asks_nothing_and_is_completed(tmp_path: Path) -> None:
    write_corpus(tmp_path, PAIR)
    cycle(tmp_path, ScriptedProposer([{"toDelete": [], "toSave": []}]))
    idle = ScriptedProposer(placeholder)
    outcome = cycle(tmp_path, idle, BASE_TIME + timedelta(hours=1))
    assert idle.requests == [] and outcome.report.result == "completed"
    assert (outcome.report.batches_usable, outcome.report.batches_unusable, outcome.report.batches_failed) == (0, 0, 0)


# ---- finding 6: the census covers prunes ------------------------------------------------------------------------


def test_finding6_pruning_both_entries_about_a_person_keeps_one(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, [*PAIR, Seed("other", "The Q3 plan is on track.", "project-context")])
    outcome = cycle(tmp_path, ScriptedProposer([{"toDelete": ["t1", "t2"], "toSave": []}]))
    report = outcome.report
    assert report.prunes_refused == 1 and report.ephemeral == 1
    (kept,) = live(store) & {"t1", "t2"}
    assert "Tomasz" in store.require(kept).entry.content and report.specifics_lost == 0
    (refusal,) = report.protections
    assert refusal.id == kept and {"Tomasz", "Whitfield", "tomasz.whitfield@tailspin.example"} <= set(refusal.census)
    assert store.require(kept).entry.meta(REVIEWED_HASH) is not None  # a decision: reviewed, not offered again


def test_finding6_the_prune_census_can_be_switched_off(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, PAIR)
    outcome = cycle(tmp_path, ScriptedProposer([{"toDelete": ["t1", "t2"], "toSave": []}]), prune_census="off")
    assert outcome.report.ephemeral == 2 and outcome.report.prunes_refused == 0
    assert outcome.report.ephemeral_specifics > 0 and live(store) == set()
    assert {s.id for s in store.scan().archived} == {"t1", "t2"}  # archived, restorable


# ---- finding 7: inventive merges ----------------------------------------------------------------------------------

INVENTIVE = TOMASZ_1 + " Contact John Smith at johnsmc_johnsales.com (2017-03-04)."


def merge_of(content: str) -> dict[str, Any]:
    return {"toDelete": [], "toSave": [{"content": content, "sourceIds": ["t1", "t2"], "category": "people/tomasz"}]}


def test_finding7_an_inventive_merge_is_rejected_after_one_repair(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, PAIR)
    proposer = ScriptedProposer([merge_of(INVENTIVE)], repair=[INVENTIVE])
    outcome = cycle(tmp_path, proposer)
    report = outcome.report
    assert (report.saved, report.rejected, report.invented, report.repaired) == (0, 1, 1, 0)
    (rejection,) = report.rejections
    assert rejection.missing == [] and rejection.invented == ["2017-03-04", "John", "johnsmc_johnsales.com", "Smith"]
    (repair,) = proposer.repairs
    assert repair.missing == [] and repair.invented == rejection.invented
    assert live(store) == {"t1", "t2"}


def test_finding7_a_repair_that_removes_the_invention_is_saved(tmp_path: Path) -> None:
    store = write_corpus(tmp_path, PAIR)
    outcome = cycle(tmp_path, ScriptedProposer([merge_of(INVENTIVE)], repair=[TOMASZ_2]))
    assert (outcome.report.saved, outcome.report.repaired, outcome.report.invented) == (1, 1, 0)
    assert live(store) - {"t1", "t2"} and not live(store) & {"t1", "t2"}


def test_a_merge_that_opens_its_sentence_differently_is_saved(tmp_path: Path) -> None:
    write_corpus(tmp_path, PAIR)
    merged = "Tomasz Whitfield (tomasz.whitfield@tailspin.example): renewal meeting about Tailspin on April 19, 2026."
    outcome = cycle(tmp_path, ScriptedProposer([merge_of(merged)]))
    assert (outcome.report.saved, outcome.report.rejected) == (1, 0), outcome.report.rejections
