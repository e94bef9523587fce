"""Entry.from_json_obj: the fast path agrees with the pydantic model on every input (values, errors, extras,
fields-set), every parsed file is written back byte-for-byte, and a parsed entry stays small."""

from __future__ import annotations

import copy
import gc
import json
import pickle
import tracemalloc
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dreamkeeper.memory.entry import Entry
from tests.memory.conftest import rockbot_entry

ALIASES = {(info.alias or name): name for name, info in Entry.model_fields.items()}
BY_LOWER = {alias.lower(): alias for alias in ALIASES}
TIMESTAMP_ALIASES = ("createdAt", "updatedAt", "lastSeenAt", "archivedAt")


def reference(obj: dict[str, Any]) -> Entry:
    """The model's own reading of a file: keys matched case-insensitively, null content is "", every value
    validated by pydantic. The rules from_json_obj must follow, fast path or not."""
    normalised: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in obj.items():
        alias = BY_LOWER.get(key.lower())
        if alias is None:
            normalised[key] = value
            continue
        if alias in spelled:
            raise ValueError(f"property {alias!r} appears twice ({spelled[alias]!r} and {key!r})")
        spelled[alias] = key
        normalised[alias] = value
    if not isinstance(normalised.get("id"), str) or not normalised["id"].strip():
        raise ValueError("missing or blank 'id'")
    if normalised.get("content") is None:
        normalised["content"] = ""
    return Entry.model_validate(normalised, by_alias=True, by_name=False)


def outcome(parse: Any, obj: dict[str, Any]) -> tuple[str, Any]:
    try:
        entry = parse(obj)
    except ValueError as exc:
        return "error", str(exc)
    fields = dict(entry.__dict__)
    present = {BY_LOWER[key.lower()] for key in obj if key.lower() in BY_LOWER}
    if "createdAt" not in present:
        fields.pop("created_at")  # the load-time default: a different instant on each parse
    offsets = {name: value.utcoffset() for name, value in fields.items() if isinstance(value, datetime)}
    types = {name: type(value) for name, value in fields.items()}
    return "entry", (fields, offsets, types, entry.model_extra or {}, entry.model_fields_set)


def assert_same_as_model(obj: dict[str, Any]) -> None:
    assert outcome(Entry.from_json_obj, obj) == outcome(reference, obj)


# ---- inputs: the plain forms RockBot writes, and the odd ones pydantic coerces or refuses -------------------

fractions = st.integers(0, 9).flatmap(lambda n: st.text("0123456789", min_size=n, max_size=n))
offsets = st.sampled_from(["", "Z", "+00:00", "-00:00", "+05:30", "-05:00", "+14:00", "z", "+0530", " UTC"])
separators = st.sampled_from(["T", "T", "T", " ", "t"])


@st.composite
def timestamps(draw: st.DrawFn) -> Any:
    moment = draw(st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30)))
    fraction = draw(fractions)
    text = moment.strftime("%Y-%m-%d") + draw(separators) + moment.strftime("%H:%M:%S")
    text += ("." + fraction if fraction else "") + draw(offsets)
    odd = st.sampled_from(
        ["2026-05-20", "2026-05-20T24:00:00Z", "2026-02-30T10:00:00Z", "2026-W01", "last tuesday", "", "2026-05-20T10"]
    )
    return draw(st.one_of(st.just(text), odd, st.integers(0, 2**33), st.floats(0, 2e9), st.none(), st.booleans()))


texts = st.text(max_size=30)
plain_or_odd_text = st.one_of(texts, texts, st.none(), st.integers(), st.booleans(), st.lists(texts, max_size=2))
numbers = st.one_of(
    st.integers(-(2**60), 2**60),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.sampled_from(["0.5", "3", " 7 ", "1e3", "high", "", "nan"]),
    st.none(),
)
tag_lists = st.one_of(st.lists(texts, max_size=3), st.none(), st.just("family"), st.lists(st.integers(), max_size=2))
metadatas = st.one_of(
    st.dictionaries(texts, texts, max_size=3),
    st.none(),
    st.dictionaries(texts, st.one_of(st.integers(), st.none(), texts), max_size=2),
    st.just(["a"]),
)
FIELD_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "content": plain_or_odd_text,
    "category": plain_or_odd_text,
    "tags": tag_lists,
    "createdAt": timestamps(),
    "updatedAt": timestamps(),
    "lastSeenAt": timestamps(),
    "reinforcementCount": numbers,
    "importanceScore": numbers,
    "metadata": metadatas,
    "supersededBy": plain_or_odd_text,
    "archivedAt": timestamps(),
    "archiveReason": plain_or_odd_text,
}
spellings = st.sampled_from(["camel", "pascal", "lower"])


@st.composite
def files(draw: st.DrawFn) -> dict[str, Any]:
    """A file: an id, any subset of the known fields (any spelling), maybe unknown fields, in any order."""
    spell = draw(spellings)
    chosen = draw(st.lists(st.sampled_from(list(FIELD_VALUES)), unique=True, max_size=len(FIELD_VALUES)))
    items = [("id", draw(st.sampled_from(["a1b2c3d4e5f6", "X", "  ", "", None, 7])))]
    items += [(alias, draw(FIELD_VALUES[alias])) for alias in chosen]
    items += [(key, draw(texts)) for key in draw(st.lists(st.sampled_from(["verify", "archived_at", "Score"])))]
    items = draw(st.permutations(items))
    obj: dict[str, Any] = {}
    for alias, value in items:
        key = {"camel": alias, "pascal": alias[0].upper() + alias[1:], "lower": alias.lower()}[spell]
        obj[key] = value
    return obj


@settings(max_examples=400, deadline=None)
@given(files())
def test_fast_path_reads_every_file_as_the_model_does(obj: dict[str, Any]) -> None:
    assert_same_as_model(obj)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(TIMESTAMP_ALIASES), timestamps(), min_size=1))
def test_timestamps_are_read_as_the_model_reads_them(stamps: dict[str, Any]) -> None:
    assert_same_as_model({"id": "a1b2c3d4e5f6", **stamps})


@settings(max_examples=300, deadline=None)
@given(files())
def test_every_readable_file_is_written_back_as_it_was(obj: dict[str, Any]) -> None:
    try:
        entry = Entry.from_json_obj(obj)
    except ValueError:
        return
    # json.dumps, not ==: 1 and 1.0 are equal in Python, not in the file.
    assert json.dumps(entry.to_json_obj()) == json.dumps(obj)
    assert json.dumps(entry.evolve().to_json_obj()) == json.dumps(obj)
    assert json.dumps(pickle.loads(pickle.dumps(entry)).to_json_obj()) == json.dumps(obj)
    assert json.dumps(copy.deepcopy(entry).to_json_obj()) == json.dumps(obj)


@pytest.mark.parametrize(
    "stamp",
    [
        "2026-03-01T08:15:02.123456+00:00",
        "2026-03-01T08:15:02.123456-00:00",
        "2026-03-01T08:15:02.123456+05:30",
        "2026-03-01T08:15:02.123456Z",
        "2026-03-01T08:15:02.123456",
        "2026-03-01T08:15:02.1234567+00:00",
        "2026-03-01T08:15:02+00:00",
        "0999-03-01T08:15:02.000000-05:00",
    ],
)
def test_every_timestamp_form_is_written_back_as_it_was(stamp: str) -> None:
    obj = rockbot_entry(createdAt=stamp, updatedAt=stamp, lastSeenAt=stamp, archivedAt=stamp)
    entry = Entry.from_json_obj(obj)
    assert entry.to_json_obj() == obj
    assert entry.evolve(content="changed").to_json_obj() == {**obj, "content": "changed"}


@pytest.mark.parametrize(
    ("alias", "value"),
    [
        ("importanceScore", "high"),
        ("importanceScore", float("nan")),
        ("tags", "family"),
        ("metadata", {"version": 3}),
        ("createdAt", "last tuesday"),
        ("createdAt", None),
        ("reinforcementCount", 2.5),
        ("content", 12),
    ],
)
def test_an_invalid_field_raises_the_models_error(alias: str, value: Any) -> None:
    obj = rockbot_entry(**{alias: value})
    with pytest.raises(ValueError) as fast:
        Entry.from_json_obj(obj)
    with pytest.raises(ValueError) as model:
        reference(obj)
    assert str(fast.value) == str(model.value)
    assert alias in str(fast.value)


def test_lax_values_are_coerced_as_the_model_does_and_written_back_as_they_were() -> None:
    obj = rockbot_entry(importanceScore="0.25", reinforcementCount=4.0, tags=None, content=None)
    entry = Entry.from_json_obj(obj)
    assert (entry.importance_score, entry.reinforcement_count, entry.tags, entry.content) == (0.25, 4, [], "")
    assert json.dumps(entry.to_json_obj()) == json.dumps(obj)


def test_a_changed_seven_digit_timestamp_is_written_new_and_a_restored_one_as_it_was() -> None:
    obj = rockbot_entry()
    entry = Entry.from_json_obj(obj)
    later = entry.created_at + timedelta(seconds=1)
    changed = entry.evolve(created_at=later).to_json_obj()
    assert changed["createdAt"] == later.isoformat(timespec="microseconds")
    assert {k: v for k, v in changed.items() if k != "createdAt"} == {k: v for k, v in obj.items() if k != "createdAt"}
    back = entry.evolve(created_at=later).evolve(created_at=entry.created_at).to_json_obj()
    assert back["createdAt"] == "2026-03-01T08:15:02.1234567+00:00"


def test_an_absent_created_at_stays_absent_unless_set() -> None:
    obj = {"id": "f1b2c3d4e5f6", "content": "x"}
    entry = Entry.from_json_obj(obj)
    assert entry.to_json_obj() == obj
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    assert entry.evolve(created_at=moment).to_json_obj() == {**obj, "createdAt": "2026-01-01T00:00:00.000000+00:00"}


def test_assigning_a_field_does_not_leak_into_entries_of_the_same_shape() -> None:
    first = Entry.from_json_obj({"id": "a1b2c3d4e5f6", "content": "x"})
    second = Entry.from_json_obj({"id": "b1b2c3d4e5f6", "content": "y"})
    first.category = "people"
    assert "category" in first.model_fields_set
    assert "category" not in second.model_fields_set
    assert second.model_copy(update={"tags": ["t"]}).model_fields_set == {"id", "content", "tags"}
    assert second.model_fields_set == {"id", "content"}


def test_an_unknown_attribute_set_on_a_parsed_entry_is_written() -> None:
    entry = Entry.from_json_obj({"id": "a1b2c3d4e5f6", "content": "x"})
    entry.verify = {"command": "true"}
    assert entry.to_json_obj() == {"id": "a1b2c3d4e5f6", "content": "x", "verify": {"command": "true"}}
    assert entry.model_copy(update={"seen": 1}).to_json_obj()["seen"] == 1


def test_an_entry_built_in_code_writes_every_field() -> None:
    entry = Entry(id="a1b2c3d4e5f6", content="x", created_at=datetime(2026, 1, 1, tzinfo=UTC))
    out = entry.to_json_obj()
    assert list(out) == list(ALIASES)
    assert out["createdAt"] == "2026-01-01T00:00:00.000000+00:00" and out["tags"] == []
    assert Entry.from_json_obj(json.loads(entry.to_json_bytes())).to_json_obj() == out


def test_a_parsed_rockbot_entry_costs_under_3_kb() -> None:
    # RockBot's own shape (7-digit fractions, tags, metadata, unknown field): the costliest common case. The
    # files' objects are made first; only what the kept entries hold is counted.
    objs = [
        json.loads(
            json.dumps(
                rockbot_entry(
                    f"{n:012x}",
                    content=f"fact number {n} about Jordan's week",
                    metadata={"sessionId": f"{n:036d}"},
                    sourceSessionId=f"{n:036d}",
                )
            )
        )
        for n in range(2000)
    ]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        entries = [Entry.from_json_obj(obj) for obj in objs]
        del objs  # what the entries do not hold is freed
        gc.collect()
        per_entry = (tracemalloc.get_traced_memory()[0] - before) / len(entries)
    finally:
        tracemalloc.stop()
    assert per_entry < 3000, f"{per_entry:.0f} bytes per parsed entry"


def test_a_decayed_copy_shares_the_fields_set_and_costs_under_1_kb() -> None:
    # A cold cycle decays nearly every entry of a corpus, each into a copy that lives to the end of the cycle
    # (issue 27: the copies were 1.45 KB each, half of it pydantic's per-copy fields-set).
    objs = [json.loads(json.dumps(rockbot_entry(f"{n:012x}", content=f"fact {n}"))) for n in range(2000)]
    entries = [Entry.from_json_obj(obj) for obj in objs]
    now = datetime(2026, 5, 1, tzinfo=UTC)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        decayed = [e.evolve(importance_score=0.25, updated_at=now) for e in entries]
        gc.collect()
        per_copy = (tracemalloc.get_traced_memory()[0] - before) / len(decayed)
    finally:
        tracemalloc.stop()
    assert per_copy < 1000, f"{per_copy:.0f} bytes per decayed copy"
    assert decayed[0].importance_score == 0.25 and decayed[0].updated_at == now
    assert entries[0].importance_score != 0.25  # the original is untouched
    assert decayed[0].model_fields_set == entries[0].model_fields_set


def test_a_shared_fields_set_never_leaks_a_change_into_the_original() -> None:
    original = Entry.from_json_obj({"id": "a1b2c3d4e5f6", "content": "x", "importanceScore": 0.5})
    copy_ = original.evolve(importance_score=0.25)
    before = set(original.model_fields_set)
    copy_.archive_reason = "merged into b"  # a field the file did not have: the copy's set grows, alone
    copy_.verify = {"command": "true"}  # an unknown field too
    assert set(original.model_fields_set) == before
    assert "archive_reason" in copy_.model_fields_set
    assert "archiveReason" not in original.to_json_obj() and original.to_json_obj()["importanceScore"] == 0.5
    assert copy_.to_json_obj()["archiveReason"] == "merged into b"
    # A copy changing a field the file lacked gets its own set at once (not the original's).
    other = original.evolve(archive_reason="r")
    assert "archive_reason" in other.model_fields_set and "archive_reason" not in original.model_fields_set


_STAMPS = [
    "2026-03-01T08:15:02.1234567+00:00",  # RockBot's own (.NET, 7 digits)
    "2026-03-01T08:15:02.123456+00:00",
    "2026-03-01T08:15:02.123456-00:00",
    "2026-03-01T08:15:02.1+05:30",
    "2026-03-01T08:15:02.123456789Z",
    "2026-03-01T08:15:02",
    "2026-03-01",  # not the fast form: the model decides
    "2026-03-01 08:15:02+00:00",
    "2026-02-30T08:15:02+00:00",  # no such day: the model's error
    "last tuesday",
    "",
]


@pytest.mark.parametrize("alias", ["createdAt", "updatedAt", "lastSeenAt", "archivedAt"])
@pytest.mark.parametrize("raw", _STAMPS)
def test_a_kept_timestamp_is_reparsed_to_the_value_the_model_gives_it(alias: str, raw: str) -> None:
    """``to_json_obj`` compares each kept raw value with the field through ``_reparse``: its timestamp fast path must
    give what the model gives (or fail where the model fails), else an unchanged value would be written anew or a
    changed one kept as it was."""
    from dreamkeeper.memory.entry import _ALIASES, _reparse

    name = _ALIASES[alias]
    try:
        wanted = Entry.model_validate({"id": "x", alias: raw}, by_alias=True, by_name=False).__dict__[name]
    except ValueError:
        with pytest.raises(ValueError):
            _reparse(name, raw)
        return
    got = _reparse(name, raw)
    assert (got, got.utcoffset(), type(got)) == (wanted, wanted.utcoffset(), type(wanted))


def test_reparsing_keeps_few_answers_and_each_is_the_parse_of_its_own_string() -> None:
    """``_reparse`` keeps its last answers for timestamp strings (a write asks of one string several times): a kept
    answer is the very value a fresh parse gives (value, offset, type), whatever came between, and no more than
    ``_REPARSED_MAX`` are kept (a cold start writes every entry of a 100k corpus)."""
    from dreamkeeper.memory.entry import _REPARSED, _REPARSED_MAX, _reparse
    from dreamkeeper.memory.entry_values import parse_timestamp

    stamps = [f"2026-03-{1 + i % 28:02d}T08:15:{i % 60:02d}.{i:07d}+0{i % 10}:00" for i in range(3 * _REPARSED_MAX)]
    for round_ in range(2):
        kept = 0
        for i, raw in enumerate(stamps):
            got = _reparse("updated_at", raw)
            again = _reparse("created_at", raw)  # the same string for another field: the kept answer
            kept += again is got  # not when the bound was reached between the two (the answers are dropped)
            fresh = parse_timestamp(raw, {})
            for value in (got, again):
                assert (value, value.utcoffset(), type(value), value.tzinfo) == (
                    fresh,
                    fresh.utcoffset(),
                    type(fresh),
                    fresh.tzinfo,
                )
            assert len(_REPARSED) <= _REPARSED_MAX, (round_, i)
        assert kept >= len(stamps) - 2 * len(stamps) // _REPARSED_MAX, (round_, kept)
    # Not a timestamp string: nothing kept for it, and the model's value as before.
    before = dict(_REPARSED)
    assert _reparse("updated_at", "2026-03-01 08:15:02+00:00") == datetime(2026, 3, 1, 8, 15, 2, tzinfo=UTC)
    assert "2026-03-01 08:15:02+00:00" not in _REPARSED and _REPARSED.keys() <= before.keys() | set(stamps)


@settings(max_examples=200, deadline=None)
@given(
    st.from_regex(r"\A\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?\Z", fullmatch=True),
    st.sampled_from(["createdAt", "updatedAt", "lastSeenAt"]),
)
def test_a_kept_timestamp_of_any_spelling_is_written_back_as_it_was_unless_changed(raw: str, alias: str) -> None:
    obj = rockbot_entry(**{alias: raw})
    try:
        entry = Entry.from_json_obj(obj)
    except ValueError:
        return  # not a timestamp the model takes (a 13th month, a 25th hour): nothing to write back
    assert json.dumps(entry.to_json_obj()) == json.dumps(obj)
    assert json.dumps(entry.evolve(content="changed").to_json_obj()) == json.dumps({**obj, "content": "changed"})


def test_format_timestamp_gives_each_value_its_own_text_when_asked_again_and_again() -> None:
    """``format_timestamp`` keeps the text of the object it formatted last (a cycle writes its one ``now`` into every
    decay): the same object gives the same text, and any other value (equal or not, aware or naive) its own."""
    from datetime import UTC, datetime, timedelta, timezone

    from dreamkeeper.memory.entry import format_timestamp

    now = datetime(2026, 12, 7, 16, 45, 1, 234567, tzinfo=UTC)
    naive = now.replace(tzinfo=None)
    plus_one = now.astimezone(timezone(timedelta(hours=1)))  # the same instant, another offset: another text
    expected = {
        id(now): "2026-12-07T16:45:01.234567+00:00",
        id(naive): "2026-12-07T16:45:01.234567+00:00",
        id(plus_one): "2026-12-07T17:45:01.234567+01:00",
    }
    for value in (now, now, plus_one, plus_one, now, naive, naive, plus_one, now):
        assert format_timestamp(value) == expected[id(value)]
