"""The prompt is RockBot's layout: existing dream.md files and their models keep working."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from dreamkeeper.consolidation.proposal import (
    Batch,
    MergeProposal,
    OfferedEntry,
    OfferGroup,
    ProposalRequest,
    RepairRequest,
)
from dreamkeeper.memory import Entry
from dreamkeeper.proposers.prompts import (
    PROPOSAL_SCHEMA,
    REPLY_CONTRACT,
    default_directive,
    format_entry,
    repair_message,
    response_format,
    system_prompt,
    user_message,
)

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
ENTRY_LINE = re.compile(
    r"^(\d+)\. \[ID:([^\]]+)\] category=(\S+) importance=(\d\.\d\d) reinforced=(\d+)× "
    r"first=(\d{4}-\d{2}-\d{2}) last=(\d{4}-\d{2}-\d{2})(?: subject=\S+)? tags=\[([^\]]*)\]( \[merge-only\])?$"
)


def entry(id_: str, content: str, **kw: object) -> Entry:
    return Entry(id=id_, content=content, created_at=T0, **kw)


def request_of(*batches: Batch, total: int = 10, withheld: int = 4) -> ProposalRequest:
    return ProposalRequest(batches=batches, total_entries=total, withheld=withheld, now=T0)


def test_entry_block_matches_rockbot_layout() -> None:
    e = entry(
        "abc123",
        "Rocky lives in Minnesota.\nHe moved in 2019.",
        category="user/home",
        tags=["home", "geo"],
        importance_score=0.875,
        reinforcement_count=7,
        last_seen_at=datetime(2026, 4, 2, tzinfo=UTC),
    )
    header, *body = format_entry(3, e).split("\n")
    assert header == (
        "3. [ID:abc123] category=user/home importance=0.88 reinforced=7× first=2026-03-01 last=2026-04-02 "
        "tags=[home, geo]"
    )
    assert body == ["   Rocky lives in Minnesota.", "   He moved in 2019."]


def test_uncategorized_untagged_and_subject_time() -> None:
    e = entry("x1", "Trip.", metadata={"subjectTimeStart": "2026-08-01", "subjectTimeEnd": "2026-08-03"})
    assert format_entry(1, e).split("\n")[0] == (
        "1. [ID:x1] category=uncategorized importance=0.50 reinforced=1× first=2026-03-01 last=2026-03-01 "
        "subject=2026-08-01..2026-08-03 tags=[(none)]"
    )


def test_user_message_counts_clusters_and_merge_only_marks() -> None:
    a, b, c = entry("a", "Milo is a Sheltie."), entry("b", "Milo the sheltie."), entry("c", "Standalone fact.")
    d, e = entry("d", "Old pair one."), entry("e", "Old pair one!")
    batch = Batch(
        0,
        (OfferGroup(("a", "b"), True), OfferGroup(("d", "e"), True, reopened=True), OfferGroup(("c",), False)),
        (OfferedEntry(a), OfferedEntry(b), OfferedEntry(d, True), OfferedEntry(e, True), OfferedEntry(c)),
    )
    other = Batch(1, (OfferGroup(("f",), False),), (OfferedEntry(entry("f", "Another.")),))
    text = user_message(batch, request_of(batch, other, total=12, withheld=6))
    assert text is not None
    lines = text.split("\n")
    assert lines[0].startswith("There are 12 memory entries. 5 are shown below (request 1 of 2; 1 other(s)")
    assert (
        "The other 6 were reviewed on an earlier pass, have not changed since, and are deliberately withheld."
        in (lines[0])
    )
    assert lines[0].endswith("Consolidate only what is shown:")
    assert "were left separate on an earlier pass and are offered again" in text
    headers = [m for line in lines if (m := ENTRY_LINE.match(line))]
    assert [(m.group(1), m.group(2)) for m in headers] == [("1", "a"), ("2", "b"), ("3", "d"), ("4", "e"), ("5", "c")]
    assert [bool(m.group(9)) for m in headers] == [False, False, True, True, False]
    # Each cluster is introduced by its own marker line, before its first member.
    assert lines.index("Near-duplicate cluster:") < lines.index(headers[0].group(0))
    assert lines.index("Near-duplicate cluster (offered again):") < lines.index(headers[2].group(0))
    assert lines.index("Other entries:") < lines.index(headers[4].group(0))


def test_single_batch_has_no_request_counter_and_no_reopen_note() -> None:
    a, b = entry("a", "One."), entry("b", "One!")
    batch = Batch(0, (OfferGroup(("a", "b"), True),), (OfferedEntry(a), OfferedEntry(b)))
    text = user_message(batch, request_of(batch, total=2, withheld=0))
    assert text is not None
    assert "request 1 of" not in text
    assert "offered again" not in text


def test_default_directive_forbids_unoffered_deletion_and_demands_verbatim_specifics() -> None:
    text = " ".join(default_directive().split())
    assert "never name an id that is not shown" in text
    assert "verbatim" in text
    assert "Code checks every proposal" in text
    assert "toSave" in text and "toDelete" in text
    assert system_prompt(None) == default_directive().strip()
    assert system_prompt("   ") == default_directive().strip()


def test_agent_directive_overrides_and_gets_the_reply_contract_only_when_it_lacks_one() -> None:
    own = "You are the dream pass of Rocky's agent. Be careful."
    assert system_prompt(own) == own + REPLY_CONTRACT
    rockbot_style = 'Reply as {"toDelete": [], "toSave": []}.'
    assert system_prompt(rockbot_style) == rockbot_style


def test_repair_prompt_sections() -> None:
    sources = [
        entry("s1", "Rockford Duane Lhotka uses timezone America/Chicago."),
        entry("s2", "Accounts: Marimer LLC."),
    ]
    merge = MergeProposal(content="The user has accounts and a timezone.", source_ids=["s1", "s2"])
    text = repair_message(RepairRequest(merge, sources, ["America/Chicago", "Marimer"]))
    order = [
        text.index("Proposed merged text:"),
        text.index("   The user has accounts and a timezone."),
        text.index("Source entries it was built from:"),
        text.index("1. [ID:s1]"),
        text.index("Missing — each must appear verbatim in your revision:"),
        text.index("- America/Chicago"),
        text.index("- Marimer"),
    ]
    assert order == sorted(order)


def test_response_formats() -> None:
    strict = response_format("json_schema", "proposal")
    assert strict is not None and strict["type"] == "json_schema"
    assert strict["json_schema"]["strict"] is True
    assert strict["json_schema"]["schema"] is PROPOSAL_SCHEMA
    item = PROPOSAL_SCHEMA["properties"]["toSave"]["items"]
    assert set(item["required"]) == set(item["properties"])  # strict mode: everything required, optional = nullable
    repair = response_format("json_schema", "repair")
    assert repair is not None and repair["json_schema"]["schema"]["required"] == ["content"]
    assert response_format("json_object", "proposal") == {"type": "json_object", "schema": PROPOSAL_SCHEMA}
    assert response_format("json_object", "repair", object_schema=False) == {"type": "json_object"}
    assert response_format("none", "repair") is None


def test_lone_entries_can_be_left_out_of_the_offer() -> None:
    a, b, c = entry("a", "Milo is a Sheltie."), entry("b", "Milo the sheltie."), entry("c", "Standalone fact.")
    mixed = Batch(0, (OfferGroup(("a", "b"), True), OfferGroup(("c",), False)), tuple(map(OfferedEntry, (a, b, c))))
    lone = Batch(1, (OfferGroup(("d",), False),), (OfferedEntry(entry("d", "Another.")),))
    req = request_of(mixed, lone, total=9, withheld=5)
    text = user_message(mixed, req, singletons=False)
    assert text is not None
    assert "[ID:a]" in text and "[ID:b]" in text and "[ID:c]" not in text and "Other entries:" not in text
    # One request is actually sent, so no "request 1 of 2"; the two lone entries are accounted for in the header.
    assert text.startswith("There are 9 memory entries. 2 are shown below. The other 5 were reviewed")
    assert "2 new or changed entries with no near-duplicate are not shown" in text
    assert user_message(lone, req, singletons=False) is None
    assert "[ID:c]" in (user_message(mixed, req) or "")
