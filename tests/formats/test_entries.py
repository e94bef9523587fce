"""Hermes' § entry files: parsed and written as its own memory tool does, caps kept exactly."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamkeeper.formats.entries import HERMES_SEPARATOR, edit_entries, joined_length, parse_entries
from dreamkeeper.formats.markdown import EditRefused


def hermes_read(raw: str) -> list[str]:
    """hermes-agent 0.19.0 ``MemoryStore._read_file`` (tools/memory_tool.py), restated."""
    return [e.strip() for e in raw.split(HERMES_SEPARATOR) if e.strip()] if raw.strip() else []


def hermes_drift(raw: str, cap: int) -> bool:
    """hermes-agent 0.19.0 ``_detect_external_drift``'s test, restated."""
    if not raw.strip():
        return False
    parsed = [e.strip() for e in raw.split(HERMES_SEPARATOR) if e.strip()]
    return raw.strip() != HERMES_SEPARATOR.join(parsed) or max(len(e) for e in parsed) > cap


def test_entries_are_what_hermes_reads() -> None:
    raw = "a fact\n§\n  multi\nline fact  \n§\n\n§\nlast"
    parsed = parse_entries(raw, "MEMORY.md", "core")
    assert [u.text for u in parsed.units] == hermes_read(raw) == ["a fact", "multi\nline fact", "last"]
    assert not parsed.round_trips  # the empty entry and the padding: Hermes' drift guard would refuse edits


def test_a_rewrite_round_trips_through_hermes_and_unblocks_its_drift_guard() -> None:
    raw = "a fact\n§\n  padded  \n§\n\n§\nlast"
    assert hermes_drift(raw, 2200)
    units = parse_entries(raw, "MEMORY.md", "core").units
    out = edit_entries(raw, file="MEMORY.md", kind="core", remove=[units[0].key], insert=["merged fact"], cap=2200)
    assert hermes_read(out) == ["padded", "last", "merged fact"]
    assert not hermes_drift(out, 2200)


def test_a_rewrite_that_would_go_over_the_cap_is_refused() -> None:
    raw = HERMES_SEPARATOR.join(["x" * 600, "y" * 600])
    with pytest.raises(EditRefused, match="over its cap of 1,375"):
        edit_entries(raw, file="USER.md", kind="core", insert=["z" * 200], cap=1375)
    exact = edit_entries(raw, file="USER.md", kind="core", insert=["z" * (1375 - 1203 - 3)], cap=1375)
    assert joined_length(hermes_read(exact)) == 1375  # exactly at the cap is allowed, as Hermes allows it


def test_a_file_already_over_its_cap_may_shrink_but_not_grow() -> None:
    raw = HERMES_SEPARATOR.join(["a" * 1000, "b" * 1000, "c" * 400])  # 2,406 > 2,200: written by someone else
    units = parse_entries(raw, "MEMORY.md", "core").units
    shrunk = edit_entries(
        raw, file="MEMORY.md", kind="core", remove=[units[0].key, units[1].key], insert=["ab" * 10], cap=2200
    )
    assert joined_length(hermes_read(shrunk)) < 2200
    with pytest.raises(EditRefused):
        edit_entries(raw, file="MEMORY.md", kind="core", insert=["more"], cap=2200)


def test_an_entry_holding_the_separator_line_is_refused() -> None:
    with pytest.raises(EditRefused, match="separator"):
        edit_entries("a", file="MEMORY.md", kind="core", insert=["one\n§\ntwo"])


@settings(max_examples=200, deadline=None)
@given(
    entries=st.lists(st.text(st.sampled_from("ab §\n.-1"), min_size=1, max_size=30), max_size=8),
    new=st.text(st.sampled_from("xy .1"), min_size=1, max_size=40),
)
def test_every_write_round_trips_and_stays_within_the_cap(entries: list[str], new: str) -> None:
    raw = HERMES_SEPARATOR.join(entries)
    parsed = parse_entries(raw, "MEMORY.md", "core")
    assert [u.text for u in parsed.units] == hermes_read(raw)
    try:
        out = edit_entries(
            raw, file="MEMORY.md", kind="core", remove=[u.key for u in parsed.units[:1]], insert=[new], cap=120
        )
    except EditRefused:
        return
    assert not hermes_drift(out, 120)
    assert joined_length(hermes_read(out)) <= max(120, joined_length(hermes_read(raw)))
    assert hermes_read(out) == [u.text for u in parsed.units[1:]] + [new.strip()]
