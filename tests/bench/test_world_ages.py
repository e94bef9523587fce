"""The synthetic corpus's ages (bench/sim/world.py): the old fixed corpus by default, a young one on request."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from bench.scale_steady import SETTLE_MAX, child, markdown
from bench.sim.world import write_synthetic_corpus

OLD_ANCHOR = datetime(2026, 9, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain")
    write_synthetic_corpus(root, 120, 7)
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _created(root: Path) -> list[datetime]:
    return [datetime.fromisoformat(json.loads(p.read_text())["createdAt"]) for p in root.rglob("*.json")]


def test_the_default_is_the_old_corpus_byte_for_byte(plain: Path, tmp_path: Path) -> None:
    write_synthetic_corpus(tmp_path, 120, 7, anchor=OLD_ANCHOR, max_age_days=700)
    assert _files(plain) == _files(tmp_path)
    created = _created(plain)
    assert min(created) > OLD_ANCHOR - timedelta(days=701)
    assert max(created) < OLD_ANCHOR


def test_a_young_corpus_is_made_within_its_days_before_the_anchor(plain: Path, tmp_path: Path) -> None:
    anchor = datetime(2026, 12, 8, tzinfo=UTC)
    write_synthetic_corpus(tmp_path, 120, 7, anchor=anchor, max_age_days=365)
    created = _created(tmp_path)
    assert len(created) == 120
    assert all(anchor - timedelta(days=366) < c < anchor for c in created)
    # spread over the year, not bunched: entries in both halves of it
    assert any(c < anchor - timedelta(days=200) for c in created)
    assert any(c > anchor - timedelta(days=150) for c in created)
    # the same generator otherwise: as many entries, in the same categories
    categories = {str(p.parent.relative_to(plain)) for p in plain.rglob("*.json")}
    assert categories == {str(p.parent.relative_to(tmp_path)) for p in tmp_path.rglob("*.json")}


def _settled_share(agent: Path, ages: dict[str, Any]) -> float:
    """Decay's share of the live entries in a cycle an hour after the corpus settled, in RockBot's mode (every drop
    written), as ``bench scale-steady --hours-between 1`` measures it."""
    write_synthetic_corpus(agent / "memory", 300, 7, **ages)
    assert child("cycle", agent, True)["result"] == "completed"
    for _ in range(SETTLE_MAX):
        settled = child("cycle", agent, True, settle=True)
        if not settled["reviewed"] and settled["wrote"] == settled["decayed"]:
            break
    else:
        raise AssertionError("the corpus did not settle")
    later = child("cycle", agent, True, now=datetime.now(UTC) + timedelta(hours=1))
    assert later["result"] == "completed" and later["wrote"] == later["decayed"], later
    return float(later["decayed"]) / float(later["live"])


def test_a_young_corpus_rewrites_a_larger_share_of_itself_every_cycle(tmp_path: Path) -> None:
    """The reason ``--corpus-age-days`` exists (bench/results/limits-s42.md): the old corpus sits mostly at the decay
    floor (about 7% of its live entries decay a cycle at 10,000), a young one is mostly still decaying (34%)."""
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    # The old corpus as it stood when this was written (2026-12-08, 98 days after its anchor): the default one ages
    # with the calendar, and from about 2027-02-27 on none of it decays any more.
    old = _settled_share(tmp_path / "old", {"anchor": today - timedelta(days=98), "max_age_days": 700})
    young = _settled_share(tmp_path / "young", {"anchor": today, "max_age_days": 365})
    assert 0.0 < old < 0.2, old
    assert young > 0.2 and young > 2 * old, (old, young)


def test_the_report_names_a_young_corpus_and_its_live_entries() -> None:
    side = {"cpuSeconds": 1.0, "overLoad": 2.0, "peakRssMiB": 1.0, "result": "completed", "stagesCpu": {}}
    run = {
        "size": 300,
        "loadCpuSeconds": 0.5,
        "hoursBetween": 1.0,
        "corpusAgeDays": 365,
        "steady": {**side, "wrote": 70, "live": 230, "allWrote": [70]},
        "steadyNoIndex": side,
    }
    result = {"command": "c", "generatedAt": "g", "machine": "m", "runs": [run]}
    text = markdown(result)
    assert "``--corpus-age-days 365``" in text and "300: 230" in text
    assert "A young corpus" not in markdown({**result, "runs": [{**run, "corpusAgeDays": None}]})
