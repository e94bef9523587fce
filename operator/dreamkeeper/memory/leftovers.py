"""What a killed write of ours leaves behind, and the sweep that cleans it (moved out of ``atomic.py``, which makes
the names read here).

Names of our own making in an entry directory (never ``*.json``, which RockBot's index load would read):

* ``.{name}.{hex}.dk-new``: a temp being written, only ever our data: removed;
* ``.{name}.{inode}-{sha}.dk-swap``: a temp swapped with the entry (``RENAME_EXCHANGE``). Our data while its inode
  is the one in its name (removed); the version the write meant to replace when its hash starts with ``sha``
  (removed: the swap was done and fair); otherwise a version of the agent's the swap displaced. That version is the
  agent's **newest** when the entry's name still holds our data (the agent wrote just before our swap): it goes back
  in place and ours goes (issue 22: recovery used to leave the agent's newest text in a hidden conflict copy RockBot
  never reads). When the agent wrote again since, its newer file stays and the displaced one is kept as a conflict
  copy, an older version, as the runbook says;
* ``.{name}.{hex}-{sha}.dk-aside``: the entry moved aside by a write without the exchange (``noexchange.py``). Back
  under its name when the name is free (the write never landed); removed when it is the version the write meant to
  replace; kept as a conflict copy otherwise;
* ``.{name}.{hex}.dk-conflict``: kept, and reported by every sweep until a person removes it.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from dreamkeeper.memory.atomic import (
    ASIDE_SUFFIX,
    CONFLICT_SUFFIX,
    NEW_SUFFIX,
    SHA_IN_NAME,
    SWAP_SUFFIX,
    discard_own,
    fingerprint_or_none,
    keep_conflict_copy,
    replaced,
)
from dreamkeeper.memory.exchange import can_exchange, exchange

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    """What ``sweep`` found: our temps removed, displaced versions kept (as conflict copies), and every conflict
    copy now present (reported each time until someone looks at them)."""

    removed: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    conflict_copies: list[Path] = field(default_factory=list)
    restored: list[Path] = field(default_factory=list)  # entries a killed purge had parked, back under their name
    collected: list[Path] = field(default_factory=list)  # hidden files with one of the caller's suffixes (``collect``)
    put_back: list[Path] = field(default_factory=list)  # entries whose newest version of the agent's went back


# A directory's sub-directories' names and its hidden entries (every name we make is hidden: none when it is known
# to hold none), or None when it cannot be listed: memory/listing_cache.py's ``ListingCache.for_sweep``.
SweepListing = Callable[[str], tuple[Sequence[str], Sequence[os.DirEntry[str]]] | None]


def sweep(
    directory: Path,
    skip: frozenset[str] = frozenset(),
    collect: tuple[str, ...] = (),
    listed: SweepListing | None = None,
) -> SweepReport:
    """Clean what killed writes of ours left under ``directory``; the caller holds the cycle lock, so no write of
    ours is in flight. Only names of our own making are looked at: the agent's files (its own ``.tmp`` temps
    included) are never touched. ``listed``: each directory's listing from the corpus index's kept listings, which
    vouch for some without listing them (a steady cycle's corpus) and keep what they list for the cycle's scan."""
    report = SweepReport()
    for path in _own_files(directory, skip, collect, listed):
        name = path.name
        try:
            if collect and name.endswith(collect):
                report.collected.append(path)
            elif name.endswith(NEW_SUFFIX):
                # Never swapped under this name: only ever our data (a create's second name, or a write cut short).
                os.unlink(path)
                report.removed.append(path)
            elif name.endswith(SWAP_SUFFIX):
                _sweep_swap(path, report)
            elif name.endswith(ASIDE_SUFFIX):
                _sweep_aside(path, report)
            elif name.endswith(CONFLICT_SUFFIX):
                report.conflict_copies.append(path)
        except OSError as exc:
            log.warning("could not clean %s: %s", path, exc)
    return report


def _sweep_swap(path: Path, report: SweepReport) -> None:
    inode = _own_swap_inode(path)
    if inode is not None:
        discard_own(path, inode)
        report.removed.append(path)
        return
    if _holds_the_replaced_version(path):
        replaced(path)  # the swap was done and fair: the version it displaced is the one we read
        report.removed.append(path)
        return
    target = target_of(path)
    if _newest_back(path, target):
        log.warning(
            "a killed write of ours had displaced the agent's newest version of %s; it is back in place", target
        )
        report.removed.append(path)
        report.put_back.append(target)
        return
    kept = keep_conflict_copy(path, target)
    report.kept.append(kept)
    report.conflict_copies.append(kept)


def _newest_back(swap: Path, target: Path) -> bool:
    """The killed swap displaced a version of the agent's (at ``swap``): when the entry's name still holds our data
    (its inode is the one recorded in the swap's name), the agent's version is the newer one and goes back in place,
    ours goes. False (nothing changed) when the agent wrote again since: its file at the name is the newest."""
    recorded, _ = _swap_name_parts(swap)
    if not recorded.isdigit():
        return False
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return False  # the agent removed the entry since: the displaced version is kept, not resurrected
    if st.st_ino != int(recorded) or not stat.S_ISREG(st.st_mode) or not can_exchange(st.st_dev):
        return False
    if not exchange(swap, target, st.st_dev):
        return False
    # `swap` now holds what was at the name a moment ago: ours, unless the agent wrote in that instant.
    taken = os.lstat(swap)
    if taken.st_ino == int(recorded):
        discard_own(swap, taken.st_ino)
        return True
    exchange(swap, target, st.st_dev)  # the agent's newest back in place; the displaced one is kept by the caller
    return False


def _sweep_aside(path: Path, report: SweepReport) -> None:
    target = target_of(path)
    if not os.path.lexists(target):
        # Moved aside by a write without the exchange, killed before its own file was linked in: the entry goes back
        # as it was (the journal step is checked again by recovery).
        os.link(path, target)
        os.unlink(path)  # only the extra name: the entry is back under its own
        log.warning("a killed write of ours had moved %s aside; it is back under its name", target)
        report.restored.append(target)
        return
    if _holds_the_replaced_version(path):
        replaced(path)  # the version the write meant to replace; the name holds a newer one (ours or the agent's)
        report.removed.append(path)
        return
    kept = keep_conflict_copy(path, target)
    report.kept.append(kept)
    report.conflict_copies.append(kept)


def _own_files(
    directory: Path, skip: frozenset[str], collect: tuple[str, ...], listed: SweepListing | None = None
) -> Iterator[Path]:
    suffixes = (NEW_SUFFIX, SWAP_SUFFIX, ASIDE_SUFFIX, CONFLICT_SUFFIX, *collect)
    stack = [directory]
    while stack:
        current = stack.pop()
        children: Sequence[os.DirEntry[str]]
        if listed is not None:
            found = listed(str(current))
            if found is None:
                continue  # not listable (logged): as an OSError below
            subdirs, children = found  # the hidden ones: the others hold nothing of ours but sub-directories
            stack.extend(current / name for name in subdirs if name not in skip)
        else:
            try:
                children = list(os.scandir(current))
            except OSError:
                continue
        for child in children:
            if child.is_dir(follow_symlinks=False):
                if child.name not in skip:
                    stack.append(Path(child.path))
            elif child.name.startswith(".") and child.name.endswith(suffixes):
                yield Path(child.path)


def _swap_name_parts(path: Path) -> tuple[str, str]:
    """The token and the hash prefix a temp's name records (``.{name}.{token}-{sha}.dk-swap`` or ``.dk-aside``)."""
    stem = path.name
    for suffix in (SWAP_SUFFIX, ASIDE_SUFFIX):
        stem = stem.removesuffix(suffix)
    recorded = stem.rsplit(".", 1)[-1]
    token, _, sha = recorded.partition("-")
    return token, sha


def _own_swap_inode(path: Path) -> int | None:
    """The inode a swap temp's name records, when the file under that name is still that inode (ours)."""
    recorded, _ = _swap_name_parts(path)
    st = os.lstat(path)
    if recorded.isdigit() and int(recorded) == st.st_ino and stat.S_ISREG(st.st_mode):
        return st.st_ino
    return None


def _holds_the_replaced_version(path: Path) -> bool:
    """Whether a swap (or aside) temp holds exactly the version its write meant to replace (a kill between swap and
    verification): that version may go, as it would have a moment later."""
    _, sha = _swap_name_parts(path)
    found = fingerprint_or_none(path)
    return len(sha) == SHA_IN_NAME and found is not None and found.sha256.startswith(sha)


def target_of(temp: Path) -> Path:
    """``.{name}.{token}{suffix}`` -> ``name`` in the same directory."""
    stem = temp.name[1:]
    for suffix in (NEW_SUFFIX, SWAP_SUFFIX, ASIDE_SUFFIX, CONFLICT_SUFFIX):
        stem = stem.removesuffix(suffix)
    return temp.with_name(stem.rsplit(".", 1)[0])


__all__ = ["SweepListing", "SweepReport", "sweep", "target_of"]
