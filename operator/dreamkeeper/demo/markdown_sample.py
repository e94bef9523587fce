"""Sample Markdown memory directories (``dreamkeeper sample --format openclaw|hermes DIR``), seed-shaped.

The facts are the sample agent's world (``world.py``: people with e-mails and phones, dates, flights and
confirmation codes, hosts and IP addresses, preferences), written the way each agent writes them:

* **OpenClaw** (``DIR/workspace``, DIR being OpenClaw's state directory, ``~/.openclaw`` or the PVC at
  ``/home/node/.openclaw``): ``MEMORY.md`` (curated bullets under headings, with near-duplicate restatements the
  agent added over time and a promoted line carrying OpenClaw's ``<!-- importance: N -->``), ``USER.md``
  (preferences as directives), months of daily notes ``memory/YYYY-MM-DD.md`` (meetings, status notes, the same
  fact noted on several days), a dreaming block OpenClaw manages in one note, ``DREAMS.md`` and ``memory/.dreams/``
  (never units, never touched).
* **Hermes** (``DIR/memories``, DIR being ``HERMES_HOME``: ``~/.hermes`` or the volume at ``/opt/data``):
  ``MEMORY.md`` and ``USER.md`` as ``§``-separated entries, near-duplicates included, each within its cap
  (2,200 and 1,375 characters) as Hermes' own tool would have kept them.

Same seed, same bytes.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from dreamkeeper.demo.world import (
    ANCHOR,
    Family,
    ephemeral_families,
    fixed_families,
    knowledge_families,
    make_people,
    person_families,
    preference_families,
    project_families,
    trip_families,
)
from dreamkeeper.formats import PROFILES

DEFAULT_MARKDOWN_SEED = 7
HERMES_SEPARATOR = "\n§\n"


class MarkdownSampleExistsError(FileExistsError):
    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} exists and is not empty; the sample is only written into a new or empty directory")


@dataclass(frozen=True)
class MarkdownSample:
    agent_dir: Path
    format: str
    files: dict[str, int]  # relative path -> characters
    units: int
    near_duplicates: int  # facts written more than once


def _families(rng: random.Random) -> list[Family]:
    people = make_people(rng, 14)
    families: list[Family] = []
    for index, person in enumerate(people[1:]):
        families += person_families(rng, person, index)
    families += project_families(rng, people)
    families += trip_families(rng, 5)
    families += ephemeral_families(rng, people, 8)
    families += knowledge_families(rng, 6)
    families += preference_families(rng, 6)
    rng.shuffle(families)
    return [*fixed_families()[:3], *families]


def _section(category: str) -> str:
    top = category.split("/")[0]
    return {
        "people": "People",
        "project-context": "Projects",
        "travel": "Travel",
        "agent-knowledge": "How I run",
        "anti-patterns": "How I run",
        "user-preferences": "Preferences",
    }.get(top, "Notes")


def _refuse_non_empty(path: Path) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise MarkdownSampleExistsError(path)


def generate_openclaw(agent_dir: Path, seed: int = DEFAULT_MARKDOWN_SEED) -> MarkdownSample:
    _refuse_non_empty(agent_dir)
    rng = random.Random(seed)
    families = _families(rng)
    workspace = agent_dir / PROFILES["openclaw"].memory_dir
    (workspace / "memory" / ".dreams").mkdir(parents=True)
    sections: dict[str, list[str]] = {}
    user_lines: list[str] = []
    days: dict[str, list[str]] = {}
    start = ANCHOR - timedelta(days=120)
    near = 0
    for family in families:
        day = (start + timedelta(days=rng.randrange(118))).date().isoformat()
        if family.ephemeral or family.category.startswith("episodes/"):
            days.setdefault(day, []).append(family.variants[0])
            if len(family.variants) > 1 and rng.random() < 0.4:
                later = (datetime.fromisoformat(day) + timedelta(days=rng.randrange(1, 9))).date().isoformat()
                days.setdefault(later, []).append(family.variants[1])
                near += 1
            continue
        if family.category.startswith("user-preferences/"):
            user_lines.append(family.variants[0])
            if len(family.variants) > 1 and rng.random() < 0.5:
                user_lines.append(family.variants[1])
                near += 1
            continue
        lines = sections.setdefault(_section(family.category), [])
        lines.append(family.variants[0])
        extra = [*family.variants[1:], *family.elaborations]
        if extra and rng.random() < 0.45:
            # The agent wrote the fact again some days later: in MEMORY.md, or in a daily note.
            restatement = rng.choice(extra)
            if rng.random() < 0.5:
                lines.append(restatement)
            else:
                days.setdefault(day, []).append(restatement)
            near += 1
    promoted = rng.choice([f for f in families if f.category.startswith("people/")])
    sections.setdefault("People", []).append(
        f"{promoted.variants[0]} <!-- trigger: contact, {promoted.key} --> <!-- importance: 8 -->"
    )
    memory = ["# Long-term memory", ""]
    for title in ("People", "Projects", "Travel", "Preferences", "How I run", "Notes"):
        if title in sections:
            memory += [f"## {title}", "", *(f"- {line}" for line in sections[title]), ""]
    files = {"MEMORY.md": "\n".join(memory)}
    files["USER.md"] = "\n".join(["# User", "", *(f"- {line}" for line in user_lines), ""])
    for index, day in enumerate(sorted(days)):
        body = [f"# {day}", "", *(f"- {line}" for line in days[day]), ""]
        if index % 17 == 5:
            body += [
                "<!-- openclaw:dreaming:light:start -->",
                "## Light Sleep",
                f"- staged: {days[day][0][:60]}",
                "<!-- openclaw:dreaming:light:end -->",
                "",
            ]
        files[f"memory/{day}.md"] = "\n".join(body)
    files["DREAMS.md"] = "# Dream Diary\n\nOpenClaw's own diary: never a unit, never touched.\n"
    for relative, text in files.items():
        (workspace / relative).write_text(text, encoding="utf-8")
    (workspace / "memory" / ".dreams" / "short-term-recall.json").write_text(json.dumps({"version": 1}) + "\n")
    (agent_dir / "openclaw.json").write_text(
        json.dumps({"plugins": {"entries": {"memory-core": {"config": {"dreaming": {"enabled": False}}}}}}, indent=2)
        + "\n"
    )
    units = sum(len(v) for v in sections.values()) + len(user_lines) + sum(len(v) for v in days.values())
    return MarkdownSample(agent_dir, "openclaw", {k: len(v) for k, v in files.items()}, units, near)


def generate_hermes(agent_dir: Path, seed: int = DEFAULT_MARKDOWN_SEED) -> MarkdownSample:
    _refuse_non_empty(agent_dir)
    rng = random.Random(seed)
    families = _families(rng)
    caps = {rule.pattern: rule.cap or 0 for rule in PROFILES["hermes"].files}
    memory: list[str] = []
    user: list[str] = []
    near = 0

    def fits(entries: list[str], text: str, cap: int) -> bool:
        return len(HERMES_SEPARATOR.join([*entries, text])) <= cap

    for family in families:
        target, cap = (
            (user, caps["USER.md"])
            if family.category.startswith(("user-preferences/", "people/"))
            else (
                memory,
                caps["MEMORY.md"],
            )
        )
        if family.ephemeral or family.category.startswith("episodes/"):
            continue
        text = family.variants[0]
        if not fits(target, text, cap):
            continue
        target.append(text)
        extra = [*family.variants[1:], *family.elaborations]
        if extra and rng.random() < 0.5 and fits(target, extra[0], cap):
            target.append(extra[0])  # what Hermes' model does when it forgets it already saved the fact
            near += 1
    memories = agent_dir / PROFILES["hermes"].memory_dir
    memories.mkdir(parents=True)
    files = {"MEMORY.md": HERMES_SEPARATOR.join(memory), "USER.md": HERMES_SEPARATOR.join(user)}
    for relative, text in files.items():
        (memories / relative).write_text(text, encoding="utf-8")
    return MarkdownSample(agent_dir, "hermes", {k: len(v) for k, v in files.items()}, len(memory) + len(user), near)


GENERATORS = {"openclaw": generate_openclaw, "hermes": generate_hermes}


def generate_markdown_sample(fmt: str, agent_dir: Path, seed: int = DEFAULT_MARKDOWN_SEED) -> MarkdownSample:
    try:
        generator = GENERATORS[fmt]
    except KeyError:
        raise ValueError(f"no sample for format {fmt!r}; samples: rockbot, {', '.join(GENERATORS)}") from None
    return generator(Path(agent_dir), seed)


__all__ = ["DEFAULT_MARKDOWN_SEED", "MarkdownSample", "MarkdownSampleExistsError", "generate_markdown_sample"]
