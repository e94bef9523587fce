"""The agent's own configuration, as far as dreamkeeper can see it: RockBot's settings that decide where its files are
and what its purge and audit do.

RockBot binds its options from .NET configuration (``GetSection("Dream").Bind(...)``): ``appsettings.json``, then
``appsettings.{Environment}.json``, then environment variables, each later source overriding the earlier; keys are
case-insensitive, a section and its key are joined by ``:`` in files and by ``__`` in the environment
(``Dream__DirectivePath``), and a nested JSON object is a section. dreamkeeper reads the same sources when they are
visible to it: the JSON files in the agent's profile directory (``AGENT_DIR/appsettings*.json``, where an operator
can copy or mount them), an env file there (``AGENT_DIR/rockbot.env``: ``KEY=VALUE`` lines, what a ConfigMap's
``Dream__*`` keys look like written out), and dreamkeeper's own process environment (a sidecar or a cycle pod given
the agent's ConfigMap). Every value keeps the name of the source it came from, for the report.

Values are strings, as .NET keeps them; the typed readers below parse them as its binder does: ``TimeSpan`` in the
invariant ``[-][d.]hh:mm[:ss[.fffffff]]`` or ``[-]d`` forms (``"90.00:00:00"``, ``"00:00:00"``, ``"0"``,
``"14"`` = 14 days; DreamOptionsRetentionBindingTests @28c7e0a2, MemoryAuditOptionsBindingTests @9bdbc3e6),
booleans ``true``/``false`` in any case, numbers in the invariant culture. A value the binder would refuse is
reported and ignored (RockBot would fail to start on it; dreamkeeper keeps its own default and says so).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from dreamkeeper.memory import loads_json, read_regular

log = logging.getLogger(__name__)

SETTINGS_FILE = "appsettings.json"
ENV_FILE = "rockbot.env"
CONFIG_LIMIT = 1 << 20  # a configuration file larger than this is not read (with a note)
# The sections dreamkeeper reads; other keys of the agent's configuration (secrets among them) are never kept.
SECTIONS = ("dream", "memoryaudit", "feedback", "memory", "agentprofile")
ENVIRONMENT_VARIABLES = ("DOTNET_ENVIRONMENT", "ASPNETCORE_ENVIRONMENT")

_TIMESPAN = re.compile(
    r"^\s*(?P<sign>-)?(?:(?P<days>\d+)\.)?(?P<h>\d{1,2}):(?P<m>\d{1,2})(?::(?P<s>\d{1,2})(?:\.(?P<f>\d{1,7}))?)?\s*$"
)
_DAYS_ONLY = re.compile(r"^\s*(?P<sign>-)?(?P<days>\d+)\s*$")


class ConfigValueError(ValueError):
    """A configured value .NET's binder would refuse."""


def parse_timespan(text: str) -> timedelta:
    """.NET ``TimeSpan.Parse`` (invariant culture), as the configuration binder calls it."""
    if (days_only := _DAYS_ONLY.match(text)) is not None:
        value = timedelta(days=int(days_only["days"]))
        return -value if days_only["sign"] else value
    match = _TIMESPAN.match(text)
    if match is None:
        raise ConfigValueError(f"{text!r} is not a TimeSpan ([-][d.]hh:mm[:ss[.fffffff]] or a number of days)")
    hours, minutes, seconds = int(match["h"]), int(match["m"]), int(match["s"] or 0)
    if hours > 23 or minutes > 59 or seconds > 59:
        raise ConfigValueError(f"{text!r} is not a TimeSpan (hours 0-23, minutes and seconds 0-59)")
    fraction = int((match["f"] or "0").ljust(7, "0")) / 10_000_000
    value = timedelta(days=int(match["days"] or 0), hours=hours, minutes=minutes, seconds=seconds + fraction)
    return -value if match["sign"] else value


def format_timespan(value: timedelta) -> str:
    """The ``d.hh:mm:ss`` form RockBot's ConfigMap uses (``90.00:00:00``)."""
    seconds = int(value.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    head = f"{days}." if days else ""
    return f"{sign}{head}{hours:02d}:{minutes:02d}:{secs:02d}"


def parse_bool(text: str) -> bool:
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    raise ConfigValueError(f"{text!r} is not a boolean (true or false)")


def parse_number(text: str) -> float:
    try:
        value = float(text.strip())
    except ValueError as exc:
        raise ConfigValueError(f"{text!r} is not a number") from exc
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigValueError(f"{text!r} is not a finite number")
    return value


@dataclass(frozen=True)
class Setting:
    """One configuration value and where it came from (``appsettings.json``, ``environment``, ...)."""

    value: str
    source: str


@dataclass(frozen=True)
class AgentConfig:
    """The agent's configuration keys dreamkeeper reads (``section:key``, lower-cased), each with its source."""

    values: Mapping[str, Setting] = field(default_factory=dict)
    read: tuple[str, ...] = ()  # the sources that contributed, in order
    problems: tuple[str, ...] = ()

    def get(self, key: str) -> Setting | None:
        return self.values.get(key.lower())


def load_agent_config(agent_dir: Path, environ: Mapping[str, str] | None = None) -> AgentConfig:
    """RockBot's configuration as visible from here: files in the profile directory, then the environment."""
    environ = os.environ if environ is None else environ
    values: dict[str, Setting] = {}
    read: list[str] = []
    problems: list[str] = []
    environment = next((environ[v] for v in ENVIRONMENT_VARIABLES if environ.get(v)), "Production")
    for name in (SETTINGS_FILE, f"appsettings.{environment}.json"):
        path = agent_dir / name
        loaded = _json_file(path, problems)
        if loaded is not None:
            _merge(values, loaded, name)
            read.append(name)
    env_file = agent_dir / ENV_FILE
    pairs = _env_file(env_file, problems)
    if pairs is not None:
        _merge(values, pairs, ENV_FILE)
        read.append(ENV_FILE)
    own = {k: v for k, v in environ.items() if "__" in k}
    if _merge(values, own, "environment"):
        read.append("environment")
    for problem in problems:
        log.warning("agent configuration: %s", problem)
    return AgentConfig(values, tuple(read), tuple(problems))


def _merge(values: dict[str, Setting], pairs: Mapping[str, str], source: str) -> bool:
    """Keys of the sections dreamkeeper reads, later sources overriding earlier ones; whether any was taken."""
    taken = False
    for raw, value in pairs.items():
        key = raw.replace("__", ":").lower()
        if key.split(":", 1)[0] in SECTIONS and ":" in key:
            values[key] = Setting(value, f"{source} ({raw})" if source in ("environment", ENV_FILE) else source)
            taken = True
    return taken


def _json_file(path: Path, problems: list[str]) -> dict[str, str] | None:
    try:
        data = read_regular(path, CONFIG_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(f"{path} not read: {exc.strerror or exc}")
        return None
    try:
        document = loads_json(data.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as exc:
        problems.append(f"{path} is not JSON ({exc}); its settings are not used")
        return None
    if not isinstance(document, dict):
        problems.append(f"{path} is a JSON {type(document).__name__}, not an object; its settings are not used")
        return None
    return dict(_flatten(document, ""))


def _flatten(node: object, prefix: str) -> Iterator[tuple[str, str]]:
    """.NET's JSON configuration provider: objects are sections (``a:b``), arrays index (``a:0``), scalars are
    strings (``true``, ``12.5``); null is an empty value."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _flatten(value, f"{prefix}:{key}" if prefix else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _flatten(value, f"{prefix}:{index}")
    elif prefix:
        if isinstance(node, bool):
            yield prefix, "true" if node else "false"
        else:
            yield prefix, "" if node is None else str(node)


def _env_file(path: Path, problems: list[str]) -> dict[str, str] | None:
    try:
        data = read_regular(path, CONFIG_LIMIT)
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(f"{path} not read: {exc.strerror or exc}")
        return None
    pairs: dict[str, str] = {}
    for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        key, sep, value = text.removeprefix("export ").partition("=")
        if not sep or not key.strip():
            problems.append(f"{path}:{number}: not KEY=VALUE; line ignored")
            continue
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
            value = value[1:-1]
        pairs[key.strip()] = value
    return pairs


__all__ = [
    "AgentConfig",
    "ConfigValueError",
    "Setting",
    "format_timespan",
    "load_agent_config",
    "parse_bool",
    "parse_number",
    "parse_timespan",
]
