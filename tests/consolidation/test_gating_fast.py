"""Gating's per-entry fast paths give the answers of their definitions."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from dreamkeeper.consolidation.gating import is_reviewed, unreviewed_ids
from dreamkeeper.memory import REVIEWED_HASH, Entry, StoredEntry, review_hash
from dreamkeeper.memory.atomic import Fingerprint

T = datetime(2026, 6, 1, tzinfo=UTC)


@st.composite
def _stored(draw: st.DrawFn, number: int) -> StoredEntry:
    content = draw(st.sampled_from(["Allen works at Xebia.", "", "ünïcode \ud83d", "x"]))
    stamp = draw(
        st.sampled_from(
            [
                None,  # no metadata at all
                "absent",  # metadata without a stamp
                review_hash(content),  # the stamp of this text
                review_hash(content).lower(),  # RockBot's spelling may differ in case
                review_hash(content + "."),  # another text's stamp
                "",
            ]
        )
    )
    metadata = None if stamp is None else ({"other": "1"} if stamp == "absent" else {REVIEWED_HASH: stamp})
    entry = Entry(id=f"e{number}", content=content, created_at=T, metadata=metadata)
    return StoredEntry(entry, Path(f"/m/e{number}.json"), Fingerprint(str(number), 1, 1))


@given(st.lists(st.integers(0, 10_000), max_size=12, unique=True).flatmap(lambda ns: st.tuples(*map(_stored, ns))))
def test_unreviewed_ids_is_its_definition(pool: tuple[StoredEntry, ...]) -> None:
    assert unreviewed_ids(pool) == {s.id for s in pool if not is_reviewed(s)}
