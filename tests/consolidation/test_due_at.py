"""``declines.due_at`` (gating asks it of every cluster of the corpus every cycle, issue 27): exactly RockBot's
``reopen_at`` and dreamkeeper's "never declined: at once" rule together, from one reading of the stamps."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from dreamkeeper.consolidation.declines import EPOCH_START, due_at, never_declined, reopen_at
from dreamkeeper.memory import DECLINED_AT, DECLINED_CLUSTER, DECLINED_COUNT, REVIEWED_AT, Entry, cluster_hash

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def members(rng: random.Random) -> list[Entry]:
    ids = [f"e{k}" for k in rng.sample(range(20), rng.randint(2, 5))]
    own = cluster_hash(ids)
    out = []
    for entry_id in ids:
        meta: dict[str, str] = {}
        if rng.random() < 0.7:
            meta[DECLINED_CLUSTER] = rng.choice([own, own.lower(), "0123456789ABCDEF", " ", own])
            meta[DECLINED_AT] = rng.choice([(NOW - timedelta(days=rng.randint(0, 90))).isoformat(), "garbage"])
            meta[DECLINED_COUNT] = rng.choice(["1", "2", "5", "0", "-3", "x", str(2**40)])
        if rng.random() < 0.7:
            meta[REVIEWED_AT] = (NOW - timedelta(days=rng.randint(0, 30))).isoformat()
        out.append(Entry(id=entry_id, content=f"fact {entry_id}", created_at=NOW, metadata=meta))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_due_at_is_reopen_at_or_at_once_for_a_never_declined_cluster(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        group = members(rng)
        interval = timedelta(days=rng.choice([0, 7, 7, 1]))
        cap = timedelta(days=rng.choice([0, 56]))
        for new in (False, True):
            expected = reopen_at(group, interval, cap)
            if new and never_declined(group):
                expected = EPOCH_START
            assert due_at(group, interval, cap, new) == expected
