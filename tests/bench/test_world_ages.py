"""The synthetic corpus's ages (bench/sim/world.py): the old fixed corpus by default, a young one on request."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
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
