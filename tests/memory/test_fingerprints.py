"""``dotnet_collapse``'s ASCII fast paths (a set-free check, and the text itself when there is nothing to collapse)
give exactly the answer of its definition: .NET's ``Regex.Replace(text, @"\\s+", " ").Trim()``."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st

from dreamkeeper.memory import fold_key
from dreamkeeper.memory.fingerprints import dotnet_collapse

# .NET's \s, written out again here (not imported): the definition the fast paths must agree with.
_NET_SPACE = re.compile("[\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+")

# Every ASCII whitespace of either engine, U+001C-U+001F (Python's only), a few .NET-only ones, and plain letters.
_ALPHABET = st.sampled_from([" ", "\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0",
                             "\u2003", "\u3000", "a", "b", "Z", "é", "\ud83d", ".", "-"])  # fmt: skip


def _by_definition(text: str) -> str:
    return _NET_SPACE.sub(" ", text).strip(" ")


@given(st.lists(_ALPHABET, max_size=24).map("".join))
@example("already collapsed text")
@example(" leading")
@example("trailing ")
@example("two  spaces")
@example("a\x1cb")
@example("")
@example(" ")
def test_dotnet_collapse_is_its_definition(text: str) -> None:
    assert dotnet_collapse(text) == _by_definition(text)


@given(st.text(max_size=40))
def test_dotnet_collapse_of_any_text_is_its_definition(text: str) -> None:
    assert dotnet_collapse(text) == _by_definition(text)


@given(
    st.one_of(st.none(), st.lists(_ALPHABET, max_size=8).map("".join)), st.lists(_ALPHABET, max_size=24).map("".join)
)
def test_the_content_half_of_a_fold_key_is_its_collapse(category: str | None, content: str) -> None:
    """The fold plans its keys from the content's collapse alone (``fold.plan_folds``): the same as ``fold_key``'s."""
    assert fold_key(category, content)[1] == dotnet_collapse(content)
    assert fold_key(category, content)[0] == _by_definition(category or "").lower()
