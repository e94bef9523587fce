"""The dreamkeeper arm on a Markdown memory format: the agent writes Markdown, cycles run through the format seam.

The agent writes what it mines the way the agent of that format does (``--format openclaw``: day-to-day notes
appended to ``memory/YYYY-MM-DD.md``, durable facts as bullets under a heading of ``MEMORY.md``, preferences in
``USER.md``; ``--format hermes``: ``§`` entries in ``MEMORY.md``/``USER.md`` through the rules of Hermes' own
``add``: an exact duplicate is not added again, an entry that would take the file over its cap is refused, so that
fact never reaches the store and is not counted as mined; ``--format claude``: each fact a topic file
``memory/<slug>.md`` with Claude Code's front matter, and its line ``- [title](file.md) — hook`` added to the
``MEMORY.md`` index). Each cycle the format ingests the files, the real engine runs with the adversary behind a
ScriptedProposer, and the format renders the result back into the files. The arm is measured from what is on disk
after the cycle: live = the units in the agent's files (their records), stored = every record (the archive included).
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

from bench.sim.adversary import Adversary, Tally
from bench.sim.dreamkeeper_arm import ArmCycle, against_adversary, to_view
from bench.sim.world import MinedEntry
from dreamkeeper.consolidation import CycleOptions, format_of
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.formats import MarkdownFormat, memory_dir
from dreamkeeper.formats.markdown import Insertion, edit
from dreamkeeper.memory import REASON_EPHEMERAL, MemoryStore
from dreamkeeper.memory.entry import ARCHIVED_BY_CYCLE

HERMES_SEPARATOR = "\n§\n"


def _write(path: Path, text: str) -> None:
    """As the agents write: a temp file renamed over the file."""
    tmp = path.with_name(f".{path.name}.sim.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _section(category: str | None) -> str:
    top = (category or "notes").split("/")[0]
    return {"people": "People", "project-context": "Projects", "travel": "Travel", "accounts": "Accounts"}.get(
        top, top.replace("-", " ").capitalize()
    )


class FormatArm:
    def __init__(
        self,
        agent_dir: Path,
        settings: CycleSettings,
        adversary: Adversary,
        tally: Tally,
        format_name: str,
        profile_json: str | None = None,
    ) -> None:
        fmt = format_of(format_name, profile_json)
        assert isinstance(fmt, MarkdownFormat)
        self.format = fmt
        self.agent_dir = agent_dir
        self.root = memory_dir(agent_dir, fmt.profile)
        self.root.mkdir(parents=True, exist_ok=True)
        self.store = MemoryStore(fmt.store_root(agent_dir))
        self.settings = settings
        self.adversary = adversary
        self.tally = tally
        self.refused = 0  # facts the agent could not write (Hermes' caps)
        self._ids = random.Random(f"successor-ids-{adversary.seed}")
        self._on_disk: dict[str, tuple[str, str | None]] = {}
        self.caps = {rule.pattern: rule.cap for rule in fmt.profile.files}
        self._topics = 0
        if fmt.name == "claude":
            (self.root / "MEMORY.md").write_text("# Memory index\n\n", encoding="utf-8")
        elif fmt.name == "openclaw":
            (self.root / "memory").mkdir(exist_ok=True)
            (self.root / "MEMORY.md").write_text("# Long-term memory\n", encoding="utf-8")
            (self.root / "USER.md").write_text("# User\n", encoding="utf-8")
        else:
            for name in ("MEMORY.md", "USER.md"):
                (self.root / name).write_text("", encoding="utf-8")

    def _next_id(self) -> str:
        return f"{self._ids.getrandbits(48):012x}"

    # ---- the agent writing ------------------------------------------------------------------------------------

    def add(self, mined: MinedEntry) -> bool:
        if self.format.name == "openclaw":
            return self._openclaw(mined)
        if self.format.name == "claude":
            return self._claude(mined)
        return self._hermes(mined)

    def _claude(self, mined: MinedEntry) -> bool:
        # Claude Code's auto memory: one topic file per memory (front matter name/description/type, the fact as its
        # body), and a line in the MEMORY.md index pointing at it.
        self._topics += 1
        top = (mined.category or "notes").split("/")[0]
        name = f"{top}-{self._topics:05d}.md"
        title = f"{_section(mined.category)} {self._topics}"
        hook = " ".join(mined.content.split()[:8])
        kind = "user" if top in ("user-preferences", "people") else "project"
        body = f"---\nname: {title}\ndescription: {hook}\ntype: {kind}\n---\n\n{mined.content.strip()}\n"
        _write(self.root / name, body)
        index = self.root / "MEMORY.md"
        _write(index, index.read_text(encoding="utf-8") + f"- [{title}]({name}) — {hook}\n")
        return True

    def _openclaw(self, mined: MinedEntry) -> bool:
        line = f"- {mined.content}\n"
        if mined.category and mined.category.startswith("episodes/"):
            day = self.root / "memory" / f"{mined.created_at.date().isoformat()}.md"
            if not day.exists():
                day.write_text(f"# {mined.created_at.date().isoformat()}\n\n", encoding="utf-8")
            with open(day, "a", encoding="utf-8") as handle:  # daily notes are appended to
                handle.write(line)
            return True
        if mined.category and mined.category.startswith("user-preferences/"):
            user = self.root / "USER.md"
            text = user.read_text(encoding="utf-8")
            cap = self.caps.get("USER.md")
            if cap is None or len(text) + len(line) <= cap:
                _write(user, text.rstrip("\n") + "\n\n" + line if "- " not in text else text + line)
                return True
        memory = self.root / "MEMORY.md"
        text = memory.read_text(encoding="utf-8")
        # The agent's edit tool adds the bullet under the fact's heading (dreamkeeper's editor does it byte-exactly).
        heading = ("Long-term memory", _section(mined.category))
        _write(memory, edit(text, file="MEMORY.md", kind="core", insert=[Insertion(mined.content, heading)]))
        return True

    def _hermes(self, mined: MinedEntry) -> bool:
        user = mined.category is not None and mined.category.startswith(("user-preferences/", "people/"))
        name = "USER.md" if user else "MEMORY.md"
        path = self.root / name
        raw = path.read_text(encoding="utf-8")
        entries = [e.strip() for e in raw.split(HERMES_SEPARATOR) if e.strip()] if raw.strip() else []
        content = mined.content.strip()
        if content in entries:
            return True  # Hermes: "Entry already exists" — the fact is stored, once
        cap = self.caps.get(name) or 0
        if len(HERMES_SEPARATOR.join([*entries, content])) > cap:
            self.refused += 1
            return False  # Hermes: "would exceed the limit" — the model is told to consolidate; the fact is lost
        _write(path, HERMES_SEPARATOR.join([*entries, content]))
        return True

    # ---- a cycle ----------------------------------------------------------------------------------------------

    def cycle(self, cycle: int, now: Any) -> ArmCycle:
        options = CycleOptions(
            agent_dir=self.agent_dir, settings=self.settings, now=now, force=True, format=self.format
        )
        outcome = against_adversary(options, self.adversary, self.tally, cycle, self._next_id)
        scan = self.store.scan()
        on_disk = {s.id: (s.entry.content, s.entry.category) for s in scan.entries}
        purged = [text for entry_id, text in self._on_disk.items() if entry_id not in on_disk]
        self._on_disk = on_disk
        live = {s.id: s.entry.content for s in scan.live}
        views = {s.id: to_view(s.entry) for s in scan.live}
        ephemeral = [
            (s.entry.content, s.entry.category)
            for s in scan.archived
            if s.entry.archive_reason == REASON_EPHEMERAL and s.entry.meta(ARCHIVED_BY_CYCLE) == outcome.report.cycle_id
        ]
        stored = {entry_id: content for entry_id, (content, _) in on_disk.items()}
        return ArmCycle(outcome, live, views, len(scan.archived), ephemeral, stored, purged)
