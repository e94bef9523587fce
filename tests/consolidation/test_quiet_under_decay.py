"""The quiet memo under RockBot's decay (``decay.min_step`` 0: every drop written, every cycle): decay's own rewrites
change importanceScore and updatedAt alone, which neither the fold, nor the write-back repair, nor gating reads, so
their answers, kept under the corpus's content generation (memory/content_digests.py), still hold and their walks
are skipped; anything else an answer depends on makes the next cycle walk again. The content generation does not
depend on the corpus index's state: the safety tests run with it cold, warm, stale and corrupt
(tests/corpus_index_modes.py). An exact duplicate and a stale write-back behind such a corpus: test_quiet_memo.py
(``decaying``)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from dreamkeeper.consolidation.journal import DECAY_JOURNAL_SUFFIX, journal_dir
from dreamkeeper.consolidation.quiet import FOLD, GATING, REPAIR, memo_path, repair_state
from dreamkeeper.memory import corpus_index as ci
from tests.consolidation.corpus import Seed, write_corpus
from tests.consolidation.test_quiet_memo import MERGE, NOTHING, Walks, agent, behind, counts, run, settle

__all__ = ["agent"]  # the fixture, shared with test_quiet_memo.py


@pytest.fixture
def decaying(agent: Path) -> Path:
    """The quiet-memo seeds and one entry long past its grace period: every cycle's decay rewrites it."""
    behind(agent, True)
    return agent


class Digested:
    """Content generations worked out from the entries (their digests, kept or made), counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        real = ci.CorpusIndex.content_generation

        def counted(*args: Any) -> str:
            self.count += 1
            return real(*args)

        monkeypatch.setattr(ci.CorpusIndex, "content_generation", counted)


@pytest.mark.usefixtures("corpus_index_mode")
def test_decays_own_rewrites_skip_the_walks_and_report_the_same(
    decaying: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walks = Walks(monkeypatch)
    run(decaying, 0, MERGE)
    walked = run(decaying, 1, NOTHING)
    assert walked.report.decayed >= 1
    quiet_one = settle(decaying, walks, 2)
    assert walks.gated == 0
    assert quiet_one.report.decayed >= 1  # decay wrote, yet nothing else walked
    assert counts(quiet_one) == counts(walked)
    again = run(decaying, 30, NOTHING)
    assert walks.reset() == (0, 0) and walks.gated == 0 and again.report.decayed >= 1
    found = json.loads(memo_path(decaying).read_bytes().split(b"\n", 2)[2])["found"]
    assert {FOLD, REPAIR, GATING} <= found.keys()
    assert not any(found[what]["files"] for what in (FOLD, REPAIR, GATING))


@pytest.mark.usefixtures("corpus_index_mode")
def test_an_edit_that_decay_would_not_make_makes_the_stages_walk(
    decaying: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The agent edits what the answers read (the text of an entry): the fold, the repair and gating walk again."""
    walks = Walks(monkeypatch)
    run(decaying, 0, MERGE)
    settle(decaying, walks)
    path = next((decaying / "memory").rglob("k1.json"))
    obj = json.loads(path.read_text(encoding="utf-8"))
    obj["content"] = "The home lab NAS is a Synology DS923+."
    path.write_text(json.dumps(obj, indent=2), encoding="utf-8")
    os.utime(path, ns=(0, 0))
    outcome = run(decaying, 20, NOTHING)
    assert walks.reset() == (1, 1) and walks.gated == 1
    assert outcome.gating is not None and "k1" in {s.id for s in outcome.gating.eligible}


def test_decay_journals_are_not_part_of_the_repairs_state(decaying: Path) -> None:
    directory = journal_dir(decaying)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "20260101T000000Z-aaaaaaaa.jsonl").write_text("{}\n", encoding="utf-8")
    for path in directory.iterdir():
        os.utime(path, ns=(0, 0))
    before = repair_state(decaying)
    assert before is not None
    (directory / f"20260102T000000Z-bbbbbbbb{DECAY_JOURNAL_SUFFIX}.jsonl").write_text("{}\n", encoding="utf-8")
    assert repair_state(decaying) == before  # decay's journal: never folded into the write-back index
    (directory / "20260102T000000Z-bbbbbbbb.jsonl").write_text("{}\n", encoding="utf-8")
    assert repair_state(decaying) != before  # a plan's journal: the repair reads it


def test_a_quiet_corpus_without_writes_digests_nothing(agent: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing written since the last cycle (the corpus index vouches for the very files): the content generations
    come from the memo, not from a digest of any entry (the frugal steady cycle's cost is unchanged)."""
    walks = Walks(monkeypatch)
    still = {"decay": {"enabled": False}}
    run(agent, 0, MERGE, **still)
    settle(agent, walks, **still)
    run(agent, 10, NOTHING, **still)
    digested = Digested(monkeypatch)
    outcome = run(agent, 11, NOTHING, **still)
    assert walks.reset() == (0, 0) and walks.gated == 0 and outcome.report.result == "completed"
    assert digested.count == 0
    write_corpus(agent, [Seed("k3", "The printer in the study is a Brother HL-L2350.", "project-context")])
    os.utime(next((agent / "memory").rglob("k3.json")), ns=(0, 0))
    run(agent, 12, NOTHING, **still)
    assert digested.count >= 1  # a file added: the corpus is another, its content generation worked out again
