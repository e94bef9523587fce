"""Tolerant reading of model replies, then strict validation."""

from __future__ import annotations

import json

import pytest

from dreamkeeper.proposers.openai_parse import (
    ReplyError,
    iter_json_objects,
    parse_proposal,
    parse_repair,
    strip_reasoning,
)

GOOD = {
    "toDelete": ["aaa111"],
    "toSave": [{"content": "Rocky lives in Minnesota.", "category": "user", "tags": ["home"], "sourceIds": ["b", "c"]}],
}


def test_plain_json_validates_to_a_proposal() -> None:
    proposal = parse_proposal(json.dumps(GOOD))
    assert proposal.to_delete == ["aaa111"]
    assert proposal.to_save[0].source_ids == ["b", "c"]
    assert proposal.to_save[0].importance is None


def test_think_block_with_braces_is_ignored() -> None:
    text = '<think>maybe {"toDelete": ["zzz"]} would do? no.</think>\n' + json.dumps(GOOD)
    assert parse_proposal(text).to_delete == ["aaa111"]


def test_lone_closing_think_tag_drops_the_reasoning_before_it() -> None:
    # Some chat templates swallow the opening tag: only "</think>" reaches the client.
    text = 'The user wants {"toDelete": ["zzz"]}. Fine.</think>' + json.dumps(GOOD)
    assert strip_reasoning(text) == json.dumps(GOOD)
    assert parse_proposal(text).to_delete == ["aaa111"]


def test_code_fence_and_prose_around_it() -> None:
    text = "Here is my answer {as requested}:\n```json\n" + json.dumps(GOOD, indent=2) + "\n```\nDone."
    assert parse_proposal(text).to_save[0].content == "Rocky lives in Minnesota."


def test_brace_scan_respects_braces_and_quotes_inside_strings() -> None:
    obj = {"toDelete": [], "toSave": [{"content": 'Use "{x}" then } and {{ in templates', "sourceIds": ["a", "b"]}]}
    text = "noise } { not json " + json.dumps(obj) + " trailing {"
    assert parse_proposal(text).to_save[0].content == 'Use "{x}" then } and {{ in templates'


def test_first_object_without_the_keys_is_skipped_and_wrappers_are_searched() -> None:
    text = '{"note": "thinking"} {"result": ' + json.dumps(GOOD) + "}"
    assert parse_proposal(text).to_delete == ["aaa111"]


def test_key_casing_and_numeric_ids_are_tolerated() -> None:
    text = '{"ToDelete": [167159126119], "to_save": [{"Content": "x", "source_ids": [12, "ab"]}]}'
    proposal = parse_proposal(text)
    assert proposal.to_delete == ["167159126119"]
    assert proposal.to_save[0].source_ids == ["12", "ab"]


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty reply"),
        ("   \n", "empty reply"),
        ("I cannot help with that.", r"no JSON object \(prose only"),
        ('{"answer": "nothing to do"}', r"JSON without toDelete/toSave \(its keys: answer\)"),
        ('{"toDelete": ["a", "b"', "JSON is cut off"),  # truncated
        ("{toDelete: [], toSave: []}", "JSON does not parse"),
        ('{"toDelete": "everything"}', "proposal schema"),
        ('{"toDelete": [], "toSave": [{"content": ["not", "text"]}]}', "proposal schema"),
    ],
)
def test_unusable_replies_raise_with_a_reason(text: str, fragment: str) -> None:
    with pytest.raises(ReplyError, match=fragment):
        parse_proposal(text)


def test_error_preview_is_truncated_to_300_chars() -> None:
    with pytest.raises(ReplyError) as info:
        parse_proposal("x" * 5000)
    assert "x" * 300 + "…" in str(info.value)
    assert "x" * 301 not in str(info.value)


def test_iter_json_objects_yields_nested_objects_in_order() -> None:
    found = list(iter_json_objects('{"a": {"b": 1}} {"c": 2}'))
    assert found == [{"a": {"b": 1}}, {"b": 1}, {"c": 2}]


def test_raw_control_characters_inside_strings_are_read() -> None:
    # llama.cpp's JSON grammar allows a literal newline or tab inside a string; strict json.loads rejects them.
    text = '{"toDelete": [], "toSave": [{"content": "Line one.\nLine\ttwo.", "sourceIds": ["a", "b"]}]}'
    assert "\n" in text  # a raw newline, not the two characters backslash-n
    assert parse_proposal(text).to_save[0].content == "Line one.\nLine\ttwo."
    assert parse_repair('{"content": "Rockford\nLhotka"}') == "Rockford\nLhotka"


def test_repair_reply() -> None:
    assert parse_repair('<think>hm</think>{"content": "Rockford Duane Lhotka"}') == "Rockford Duane Lhotka"
    with pytest.raises(ReplyError):
        parse_repair('{"content": ""}')
    with pytest.raises(ReplyError):
        parse_repair("sorry")


def test_a_reply_nested_too_deeply_to_parse_is_a_reply_error_not_a_crash() -> None:
    deep = '{"toDelete": [], "x": ' + "[" * 100_000 + "]" * 100_000 + "}"
    with pytest.raises(ReplyError):
        parse_proposal(deep)
