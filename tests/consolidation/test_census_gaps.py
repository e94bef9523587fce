"""The census's first question (which of a merge's sources' specifics its successor does not hold) is asked at
validation, while the successor's inventory is at hand (successor_gaps.py, issue 27). The census uses such an answer
only for the exact successor text, source texts and categories and vocabulary it was computed from: every other
record is computed afresh, and the census decides exactly as the single pass does whatever was recorded."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.consolidation import census as census_module
from dreamkeeper.consolidation.census import census
from dreamkeeper.consolidation.plan import MergeAction, PruneAction
from dreamkeeper.consolidation.successor_gaps import SuccessorGaps, successor_gaps
from dreamkeeper.coverage import DEFAULT_VOCABULARY, Vocabulary
from tests.consolidation.corpus import write_corpus
from tests.consolidation.test_census_successor_first import (
    RandomPlan,
    eager_census,
    new_state,
    plans,
    stored,
    successor,
)
from tests.consolidation.test_refusals import IMOGEN, SEEDS, dream, save

A = stored("a", "Allen Conway works at Xebia.")
B = stored("b", "Allen Conway lives in Austin.")
LOSES_AUSTIN = MergeAction(successor("m", "Allen Conway works at Xebia."), [A, B])
KEEPS_ALL = MergeAction(successor("m", "Allen Conway works at Xebia and lives in Austin."), [A, B])
OTHER_VOCABULARY = Vocabulary(extraCommonWords=["Austin"])


def stale(merge: MergeAction, how: str) -> SuccessorGaps:
    """A record saying the successor holds everything, computed for something other than ``merge``."""
    exact = successor_gaps(merge, DEFAULT_VOCABULARY)
    if how == "successor":
        return SuccessorGaps(merge.successor.content + " Austin", exact.sources, DEFAULT_VOCABULARY, ())
    if how == "source":
        (text, category), *rest = exact.sources
        return SuccessorGaps(exact.successor, ((text + " again", category), *rest), DEFAULT_VOCABULARY, ())
    if how == "category":
        (text, _), *rest = exact.sources
        return SuccessorGaps(exact.successor, ((text, "people/allen"), *rest), DEFAULT_VOCABULARY, ())
    if how == "order":
        if exact.sources[::-1] == exact.sources:
            return exact  # sources alike in text and category: reversed, they are the same question
        return SuccessorGaps(exact.successor, exact.sources[::-1], DEFAULT_VOCABULARY, ())
    assert how == "vocabulary"
    return SuccessorGaps(exact.successor, exact.sources, OTHER_VOCABULARY, ())


@pytest.mark.parametrize("how", ["successor", "source", "category", "order", "vocabulary"])
def test_a_record_for_other_texts_or_another_vocabulary_is_never_used(how: str) -> None:
    """Each stale record claims the successor holds everything; used, the merge losing Austin would be accepted."""
    state = new_state()
    state.plan.merges = [LOSES_AUSTIN]
    state.gaps[LOSES_AUSTIN.successor.id] = stale(LOSES_AUSTIN, how)
    census([A, B], state)
    assert state.plan.merges == [] and state.census_refusals == 1
    assert [r.missing for r in state.decisions().rejections] == [["Austin"]]


def test_the_exact_record_is_used_and_nothing_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    state = new_state()
    state.plan.merges = [KEEPS_ALL, LOSES_AUSTIN.__class__(successor("m2", "Allen Conway."), [stored("c", "Rocky")])]
    for merge in state.plan.merges:
        state.gaps[merge.successor.id] = successor_gaps(merge, DEFAULT_VOCABULARY)

    def asked(*_: object) -> SuccessorGaps:
        raise AssertionError("the census asked a successor again")

    monkeypatch.setattr(census_module, "successor_gaps", asked)
    census([A, B, stored("c", "Rocky")], state)
    assert [m.successor.id for m in state.plan.merges] == ["m"]  # "Rocky" is said nowhere else: m2 refused
    assert [r.missing for r in state.decisions().rejections] == [["Rocky"]]


def test_validation_records_each_merge_it_accepts_for_the_census(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Through a whole cycle: the model's merge is recorded at validation, and the census asks nothing again."""
    write_corpus(tmp_path, SEEDS)
    asked: list[str] = []
    real = census_module.successor_gaps
    monkeypatch.setattr(census_module, "successor_gaps", lambda m, v: asked.append(m.successor.id) or real(m, v))
    outcome = dream(tmp_path, {"toDelete": [], "toSave": [save(IMOGEN, "7d2eb8c68286", "d1090b231039")]})
    assert outcome.report.saved == 1
    assert asked == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), st.data())
def test_census_answers_like_the_single_pass_whatever_validation_recorded(
    plan: RandomPlan, data: st.DataObject
) -> None:
    live, merges, prunes = plan
    kept, refusals, pruned, _, refused = eager_census(live, merges, prunes, True)
    state = new_state("identity")
    state.plan.merges = list(merges)
    state.plan.prunes = [PruneAction(p) for p in prunes]
    for merge in merges:
        how = data.draw(st.sampled_from(["none", "exact", "successor", "source", "category", "order", "vocabulary"]))
        if how == "exact":
            state.gaps[merge.successor.id] = successor_gaps(merge, DEFAULT_VOCABULARY)
        elif how != "none":
            state.gaps[merge.successor.id] = stale(merge, how)
    census(live, state)
    assert [p.id for p in state.decisions().refused_prunes] == refused
    assert [m.successor.id for m in state.plan.merges] == kept
    assert [r.missing for r in state.decisions().rejections] == refusals
    assert [p.lost_specifics for p in state.plan.prunes] == pruned
