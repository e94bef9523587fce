"""Memory formats: how an agent keeps its memory on disk, and the units the engine consolidates.

``rockbot`` is one format (one JSON file per entry: the engine's own store). A Markdown format is a *profile*
(``openclaw``, ``hermes``, ``claude``): which files hold units, how each splits (whole file, ``§`` entry, Markdown
block under its heading path), caps, the agent's lock, append-only logs, folders never touched. Its units are kept as
records of a store outside the agent's files; ``prepare`` (ingest) and ``finish`` (render) keep the two in step.
docs/formats.md says what is enforced for each.
"""

from dreamkeeper.formats.format import (
    ROCKBOT,
    Finished,
    FormatCounts,
    FormatOutcome,
    MarkdownFormat,
    MemoryFormat,
    Prepared,
    RockBotFormat,
    get_format,
)
from dreamkeeper.formats.layout import FILE_ARCHIVE_DIR, UNITS_DIR, memory_dir, units_root
from dreamkeeper.formats.profile import FORMAT_NAMES, PROFILES, Profile, ProfileOverrides, resolve_profile

__all__ = [
    "FILE_ARCHIVE_DIR",
    "FORMAT_NAMES",
    "PROFILES",
    "ROCKBOT",
    "UNITS_DIR",
    "Finished",
    "FormatCounts",
    "FormatOutcome",
    "MarkdownFormat",
    "MemoryFormat",
    "Prepared",
    "Profile",
    "ProfileOverrides",
    "RockBotFormat",
    "get_format",
    "memory_dir",
    "resolve_profile",
    "units_root",
]
