"""Requests shaped for a small model (issue 23 item 1): one near-duplicate component asked about on its own, and lone
entries reviewed for pruning apart, each in a short request with a reply of its own shape.

Measured with Qwen2.5-Coder 1.5B on 2 CPU cores: a RockBot-layout batch of 40 entries is ~5,000 prompt tokens
(249 s a request) and four of five were answered ``{"toDelete": [], "toSave": []}``; the same model asked about one
cluster in ~200 tokens ("these entries may state the same fact; if so write one entry keeping every detail, else
say they differ") merged a triple and a pair keeping every detail and told a colleague and a flight apart. Given the
full offer layout for one cluster it copied the layout (the header line as the merged text, ``ID:…`` as a source).
So these requests show the entries' texts only, numbered, with no ids and no header line: the reply names no id
at all (a cluster's answer applies to the entries shown, a review's names their numbers), and the engine maps it
back to the offered ids, so there is nothing to copy and no id to invent.

Every decision is still the engine's: the reply becomes an ordinary ``Proposal`` (a merge of the component's entries,
or prunes), validated like any other.
"""

from __future__ import annotations

from typing import Any

from dreamkeeper.consolidation import Batch, MergeProposal, Proposal, RepairRequest
from dreamkeeper.memory import Entry
from dreamkeeper.proposers.openai_parse import ReplyError, candidates, canon, preview

CLUSTER_SYSTEM = "You merge duplicate notes in an AI agent's memory. Reply with one JSON object and nothing else."
CLUSTER_QUESTION = (
    "If they state the same fact, or one adds details to the other, write one entry that keeps every detail of each "
    "(every name, place, number, date, e-mail address, phone number and code, exactly as written) and adds nothing. "
    "If they are about different things (two trips, two people, two meetings, two versions or hosts), they are "
    "distinct."
)
# No placeholder text: Qwen2.5-Coder 0.5B copied "<the one entry>" as its merged text (as SmolLM2 copied "<id>").
CLUSTER_CONTRACT = (
    "Reply with one JSON object with two keys: same (true or false) and merged (the one entry you wrote, or an "
    "empty string when they are distinct)."
)

REVIEW_SYSTEM = "You review notes in an AI agent's memory. Reply with one JSON object and nothing else."
REVIEW_QUESTION = (
    "Each numbered line is one memory entry. Which of them are present-tense status notes that are clearly obsolete "
    "(a task that is done, a temporary state that has passed)? People, preferences, facts, decisions, plans and past "
    "or future events are never obsolete. When unsure, leave an entry out."
)
REVIEW_CONTRACT = (
    "Reply with one JSON object with one key, obsolete: the list of the numbers of the obsolete entries (empty "
    "when none is)."
)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def shown_entries(batch: Batch) -> list[Entry]:
    """The entries a shaped request shows, numbered from 1 in this order (the reply's numbers refer to it)."""
    by_id = {o.entry.id: o.entry for o in batch.entries}
    return [by_id[i] for g in batch.groups for i in g.ids if i in by_id]


def cluster_messages(batch: Batch) -> list[dict[str, str]]:
    """One near-duplicate component: its entries' texts, numbered, and the question."""
    entries = shown_entries(batch)
    lines = ["These memory entries may state one fact:"]
    lines += [f"{n}. {_one_line(e.content)}" for n, e in enumerate(entries, start=1)]
    lines += ["", CLUSTER_QUESTION, CLUSTER_CONTRACT]
    return [{"role": "system", "content": CLUSTER_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def review_messages(batch: Batch) -> list[dict[str, str]]:
    """Lone entries for prune review: category and text, numbered, and the question."""
    entries = shown_entries(batch)
    lines = [REVIEW_QUESTION, ""]
    lines += [f"{n}. [{e.category or 'uncategorized'}] {_one_line(e.content)}" for n, e in enumerate(entries, start=1)]
    lines += ["", REVIEW_CONTRACT]
    return [{"role": "system", "content": REVIEW_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


REPAIR_SYSTEM = "You fix a merged note in an AI agent's memory. Reply with one JSON object and nothing else."


def repair_messages(request: RepairRequest) -> list[dict[str, str]]:
    """A merge asked for by a cluster question, asked again in the same shape: the entries' texts, the merged text,
    what it left out or added. No ids, no header lines."""
    lines = ["These memory entries state one fact:"]
    lines += [f"{n}. {_one_line(e.content)}" for n, e in enumerate(request.sources, start=1)]
    lines += ["", f"A merged entry was written for them: {_one_line(request.merge.content)}"]
    if request.missing:
        lines.append("It leaves out (write each exactly like this): " + "; ".join(request.missing))
    if request.invented:
        lines.append("It says what no entry says (remove each): " + "; ".join(request.invented))
    lines += [
        "",
        "Write the merged entry again, keeping every detail of each entry and adding nothing.",
        "Reply with one JSON object with one key, content: the merged entry.",
    ]
    return [{"role": "system", "content": REPAIR_SYSTEM}, {"role": "user", "content": "\n".join(lines)}]


def _truth(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "yes", "same"):
        return True
    if isinstance(value, str) and value.strip().lower() in ("false", "no", "distinct", "different"):
        return False
    return None


def parse_cluster(text: str | None, batch: Batch) -> Proposal:
    """``{"same": true, "merged": "…"}``: a merge of every entry shown; ``{"same": false}``: no change (the
    component is declined). Anything else is unusable."""
    if text is None or not text.strip():
        raise ReplyError("empty reply")
    for obj in candidates(text):
        keys = {canon(k): v for k, v in obj.items()}
        if "same" not in keys:
            continue
        same = _truth(keys["same"])
        if same is None:
            raise ReplyError(f"the reply's 'same' is neither true nor false: {preview(text)}")
        if not same:
            return Proposal()
        merged = keys.get("merged")
        if not isinstance(merged, str) or not merged.strip():
            raise ReplyError(f"the reply says the entries are the same but gives no merged text: {preview(text)}")
        ids = [e.id for e in shown_entries(batch)]
        return Proposal(to_save=[MergeProposal(content=merged, source_ids=ids)])
    raise ReplyError(f"the reply has no JSON object with 'same': {preview(text)}")


def parse_review(text: str | None, batch: Batch) -> Proposal:
    """``{"obsolete": [numbers]}``: prunes of those entries. A number that names no entry shown is passed on as
    ``#N``, which no offered id matches, so a reply naming only such numbers decides nothing."""
    if text is None or not text.strip():
        raise ReplyError("empty reply")
    entries = shown_entries(batch)
    for obj in candidates(text):
        keys = {canon(k): v for k, v in obj.items()}
        if "obsolete" not in keys:
            continue
        value = keys["obsolete"]
        if value is None:
            return Proposal()
        if not isinstance(value, list):
            raise ReplyError(f"the reply's 'obsolete' is not a list: {preview(text)}")
        ids: list[str] = []
        for item in value:
            number = _number(item)
            ids.append(entries[number - 1].id if number is not None and 1 <= number <= len(entries) else f"#{item}")
        return Proposal(to_delete=ids)
    raise ReplyError(f"the reply has no JSON object with 'obsolete': {preview(text)}")


def _number(item: object) -> int | None:
    if isinstance(item, bool):
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, str) and item.strip().lstrip("#").isdigit():
        return int(item.strip().lstrip("#"))
    return None


CLUSTER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["same", "merged"],
    "properties": {"same": {"type": "boolean"}, "merged": {"type": "string"}},
}
REVIEW_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["obsolete"],
    "properties": {"obsolete": {"type": "array", "items": {"type": "integer"}}},
}

__all__ = [
    "CLUSTER_SCHEMA",
    "REVIEW_SCHEMA",
    "cluster_messages",
    "parse_cluster",
    "parse_review",
    "repair_messages",
    "review_messages",
    "shown_entries",
]
