"""What a cycle found nothing to do about, kept under the corpus's generation, so that the next cycle over the same
corpus does not walk all of it again for the same answer (issue 27).

A steady cycle's stages each walked the whole corpus for an answer that had not changed since the last cycle: the
stale write-back repair (every live entry against the write-back index), the exact-duplicate fold (every entry's
collapsed text), gating (every entry's review stamp, every settled cluster's decline stamps). Each answer is a
function of the corpus, the settings and the code; the repair's also of the write-back index, the journals, the
reversals log and the clock (the index forgets journals past the retention window); gating's also of the clusters
(by the cluster cache's key, which covers the vectors) and the clock (a declined cluster is due again at a time).
The corpus index vouches for an unchanged corpus by its generation (memory/corpus_index.py: every file's stat as its
record says, no file more or less). So a cycle that found nothing to do, and left the corpus as it found it, keeps
that here under the generation ("no exact duplicates"; "no stale copy, with these state files, until this time"),
and the next cycle skips the walk when everything the answer depended on is as it was.

Why it can never hide work (a cache: deleting or damaging the file costs one walk, never a decision not taken):

* Only "nothing to do" is kept, and only for one generation: a file of the corpus edited, added, removed or racy,
  and the scan has no generation (or another), so the stages walk the corpus.
* The key holds every setting (the settings as JSON) and the code that makes the answers; the repair's other
  inputs go in by stat record (size, mtime_ns, ctime_ns, inode) under the corpus index's racy rule: the write-back
  index, every journal file (by name: one added or removed shows), the reversals log; and its clock: the answer
  holds until the oldest journal the index holds leaves the retention window (the index changes then). Gating's
  holds for the clusters of one cluster-cache key, and until the first settled cluster is due to be offered again;
  it is kept only when every entry is reviewed and none is held in a back-off (their time is not kept). Decay's
  (the frugal mode only: with ``min_step`` 0 every drop is a write) holds until the first entry could fall by
  ``min_step``, reach the decay floor or leave the high-value floor (``decay.quiet_until``, made a little early).
* Written only by a cycle that wrote nothing its next scan would see (the corpus index was not written: the next
  load has this very generation) and never by a dry run. Recorded by a stage only when it found nothing at all
  (no step, no edited record, no note, the write-back index unchanged).
* Checked whole (a magic line, the sha256 of the payload, JSON validated): anything else is discarded, logged.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import stat
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from dreamkeeper.consolidation.journal import journal_dir
from dreamkeeper.consolidation.settings import CycleSettings
from dreamkeeper.consolidation.writeback.records import index_path as writeback_index_path
from dreamkeeper.memory import (
    RACY_WINDOW_NS,
    MiB,
    UnsafeFileError,
    checked_payload,
    read_regular,
    reversals_path,
    stat_key,
    state_dir,
    write_checked,
)

log = logging.getLogger(__name__)

MEMO_NAME: Final = "quiet-memo"
FORMAT: Final = b"dreamkeeper-quiet-memo 1\n"
MEMO_LIMIT: Final = 16 * MiB
FOLD: Final = "fold"
REPAIR: Final = "repair"
GATING: Final = "gating"
DECAY: Final = "decay"
_now_ns = time.time_ns  # the racy rule's clock (a test moves it to play "a later cycle")


def memo_path(agent_dir: Path) -> Path:
    return state_dir(agent_dir) / MEMO_NAME


# The sources whose rules make the answers kept here: the fold's, the repair's (and the write-back index's), the
# stages that ask, the settings, and the memory package's (entries, their keys and fold texts).
_SOURCES: Final = (
    "fold.py", "scope.py", "quiet.py", "settings.py", "cycle.py", "writes.py", "dryrun.py", "gating.py",
    "declines.py", "backoff.py", "decay.py",
)  # fmt: skip


@functools.cache
def code_version() -> str:
    """A digest of those sources: another version of any never reuses an answer."""
    digest = hashlib.sha256(FORMAT)
    package = Path(__file__).resolve().parent
    sources = [package / name for name in _SOURCES]
    sources += [*sorted((package / "writeback").glob("*.py")), *sorted((package.parent / "memory").glob("*.py"))]
    for source in sources:
        digest.update(str(source.relative_to(package.parent)).encode())
        try:
            digest.update(source.read_bytes())
        except OSError:
            digest.update(b"?")
    return digest.hexdigest()


def stat_records(paths: dict[str, Path], directory: Path | None = None) -> dict[str, str] | None:
    """Name -> stat record of each path (``-`` when absent), and of every file in ``directory`` (by ``dir/name``);
    None when one cannot be trusted (changed within the racy window, or not readable as such)."""
    trusted_before = _now_ns() - RACY_WINDOW_NS
    out: dict[str, str] = {}

    def record(name: str, st: os.stat_result) -> bool:
        if max(st.st_mtime_ns, st.st_ctime_ns) >= trusted_before:
            return False
        kind = "R" if stat.S_ISREG(st.st_mode) else "D" if stat.S_ISDIR(st.st_mode) else "O"
        out[name] = kind + ",".join(map(str, stat_key(st)))
        return True

    try:
        for name, path in paths.items():
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                out[name] = "-"
                continue
            if not record(name, st):
                return None
        if directory is not None:
            try:
                listing = os.scandir(directory)
            except FileNotFoundError:
                out["dir/"] = "-"
                return out
            with listing:
                for child in listing:
                    if not record(f"dir/{child.name}", child.stat(follow_symlinks=False)):
                        return None
    except OSError:
        return None
    return out


class QuietMemo:
    """One agent's memo: ``unchanged`` asks whether a stage found nothing last time under this generation (and the
    state it names is as it was, and ``now`` is before the answer's end), ``found_nothing`` records it, ``save``
    writes what this cycle found (only when the next cycle can see the same generation)."""

    def __init__(self, agent_dir: Path, generation: str | None, settings: CycleSettings) -> None:
        self.path = memo_path(agent_dir)
        self.generation = generation
        self.key = hashlib.sha256(f"{code_version()}\n{settings.model_dump_json()}".encode()).hexdigest()
        self._saved: dict[str, Any] | None = None  # loaded lazily: a cycle without a generation never reads it
        self._found: dict[str, Any] = {}
        self.skipped: list[str] = []  # the stages whose walk was skipped (reports, tests)

    def unchanged(self, what: str, now: datetime, state: dict[str, str] | None = None) -> bool:
        if self.generation is None:
            return False
        saved = self._load().get(what)
        if not isinstance(saved, dict) or saved.get("state") != state:
            return False
        until = saved.get("until")
        if until is not None and not (isinstance(until, str) and now < datetime.fromisoformat(until)):
            return False
        self.skipped.append(what)
        # Still true: carried into the memo this cycle saves (the walk was skipped, the answer is the same).
        self._found[what] = saved
        return True

    def found_nothing(self, what: str, state: dict[str, str] | None = None, until: datetime | None = None) -> None:
        """This cycle's stage found nothing to do (under this generation); ``state``: the stat records of what else
        it read (None: nothing else), ``until``: when the same inputs may give another answer."""
        if self.generation is not None:
            self._found[what] = {"state": state, "until": until.isoformat() if until is not None else None}

    def save(self, generation_after: str | None) -> None:
        """Written when the corpus index still vouches for the generation the stages saw (the cycle wrote nothing
        the next scan would read) and there is something to keep; a failure is logged (a cache)."""
        if self.generation is None or generation_after != self.generation or not self._found:
            return
        if self._found == self._load():
            return  # already what the file says (what it says for another generation or key reads as nothing)
        payload = json.dumps(
            {"generation": self.generation, "key": self.key, "found": self._found}, separators=(",", ":")
        ).encode()
        write_checked(self.path, FORMAT, payload, "quiet memo", "the next cycle looks again")

    def _load(self) -> dict[str, Any]:
        if self._saved is not None:
            return self._saved
        self._saved = {}
        try:
            data = read_regular(self.path, MEMO_LIMIT, follow_symlinks=False)
        except FileNotFoundError:
            return self._saved
        except (OSError, UnsafeFileError) as exc:
            log.warning("quiet memo %s not used (%s): the stages look again", self.path, exc)
            return self._saved
        try:
            loaded = _decode(data)
        except Exception as exc:  # any damage at all: discarded, never trusted in part
            log.warning("quiet memo %s discarded (%s): the stages look again", self.path, exc)
            return self._saved
        if loaded["generation"] == self.generation and loaded["key"] == self.key:
            self._saved = loaded["found"]
        return self._saved


def _decode(data: bytes) -> dict[str, Any]:
    loaded: Any = json.loads(checked_payload(data, FORMAT, "quiet memo"))
    if not (
        isinstance(loaded, dict)
        and isinstance(loaded.get("generation"), str)
        and isinstance(loaded.get("key"), str)
        and isinstance(loaded.get("found"), dict)
    ):
        raise ValueError("unexpected content")
    for answer in loaded["found"].values():
        if not (isinstance(answer, dict) and set(answer) == {"state", "until"}):
            raise ValueError("unexpected answer")
        state, until = answer["state"], answer["until"]
        if state is not None and not (isinstance(state, dict) and all(isinstance(v, str) for v in state.values())):
            raise ValueError("unexpected state")
        if until is not None and datetime.fromisoformat(until).tzinfo is None:  # raises on anything but a time
            raise ValueError("an end time without its offset")  # compared with the cycle's aware clock
    return loaded


def repair_state(agent_dir: Path) -> dict[str, str] | None:
    """What the stale write-back repair reads besides the corpus, by stat record: the write-back index, the
    reversals log, every journal (None: one changed within the racy window, or could not be looked at)."""
    paths = {"index": writeback_index_path(agent_dir), "reversals": reversals_path(agent_dir)}
    return stat_records(paths, journal_dir(agent_dir))


__all__ = ["DECAY", "FOLD", "GATING", "MEMO_NAME", "REPAIR", "QuietMemo", "code_version", "memo_path", "repair_state"]
