"""What the LLM proposer sends: the system directive, the offer in RockBot's entry layout, the repair prompt, and the
JSON schemas for structured output.

The entry line is RockBot's (``N. [ID:<id>] category=… importance=… reinforced=…× first=… last=… tags=[…]`` then the
content indented three spaces), so dream prompts written for RockBot keep working.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, Literal

from dreamkeeper.consolidation import Batch, OfferedEntry, OfferGroup, ProposalRequest, RepairRequest, compose
from dreamkeeper.memory import Entry
from dreamkeeper.proposers.prompts_shaped import CLUSTER_SCHEMA, REVIEW_SCHEMA

DIRECTIVE_RESOURCE = "dream_directive.md"
INDENT = "   "

# Appended to an operator-supplied directive that does not describe the reply: without it a server with no
# structured-output support would have no way to learn the schema. No placeholder ids: SmolLM2 copied the old
# contract's "<id>" into its replies (#18).
REPLY_CONTRACT = (
    "\n\n## Reply format\n\nReply with one JSON object and nothing else, with the keys toDelete (a list of ids) "
    "and toSave (a list of merges, each with content, category, tags, sourceIds and importance). Name only ids "
    "shown in the request, exactly as written after ID: (without the prefix). A merge must keep every specific of "
    'its sources verbatim. When nothing should change, reply {"toDelete": [], "toSave": []}.'
)

# The end of every offer, in the user message: chat templates that drop system messages (llama-cpp-python's stock
# "gemma") would otherwise hide the reply format, and small models follow the last thing they read best. No
# placeholder ids and no worked example: measured on llama.cpp with SmolLM2-135M and Gemma 3 270M
# (bench/results/real-model.md), both copied the old contract's "<id>" into every reply, Gemma copied a worked
# example's ids and content, and listing the shown ids made it prune the first one; this wording raised the share
# of usable replies from 0 without inviting either.
OFFER_CONTRACT = (
    "Reply with one JSON object and nothing else, with the keys toDelete (ids to retire) and toSave (merges, each "
    "with content, category, tags, sourceIds and importance).\n"
    "Write each id as shown after ID: above, without the prefix. A merge keeps every name, number, date, e-mail, "
    "phone and id of its sources word for word, and adds nothing.\n"
    'When nothing should change, reply {"toDelete": [], "toSave": []}.'
)


def offer_contract() -> str:
    """The reply contract that ends every offer (a function, so the real-model bench can measure others)."""
    return OFFER_CONTRACT


REPAIR_CONTRACT = 'Reply with one JSON object and nothing else: {"content": "<the revised merged text>"}.'
REPAIR_DIRECTIVE = (
    "You revise a proposed merge of memory entries that dropped specific details or stated details no source has. "
    "Restore each missing string verbatim, exactly as written in the sources. Remove every detail listed as not in "
    "the sources. Keep everything else the proposed text says. Add no fact that is not in the sources. "
    "Stay concise. " + REPAIR_CONTRACT
)


@cache
def default_directive() -> str:
    """The shipped directive (package data), read once."""
    return resources.files("dreamkeeper.proposers").joinpath(DIRECTIVE_RESOURCE).read_text(encoding="utf-8")


def system_prompt(directive: str | None, memory_rules: str | None = None) -> str:
    """The agent's own ``dream.md`` when it has one, else the shipped default; its ``memory-rules.md`` before it,
    as RockBot composes them (``LoadDirectives``, DreamService.cs @05346ff0)."""
    if directive is None or not directive.strip():
        text = default_directive().strip()
    else:
        text = directive.strip()
        text = text if "toSave" in text else text + REPLY_CONTRACT
    return compose(memory_rules, text)


def _day(entry: Entry, which: Literal["first", "last"]) -> str:
    value = entry.created_at if which == "first" else entry.seen_at
    return value.strftime("%Y-%m-%d")


def _subject(entry: Entry) -> str:
    point = entry.meta("subjectTime")
    if point:
        return f" subject={point}"
    start, end = entry.meta("subjectTimeStart"), entry.meta("subjectTimeEnd")
    if start or end:
        return f" subject={start or ''}..{end or ''}"
    return ""


def entry_header(number: int, entry: Entry, merge_only: bool = False) -> str:
    tags = ", ".join(entry.tags) if entry.tags else "(none)"
    line = (
        f"{number}. [ID:{entry.id}] category={entry.category or 'uncategorized'} "
        f"importance={entry.importance_score:.2f} reinforced={entry.reinforcement_count}× "
        f"first={_day(entry, 'first')} last={_day(entry, 'last')}{_subject(entry)} tags=[{tags}]"
    )
    return line + " [merge-only]" if merge_only else line


def format_entry(number: int, entry: Entry, merge_only: bool = False) -> str:
    """One entry block: the header line, then the content with every line indented three spaces."""
    body = "\n".join(INDENT + line if line else "" for line in entry.content.splitlines() or [""])
    return entry_header(number, entry, merge_only) + "\n" + body


def offer_header(
    total: int,
    shown: int,
    withheld: int,
    elsewhere: int = 0,
    part: tuple[int, int] | None = None,
    unshown_singles: int = 0,
) -> str:
    where = ""
    if part is not None and part[1] > 1:
        where = f" (request {part[0]} of {part[1]}; {elsewhere} other(s) are offered in separate requests)"
    singles = ""
    if unshown_singles:
        one = unshown_singles == 1
        singles = (
            f" {unshown_singles} new or changed entr{'y' if one else 'ies'} with no near-duplicate "
            f"{'is' if one else 'are'} not shown: there is nothing to merge {'it' if one else 'them'} with."
        )
    return (
        f"There are {total} memory entries. {shown} are shown below{where}. The other {withheld} were reviewed on an "
        f"earlier pass, have not changed since, and are deliberately withheld.{singles} Consolidate only what is shown:"
    )


FEEDBACK_HEADING = "Recent feedback signals (last 7 days):"

REOPENED_NOTE = (
    "Some near-duplicates below were left separate on an earlier pass and are offered again (marked [merge-only]): "
    "merge them if they state the same fact, otherwise leave them as they are."
)


def shown_groups(batch: Batch, singletons: bool = True) -> list[OfferGroup]:
    """The groups of a batch that go to the model: every cluster, and lone entries only when ``singletons``."""
    return [g for g in batch.groups if g.is_cluster or singletons]


def _count(batch: Batch, groups: list[OfferGroup]) -> int:
    ids = {o.entry.id for o in batch.entries}
    return sum(1 for g in groups for i in g.ids if i in ids)


def user_message(batch: Batch, request: ProposalRequest, singletons: bool = True) -> str | None:
    """The offer for one batch, clusters marked, numbered from 1; None when the batch has nothing to show."""
    groups = shown_groups(batch, singletons)
    if not groups:
        return None
    sending = [(b, _count(b, shown_groups(b, singletons))) for b in request.batches]
    sending = [(b, n) for b, n in sending if n]
    position = next(i for i, (b, _) in enumerate(sending, start=1) if b.index == batch.index)
    shown = _count(batch, groups)
    lines = [
        offer_header(
            request.total_entries,
            shown,
            request.withheld,
            elsewhere=sum(n for _, n in sending) - shown,
            part=(position, len(sending)),
            unshown_singles=sum(len(b.entries) for b in request.batches) - sum(n for _, n in sending),
        )
    ]
    if any(g.reopened for g in groups):
        lines += ["", REOPENED_NOTE]
    if request.feedback:
        # RockBot's block, after the header and before the entries (DreamService.cs @05346ff0, ~80k).
        lines += ["", FEEDBACK_HEADING, *(signal.line() for signal in request.feedback)]
    by_id: dict[str, OfferedEntry] = {o.entry.id: o for o in batch.entries}
    number = 0
    singles_started = False
    for group in groups:
        members = [by_id[i] for i in group.ids if i in by_id]
        if not members:
            continue
        if group.is_cluster:
            lines += ["", "Near-duplicate cluster (offered again):" if group.reopened else "Near-duplicate cluster:"]
        elif not singles_started:
            lines += ["", "Other entries:"]
            singles_started = True
        for offered_entry in members:
            number += 1
            lines.append(format_entry(number, offered_entry.entry, offered_entry.merge_only))
    lines += ["", offer_contract()]
    return "\n".join(lines)


def whole_offer_message(entries: list[Entry], total: int, withheld: int) -> str:
    """A single unbatched offer in RockBot's layout (used to price the alternatives in the token bench)."""
    lines = [offer_header(total, len(entries), withheld), ""]
    lines += [format_entry(n, e) for n, e in enumerate(entries, start=1)]
    return "\n".join(lines)


def repair_message(request: RepairRequest) -> str:
    """RockBot's repair prompt: the proposed text, its sources, and the missing specifics."""
    lines = ["Proposed merged text:", INDENT + request.merge.content.replace("\n", "\n" + INDENT), ""]
    lines.append("Source entries it was built from:")
    lines += [format_entry(n, e) for n, e in enumerate(request.sources, start=1)]
    if request.missing:
        lines += ["", "Missing — each must appear verbatim in your revision:"]
        lines += [f"- {m}" for m in request.missing]
    if request.invented:
        lines += ["", "Not in any source — remove each from your revision:"]
        lines += [f"- {m}" for m in request.invented]
    lines += ["", REPAIR_CONTRACT]
    return "\n".join(lines)


# ---- structured output ----------------------------------------------------------------------------------------

# Strict mode needs every property required and no extras; optional values are nullable instead.
PROPOSAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["toDelete", "toSave"],
    "properties": {
        "toDelete": {"type": "array", "items": {"type": "string"}},
        "toSave": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["content", "category", "tags", "sourceIds", "importance"],
                "properties": {
                    "content": {"type": "string"},
                    "category": {"type": ["string", "null"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "sourceIds": {"type": "array", "items": {"type": "string"}},
                    "importance": {"type": ["number", "null"]},
                },
            },
        },
    },
}

REPAIR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["content"],
    "properties": {"content": {"type": "string"}},
}

OutputMode = Literal["json_schema", "json_object", "none"]
OUTPUT_MODES: tuple[OutputMode, ...] = ("json_schema", "json_object", "none")
# What a request asks for: RockBot's proposal, a merge repair, or one of the shaped requests (prompts_shaped.py).
RequestKind = Literal["proposal", "repair", "cluster", "review"]
SCHEMAS: dict[RequestKind, tuple[str, dict[str, Any]]] = {
    "proposal": ("dream_proposal", PROPOSAL_SCHEMA),
    "repair": ("merge_repair", REPAIR_SCHEMA),
    "cluster": ("same_fact", CLUSTER_SCHEMA),
    "review": ("obsolete_entries", REVIEW_SCHEMA),
}


def response_format(mode: OutputMode, kind: RequestKind, object_schema: bool = True) -> dict[str, Any] | None:
    """What to ask for. ``json_object`` carries the schema as well (``object_schema``) — servers of the llama.cpp
    family constrain their output to it there, where they do not support ``json_schema``; a server that refuses the
    extra key is asked without it."""
    if mode == "none":
        return None
    name, schema = SCHEMAS[kind]
    if mode == "json_object":
        return {"type": "json_object", "schema": schema} if object_schema else {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": name, "strict": True, "schema": schema}}
