"""The table of a cycle's counts: its rows are coherent, and the texts derived from it read as they always have."""

from __future__ import annotations

from datetime import UTC, datetime

from dreamkeeper.consolidation.count_phrases import any_counted, cli_rows, sentence
from dreamkeeper.consolidation.counts import COUNTS, CycleCounts, Row
from dreamkeeper.consolidation.report import CycleReport

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def test_each_row_says_something_its_consumers_can_do() -> None:
    names = [c.name for c in COUNTS]
    assert names == list(CycleCounts.model_fields) and len(set(names)) == len(names)
    for count in COUNTS:
        assert count.description, count.name
        if count.metric is not None:  # a counter must be summed to be seeded from totals; a gauge is a state
            assert count.summed or count.state, count.name
            assert (count.metric.family.label is None) == (count.metric.label_value is None), count.name
        if count.state:
            assert count.reach == "run", count.name  # a state is carried, never summed
        if count.totals_key is not None:
            assert count.summed, count.name
        if count.event is not None:
            assert count.in_run, count.name  # the operator sees only what a run carries
    assert {c.cli.row for c in COUNTS if c.cli is not None} == set(Row)


def test_counts_add_field_by_field() -> None:
    total = CycleCounts.total_of([CycleCounts(folded=2, archived=2), CycleCounts(archived=3, saved=1), CycleCounts()])
    assert (total.folded, total.archived, total.saved, total.purged) == (2, 5, 1, 0)


def report(**counts: int) -> CycleReport:
    return CycleReport(cycle_id="c", started_at=T0, **counts)


def test_the_dream_table_rows() -> None:
    r = report(
        total=284,
        reviewed=193,
        withheld=67,
        folded=24,
        decayed=11,
        decay_left_floor=2,
        saved=26,
        merged_into_existing=3,
        archived=80,
        archived_with_replacement=78,
        ephemeral=2,
        rejected=3,
        repaired=1,
        protected=4,
        conflicts=5,
        stale_write_backs=3,
        resurrected=2,
        reinforcements_carried=5,
        purged=7,
        purge_kept_last_record=5,
        specifics_lost=6,
        live_entries=232,
        archived_entries=86,
        llm_calls=9,
        input_tokens=1000,
        output_tokens=200,
        invented=2,
        prunes_refused=3,
        batches_usable=4,
        batches_unusable=2,
        batches_failed=1,
        subsumed=5,
        refused_restating=1,
        refused_layout=2,
        refused_notation=3,
        duplicate_backlog=19,
    )
    assert cli_rows(r) == [
        ("entries (live at start)", "284"),
        ("reviewed / withheld", "193 / 67"),
        ("exact duplicates folded", "24"),
        ("importance decayed (left the high-value floor)", "11 (2)"),
        ("merges saved (into an existing entry)", "26 (3)"),
        ("merges without the model (subsumed)", "5"),
        ("archived (with replacement / ephemeral)", "80 (78 / 2)"),
        ("merges rejected (inventing) / repaired", "3 (2) / 1"),
        ("proposals refused: restating / offer layout / offer notation", "1 / 2 / 3"),
        ("prunes refused: floor / census", "4 / 3"),
        ("conflicts with concurrent writes", "5"),
        ("changes that could not be written", "0"),
        ("stale write-backs repaired (resurrected / reinforcements carried)", "3 (2 / 5)"),
        ("hard deletes", "0"),
        ("entries the agent deleted itself", "0"),
        ("held for approval (would leave the live corpus)", "0"),
        ("purged (retention) (kept as last records)", "7 (5)"),
        ("specifics lost (orphaned / losses reversed)", "6 (0 / 0)"),
        ("stages refused: the clock disagrees", "0"),
        ("live / archived entries now", "232 / 86"),
        ("near-duplicate clusters left (duplicate backlog)", "19"),
        ("proposer calls / tokens in / out", "9 / 1000 / 200"),
        ("proposer batches usable / unusable / failed", "4 / 2 / 1"),
    ]


def test_the_closing_log_lines() -> None:
    r = report(archived=80, archived_with_replacement=78, ephemeral=2, saved=26, folded=24, decayed=3, live_entries=232)
    assert sentence(r, lambda c: c.logged) == (
        "80 archived (78 with replacement, 2 ephemeral), 26 saved (0 into existing, 0 subsumed), 24 folded, "
        "3 decayed (0 left the high-value floor), 0 conflicts, 0 write failures, 0 stale write-backs, 0 hard deletes, "
        "live 232, archived 0, duplicate backlog 0"
    )
    assert not any_counted(r, lambda c: c.safeguard)
    guarded = report(repaired=1)
    assert any_counted(guarded, lambda c: c.safeguard)
    assert sentence(guarded, lambda c: c.safeguard) == (
        "0 merge(s) rejected (0 for inventing specifics), 1 merge(s) repaired, 0 useless merge(s) refused, "
        "0 merge(s) copying the offer refused, 0 proposal(s) naming ids as ID:… refused, 0 entry(s) protected from "
        "pruning, 0 prune(s) refused by the census, 0 prune(s) of reopened duplicates ignored, "
        "0 stale write-back(s) repaired, 0 archived entr(ies) held from RockBot's purge, 0 source-less save(s) "
        "refused, 0 repl(ies) naming no offered id decided nothing"
    )
