"""RockBot's paths and purge settings as this cycle uses them, each with where it came from.

Precedence, highest first: dreamkeeper's own settings (``rockbot`` section of the settings file, or the
DreamSchedule's ``spec.rockbot``), the agent's configuration where it is visible (agent_config.py), RockBot's
defaults. RockBot resolves a relative path under its profile directory (``ResolvePath(path, profile.BasePath)``,
DreamService.cs @05346ff0; MemoryAuditService.ResolveUnderProfile @0969bf1f; FeedbackOptions @024a12e6), which is
the agent directory here; an absolute path under the agent's ``AgentProfile:BasePath`` (``/data/agent`` in its
Helm chart) is the same file seen from this mount. An absolute path elsewhere is used as it is, and the report says
it may not be this volume.

* directive: ``Dream:DirectivePath``, default ``dream.md``;
* the audit's directory, where its pause marker lives: ``MemoryAudit:BasePath``, default ``memory-audit``
  (``MemoryAuditFiles.DefaultBasePath``);
* feedback signals: ``Feedback:BasePath``, default ``feedback``;
* the archive retention RockBot's purge and audit use: ``Dream:MemoryArchiveRetention`` (default 90 days);
* its high-value floor: ``Dream:PruningProtectionImportance`` (0.80) and ``...ReinforcementCount`` (5).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path, PurePosixPath

from dreamkeeper.consolidation.agent_config import (
    AgentConfig,
    ConfigValueError,
    format_timespan,
    load_agent_config,
    parse_bool,
    parse_number,
    parse_timespan,
)
from dreamkeeper.consolidation.settings import RockBotSettings

DEFAULT_DIRECTIVE = "dream.md"
DEFAULT_AUDIT_DIR = "memory-audit"
DEFAULT_FEEDBACK_DIR = "feedback"
PAUSE_FILE = "consolidation-paused.json"
DEFAULT_RETENTION = timedelta(days=90)
DEFAULT_FLOOR_IMPORTANCE = 0.80
DEFAULT_FLOOR_REINFORCEMENT = 5


@dataclass(frozen=True)
class Resolved:
    path: Path
    source: str

    def describe(self) -> str:
        return f"{self.path} ({self.source})"


@dataclass(frozen=True)
class AgentView:
    """What this cycle uses of RockBot's configuration."""

    directive: Resolved
    audit_dir: Resolved
    feedback_dir: Resolved
    archive_retention: timedelta  # RockBot's purge and audit window (zero or negative: its purge is off)
    retention_source: str
    floor_importance: float
    floor_reinforcement: int
    floor_source: str
    audit_enabled: bool = True
    pause_on_alert: bool = False
    notes: tuple[str, ...] = ()

    @property
    def pause_marker(self) -> Path:
        return self.audit_dir.path / PAUSE_FILE

    def described(self) -> dict[str, str]:
        """For the report: every value and where it came from."""
        return {
            "directive": self.directive.describe(),
            "pauseMarker": f"{self.pause_marker} ({self.audit_dir.source})",
            "feedback": self.feedback_dir.describe(),
            "archiveRetention": f"{format_timespan(self.archive_retention)} ({self.retention_source})",
            "floor": f"importance {self.floor_importance}, reinforcement {self.floor_reinforcement} "
            f"({self.floor_source})",
        }


def agent_view(agent_dir: Path, settings: RockBotSettings, environ: Mapping[str, str] | None = None) -> AgentView:
    config = load_agent_config(agent_dir, environ) if settings.read_agent_settings else AgentConfig()
    notes: list[str] = list(config.problems)
    base = settings.profile_base
    base_source = "settings rockbot.profile_base"
    if base is None and (found := config.get("AgentProfile:BasePath")) is not None and found.value.startswith("/"):
        base, base_source = found.value, found.source

    def path(own: str | None, own_key: str, key: str, default: str) -> Resolved:
        if own is not None:
            value, source = own, f"settings rockbot.{own_key}"
        elif (found := config.get(key)) is not None and found.value.strip():
            value, source = found.value.strip(), found.source
        else:
            value, source = default, "RockBot's default"
        return _resolve(agent_dir, value, source, base, base_source, key, notes)

    retention, retention_source = DEFAULT_RETENTION, "RockBot's default"
    if settings.archive_retention_days is not None:
        retention = timedelta(days=settings.archive_retention_days)
        retention_source = "settings rockbot.archive_retention_days"
    elif (found := config.get("Dream:MemoryArchiveRetention")) is not None:
        try:
            retention, retention_source = parse_timespan(found.value), found.source
        except ConfigValueError as exc:
            notes.append(f"Dream:MemoryArchiveRetention from {found.source}: {exc}; RockBot's default used")
    importance, reinforcement, floor_source = _floor(config, notes)
    return AgentView(
        directive=path(settings.directive_path, "directive_path", "Dream:DirectivePath", DEFAULT_DIRECTIVE),
        audit_dir=path(settings.audit_base_path, "audit_base_path", "MemoryAudit:BasePath", DEFAULT_AUDIT_DIR),
        feedback_dir=path(settings.feedback_base_path, "feedback_base_path", "Feedback:BasePath", DEFAULT_FEEDBACK_DIR),
        archive_retention=retention,
        retention_source=retention_source,
        floor_importance=importance,
        floor_reinforcement=reinforcement,
        floor_source=floor_source,
        audit_enabled=_flag(config, "MemoryAudit:Enabled", True, notes),
        pause_on_alert=_flag(config, "MemoryAudit:PauseConsolidationOnAlert", False, notes),
        notes=tuple(notes),
    )


def _resolve(
    agent_dir: Path, value: str, source: str, base: str | None, base_source: str, key: str, notes: list[str]
) -> Resolved:
    posix = PurePosixPath(value)
    if not posix.is_absolute():
        return Resolved(agent_dir / value, source)
    if base is not None:
        root = PurePosixPath(base)
        if posix == root or root in posix.parents:
            return Resolved(agent_dir.joinpath(*posix.relative_to(root).parts), f"{source}, under {base_source}")
    if not Path(value).exists():
        notes.append(
            f"{key} is {value} ({source}), outside the agent directory as seen from here and not found: set "
            "rockbot.profile_base to the agent's AgentProfile:BasePath so it maps onto this volume"
        )
    return Resolved(Path(value), source)


def _floor(config: AgentConfig, notes: list[str]) -> tuple[float, int, str]:
    importance, reinforcement, sources = DEFAULT_FLOOR_IMPORTANCE, DEFAULT_FLOOR_REINFORCEMENT, []
    if (found := config.get("Dream:PruningProtectionImportance")) is not None:
        try:
            importance = parse_number(found.value)
            sources.append(found.source)
        except ConfigValueError as exc:
            notes.append(f"Dream:PruningProtectionImportance from {found.source}: {exc}; RockBot's default used")
    if (found := config.get("Dream:PruningProtectionReinforcementCount")) is not None:
        try:
            number = parse_number(found.value)
            if number != int(number):
                raise ConfigValueError(f"{found.value!r} is not an integer")
            reinforcement = int(number)
            sources.append(found.source)
        except ConfigValueError as exc:
            notes.append(f"Dream:PruningProtectionReinforcementCount from {found.source}: {exc}; default used")
    return importance, reinforcement, ", ".join(sources) if sources else "RockBot's default"


def _flag(config: AgentConfig, key: str, default: bool, notes: list[str]) -> bool:
    found = config.get(key)
    if found is None:
        return default
    try:
        return parse_bool(found.value)
    except ConfigValueError as exc:
        notes.append(f"{key} from {found.source}: {exc}; RockBot's default used")
        return default


__all__ = ["PAUSE_FILE", "AgentView", "Resolved", "agent_view"]
