"""What a cycle found nothing to do about, kept under the generation of the corpus it looked at, so that the next
cycle over the same corpus does not walk all of it again for the same answer (issue 27).

A steady cycle's stages each walked the whole corpus for an answer that had not changed since the last cycle: the
stale write-back repair (every live entry against the write-back index), the exact-duplicate fold (every entry's
collapsed text), gating (every entry's review stamp, every settled cluster's decline stamps). Each answer is a
function of the corpus, the settings and the code; the repair's also of the write-back index, the journals, the
reversals log and the clock (the index forgets journals past the retention window); gating's also of the clusters
(by the cluster cache's key, which covers the vectors) and the clock (a declined cluster is due again at a time).
None of those three reads an entry's importance or updatedAt, so each is kept under the content generation of the
list it looked at (memory/content_digests.py: what the entries say, decay's two values aside), which RockBot's
decay rewriting a few percent of the corpus every cycle does not change. Decay's own answer (the frugal mode) reads
importance: it is kept under the corpus index's files generation (memory/corpus_index.py: every file's stat as its
record says, no file more or less). The next cycle skips a walk when the generation and everything else the answer
depended on are as they were.

Why it can never hide work (a cache: deleting or damaging the file costs one walk, never a decision not taken):

* Only "nothing to do" is kept, each answer for one generation: an entry edited (anything but decay's two values),
  added, removed or moved, and the list has another content generation; for decay's, any file written, added,
  removed or racy, and the scan has another files generation (or none), so the stage walks the corpus.
* A content generation is a function of the entries themselves, so its answers are kept whatever the cycle wrote;
  a files generation names the corpus only while nothing is written: its answers, and which content generations
  its corpus has (``contents``, so a cycle over the very files the last one saw digests nothing), are written only
  by a cycle that wrote nothing its next scan would see (the corpus index was not written: the next load has this
  very generation).
* The key holds every setting (the settings as JSON) and the code that makes the answers; the repair's other
  inputs go in by stat record (size, mtime_ns, ctime_ns, inode) under the corpus index's racy rule: the write-back
  index, every journal file but decay's (by name: one added or removed shows; decay's are never folded into the
  write-back index, writeback/ingest.py), the reversals log; and its clock: the answer holds until the oldest journal
  the index holds leaves the retention window (the index changes then). Gating's holds for the clusters of one
  cluster-cache key, and until the first settled cluster is due to be offered again; it is kept only when every
  entry is reviewed and none is held in a back-off (their time is not kept). Decay's holds until the first entry
  could fall by ``min_step``, reach the decay floor or leave the high-value floor (``decay.quiet_until``, made a
  little early; with ``min_step`` 0 every drop is a write: it holds only while no entry is past its grace period).
* Never written by a dry run. Recorded by a stage only when it found nothing at all (no step, no edited record, no
  note, the write-back index unchanged).
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

from dreamkeeper.consolidation.journal import DECAY_JOURNAL_SUFFIX, journal_dir
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
FORMAT: Final = b"dreamkeeper-quiet-memo 2\n"
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


def stat_records(
    paths: dict[str, Path], directory: Path | None = None, skip_suffix: str | None = None
) -> dict[str, str] | None:
    """Name -> stat record of each path (``-`` when absent), and of every file in ``directory`` (by ``dir/name``)
    but those whose names end with ``skip_suffix``; None when one cannot be trusted (changed within the racy window,
    or not readable as such)."""
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
                    if skip_suffix is not None and child.name.endswith(skip_suffix):
                        continue
                    if not record(f"dir/{child.name}", child.stat(follow_symlinks=False)):
                        return None
    except OSError:
        return None
    return out


class QuietMemo:
    """One agent's memo: ``unchanged`` asks whether a stage found nothing last time over the corpus of this
    generation (and the state it names is as it was, and ``now`` is before the answer's end), ``found_nothing``
    records it, ``save`` writes what this cycle found.

    An answer is kept under a content generation (memory/content_digests.py: what the entries say, decay's two
    values aside; the fold's, the repair's, gating's) or, ``files=True``, under the corpus index's generation (the
    files' stat records: decay's, which reads importance and updatedAt). A content generation is a function of the
    entries themselves: its answers are kept whatever the cycle wrote (a later corpus with the same content has the
    same answer). A files generation names the corpus the stages saw only while nothing is written: its answers,
    and which content generations the corpus of that generation has (``contents``: asked again without digesting
    the corpus), are kept only when the next load sees that very generation (``save``)."""

    def __init__(self, agent_dir: Path, settings: CycleSettings) -> None:
        self.path = memo_path(agent_dir)
        self.key = hashlib.sha256(f"{code_version()}\n{settings.model_dump_json()}".encode()).hexdigest()
        self._saved: dict[str, Any] | None = None  # loaded lazily: a cycle without a generation never reads it
        self._found: dict[str, Any] = {}
        self._contents: dict[str, Any] | None = None  # {"files": generation, "of": {list: content generation}}
        self.skipped: list[str] = []  # the stages whose walk was skipped (reports, tests)

    def unchanged(self, what: str, generation: str | None, now: datetime, state: dict[str, str] | None = None) -> bool:
        if generation is None:
            return False
        saved = self._load()["found"].get(what)
        if not isinstance(saved, dict) or saved.get("generation") != generation or saved.get("state") != state:
            return False
        until = saved.get("until")
        if until is not None and not (isinstance(until, str) and now < datetime.fromisoformat(until)):
            return False
        self.skipped.append(what)
        # Still true: carried into the memo this cycle saves (the walk was skipped, the answer is the same).
        self._found[what] = saved
        return True

    def found_nothing(
        self,
        what: str,
        generation: str | None,
        state: dict[str, str] | None = None,
        until: datetime | None = None,
        *,
        files: bool = False,
    ) -> None:
        """This cycle's stage found nothing to do over the corpus of ``generation`` (a files generation when
        ``files``); ``state``: the stat records of what else it read (None: nothing else), ``until``: when the same
        inputs may give another answer."""
        if generation is not None:
            self._found[what] = {
                "generation": generation,
                "files": files,
                "state": state,
                "until": until.isoformat() if until is not None else None,
            }

    def contents(self, files_generation: str | None) -> dict[str, str]:
        """The content generations of the lists of the corpus of ``files_generation``, as a cycle over that very
        corpus found them (``learn_contents``); empty when none did."""
        known: dict[str, str] = {}
        for contents in (self._load()["contents"], self._contents):  # what was saved, then what this cycle learnt
            if files_generation is not None and contents is not None and contents["files"] == files_generation:
                known.update(contents["of"])
        return known

    def learn_contents(self, files_generation: str, name: str, content_generation: str) -> None:
        if self._contents is None or self._contents["files"] != files_generation:
            self._contents = {"files": files_generation, "of": self.contents(files_generation)}
        self._contents["of"][name] = content_generation

    def save(self, files_generation_after: str | None) -> None:
        """What this cycle found, less what holds only for a files generation the next load will not see (the cycle
        wrote a file of the corpus); a failure is logged (a cache)."""
        found = {
            what: answer
            for what, answer in self._found.items()
            if not answer.get("files") or answer.get("generation") == files_generation_after
        }
        contents = self._contents
        if contents is None or files_generation_after is None or contents["files"] != files_generation_after:
            contents = self._load()["contents"]  # still true for the corpus it names, if that one comes back
        if not found and contents is None:
            return
        if {"found": found, "contents": contents} == self._load():
            return  # already what the file says
        payload = json.dumps({"key": self.key, "found": found, "contents": contents}, separators=(",", ":")).encode()
        write_checked(self.path, FORMAT, payload, "quiet memo", "the next cycle looks again")

    def _load(self) -> dict[str, Any]:
        if self._saved is not None:
            return self._saved
        self._saved = {"found": {}, "contents": None}
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
        if loaded["key"] == self.key:
            self._saved = {"found": loaded["found"], "contents": loaded["contents"]}
        return self._saved


def _decode(data: bytes) -> dict[str, Any]:
    loaded: Any = json.loads(checked_payload(data, FORMAT, "quiet memo"))
    if not (
        isinstance(loaded, dict)
        and set(loaded) == {"key", "found", "contents"}
        and isinstance(loaded["key"], str)
        and isinstance(loaded["found"], dict)
    ):
        raise ValueError("unexpected content")
    for answer in loaded["found"].values():
        if not (isinstance(answer, dict) and set(answer) == {"generation", "files", "state", "until"}):
            raise ValueError("unexpected answer")
        if not (isinstance(answer["generation"], str) and type(answer["files"]) is bool):
            raise ValueError("unexpected generation")
        state, until = answer["state"], answer["until"]
        if state is not None and not (isinstance(state, dict) and all(isinstance(v, str) for v in state.values())):
            raise ValueError("unexpected state")
        if until is not None and datetime.fromisoformat(until).tzinfo is None:  # raises on anything but a time
            raise ValueError("an end time without its offset")  # compared with the cycle's aware clock
    contents = loaded["contents"]
    if contents is not None and not (
        isinstance(contents, dict)
        and set(contents) == {"files", "of"}
        and isinstance(contents["files"], str)
        and isinstance(contents["of"], dict)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in contents["of"].items())
    ):
        raise ValueError("unexpected content generations")
    return loaded


def repair_state(agent_dir: Path) -> dict[str, str] | None:
    """What the stale write-back repair reads besides the corpus, by stat record: the write-back index, the
    reversals log, every journal but decay's (None: one changed within the racy window, or could not be looked at).
    Decay's journals are never folded into the write-back index (writeback/ingest.py: a decay step changes
    importance and updatedAt alone, which no stale copy is judged by), and with RockBot's decay every cycle writes
    one: named here, they would make every such cycle walk the repair again."""
    paths = {"index": writeback_index_path(agent_dir), "reversals": reversals_path(agent_dir)}
    return stat_records(paths, journal_dir(agent_dir), DECAY_JOURNAL_SUFFIX + ".jsonl")


__all__ = ["DECAY", "FOLD", "GATING", "MEMO_NAME", "REPAIR", "QuietMemo", "code_version", "memo_path", "repair_state"]
