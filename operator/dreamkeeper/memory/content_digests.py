"""What each entry says besides decay's two values, as a digest kept in its corpus-index record, so a cycle can name
the corpus's content by one value that decay's own rewrites do not change (issue 27).

A steady cycle with RockBot's decay (``decay.min_step`` 0: every drop written) rewrites the entries past their grace
period every cycle, importance and updatedAt and nothing else. The corpus index's generation (corpus_index.py) names
the corpus by its files' stat records, so after such a cycle it had none, and every stage whose answer the last
cycle had kept (the exact-duplicate fold, the write-back repair, gating and its clusters: consolidation/quiet.py,
cluster_cache.py) walked the whole corpus again for the same answer: none of them reads either value.

So, per file: a digest of every field of its parsed entry but ``importanceScore`` and ``updatedAt``
(``entry_digest``), and of a list of entries the digest of their paths and digests in order
(``content_generation``): two lists with one content generation hold the same entries at the same paths in the same
order, equal in every field but those two. It is a function of the entries themselves, not of any history: a stage
may keep an answer that reads nothing else of them under it, for as long as the inputs it names besides are as
they were.

Where a digest comes from (a wrong one could only make a stage keep an answer for another corpus, so none is
trusted further than the parse it was made from):

* An entry the scan took from a corpus-index record (``record.stored is stored``: the parse of the bytes the record
  names) by the digest its record holds, made from that very entry the first time a cycle asked, then saved with
  the record (the index's format, code digest, checksum and restricted unpickler cover it, as they cover the
  parse; ``corpus_index._rebuilt`` refuses anything but 16 bytes).
* Any other entry (one a stage changed in memory, a racy file's, one read without an index) digested from its
  fields.
* A list decay made from one whose generation is known: that generation, when each entry is the same object or a
  copy at the same path that differs in decay's values alone, every other field the very object or (the containers
  ``Entry.evolve`` copies) an equal list or dict of strings in the same order (``derived_generation``): the value
  a digest of every entry gives.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final

from dreamkeeper.memory.entry import Entry

if TYPE_CHECKING:
    from dreamkeeper.memory.corpus_index import Record
    from dreamkeeper.memory.store import StoredEntry

DIGEST_SIZE: Final = 16
# All a decay step changes (consolidation/journal.py DECAY_FIELDS, as the model names them).
DECAY_FIELDS: Final = frozenset({"importance_score", "updated_at"})


def entry_digest(entry: Entry) -> bytes:
    """The digest of every field of ``entry`` but decay's, by name and value. By ``repr``, not by pickle: a pickle
    names an object seen twice by reference (an entry whose created and last-seen times are one object pickles
    otherwise than one whose are two equal ones); a repr is of the values alone."""
    fields = [(name, value) for name, value in entry.__dict__.items() if name not in DECAY_FIELDS]
    return hashlib.blake2b(repr(fields).encode("utf-8", "surrogatepass"), digest_size=DIGEST_SIZE).digest()


def decay_only(old: Entry, new: Entry) -> bool:
    """Whether ``new`` differs from ``old`` in decay's two values alone, as a copy decay makes (``Entry.evolve``): every
    other field the very object, or (the containers evolve copies) a list of strings, a dict of strings to strings,
    equal and in the same order. Then their digests are equal; False does not say they differ."""
    before, after = old.__dict__, new.__dict__
    if tuple(before) != tuple(after):
        return False
    for name, value in before.items():
        other = after[name]
        if value is other or name in DECAY_FIELDS:
            continue
        if type(value) is list and type(other) is list:
            if value == other and all(type(v) is str for v in value) and all(type(v) is str for v in other):
                continue
        elif type(value) is dict and type(other) is dict:
            pairs, others = list(value.items()), list(other.items())
            if pairs == others and all(type(k) is str and type(v) is str for k, v in pairs + others):
                continue
        return False
    return True


def content_generation(
    entries: Iterable[StoredEntry], records: dict[str, Record], learnt: set[str]
) -> tuple[str, int, int]:
    """The content generation of ``entries``, in their order, and how many digests were taken from records and how
    many made; ``records``: the corpus index's (path -> Record) as its last scan left them. A record given its
    digest here is named in ``learnt`` (the index saves it with it)."""
    names: list[str] = []
    parts: list[bytes] = []
    kept = made = 0
    add_name, append, get = names.append, parts.append, records.get
    for stored in entries:
        name = stored.name
        add_name(name)
        record = get(name)
        if record is None or record.stored is not stored:
            append(entry_digest(stored.entry))  # not the parse a record holds: from its fields
            made += 1
            continue
        digest = record.content
        if digest is None:
            digest = record.content = entry_digest(stored.entry)
            learnt.add(name)
            made += 1
        else:
            kept += 1
        append(digest)
    total = hashlib.blake2b(b"dreamkeeper content generation 1", digest_size=32)
    total.update(len(parts).to_bytes(8, "big"))
    total.update("\0".join(names).encode("utf-8", "surrogatepass"))  # no path holds a NUL
    total.update(b"".join(parts))
    return total.hexdigest(), kept, made


def derived_generation(entries: Sequence[StoredEntry], base: Sequence[StoredEntry], generation: str) -> str | None:
    """``generation``, the content generation of ``base``, when ``entries`` is ``base`` with some entries replaced by
    copies at the same paths that differ from them in decay's values alone (``decay_only``: what a decay pass makes),
    so that a digest of every entry would give that very value; None otherwise. A zip of the two lists, not a digest
    lookup per entry: decay hands gating such a list every cycle."""
    if len(entries) != len(base):
        return None
    for new, old in zip(entries, base, strict=True):
        if new is not old and (str(new.path) != str(old.path) or not decay_only(old.entry, new.entry)):
            return None
    return generation


__all__ = ["DECAY_FIELDS", "DIGEST_SIZE", "content_generation", "decay_only", "derived_generation", "entry_digest"]
