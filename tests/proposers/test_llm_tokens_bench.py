"""The LLM-token bench in quick mode: it runs end to end, and its own numbers hang together."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from bench.llm_tokens import Shown, lossless_text, main, parse_offer, scripted_proposal

from dreamkeeper.coverage import SourceText, find_missing_specifics
from dreamkeeper.memory import Entry
from dreamkeeper.proposers.prompts import whole_offer_message


def test_quick_mode(tmp_path: Path) -> None:
    assert main(["--quick", "--out-dir", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "llm-tokens-quick.json").read_text())
    assert summary["command"] == "python -m bench llm-tokens --quick"
    assert (tmp_path / "llm-tokens-quick.md").read_text().startswith("# LLM input tokens per dream cycle")
    rows = summary["perCycle"]
    assert len(rows) == summary["cycles"] == 12
    totals = summary["totals"]
    assert totals["dreamkeeper"] == sum(r["dreamkeeper_tokens"] for r in rows)
    assert totals["wholeCorpus"] > totals["rockbotStyle"] > totals["dreamkeeper"] > totals["dreamkeeperFrugal"] > 0
    goals = summary["goals"]
    assert goals["dreamkeeperBelowRockbotStyle"] and goals["frugalAtMost50PercentOfRockbotStyle"]
    # Twelve cycles are mostly the cold start (every entry is new, so every entry is shown): the whole-corpus goal
    # is the full run's; once warm, the quick run is within it too.
    assert summary["ratios"]["secondHalfDreamkeeperVsWholeCorpus"] <= 0.10
    # A cycle without a request costs nothing; one with requests was really answered by the fake server.
    for row in rows:
        assert (row["dreamkeeper_tokens"] == 0) == (row["dreamkeeper_requests"] == 0)
        if row["dreamkeeper_requests"]:
            assert row["dreamkeeper_reported_input"] > 0
    assert summary["hardDeletes"] == 0 and summary["minedIdsMissing"] == 0


def test_scripted_model_reads_the_prompt_back_and_merges_losslessly() -> None:
    t = datetime(2026, 9, 1, tzinfo=UTC)
    entries = [
        Entry(id="a1", content="Met Trish Roberts at VS Live.", tags=["fact:f1"], created_at=t),
        Entry(id="a2", content="Met Trish Roberts at VS Live in Las Vegas.", tags=["meeting", "fact:f1"], created_at=t),
        Entry(id="b1", content="Line one.\nLine two.", category="misc/notes", created_at=t),
    ]
    shown = parse_offer(whole_offer_message(entries, 3, 0))
    assert [(s.id, s.content, s.category) for s in shown] == [(e.id, e.content, e.category) for e in entries]
    assert shown[1].tags == ("meeting", "fact:f1")
    (save,) = scripted_proposal(shown)["toSave"]
    assert save["sourceIds"] == ["a1", "a2"]
    assert not find_missing_specifics([SourceText(e.content) for e in entries[:2]], save["content"])
    odd = [Shown("x", "Ana uses Signal.", None, ()), Shown("y", "Bo uses Teams.", None, ())]
    assert "Signal" in lossless_text(odd) and "Teams" in lossless_text(odd)
