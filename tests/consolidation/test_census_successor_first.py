"""The census and the post-apply loss check ask a merge's successor first and index the corpus only for what it
does not cover. Their answers (refusals, missing lists, ephemeral accounting, specifics lost) must be those of
indexing everything: checked case by case, and against the single-pass census on random plans."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.consolidation import writes as writes_module
from dreamkeeper.consolidation.census import census
from dreamkeeper.consolidation.cycle import CycleOptions, CycleOutcome, FinalState, Writes, run_cycle
from dreamkeeper.consolidation.decisions import ValidationState
from dreamkeeper.consolidation.plan import MergeAction, PruneAction
from dreamkeeper.consolidation.settings import CycleSettings, PruneCensus
from dreamkeeper.coverage import DEFAULT_VOCABULARY, IDENTITY_KINDS, CoverageIndex, extract_specifics
from dreamkeeper.memory import Entry, MemoryStore, StoredEntry
from dreamkeeper.memory.atomic import Fingerprint
from dreamkeeper.proposers import ScriptedProposer
from tests.consolidation.corpus import BASE_TIME, Seed, write_corpus

# Run with the corpus index cold, warm, stale and corrupt: the same decisions each time (tests/corpus_index_modes.py).
pytestmark = pytest.mark.usefixtures("corpus_index_mode")

# --- helpers ------------------------------------------------------------------------------------------------


def stored(entry_id: str, content: str, category: str | None = "project-context") -> StoredEntry:
    entry = Entry(
        id=entry_id,
        content=content,
        category=category,
        created_at=BASE_TIME,
        updated_at=BASE_TIME,
        last_seen_at=BASE_TIME,
    )
    return StoredEntry(entry, Path(f"/nonexistent/{entry_id}.json"), Fingerprint("0" * 64, 0, 0))


def successor(entry_id: str, content: str) -> Entry:
    return Entry(id=entry_id, content=content, category="project-context", created_at=BASE_TIME, updated_at=BASE_TIME)


def new_state(prune_census: PruneCensus = "identity") -> ValidationState:
    return ValidationState(CycleSettings(prune_census=prune_census), DEFAULT_VOCABULARY, "test", BASE_TIME)


def run_census(
    live: list[StoredEntry],
    merges: list[MergeAction],
    prunes: Sequence[StoredEntry] = (),
    prune_census: PruneCensus = "identity",
) -> ValidationState:
    state = new_state(prune_census)
    state.plan.merges = list(merges)
    state.plan.prunes = [PruneAction(p) for p in prunes]
    census(live, state)
    return state


# --- census, case by case -----------------------------------------------------------------------------------


def test_successor_covering_everything_needs_no_corpus_index() -> None:
    a = stored("a", "Allen Conway works at Xebia.")
    b = stored("b", "Allen Conway lives in Austin.")
    other = stored("c", "Trish prefers concise notes.")
    merge = MergeAction(successor("m", "Allen Conway works at Xebia and lives in Austin."), [a, b])
    state = run_census([a, b, other], [merge])
    assert state.plan.merges == [merge]
    assert state.decisions().census_refusals == 0
    assert state.census_index is None  # nothing was looked up in the corpus


def test_successor_missing_a_specific_said_elsewhere_is_accepted() -> None:
    # Validation checks with the sources' joint evidence ("mark" in b demotes "Mark"); the census extracts each
    # source alone, so it asks about "Mark", which the successor lacks but another live entry says.
    a = stored("a", "Mark approved the Xebia budget.")
    b = stored("b", "Remember to mark the Xebia budget approved.")
    other = stored("c", "Mark runs the weekly review.")
    merge = MergeAction(successor("m", "The Xebia budget was approved."), [a, b])
    state = run_census([a, b, other], [merge])
    assert state.plan.merges == [merge]
    assert state.decisions().census_refusals == 0
    assert state.census_index is not None and len(state.census_index) == 2  # c and the successor


def test_successor_missing_a_specific_said_nowhere_is_refused() -> None:
    a = stored("a", "Mark approved the Xebia budget.")
    b = stored("b", "Remember to mark the Xebia budget approved.")
    other = stored("c", "Trish runs the weekly review.")
    merge = MergeAction(successor("m", "The Xebia budget was approved."), [a, b])
    state = run_census([a, b, other], [merge])
    assert state.plan.merges == []
    assert state.decisions().census_refusals == 1
    assert state.decisions().rejections[0].missing == ["Mark"]
    assert state.decisions().rejections[0].reason == "census: would vanish from the live corpus"
    assert state.shielded == {"a", "b"}
    # The index now holds the refused merge's sources instead of its successor.
    index = state.census_index
    assert index is not None and len(index) == 3
    assert index.covers(extract_specifics(a.entry.content)[0])


def test_a_refused_merge_gives_its_sources_back_to_later_checks() -> None:
    # The first merge is refused, so "Duane" (said by its source d1) stays live and covers the second merge's
    # loss: the lazily built index must already hold the refused sources.
    d1 = stored("d1", "Rockford Duane Lhotka is also known as Rocky.")
    d2 = stored("d2", "Rocky Lhotka travels as Rockford.")
    e1 = stored("e1", "Duane booked the Tripit trip.")
    e2 = stored("e2", "The trip is in Tripit.")
    first = MergeAction(successor("m1", "Rocky Lhotka travels as Rockford Lhotka."), [d1, d2])
    second = MergeAction(successor("m2", "The trip is booked in Tripit."), [e1, e2])
    state = run_census([d1, d2, e1, e2], [first, second])
    assert state.plan.merges == [second]
    assert state.decisions().census_refusals == 1
    assert [r.missing for r in state.decisions().rejections] == [["Duane"]]


def test_prune_ephemeral_accounting_is_unchanged_when_the_prune_census_is_off() -> None:
    said_elsewhere = stored("p1", "Trish likes Eventbrite.")
    said_nowhere = stored("p2", "Roberts owns PWOP Productions, 2048 units.")
    other = stored("c", "Trish posted on Eventbrite again.")
    state = run_census([said_elsewhere, said_nowhere, other], [], [said_elsewhere, said_nowhere], "off")
    assert state.decisions().counts.ephemeral_specifics == 4
    assert state.plan.prunes[0].lost_specifics == []
    assert state.plan.prunes[1].lost_specifics == ["Roberts", "PWOP", "Productions", "2048"]


def test_finding6_a_prune_taking_the_last_mention_of_a_name_is_refused() -> None:
    said_elsewhere = stored("p1", "Trish likes Eventbrite.")
    said_nowhere = stored("p2", "Roberts owns PWOP Productions, 2048 units.")
    only_numbers = stored("p3", "The 2031 budget line is 7,800.")
    other = stored("c", "Trish posted on Eventbrite again.")
    state = run_census(
        [said_elsewhere, said_nowhere, only_numbers, other], [], [said_elsewhere, said_nowhere, only_numbers]
    )
    decisions = state.decisions()
    assert [p.target.id for p in state.plan.prunes] == ["p1", "p3"]  # p3 only takes numbers: counted, allowed
    assert state.plan.prunes[1].lost_specifics == ["2031", "7,800"]
    (refused,) = decisions.refused_prunes
    assert (refused.id, refused.census) == ("p2", ["Roberts", "PWOP", "Productions"])
    assert decisions.counts.prunes_refused == 1 and decisions.counts.ephemeral_specifics == 2
    # "all" refuses p3 too; a refusal keeps the entry live, so the second of two last mentions may go.
    everything = run_census([said_nowhere, only_numbers, stored("p4", "Roberts again")], [], [only_numbers], "all")
    assert everything.plan.prunes == [] and everything.decisions().refused_prunes[0].census == ["2031", "7,800"]
    # Finding 6: both meeting entries about one person pruned. The first is refused; with it live, the second
    # takes nothing the corpus does not still say.
    twins = [stored("t1", "Met Tomasz Whitfield on 2026-04-19."), stored("t2", "Tomasz Whitfield renewed.")]
    pair = run_census(twins, [], twins)
    assert [r.id for r in pair.decisions().refused_prunes] == ["t1"]
    assert [p.target.id for p in pair.plan.prunes] == ["t2"] and pair.plan.prunes[0].lost_specifics == []


def test_a_prune_without_specifics_needs_no_corpus_index() -> None:
    plain = stored("p", "remember to water the plants")
    state = run_census([plain, stored("c", "Trish waters them.")], [], [plain])
    assert state.decisions().counts.ephemeral_specifics == 0
    assert state.census_index is None


# --- census, against the single-pass reference --------------------------------------------------------------


def eager_census(
    live: Sequence[StoredEntry], merges: list[MergeAction], prunes: list[StoredEntry], refuse_identity: bool = False
) -> Any:
    """The census before successor-first: index the whole planned corpus, then one pass in plan order; prunes that
    take the last mention of an identity specific refused (``refuse_identity``), their entries added back."""
    leaving = {s.id for m in merges for s in m.sources} | {p.id for p in prunes}
    if not leaving:
        return [], [], [], None, []
    index = CoverageIndex()
    for entry in live:
        if entry.id not in leaving:
            index.add(entry.entry.content)
    for merge in merges:
        index.add(merge.successor.content)

    def vanishing(entries: Sequence[StoredEntry], identity: bool = False) -> list[str]:
        lost: list[str] = []
        for e in entries:
            for specific in extract_specifics(e.entry.content, e.entry.category):
                if identity and specific.kind not in IDENTITY_KINDS:
                    continue
                if not index.covers(specific) and specific.text not in lost:
                    lost.append(specific.text)
        return lost

    kept, refusals = [], []
    for merge in merges:
        lost = vanishing(merge.sources)
        if lost:
            refusals.append(lost)
            index.remove(merge.successor.content)
            for s in merge.sources:
                index.add(s.entry.content)
        else:
            kept.append(merge.successor.id)
    pruned, refused = [], []
    for p in prunes:
        if refuse_identity and vanishing([p], identity=True):
            refused.append(p.id)
            index.add(p.entry.content)
        else:
            pruned.append(vanishing([p]))
    return kept, refusals, pruned, index, refused


WORDS = ["Rockford", "Duane", "Trish", "Roberts", "Xebia", "Austin", "Mark", "mark", "Rose", "rose", "the", "and"]
WORDS += ["notes", "2026", "42", "August 19, 2026", "2026-08-19", "lhotka.net", "marimer-work", "IMAP", "Review"]
phrases = st.lists(st.sampled_from(WORDS), min_size=0, max_size=6).map(" ".join)


RandomPlan = tuple[list[StoredEntry], list[MergeAction], list[StoredEntry]]


@st.composite
def plans(draw: st.DrawFn) -> RandomPlan:
    live = [stored(f"e{i}", text) for i, text in enumerate(draw(st.lists(phrases, min_size=1, max_size=10)))]
    order = draw(st.permutations(range(len(live))))
    merges: list[MergeAction] = []
    prunes: list[StoredEntry] = []
    i = 0
    while i < len(order):
        what = draw(st.sampled_from(["merge", "prune", "keep"]))
        if what == "merge" and i + 1 < len(order):
            size = draw(st.integers(min_value=2, max_value=min(3, len(order) - i)))
            sources = [live[j] for j in order[i : i + size]]
            words = " ".join(s.entry.content for s in sources).split()
            kept_words = draw(st.lists(st.sampled_from(words), max_size=8)) if words else []
            merges.append(MergeAction(successor(f"m{len(merges)}", " ".join(kept_words)), sources))
            i += size
            continue
        if what == "prune":
            prunes.append(live[order[i]])
        i += 1
    return live, merges, prunes


def inventory_state(index: CoverageIndex | None) -> Any:
    if index is None:
        return None
    inventory = index._inventory
    return len(index), inventory.words, inventory.numbers, inventory.chunks, inventory.date_keys, inventory.runs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
@pytest.mark.parametrize("prune_census", ["off", "identity"])
def test_census_answers_like_the_single_pass(
    prune_census: PruneCensus, plan: tuple[list[StoredEntry], list[MergeAction], list[StoredEntry]]
) -> None:
    live, merges, prunes = plan
    kept, refusals, pruned, reference_index, refused = eager_census(live, merges, prunes, prune_census == "identity")
    state = run_census(live, merges, prunes, prune_census)
    assert [p.id for p in state.decisions().refused_prunes] == refused
    assert [m.successor.id for m in state.plan.merges] == kept
    assert [r.missing for r in state.decisions().rejections] == refusals
    assert state.decisions().census_refusals == len(refusals)
    assert [p.lost_specifics for p in state.plan.prunes] == pruned
    assert state.decisions().counts.ephemeral_specifics == sum(len(lost) for lost in pruned)
    if state.census_index is not None:  # when built, it holds what the single pass's index held at the end
        assert inventory_state(state.census_index) == inventory_state(reference_index)


# --- the post-apply loss check, through whole cycles --------------------------------------------------------


def cycle(agent_dir: Path, proposer: ScriptedProposer) -> CycleOutcome:
    options = CycleOptions(agent_dir=agent_dir, settings=CycleSettings(min_interval_hours=0), now=BASE_TIME)
    return asyncio.run(run_cycle(options, proposer))


def count_final_index_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = writes_module._final_index

    def counting(*args: Any) -> CoverageIndex:
        calls.append(1)
        return original(*args)

    monkeypatch.setattr(writes_module, "_final_index", counting)
    return calls


def after_apply(monkeypatch: pytest.MonkeyPatch, action: Callable[[Writes], None]) -> None:
    """Run ``action`` between apply and the report's final scan (an agent writing in between)."""
    original = Writes._final_state
    done: list[bool] = []

    def patched(self: Writes, snapshot: Any, **how: bool) -> FinalState:
        if not done:  # once: the final scan is read again after the end-of-run invariant brought something back
            done.append(True)
            action(self)
        return original(self, snapshot, **how)

    monkeypatch.setattr(Writes, "_final_state", patched)


MERGE = {
    "toSave": [{"content": "Allen Conway works at Xebia, lives in Austin.", "sourceIds": ["s1", "s2"]}],
    "toDelete": [],
}


def successor_of(store: MemoryStore) -> StoredEntry:
    (made,) = [s for s in store.scan().live if s.id not in {"s1", "s2", "s3"}]
    return made


def test_loss_check_needs_no_index_when_successors_cover_their_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_corpus(tmp_path, [Seed("s1", "Allen Conway works at Xebia."), Seed("s2", "Allen Conway lives in Austin.")])
    calls = count_final_index_builds(monkeypatch)
    outcome = cycle(tmp_path, ScriptedProposer([MERGE]))
    assert outcome.report.saved == 1 and outcome.report.archived == 2
    assert outcome.report.specifics_lost == 0
    assert calls == []


def test_successor_gone_after_apply_counts_as_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = write_corpus(
        tmp_path, [Seed("s1", "Allen Conway works at Xebia."), Seed("s2", "Allen Conway lives in Austin.")]
    )
    calls = count_final_index_builds(monkeypatch)
    after_apply(monkeypatch, lambda _: successor_of(store).path.unlink())
    outcome = cycle(tmp_path, ScriptedProposer([MERGE]))
    assert outcome.report.archived == 2
    # The end-of-run invariant (issue 22) finds the loss, brings both sources back, and fails the cycle.
    (found,) = [n for n in outcome.report.notes if "no live entry says any more" in n]
    assert "4 specific(s)" in found and "Allen, Conway, Xebia, Austin" in found
    assert outcome.report.losses_reversed == 2 and outcome.report.result == "failed"
    assert outcome.report.specifics_lost == 0 and outcome.report.lost_specifics == []  # after bringing back
    assert {s.id for s in store.scan().live} == {"s1", "s2"}
    assert calls == [1]


def test_successor_gone_after_apply_is_no_loss_where_covered_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = write_corpus(
        tmp_path,
        [
            Seed("s1", "Allen Conway works at Xebia."),
            Seed("s2", "Allen Conway lives in Austin."),
            Seed("s3", "Allen Conway of Xebia flew to Austin.", reinforcement=9),
        ],
    )
    after_apply(monkeypatch, lambda _: successor_of(store).path.unlink())
    proposer = ScriptedProposer([MERGE])
    outcome = cycle(tmp_path, proposer)
    assert outcome.report.archived == 2
    assert outcome.report.specifics_lost == 0
    assert not any("no live entry says any more" in n for n in outcome.report.notes)
    # No specific was lost, but the sources' merged-into chain ends in nothing live: orphaned, brought back.
    assert any("reach no live entry" in n for n in outcome.report.notes)
    assert outcome.report.losses_reversed == 2 and outcome.report.orphaned == 0


def test_successor_rewritten_after_apply_is_checked_as_on_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = write_corpus(
        tmp_path, [Seed("s1", "Allen Conway works at Xebia."), Seed("s2", "Allen Conway lives in Austin.")]
    )

    def agent_rewrites(_: Writes) -> None:
        made = successor_of(store)
        store.update(made, made.entry.model_copy(update={"content": "Allen Conway works at Xebia."}))

    after_apply(monkeypatch, agent_rewrites)
    outcome = cycle(tmp_path, ScriptedProposer([MERGE]))
    (found,) = [n for n in outcome.report.notes if "no live entry says any more" in n]
    assert "1 specific(s)" in found and ": Austin (carried by s2)" in found
    assert outcome.report.losses_reversed == 1 and outcome.report.lost_specifics == []
    assert {s.id for s in store.scan().live} == {"s2", successor_of(store).id} - {"s1"}
