"""The end-of-run invariant (issue 22, Build 1), case by case: what departs, what is charged to the run, what is
excused (the agent's own changes, documented ephemeral prunes), when a merged-into chain reaches a live entry."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dreamkeeper.consolidation.invariant import Census, departures, judge, tags_in
from dreamkeeper.consolidation.invariant import by_id as invariant_by_id
from dreamkeeper.coverage import DEFAULT_VOCABULARY, Inventory, merged_inventory
from dreamkeeper.coverage.check import clear_inventory_memo
from dreamkeeper.memory import (
    ARCHIVED_BY_CYCLE,
    MERGED_FROM,
    REASON_EPHEMERAL,
    REASON_MERGED_INTO,
    REASON_STALE_WRITE_BACK,
    Entry,
    StoredEntry,
)
from dreamkeeper.memory.atomic import Fingerprint

T = datetime(2026, 6, 1, tzinfo=UTC)
RUN = "20260601T000000Z-aaaaaa"
OURS = tags_in({RUN, RUN + "-writeback", "undo-" + RUN})


def live(entry_id: str, content: str, **meta: str) -> StoredEntry:
    entry = Entry(id=entry_id, content=content, created_at=T, updated_at=T, metadata=dict(meta) or None)
    return StoredEntry(entry, Path(f"/m/{entry_id}.json"), Fingerprint(entry_id, 1, 1))


def archived(stored: StoredEntry, reason: str, tag: str | None = RUN) -> StoredEntry:
    entry = stored.entry.evolve(archived_at=T, archive_reason=reason)
    if tag is not None:
        entry = entry.with_meta(**{ARCHIVED_BY_CYCLE: tag})
    return StoredEntry(entry, stored.path, Fingerprint(stored.id + "-a", 2, 2))


def by_id(*entries: StoredEntry) -> dict[str, StoredEntry]:
    return {s.id: s for s in entries}


A = live("a", "Allen Conway works at Xebia.")
B = live("b", "Allen Conway lives in Austin.")
M = live("m", "Allen Conway works at Xebia and lives in Austin.")


def test_nothing_departed_costs_nothing() -> None:
    verdict = judge(Census.of([A, B]), by_id(A, B), OURS, DEFAULT_VOCABULARY, index=_never)
    assert verdict.clean and verdict.departed == 0


def _never() -> object:
    raise AssertionError("no index may be built when nothing needs one")


def test_a_merge_whose_successor_carries_everything_needs_no_index() -> None:
    after = by_id(archived(A, REASON_MERGED_INTO + "m"), archived(B, REASON_MERGED_INTO + "m"), M)
    verdict = judge(Census.of([A, B]), after, OURS, DEFAULT_VOCABULARY, index=_never)  # type: ignore[arg-type]
    assert verdict.clean and verdict.ours == 2


def test_sources_merged_into_an_archived_successor_are_orphaned_and_lost() -> None:
    """Finding 1's shape: re-archived as "stale write-back; merged into X" with X archived."""
    gone = archived(M, "undone cycle x", "undo-other")
    after = by_id(archived(A, REASON_STALE_WRITE_BACK + REASON_MERGED_INTO + "m", RUN + "-writeback"), B, gone)
    verdict = judge(Census.of([A, B]), after, OURS, DEFAULT_VOCABULARY)
    assert verdict.orphaned == ["a"]
    assert verdict.lost == ["Xebia"] and verdict.carriers == ["a"]  # Allen Conway is still said by b


def test_an_undone_successor_is_reachable_through_its_sources() -> None:
    successor = live("m", M.entry.content, **{MERGED_FROM: "a,b"})
    after = by_id(A, B, archived(successor, "undone cycle x", "undo-" + RUN))
    verdict = judge(Census.of([successor]), after, OURS, DEFAULT_VOCABULARY)
    assert verdict.clean


def test_an_undone_successor_whose_sources_are_gone_is_orphaned() -> None:
    successor = live("m", M.entry.content, **{MERGED_FROM: "a,b"})
    verdict = judge(
        Census.of([successor]), by_id(archived(successor, "undone", "undo-" + RUN)), OURS, DEFAULT_VOCABULARY
    )
    assert verdict.orphaned == ["m"] and set(verdict.lost) == {"Allen", "Conway", "Xebia", "Austin"}


def test_a_documented_ephemeral_prune_may_take_a_specific_out() -> None:
    verdict = judge(Census.of([A, B]), by_id(archived(A, REASON_EPHEMERAL), B), OURS, DEFAULT_VOCABULARY)
    assert verdict.clean


def test_the_agents_own_changes_are_never_charged_to_the_run() -> None:
    edited = live("a", "Allen moved on.")
    agent_archive = archived(B, "the agent's reflection", tag=None)
    verdict = judge(Census.of([A, B]), by_id(edited, agent_archive), OURS, DEFAULT_VOCABULARY)
    assert verdict.clean and verdict.departed == 2 and verdict.ours == 0
    # Deleted from disk and not purged by the run: the agent's deletion.
    assert judge(Census.of([A, B]), by_id(B), OURS, DEFAULT_VOCABULARY).clean


def test_an_archive_by_an_earlier_run_written_back_by_the_agent_is_not_this_runs() -> None:
    stale = archived(A, REASON_MERGED_INTO + "gone", "20250101T000000Z-bbbbbb")
    assert judge(Census.of([A, B]), by_id(stale, B), OURS, DEFAULT_VOCABULARY).clean


def test_a_live_entry_the_run_purged_is_orphaned_and_lost() -> None:
    verdict = judge(Census.of([A, B]), by_id(B), OURS, DEFAULT_VOCABULARY, purged={"a"})
    assert verdict.orphaned == ["a"] and verdict.lost == ["Xebia"]


def test_a_specific_an_allowed_prune_also_carried_is_excused() -> None:
    pruned = live("p", "Xebia sponsors the meetup.")
    after = by_id(
        archived(A, REASON_MERGED_INTO + "m2"),
        live("m2", "Allen Conway works there."),
        archived(pruned, REASON_EPHEMERAL),
        B,
    )
    verdict = judge(Census.of([A, B, pruned]), after, OURS, DEFAULT_VOCABULARY)
    assert verdict.lost == [] and verdict.orphaned == []


@pytest.fixture
def fresh_inventory_memo() -> Iterator[None]:
    clear_inventory_memo()
    yield
    clear_inventory_memo()


def test_a_successors_inventory_is_read_from_the_memo_built_for_its_exact_text(
    fresh_inventory_memo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validation and the census built the successor's inventory already: the judge reads it, never changes it."""
    shared = merged_inventory(M.entry.content)
    words = dict(shared.words)

    def build(cls: type[Inventory], text: str) -> Inventory:
        raise AssertionError(f"the judge built an inventory the memo holds: {text!r}")

    monkeypatch.setattr(Inventory, "of", classmethod(build))
    after = by_id(archived(A, REASON_MERGED_INTO + "m"), archived(B, REASON_MERGED_INTO + "m"), M)
    verdict = judge(Census.of([A, B]), after, OURS, DEFAULT_VOCABULARY, index=_never)  # type: ignore[arg-type]
    assert verdict.clean and verdict.ours == 2
    assert dict(shared.words) == words


def test_a_memo_of_the_text_the_plan_wrote_never_answers_for_the_successors_text_now(
    fresh_inventory_memo: None,
) -> None:
    """The memo holds the planned successor's text (which carries Austin); the successor on disk says less now (the
    same id, another text): the judge must read the text on disk, so Austin is lost. A memo keyed by the successor's
    id, or by anything but its exact text, answers "clean" here."""
    merged_inventory(M.entry.content)
    now = live("m", "Allen Conway works at Xebia.")
    after = by_id(archived(A, REASON_MERGED_INTO + "m"), archived(B, REASON_MERGED_INTO + "m"), now)
    verdict = judge(Census.of([A, B]), after, OURS, DEFAULT_VOCABULARY)
    assert verdict.lost == ["Austin"] and verdict.carriers == ["b"]
    # And with the memo holding the text on disk as well, the answer is the same.
    merged_inventory(now.entry.content)
    assert judge(Census.of([A, B]), after, OURS, DEFAULT_VOCABULARY).lost == ["Austin"]


_SCENARIOS = {
    "nothing departed": ([A, B], [A, B]),
    "merged into a live successor": (
        [A, B],
        [archived(A, REASON_MERGED_INTO + "m"), archived(B, REASON_MERGED_INTO + "m"), M],
    ),
    "orphaned and lost": (
        [A, B],
        [archived(A, REASON_STALE_WRITE_BACK + REASON_MERGED_INTO + "m", RUN + "-writeback"), B, archived(M, "x", "o")],
    ),
    "an ephemeral prune and the agent's own deletion": ([A, B, M], [archived(A, REASON_EPHEMERAL), M]),
    "an edit of the agent's": ([A], [live("a", "Allen Conway moved.")]),
}


@pytest.mark.parametrize("name", sorted(_SCENARIOS))
def test_a_verdict_given_its_departures_is_the_verdict_that_walks_them(name: str) -> None:
    """The cycle's report works the departures out once (to know whether it must read every file) and hands them to
    the invariant: the same verdict as the invariant walking the census itself over the same arguments."""
    then, now = _SCENARIOS[name]
    before, after = Census.of(then), by_id(*now)
    walked = judge(before, after, OURS, DEFAULT_VOCABULARY, purged={"b"})
    given = departures(before, after, OURS, {"b"})
    assert judge(before, after, OURS, DEFAULT_VOCABULARY, purged={"b"}, departed=given) == walked


@given(st.lists(st.tuples(st.sampled_from(["a", "A", "b", "c"]), st.booleans(), st.integers(0, 3)), max_size=10))
def test_a_census_is_the_live_entries_by_exact_id_first_file_first(shapes: list[tuple[str, bool, int]]) -> None:
    """``Census.of`` (one loop) is ``invariant.by_id`` of the live entries: exact ids, the first file of an id wins."""
    entries = []
    for number, (entry_id, live_one, copy) in enumerate(shapes):
        stored = live(entry_id, f"text {copy}")
        stored = StoredEntry(stored.entry, Path(f"/m/{number}/{entry_id}.json"), stored.fingerprint)
        entries.append(stored if live_one else archived(stored, REASON_EPHEMERAL))
    census = Census.of(entries).live
    expected = invariant_by_id(s for s in entries if s.entry.is_live)
    assert list(census) == list(expected)
    assert all(census[i] is expected[i] for i in expected)
