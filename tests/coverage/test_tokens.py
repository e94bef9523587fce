"""A text's tokens are read once for extraction and inventory (coverage/tokens.py): the memo only saves work.
Whatever was read before, and in whatever order, every answer is the one read from scratch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dreamkeeper.coverage import extract_specifics
from dreamkeeper.coverage.inventory import Inventory
from dreamkeeper.coverage.specifics import clear_specifics_memo, extract_specifics_unmemoised
from dreamkeeper.coverage.text import prepare
from dreamkeeper.coverage.tokens import clear_tokens_memo, read_tokens, tokens_of
from tests.coverage.test_memo import any_texts, categories


@pytest.fixture(autouse=True)
def _cold() -> Iterator[None]:
    clear_tokens_memo()
    clear_specifics_memo()
    yield
    clear_tokens_memo()
    clear_specifics_memo()


def _counters(inventory: Inventory) -> tuple[object, ...]:
    return tuple(getattr(inventory, name) for name in ("words", "numbers", "chunks", "phones", "runs", "date_keys"))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_texts)
def test_the_memo_gives_the_tokens_read_from_scratch(text: str) -> None:
    assert tokens_of(text) == read_tokens(prepare(text))
    assert tokens_of(text) is tokens_of(text)  # the second ask is served, not read again


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_texts, categories, st.booleans())
def test_extraction_and_inventory_agree_whichever_read_the_text_first(text: str, category: str, extract: bool) -> None:
    clear_tokens_memo()
    clear_specifics_memo()
    cold = Inventory.of(text)  # read from scratch: nothing in the memo
    clear_tokens_memo()
    if extract:
        found = extract_specifics(text, category)  # reads the tokens the inventory then takes from the memo
        assert found == extract_specifics_unmemoised(text, category)
    warm = Inventory.of(text)
    assert _counters(warm) == _counters(cold)
    assert all(warm.covers(specific) for specific in extract_specifics(text, category))


def test_a_texts_tokens_are_immutable() -> None:
    tokens = tokens_of("Rocky's NAS nas-01 at 10.0.0.5 since August 19, 2026; mail rocky@example.com.")
    assert isinstance(tokens.chunked, tuple) and isinstance(tokens.listed, tuple)
    assert isinstance(tokens.numbers, tuple) and isinstance(tokens.month_dates, tuple)
    assert [w.text for w in tokens.listed][:2] == ["Rocky", "NAS"]
    assert (tokens.month_dates[0].date.year, tokens.month_dates[0].date.month) == (2026, 8)
    with pytest.raises(AttributeError):
        tokens.listed = ()  # type: ignore[misc]
