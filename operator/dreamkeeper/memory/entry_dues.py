"""A time kept in each corpus-index record before which a stage has nothing to do about that record's entry, so that
the stage looks only at the entries due (issue 27).

Importance decay (consolidation/decay.py) asked every live entry, every cycle, whether it had fallen far enough to be
written: about 0.3 CPU s of a 100,000-entry cycle in the frugal mode (bench/results/
scale-steady-s27-100k-frugal-hourly.md), for the five to nine entries an hourly cycle writes; in RockBot's mode
(``min_step`` 0) every entry still inside its grace period, or at the decay floor, was asked for nothing. The
earliest time an entry can be written is a function of the entry and the settings alone (``decay._Due``), so it is
kept with the record of the file the entry was parsed from, and the next cycle looks only at the entries whose time
has come.

What is kept and why it cannot hide work (a cache: an index without dues, or with another key's, costs one walk):

* Per record, a key (an opaque string from the stage: a digest of its settings and of its code) and a time in
  whole POSIX seconds, floored and made a second earlier than what the stage worked out. A due is used only under
  the very key it was kept under, only for the parse the record holds (``record.stored is stored``: the entry the
  scan took from the record, never a copy a stage made), and a record exists only while its file's stat matches
  (corpus_index.py): an entry edited, rewritten (decay's own write among them) or read again has no due until the
  stage works it out again.
* Saved with the record (the index's format, code digest, checksum and restricted unpickler cover it;
  ``corpus_index._rebuilt`` refuses anything but a string or None and an int).

``NEVER``: the entry cannot become due (it never decays); kept like any other time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from dreamkeeper.memory.corpus_index import Record
    from dreamkeeper.memory.store import StoredEntry

NEVER: Final = 2**62  # a due no clock reaches (seconds): an entry that never becomes due


def pending(
    entries: Iterable[StoredEntry], records: dict[str, Record], key: str, at: int
) -> tuple[list[StoredEntry], list[StoredEntry], int | None]:
    """Of ``entries``, in order: those due at or before ``at`` or with no due known under ``key`` (the ones to look
    at), of which those with none known; and the earliest due of the others (None: there are none). ``records``: the
    corpus index's (path -> Record) as its last scan left them. One loop: it runs over the live corpus."""
    look: list[StoredEntry] = []
    unknown: list[StoredEntry] = []
    soonest: int | None = None
    get, add, add_unknown = records.get, look.append, unknown.append
    for stored in entries:
        record = get(stored.name)
        if record is None or record.stored is not stored or record.due_key != key:
            add(stored)
            add_unknown(stored)
            continue
        due = record.due
        if due <= at:
            add(stored)
        elif soonest is None or due < soonest:
            soonest = due
    return look, unknown, soonest


def note_dues(dues: Sequence[tuple[StoredEntry, int]], records: dict[str, Record], learnt: set[str], key: str) -> int:
    """Keep each entry's due under ``key`` in its record (only a record holding that very parse); each record so
    changed is named in ``learnt`` (the index saves it). How many were kept."""
    kept = 0
    get = records.get
    for stored, due in dues:
        if type(due) is not int:
            raise TypeError(f"a due is whole seconds, not {due!r}")
        name = stored.name
        record = get(name)
        if record is None or record.stored is not stored:
            continue  # not the parse a record holds: worked out again next time
        if record.due_key != key or record.due != due:
            record.due_key, record.due = key, due
            learnt.add(name)
            kept += 1
    return kept


__all__ = ["NEVER", "note_dues", "pending"]
