"""Profiles: what one agent's Markdown memory directory looks like, as data.

A profile names the agent's memory directory (relative to AGENT_DIR), which files hold units and how each splits
(whole file, ``§`` entry, or Markdown block with its heading path), their character caps, which files are logs that
are only ever appended to, where successors go, the agent's lock, the agent's own generated regions, and the folders
that are never read or written. Shipped: ``openclaw`` and ``hermes`` (sources and versions below), and ``claude``
(one file per memory with a ``MEMORY.md`` index: Claude Code's auto memory, OpenHarness).

Sources: openclaw/openclaw ``docs/concepts/memory.md`` @57f06f9 and the npm package openclaw 2026.9.6 (memory
indexer ``listMemoryFiles``: ``MEMORY.md``, ``USER.md``, ``memory/**/*.md``; bootstrap caps 10,000 characters for
``MEMORY.md`` (``DEFAULT_MEMORY_FILE_MAX_CHARS``) and 4,000 for ``USER.md`` (``USER_BOOTSTRAP_MAX_CHARS``); dreaming's
promotion lock ``<stateDir>/locks/memory-promotion-<sha256(workspace)>.lock``); NousResearch/hermes-agent
``tools/memory_tool.py`` @029cfb2 and the PyPI package hermes-agent 0.19.0 (``ENTRY_DELIMITER``, caps 2,200 and
1,375, ``fcntl.flock`` on ``MEMORY.md.lock``); HKUDS/OpenHarness ``src/openharness/memory/`` @09bc641.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from dreamkeeper.formats.entries import HERMES_SEPARATOR
from dreamkeeper.formats.markdown import OPENCLAW_MANAGED
from dreamkeeper.formats.units import UnitKind

Split = Literal["block", "entry", "file"]
LockKind = Literal["flock-sidecar", "exclusive-file", "none"]
MAX_CAP = 10_000_000

_Glob = Annotated[str, Field(min_length=1, max_length=256, pattern=r"^[^\x00]+$")]


class FileRule(BaseModel):
    """Which files hold units, and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    pattern: _Glob  # relative to the memory directory; '*' within a name, '**/' across folders
    kind: UnitKind
    split: Split
    category: str = Field(pattern=r"^[A-Za-z0-9_-]+$")  # the unit records' category (settings and reports use it)
    cap: int | None = Field(default=None, ge=1, le=MAX_CAP)  # characters, as the agent counts them
    append_only: bool = False  # a log: never rewritten, only appended to (a restore appends)
    dated: bool = False  # the file name starts with the day its units were written (YYYY-MM-DD)


class Importance(BaseModel):
    """Importance where the format records none (documented in docs/formats.md): by the kind of file (a curated core
    file over a log), raised by how often the same text recurs across the files, and read from the unit itself when
    the agent wrote one (``importance_comment``, OpenClaw's ``<!-- importance: N -->``, N of 10)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    core: float = Field(default=0.6, ge=0.0, le=1.0)
    log: float = Field(default=0.35, ge=0.0, le=1.0)
    file: float = Field(default=0.6, ge=0.0, le=1.0)
    by_category: dict[str, float] = Field(default_factory=dict)
    recurrence_step: float = Field(default=0.05, ge=0.0, le=1.0)
    recurrence_max: float = Field(default=0.2, ge=0.0, le=1.0)
    importance_comment: str | None = None  # a regex whose group 1 is the agent's own importance, out of ten


class AgentLock(BaseModel):
    """The agent's own lock, taken around every rewrite of its files (dreamkeeper's cycle lock is taken as well).

    ``flock-sidecar``: ``fcntl.flock`` on ``<file><suffix>`` next to each file (Hermes). ``exclusive-file``: a file
    created exclusively, holding ``{"pid", "createdAt"}``, removed after (OpenClaw's promotion lock; Claude Code's
    ``.consolidate-lock``); ``path`` is relative to AGENT_DIR, ``{workspace_sha256}`` stands for the SHA-256 of the
    memory directory's real path."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: LockKind = "none"
    suffix: str = ".lock"
    path: str | None = None
    wait_seconds: float = Field(default=30.0, ge=0.0, le=3600.0)


class DreamFlag(BaseModel):
    """Where the agent's own consolidation is switched, so a cycle can say when it is on (two consolidators of one
    file make each other's work stale). ``file`` is relative to AGENT_DIR, JSON; ``path`` the keys to the flag."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: str
    path: tuple[str, ...]
    default_on: bool = True


class Profile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    memory_dir: str = Field(default=".", max_length=256)  # relative to AGENT_DIR
    files: tuple[FileRule, ...]
    untouched: tuple[_Glob, ...] = ()  # never read, never written (the agent's own state, backups, reports)
    indexed: tuple[_Glob, ...] = ()  # what the agent reads or indexes: the archive must be outside all of it
    managed: tuple[tuple[str, str], ...] = ()  # start/end regexes of regions the agent generates (never units)
    separator: str = HERMES_SEPARATOR
    promote_to: str | None = None  # where a successor of log units only goes (a core file's pattern)
    promote_heading: tuple[str, ...] = ()
    index_file: str | None = None  # file-units: the index whose link lines point at them
    importance: Importance = Field(default_factory=Importance)
    lock: AgentLock = Field(default_factory=AgentLock)
    dream_switch: str | None = None  # how to turn the agent's own consolidation off (said in the report)
    dream_flag: DreamFlag | None = None

    @field_validator("memory_dir")
    @classmethod
    def _relative(cls, value: str) -> str:
        value = value.strip().strip("/") or "."
        if value.startswith("..") or "/../" in f"/{value}/" or value.startswith("~"):
            raise ValueError("memory_dir is relative to AGENT_DIR and may not leave it")
        return value

    def rule_for(self, relative: str) -> FileRule | None:
        """The first rule whose pattern matches, unless the path is one never touched."""
        if any(glob_match(pattern, relative) for pattern in self.untouched):
            return None
        return next((rule for rule in self.files if glob_match(rule.pattern, relative)), None)

    def indexes(self, relative: str) -> bool:
        return any(glob_match(pattern, relative) for pattern in self.indexed)


class ProfileOverrides(BaseModel):
    """What a deployment may change of a shipped profile (``--profile-json``, the DreamSchedule's ``spec.format``)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    memory_dir: str | None = Field(default=None, alias="memoryDir", max_length=256)
    caps: dict[Annotated[str, Field(max_length=256)], Annotated[int, Field(ge=1, le=MAX_CAP)]] = Field(
        default_factory=dict, max_length=64
    )
    append_only_logs: bool | None = Field(default=None, alias="appendOnlyLogs")

    def apply(self, profile: Profile) -> Profile:
        files = tuple(
            rule.model_copy(
                update={
                    "cap": self.caps.get(rule.pattern, rule.cap),
                    "append_only": rule.append_only
                    if self.append_only_logs is None or rule.kind != "log"
                    else self.append_only_logs,
                }
            )
            for rule in profile.files
        )
        unknown = set(self.caps) - {rule.pattern for rule in profile.files}
        if unknown:
            raise ValueError(f"caps name files the {profile.name} profile does not have: {', '.join(sorted(unknown))}")
        update: dict[str, object] = {"files": files}
        if self.memory_dir is not None:
            update["memory_dir"] = self.memory_dir
        return Profile.model_validate({**profile.model_dump(), **update})


_DAILY = "memory/[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]*.md"

OPENCLAW = Profile(
    name="openclaw",
    memory_dir="workspace",
    files=(
        FileRule(pattern="MEMORY.md", kind="core", split="block", category="memory", cap=10_000),
        FileRule(pattern="USER.md", kind="core", split="block", category="user", cap=4_000),
        FileRule(pattern=_DAILY, kind="log", split="block", category="daily", append_only=True, dated=True),
    ),
    untouched=(
        "memory/.dreams/**",
        "memory/dreaming/**",
        "memory/imports/**",
        ".openclaw-repair/**",
        "DREAMS.md",
        "dreams.md",
        "memory.md",
    ),
    indexed=("MEMORY.md", "USER.md", "DREAMS.md", "dreams.md", "memory/**"),
    managed=(OPENCLAW_MANAGED,),
    promote_to="MEMORY.md",
    promote_heading=("Consolidated from daily notes",),
    importance=Importance(by_category={"user": 0.7}, importance_comment=r"<!--\s*importance:\s*(\d{1,2})\s*-->"),
    lock=AgentLock(kind="exclusive-file", path="locks/memory-promotion-{workspace_sha256}.lock"),
    dream_switch="plugins.entries.memory-core.config.dreaming.enabled: false (openclaw.json)",
    dream_flag=DreamFlag(
        file="openclaw.json", path=("plugins", "entries", "memory-core", "config", "dreaming", "enabled")
    ),
)

HERMES = Profile(
    name="hermes",
    memory_dir="memories",
    files=(
        FileRule(pattern="MEMORY.md", kind="core", split="entry", category="memory", cap=2_200),
        FileRule(pattern="USER.md", kind="core", split="entry", category="user", cap=1_375),
    ),
    untouched=("*.bak.*", "*.lock", ".mem_*"),
    indexed=("MEMORY.md", "USER.md"),
    importance=Importance(by_category={"user": 0.7}),
    lock=AgentLock(kind="flock-sidecar", suffix=".lock"),
    dream_switch="none built in (hermes-agent #10771); its model consolidates by hand when a file is full",
)

CLAUDE = Profile(
    name="claude",
    memory_dir="memory",
    files=(FileRule(pattern="*.md", kind="file", split="file", category="topic"),),
    untouched=("MEMORY.md", ".consolidate-lock"),
    indexed=("**",),
    index_file="MEMORY.md",
    # Claude Code's .consolidate-lock stays on disk (its mtime says when autoDream last ran): no lock to take; the
    # fingerprint guard on every write and move is what keeps its writes.
    lock=AgentLock(kind="none"),
    dream_switch="autoDreamEnabled: false (settings.json)",
)

PROFILES: dict[str, Profile] = {p.name: p for p in (OPENCLAW, HERMES, CLAUDE)}
FORMAT_NAMES = ("rockbot", *PROFILES)


def glob_match(pattern: str, relative: str) -> bool:
    return _glob_regex(pattern).fullmatch(relative) is not None


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """``*``/``?``/``[...]`` within one path segment, ``**/`` any folders (none included), a trailing ``**``
    everything below."""
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out += "(?:.*/)?"
            i += 3
        elif pattern.startswith("**", i):
            out += ".*"
            i += 2
        elif pattern[i] == "*":
            out += "[^/]*"
            i += 1
        elif pattern[i] == "?":
            out += "[^/]"
            i += 1
        elif pattern[i] == "[":
            close = pattern.find("]", i + 1)
            if close < 0:
                out += re.escape("[")
                i += 1
            else:
                out += "[" + pattern[i + 1 : close].replace("\\", "\\\\") + "]"
                i = close + 1
        else:
            out += re.escape(pattern[i])
            i += 1
    return re.compile(out)


def resolve_profile(name: str, overrides: ProfileOverrides | None = None) -> Profile:
    """A shipped profile by name, with a deployment's overrides; a clear error for an unknown name."""
    try:
        profile = PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown memory format {name!r}; known: {', '.join(FORMAT_NAMES)}") from None
    return overrides.apply(profile) if overrides is not None else profile


__all__ = [
    "CLAUDE",
    "FORMAT_NAMES",
    "HERMES",
    "OPENCLAW",
    "PROFILES",
    "AgentLock",
    "DreamFlag",
    "FileRule",
    "Importance",
    "Profile",
    "ProfileOverrides",
    "glob_match",
    "resolve_profile",
]
