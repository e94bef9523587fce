"""What a scan's listing of the corpus saw, kept so that a later look can tell it would list the same names.

The end-of-run final-state check (consolidation/final_state.py) lists every directory of the corpus again, to count
the files the agent added or removed while the cycle ran; at 100,000 entries that listing and the maps it builds
cost a seventh of a steady cycle. A directory's mtime and ctime move whenever a name in it is created, removed or
renamed (POSIX specifies that a successful ``open`` with ``O_CREAT`` of a new file, ``unlink``, ``rename``,
``mkdir`` and ``rmdir`` mark the parent directory's last data modification and last file status change timestamps
for update), and its inode changes when it is replaced. So, with the stat of every directory the scan listed,
taken before it was listed:

* every directory still has that stat: no name was created, removed or renamed in any of them since (a new
  sub-directory, or one removed, moves its parent's); the scan's listing is the listing now;
* git's "racily clean" rule, as the corpus index applies it to files (corpus_index.py): a change in the same
  timestamp tick as the directory's last one would keep its stat, so a directory is trusted only when its mtime and
  ctime are older than the start of the scan by ``RACY_WINDOW_NS``.

Names only: a file rewritten in place keeps its directory's stat. A caller that also needs the files' bytes must
look at them (the final-state check in its listing mode takes only names from a listing: see there). Hidden
directories (``.embeddings``) are not part of the listing, and changes inside them move no recorded stat.
"""

from __future__ import annotations

import os
import stat
import time
from dataclasses import dataclass, field
from typing import Final

from dreamkeeper.memory.corpus_index import RACY_WINDOW_NS

DirRecord = tuple[int, int, int]  # (mtime_ns, ctime_ns, inode) of a directory, as the scan found it

_UNUSABLE: Final = (-1, -1, -1)  # a directory that could not be stat'ed or listed: never "unchanged"
_now_ns = time.time_ns  # the scan's clock (a test moves it to play "a listing made later")


def _started() -> int:
    return _now_ns()


@dataclass(slots=True)
class Listing:
    """The directories one scan listed, each with its stat from just before it was listed."""

    started_ns: int = field(default_factory=_started)
    directories: dict[str, DirRecord] = field(default_factory=dict)

    def record(self, directory: str) -> None:
        """Called before ``directory`` is listed."""
        try:
            st = os.lstat(directory)
        except OSError:
            self.directories[directory] = _UNUSABLE
            return
        if not stat.S_ISDIR(st.st_mode):
            self.directories[directory] = _UNUSABLE
            return
        self.directories[directory] = (st.st_mtime_ns, st.st_ctime_ns, st.st_ino)

    def failed(self, directory: str) -> None:
        """``directory`` could not be listed: what is in it is not known."""
        self.directories[directory] = _UNUSABLE

    def unchanged(self) -> bool:
        """Whether listing every directory again would give exactly the names the scan saw (module docstring)."""
        if not self.directories:
            return False  # nothing was listed (no memory root): nothing to vouch for
        trusted_before = self.started_ns - RACY_WINDOW_NS
        for directory, then in self.directories.items():
            if then == _UNUSABLE or max(then[0], then[1]) >= trusted_before:
                return False
            try:
                st = os.lstat(directory)
            except OSError:
                return False
            if (st.st_mtime_ns, st.st_ctime_ns, st.st_ino) != then:
                return False
        return True


__all__ = ["DirRecord", "Listing"]
