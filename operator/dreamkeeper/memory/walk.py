"""The walk of a memory tree: every entry file, depth-first in name order (the scan's order, which the corpus
index's generation and every "same order" argument rest on). Hidden names (temps, ``.embeddings``) and anything
that is not a regular ``*.json`` file are skipped; so are symbolic links (never followed).

Two forms: ``walk_entries`` lists every directory (``os.scandir``; a ``DirEntry`` per file, for callers that stat
only some of them), and ``walk_names`` takes a directory's names from the kept listings (listing_cache.py) when its
stat says they are still the ones kept, and lists it (and keeps what it found) otherwise."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from operator import attrgetter
from pathlib import Path

from dreamkeeper.memory.listing import Listing
from dreamkeeper.memory.listing_cache import ListingCache

log = logging.getLogger(__name__)

_NAME = attrgetter("name")  # a directory entry's sort key (C, not a lambda per file: runs per file per listing)


def list_directory(
    directory: str, listing: Listing | None, hidden_entries: list[os.DirEntry[str]] | None = None
) -> tuple[list[os.DirEntry[str]], list[str], bool] | None:
    """One directory's entry files and sub-directories (paths), in name order, and whether it held a hidden name
    (skipped; each appended to ``hidden_entries`` if given); None (logged) when it cannot be listed. ``listing``: its
    stat is recorded there first."""
    if listing is not None:
        listing.record(directory)
    try:
        children = sorted(os.scandir(directory), key=_NAME)
    except OSError as exc:
        if listing is not None:
            listing.failed(directory)
        log.warning("cannot list %s: %s; its entries are not visible this run", directory, exc)
        return None
    files: list[os.DirEntry[str]] = []
    subdirs: list[str] = []
    hidden = False
    for child in children:
        if child.name.startswith("."):
            hidden = True
            if hidden_entries is not None:
                hidden_entries.append(child)
            continue
        if child.is_dir(follow_symlinks=False):
            subdirs.append(child.path)
        elif child.name.endswith(".json") and child.is_file(follow_symlinks=False):
            files.append(child)
    return files, subdirs, hidden


def walk_entries(root: Path, listing: Listing | None = None) -> Iterator[os.DirEntry[str]]:
    """Every entry file under ``root`` as a directory entry; ``listing``: each directory's stat recorded first."""
    if not root.is_dir():
        return
    stack: list[str] = [str(root)]
    while stack:
        directory = stack.pop()
        listed = list_directory(directory, listing)
        if listed is not None:
            files, subdirs, _ = listed
            yield from files
            stack.extend(reversed(subdirs))


def walk_names(root: Path, listing: Listing, cache: ListingCache) -> Iterator[str]:
    """``walk_entries``' files as path strings in the same order (each exactly the ``DirEntry.path`` a listing
    gives), a directory's names from ``cache`` when its stat is the kept one."""
    if not root.is_dir():
        return
    cache.begin()
    stack: list[str] = [str(root)]
    while stack:
        directory = stack.pop()
        prefix = directory if directory.endswith(os.sep) else directory + os.sep  # as os.path.join, and scandir
        kept = cache.known(directory, listing)
        if kept is not None:
            _, names, subnames, _ = kept
            for name in names:
                yield prefix + name
            stack.extend([prefix + name for name in reversed(subnames)])
            continue
        listed = list_directory(directory, listing)
        if listed is None:
            continue
        files, subdirs, hidden = listed
        for child in files:
            yield child.path
        stack.extend(reversed(subdirs))
        file_names = [child.name for child in files]
        cache.learn(directory, listing, file_names, [path[len(prefix) :] for path in subdirs], hidden)
    cache.finished()


__all__ = ["list_directory", "walk_entries", "walk_names"]
