"""Embeddings as RockBot's ``EmbeddingCache`` keeps them, filled in before clustering (issue 24 item 4).

RockBot (RockBot.Host, read at the commits cited):

* a vector is ``{memory root}/.embeddings/{id}.bin``, the raw float32 array (``Buffer.BlockCopy``: little-endian on
  every platform it runs on), no header, no model or dimension; the id as the entry has it
  (``EmbeddingCache.GetFilePath``, EmbeddingCache.cs @08e13c9f);
* the text embedded is ``GetDocumentText``: the content, then the tags joined by spaces, then the category with
  ``/`` and ``-`` turned into spaces, joined by single spaces (FileMemoryStore.cs @8a7e360e), passed through
  ``EmbeddingTextPreparer.Prepare`` (@21c90b0d): cut to ``MaxInputChars`` (30,000 UTF-16 units), or to
  ``MaxStructuredInputChars`` (12,000) when it looks structured (first non-blank character ``{`` or ``[``; or at
  1,024 units and more, an average run between whitespace over 15 or more than a quarter of the first 4,096 units
  neither letters nor whitespace), with EmbeddingOptions' defaults;
* before its near-duplicate scan RockBot asks for every missing vector in one batch (``GetOrCreateBatchAsync``); a
  file that cannot be read as floats (a length not a multiple of 4) counts as missing and is written again, an
  empty file is an (empty) vector. A failed request leaves those entries without a vector: they are compared by
  Jaccard, the others by cosine (``BuildSimilarityFunctionAsync``);
* every save re-embeds the entry in the background (``SaveAsync`` → ``UpdateAsync``): a merge's new entry gets its
  vector, and so does an entry whose tags a fold changed.

dreamkeeper does the same when an embeddings endpoint is configured (``proposers/embeddings.py``): missing vectors
of live entries before the gate, vectors of the entries a cycle created or re-tagged after apply, written where and
as RockBot writes them, so its clusters (and the decline stamps keyed on their hashes) are RockBot's. Requests are
split into batches of ``batch_size`` texts (RockBot sends one request; a model's vector does not depend on its
batch). Without an endpoint, vectors are read as before and entries without one are compared by Jaccard.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeAlias

from dreamkeeper.memory import Entry, StoredEntry, embedding_file_name

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

log = logging.getLogger(__name__)

MAX_INPUT_CHARS = 30_000  # EmbeddingOptions.MaxInputChars
MAX_STRUCTURED_INPUT_CHARS = 12_000  # EmbeddingOptions.MaxStructuredInputChars
# For annotations only: numpy is loaded where vectors are made or written, never by a cycle without embeddings.
Vector: TypeAlias = "npt.NDArray[np.float32]"


class EmbeddingError(RuntimeError):
    """The endpoint could not produce vectors (after its retries)."""


class Embedder(Protocol):
    """An embeddings endpoint: one vector per text, in order."""

    name: str
    batch_size: int

    async def embed(self, texts: Sequence[str]) -> list[Vector]: ...

    async def aclose(self) -> None: ...


def document_text(entry: Entry) -> str:
    """RockBot's ``GetDocumentText``: content, tags, category words."""
    parts = [entry.content]
    if entry.tags:
        parts.append(" ".join(entry.tags))
    if entry.category is not None:
        parts.append(entry.category.replace("/", " ").replace("-", " "))
    return " ".join(parts)


def _units(text: str) -> int:
    """Length in UTF-16 code units, as .NET counts a string."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _cut(text: str, units: int) -> str:
    """The first ``units`` UTF-16 units (a surrogate pair cut in half is dropped: it cannot be sent as text)."""
    data = text.encode("utf-16-le", "surrogatepass")[: 2 * units]
    return data.decode("utf-16-le", "ignore")


def _structured(text: str) -> bool:
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        return True
    if _units(text) < 1024:
        return False
    sample = _cut(text, 4096)
    length = _units(sample)
    blank = sum(1 for c in sample if c.isspace())
    other = sum(1 for c in sample if not c.isspace() and not c.isalpha())
    average_run = (length - blank) / blank if blank else float("inf")
    return average_run > 15 or other / length > 0.25


def prepare_text(text: str) -> str:
    """``EmbeddingTextPreparer.Prepare`` with RockBot's default caps."""
    if not text:
        return text
    cap = MAX_STRUCTURED_INPUT_CHARS if _structured(text) else MAX_INPUT_CHARS
    return text if _units(text) <= cap else _cut(text, cap)


def vector_bytes(vector: Vector) -> bytes:
    """A vector as RockBot's ``WriteAsync`` writes it: raw little-endian float32."""
    import numpy as np

    return np.asarray(vector, dtype="<f4").tobytes()


def missing(live: Sequence[StoredEntry], sizes: dict[str, int]) -> list[StoredEntry]:
    """The entries RockBot would (re)generate a vector for: no file, or one not a whole number of floats (its
    ``Buffer.BlockCopy`` throws, the read returns null). ``sizes``: ``MemoryStore.embedding_sizes()``."""
    out = []
    for stored in live:
        size = sizes.get(embedding_file_name(stored.id).casefold())
        if size is None or size % 4 != 0:
            out.append(stored)
    return out


@dataclass(frozen=True)
class Generated:
    vectors: dict[str, Vector]  # id -> vector
    failed: int = 0
    requests: int = 0
    note: str | None = None


async def generate(entries: Sequence[Entry], embedder: Embedder) -> Generated:
    """Vectors for ``entries`` (their document texts), batch by batch. A failed batch leaves its entries without
    one (they are compared by Jaccard, as RockBot does) and is reported; the others keep theirs."""
    import numpy as np

    vectors: dict[str, Vector] = {}
    failed = requests = 0
    errors: list[str] = []
    size = max(1, embedder.batch_size)
    for start in range(0, len(entries), size):
        chunk = entries[start : start + size]
        requests += 1
        try:
            produced = await embedder.embed([prepare_text(document_text(e)) for e in chunk])
        except EmbeddingError as exc:
            failed += len(chunk)
            errors.append(str(exc))
            log.warning(
                "embeddings: %d vector(s) not generated (%s); those entries are compared by Jaccard", len(chunk), exc
            )
            continue
        for entry, vector in zip(chunk, produced, strict=True):
            vectors[entry.id] = np.asarray(vector, dtype=np.float32)
    note = f"embeddings: {failed} vector(s) not generated: {errors[0]}" if errors else None
    return Generated(vectors, failed, requests, note)


__all__ = [
    "MAX_INPUT_CHARS",
    "MAX_STRUCTURED_INPUT_CHARS",
    "Embedder",
    "EmbeddingError",
    "Generated",
    "Vector",
    "document_text",
    "generate",
    "missing",
    "prepare_text",
    "vector_bytes",
]
