"""The coverage evaluation's pipeline works end to end (quick mode); the numbers themselves live in bench/."""

from __future__ import annotations

import json
from pathlib import Path

from bench.__main__ import main as bench_main
from bench.corpus import generate_corpus
from bench.coverage_eval import build_merges

from dreamkeeper.coverage import SourceText, find_missing_specifics


def test_quick_mode_writes_both_reports(tmp_path: Path) -> None:
    assert bench_main(["coverage", "--quick", "--out", str(tmp_path), "--index-entries", "300"]) == 0
    report = json.loads((tmp_path / "coverage-eval-quick.json").read_text())
    assert report["command"].startswith("python -m bench coverage --quick")
    assert report["preserving"] == report["dropping"] == 40
    for row in report["checks"].values():
        assert row["preserving"] == row["dropping"] == 40
        assert 0 <= row["false_rejections"] <= 40 and 0 <= row["caught"] <= 40
        assert sum(t["merges"] for t in row["per_drop_type"].values()) == 40
    assert set(report["checks"]) == {"dreamkeeper", "substring variant", "RockBot (re-implemented)"}
    assert report["index"]["entries"] == 300
    markdown = (tmp_path / "coverage-eval-quick.md").read_text()
    assert "| dreamkeeper |" in markdown and report["command"] in markdown


def test_generated_merges_have_the_ground_truth_they_claim() -> None:
    """Preserving merges restate every source fact; dropping merges lose a value the sources state."""
    merges, _ = build_merges(seed=3, count=30)
    for merge in merges:
        if merge.preserving:
            continue
        assert merge.lost, merge
        stated = " ".join(s.text for s in merge.sources)
        digits = "".join(ch for ch in stated if ch.isdigit())
        assert any(value in stated or value in digits for value in merge.lost), merge
    # The concatenation of the sources is itself a content-preserving merge.
    for merge in merges[:10]:
        assert find_missing_specifics(merge.sources, "\n".join(s.text for s in merge.sources)) == []


def test_corpus_is_deterministic() -> None:
    first, second = generate_corpus(5, people=10), generate_corpus(5, people=10)
    assert [e.content for e in first.entries] == [e.content for e in second.entries]
    assert [e.content for e in generate_corpus(6, people=10).entries] != [e.content for e in first.entries]
    assert all(isinstance(SourceText(e.content, e.category).text, str) for e in first.entries)
