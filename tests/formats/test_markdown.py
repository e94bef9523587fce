"""Markdown files as units under headings: what is a unit, and edits that touch nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamkeeper.formats.markdown import OPENCLAW_MANAGED, EditRefused, Insertion, edit, parse
from dreamkeeper.formats.units import normalise_text

MEMORY = """# Memory

## People

- Franklin Oduya is the on-call lead.
  - phone +1 386-299-4605
- Priya prefers tea.

Paragraph about Priya
continues here. <!-- importance: 7 -->

## Projects

The Hydra migration ships 2026-12-15.
<!-- openclaw:dreaming:light:start -->
- staged candidate, never a unit
<!-- openclaw:dreaming:light:end -->

```
code stays one unit
- even with a bullet inside
```
"""
MANAGED = (OPENCLAW_MANAGED,)


def texts(text: str) -> list[tuple[str, str]]:
    return [(u.key.heading, u.text) for u in parse(text, MANAGED).units("MEMORY.md", "core")]


def test_units_are_items_paragraphs_and_fences_under_their_heading_path() -> None:
    assert texts(MEMORY) == [
        ("Memory > People", "- Franklin Oduya is the on-call lead.\n  - phone +1 386-299-4605"),
        ("Memory > People", "- Priya prefers tea."),
        ("Memory > People", "Paragraph about Priya\ncontinues here. <!-- importance: 7 -->"),
        ("Memory > Projects", "The Hydra migration ships 2026-12-15."),
        ("Memory > Projects", "```\ncode stays one unit\n- even with a bullet inside\n```"),
    ]


def test_blocks_cover_the_whole_text_in_order() -> None:
    parsed = parse(MEMORY, MANAGED)
    assert "".join(MEMORY[b.start : b.end] for b in parsed.blocks) == MEMORY
    assert [b.kind for b in parsed.blocks].count("managed") == 1


def test_front_matter_setext_headings_breaks_and_comment_lines_are_not_units() -> None:
    text = "---\nname: x\n---\nTitle\n=====\n\nSub\n---\n\n<!-- a note -->\n\n***\n\n1. first\n2) second\n"
    assert texts(text) == [("Title > Sub", "1. first"), ("Title > Sub", "2) second")]


def test_a_loose_list_item_keeps_its_indented_paragraph_and_a_lazy_line() -> None:
    text = "- item one\nlazy continuation\n\n  second paragraph of one\n- item two\n\nafter\n"
    assert [t for _, t in texts(text)] == [
        "- item one\nlazy continuation\n\n  second paragraph of one",
        "- item two",
        "after",
    ]


def test_identity_ignores_the_list_marker_and_wrapping_not_the_words() -> None:
    assert normalise_text("- Priya  prefers\n  tea.") == normalise_text("* Priya prefers tea.")
    assert normalise_text("Priya prefers tea.") != normalise_text("Priya prefers coffee.")
    a = parse("- Priya prefers tea.\n", ()).units("f.md", "core")[0].key
    b = parse("* Priya   prefers tea.\n", ()).units("f.md", "core")[0].key
    assert a == b


def test_identical_texts_under_one_heading_are_numbered() -> None:
    units = parse("- same\n- same\n- other\n", ()).units("f.md", "core")
    assert [u.key.nth for u in units] == [1, 2, 1]
    assert len({u.key.unit_id() for u in units}) == 3


def test_removing_a_unit_leaves_every_other_byte() -> None:
    units = parse(MEMORY, MANAGED).units("MEMORY.md", "core")
    out = edit(MEMORY, file="MEMORY.md", kind="core", remove=[units[1].key], managed=MANAGED)
    assert out == MEMORY.replace("- Priya prefers tea.\n", "")


def test_removing_a_paragraph_takes_one_of_its_blank_lines() -> None:
    text = "# T\n\nfirst\n\nsecond\n\nthird\n"
    units = parse(text, ()).units("f.md", "core")
    assert edit(text, file="f.md", kind="core", remove=[units[1].key]) == "# T\n\nfirst\n\nthird\n"
    assert edit(text, file="f.md", kind="core", remove=[units[2].key]) == "# T\n\nfirst\n\nsecond\n"


def test_insertion_goes_under_its_heading_as_a_list_item_and_creates_a_missing_heading() -> None:
    out = edit(
        MEMORY,
        file="MEMORY.md",
        kind="core",
        insert=[
            Insertion("Ana joined in March.", ("Memory", "People")),
            Insertion("Lisbon office", ("Memory", "Places")),
        ],
        managed=MANAGED,
    )
    assert "- Priya prefers tea.\n\nParagraph about Priya\ncontinues here. <!-- importance: 7 -->\n- Ana" not in out
    people = texts(out)
    assert ("Memory > People", "- Ana joined in March.") in people
    assert ("Memory > Places", "- Lisbon office") in people
    assert out.startswith(MEMORY.split("## Projects")[0].rstrip("\n"))
    assert "<!-- openclaw:dreaming:light:start -->\n- staged candidate, never a unit\n" in out


def test_a_multiline_successor_is_one_list_item() -> None:
    out = edit("# M\n\n- a\n", file="f.md", kind="core", insert=[Insertion("line one\nline two", ("M",))])
    assert out == "# M\n\n- a\n- line one\n  line two\n"
    assert [u.text for u in parse(out, ()).units("f.md", "core")] == ["- a", "- line one\n  line two"]


def test_removing_a_unit_that_is_not_there_is_refused() -> None:
    units = parse("- a\n", ()).units("f.md", "core")
    with pytest.raises(EditRefused, match="not found"):
        edit("- b\n", file="f.md", kind="core", remove=[units[0].key])


def test_an_insertion_that_would_merge_into_its_neighbour_is_refused() -> None:
    # A "successor" that opens a fence swallows what follows: the re-parse catches it and nothing is written.
    with pytest.raises(EditRefused):
        edit("# M\n\n- a\n\n# N\n\n- b\n", file="f.md", kind="core", insert=[Insertion("```\nopen", ("M",), False)])


def test_managed_regions_are_never_edited_or_split() -> None:
    text = "# D\n\n<!-- openclaw:dreaming:rem:start -->\n## REM Sleep\n- theme\n<!-- openclaw:dreaming:rem:end -->\n"
    assert texts(text) == []
    out = edit(text, file="f.md", kind="log", insert=[Insertion("new note", ("D",))], managed=MANAGED)
    assert "<!-- openclaw:dreaming:rem:start -->\n## REM Sleep\n- theme\n<!-- openclaw:dreaming:rem:end -->\n" in out


# ---- properties -----------------------------------------------------------------------------------------------

_WORDS = st.sampled_from(["alpha", "Franklin", "2026-11-30", "+1 386-299-4605", "tea", "INC-4411", "nas-02", "x"])
_LINE = st.lists(_WORDS, min_size=1, max_size=5).map(" ".join)
_BLOCK = st.one_of(
    _LINE.map(lambda s: f"- {s}\n"),
    st.tuples(_LINE, _LINE).map(lambda p: f"- {p[0]}\n  - {p[1]}\n"),
    st.tuples(_LINE, _LINE).map(lambda p: f"\n{p[0]}\n{p[1]}\n\n"),
    _LINE.map(lambda s: f"\n## {s}\n\n"),
    _LINE.map(lambda s: f"\n### {s}\n\n"),
    st.just("\n<!-- openclaw:dreaming:light:start -->\n- staged\n<!-- openclaw:dreaming:light:end -->\n"),
    st.just("\n```\n- fenced\n```\n"),
)
_DOC = st.lists(_BLOCK, min_size=0, max_size=12).map(lambda blocks: "# Memory\n\n" + "".join(blocks))


@settings(max_examples=150, deadline=None)
@given(doc=_DOC, picks=st.lists(st.integers(min_value=0, max_value=30), max_size=4), new=_LINE)
def test_edits_remove_exactly_what_they_name_and_add_under_the_heading(doc: str, picks: list[int], new: str) -> None:
    parsed = parse(doc, MANAGED)
    assert "".join(doc[b.start : b.end] for b in parsed.blocks) == doc
    units = parsed.units("MEMORY.md", "core")
    remove = list({units[p % len(units)].key for p in picks}) if units else []
    heading = units[0].heading if units else ("Memory",)
    try:
        out = edit(doc, file="MEMORY.md", kind="core", remove=remove, insert=[Insertion(new, heading)], managed=MANAGED)
    except EditRefused:
        return  # refused is allowed (nothing written); a wrong result is not
    after = parse(out, MANAGED).units("MEMORY.md", "core")
    kept = [(u.key.heading, u.key.hash) for u in units if u.key not in remove]
    got = [(u.key.heading, u.key.hash) for u in after]
    for item in kept:
        got.remove(item)
    assert len(got) == 1 and got[0][1] == parse(f"- {new}\n", ()).units("x", "core")[0].key.hash
    # Managed regions and fenced code come through byte for byte.
    assert out.count("<!-- openclaw:dreaming:light:start -->\n- staged\n") == doc.count(
        "<!-- openclaw:dreaming:light:start -->\n- staged\n"
    )
