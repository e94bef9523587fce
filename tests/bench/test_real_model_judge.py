"""The real-model bench's judge (bench/realmodel_judge.py) on the decisions #18's findings describe: its own logic
must see what the engine's checks see, and more, so that it can catch them when they are wrong."""

from __future__ import annotations

from bench.realmodel_judge import Decision, Lexicon, invented, judge, last_mentions, missing

T1 = "Met Tomasz Whitfield on 2026-04-19 about the Tailspin renewal; tomasz.whitfield@tailspin.example."
T2 = "Tomasz's phone is 612-555-1234. He met Allen Conway at Xebia."
OTHER = "I spoke to Tomasz. The plan is fine. Deploy the build."
LEX = Lexicon.of([T1, T2, OTHER])


def test_names_come_from_the_corpus_not_from_sentence_position() -> None:
    assert {"tomasz", "whitfield", "tailspin", "allen", "conway", "xebia"} <= LEX.names
    assert not {"met", "he", "deploy", "the", "i"} & LEX.names


def test_a_merge_that_keeps_everything_in_other_words_is_clean() -> None:
    merged = "Tomasz Whitfield (tomasz.whitfield@tailspin.example): Tailspin renewal meeting on April 19, 2026."
    assert missing([T1], merged, LEX) == [] and invented([T1], merged, LEX) == []


def test_finding7_the_inventive_merges_are_inventive() -> None:
    merged = "Met Tomasz Whitfield (2017-03-04) about the Tailspin renewal; ask John Smith, johnsmc_johnsales.com."
    assert invented([T1], merged, LEX) == ["date:2017-03-04", "host:johnsmc_johnsales.com", "name:john", "name:smith"]
    assert "email:tomasz.whitfield@tailspin.example" in missing([T1], merged, LEX)


def test_finding6_pruning_both_entries_takes_a_last_mention() -> None:
    assert last_mentions(T1, [OTHER], LEX) == [
        "date:2026-04-19",
        "email:tomasz.whitfield@tailspin.example",
        "name:tailspin",
        "name:whitfield",
    ]
    assert last_mentions(T1, [T1.replace("Met", "Saw")], LEX) == []


def test_the_verdicts_of_one_cycle() -> None:
    lossy = ([T1, T2], "Tomasz Whitfield met Allen Conway.", [])
    clean_rejected = ([T2], T2.replace("He met", "Met"), [])
    decision = Decision(accepted=[lossy], rejected=[clean_rejected], pruned=[T1], refused=[T2])
    v = judge(decision, {"t2": T2, "o": OTHER}, LEX)
    assert (v.merges_accepted, v.lossy_accepts, v.inventive_accepts) == (1, 1, 0)
    assert (v.merges_rejected, v.false_rejections) == (1, 1)
    assert (v.prunes_allowed, v.prunes_removing_last_mention) == (1, 1)
    assert (v.prunes_refused, v.refusals_needed) == (1, 1)  # without T2 nobody says Xebia or the phone
    assert v.examples["lossy_accept"][0]["missing"]


def test_declines_are_graded_a_declined_duplicate_is_a_missed_one() -> None:
    # Issue 23: the judge never graded declines, so "0 lossy, 0 false rejections" hid 30 missed merges.
    decision = Decision(accepted=[], rejected=[], pruned=[], refused=[], declined=[True, False, True])
    v = judge(decision, {"o": OTHER}, LEX)
    assert (v.declines, v.missed_duplicates) == (3, 2)


def test_a_number_inside_a_host_name_is_no_phone() -> None:
    # "gpu-03 (10.0.40.70:5432)" and "gpu-03, 10.0.40.70:5432" state the same host and address.
    source = "The episode store is Postgres 2.18.5 on gpu-03, 10.0.40.70:5432, database episodes."
    merged = "Postgres 2.18.5 for the episode store runs on gpu-03 (10.0.40.70:5432), database episodes."
    assert missing([source], merged, Lexicon.of([source, merged])) == []
