"""Where a profile's files are in an agent directory, and reading them safely.

The listing never follows a symlink (OpenClaw's indexer skips them too, and a link could lead a rewrite outside the
agent's directory), skips hidden folders and the profile's untouched paths, and reads only regular files up to a
bound. A file that cannot be read as UTF-8 is reported and left exactly as it is: its units are unknown this run, so
nothing about them is concluded (in particular, none is taken for removed by the agent).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from dreamkeeper.formats.entries import parse_entries
from dreamkeeper.formats.markdown import parse
from dreamkeeper.formats.profile import FileRule, Profile
from dreamkeeper.formats.units import Unit, UnitKey
from dreamkeeper.memory import (
    Fingerprint,
    MiB,
    StateDirError,
    UnsafeFileError,
    open_regular,
    state_dir,
)

AGENT_FILE_LIMIT = 8 * MiB  # a memory file of the agent's (Hermes caps its at 2,200 characters; OpenClaw at 10,000)
UNITS_DIR = "units"  # the unit records: AGENT_DIR/.dreamkeeper/units
FILE_ARCHIVE_DIR = "archive"  # whole files moved out of the agent's directory: AGENT_DIR/.dreamkeeper/archive


@dataclass(frozen=True, slots=True)
class AgentFile:
    relative: str  # '/'-separated, relative to the memory directory
    path: Path
    rule: FileRule


@dataclass(frozen=True, slots=True)
class ReadFile:
    file: AgentFile
    text: str
    fingerprint: Fingerprint
    units: list[Unit]
    round_trips: bool = True  # entry files: whether the agent's own parser gives these bytes back


@dataclass(frozen=True, slots=True)
class Unreadable:
    file: AgentFile
    error: str


def memory_dir(agent_dir: Path, profile: Profile) -> Path:
    return agent_dir if profile.memory_dir == "." else agent_dir.joinpath(*profile.memory_dir.split("/"))


def units_root(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / UNITS_DIR


def check_outside_indexed(agent_dir: Path, profile: Profile) -> None:
    """Refuse a layout where dreamkeeper's state (the unit records, the archive) would be read or indexed by the
    agent: an archive the agent indexes is searched and recalled (OpenClaw #77831: dream working files were 83% of
    the search store and leaked into MEMORY.md)."""
    root = memory_dir(agent_dir, profile)
    state = state_dir(agent_dir)
    try:
        relative = state.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return  # outside the agent's memory directory altogether
    probe = f"{relative}/{UNITS_DIR}/x/y.json"
    if profile.indexes(probe) or profile.rule_for(probe) is not None:
        raise StateDirError(
            state,
            f"it is inside {root}, where the {profile.name} agent reads or indexes files; put the agent's memory "
            f"directory elsewhere (memory_dir is {profile.memory_dir!r} relative to AGENT_DIR)",
        )


def list_files(agent_dir: Path, profile: Profile) -> list[AgentFile]:
    """Every file a rule of the profile claims, in path order; symlinks, hidden folders and untouched paths skipped."""
    root = memory_dir(agent_dir, profile)
    found: list[AgentFile] = []
    stack = [(root, "")]
    while stack:
        directory, prefix = stack.pop()
        try:
            children = sorted(os.scandir(directory), key=lambda d: d.name)
        except (FileNotFoundError, NotADirectoryError):
            continue
        subdirs = []
        for child in children:
            relative = prefix + child.name
            if child.is_symlink():
                continue
            if child.is_dir(follow_symlinks=False):
                if not child.name.startswith("."):
                    subdirs.append((Path(child.path), relative + "/"))
                continue
            if child.name.startswith(".") or not child.is_file(follow_symlinks=False):
                continue
            rule = profile.rule_for(relative)
            if rule is not None:
                found.append(AgentFile(relative, Path(child.path), rule))
        stack.extend(reversed(subdirs))
    return sorted(found, key=lambda f: f.relative)


def read_bytes(path: Path) -> tuple[bytes, Fingerprint]:
    """A regular file's bytes and fingerprint (never through a symlink, never more than the bound)."""
    fd, _ = open_regular(path, AGENT_FILE_LIMIT, follow_symlinks=False)
    try:
        chunks = []
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if not stat.S_ISREG(st.st_mode):
        raise UnsafeFileError(path, "not a regular file")
    return data, Fingerprint.of_bytes(data, st)


def units_of(text: str, relative: str, rule: FileRule, profile: Profile) -> tuple[list[Unit], bool]:
    """A file's units, and whether it round-trips through the agent's own parser (entry files)."""
    if rule.split == "entry":
        parsed = parse_entries(text, relative, rule.kind, profile.separator)
        return parsed.units, parsed.round_trips
    if rule.split == "file":
        return [file_unit(text, relative)], True
    return parse(text, profile.managed).units(relative, rule.kind), True


def file_unit(text: str, relative: str) -> Unit:
    """A whole file as one unit: its identity is the file (an edit keeps it the same unit), its text the body; the
    front matter (name, description, type...) rides along."""
    from dreamkeeper.formats.topics import split_front

    front, body = split_front(text)
    return Unit(UnitKey(relative, "", "file", 1), body.strip("\n"), 0, len(text), "file", (), front)


def read_file(file: AgentFile, profile: Profile) -> ReadFile | Unreadable:
    try:
        data, fingerprint = read_bytes(file.path)
    except (OSError, UnsafeFileError) as exc:
        return Unreadable(file, f"unreadable: {exc}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return Unreadable(file, f"not UTF-8 ({exc.reason} at byte {exc.start})")
    units, round_trips = units_of(text, file.relative, file.rule, profile)
    return ReadFile(file, text, fingerprint, units, round_trips)


__all__ = [
    "AGENT_FILE_LIMIT",
    "FILE_ARCHIVE_DIR",
    "UNITS_DIR",
    "AgentFile",
    "ReadFile",
    "Unreadable",
    "check_outside_indexed",
    "file_unit",
    "list_files",
    "memory_dir",
    "read_bytes",
    "read_file",
    "units_of",
    "units_root",
]
