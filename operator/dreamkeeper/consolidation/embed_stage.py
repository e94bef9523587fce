"""The cycle's two embeddings steps (embeddings.py says what and why): missing vectors before the gate, and the
vectors of what the cycle wrote after apply. Writing goes through the cycle's effects (nothing in a dry run)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

from dreamkeeper.consolidation import embeddings
from dreamkeeper.consolidation.counts import CycleCounts
from dreamkeeper.consolidation.embeddings import Embedder, Vector
from dreamkeeper.consolidation.stages import Applied, Embedded, Folded
from dreamkeeper.memory import Entry, MemoryStore, MemoryStoreError, StoredEntry, embedding_file_name

log = logging.getLogger(__name__)

Write = Callable[[Mapping[str, Vector], frozenset[str]], int]


async def embed_missing(store: MemoryStore, live: Sequence[StoredEntry], embedder: Embedder, write: Write) -> Embedded:
    """Vectors for the live entries that have none (or a file RockBot cannot read as floats), before clustering."""
    sizes = store.embedding_sizes()
    wanted = embeddings.missing(live, sizes)
    if not wanted:
        return Embedded()
    generated = await embeddings.generate([s.entry for s in wanted], embedder)
    ragged = frozenset(s.id for s in wanted if embedding_file_name(s.id).casefold() in sizes)
    written = write(generated.vectors, ragged)
    log.info(
        "embeddings: %d vector(s) generated for entries without one (%d written, %d failed) by %s",
        len(generated.vectors),
        written,
        generated.failed,
        embedder.name,
    )
    counts = CycleCounts(embeddings_generated=len(generated.vectors), embeddings_failed=generated.failed)
    return Embedded(generated.vectors, counts, (generated.note,) if generated.note else ())


async def embed_written(folded: Folded, applied: Applied, embedder: Embedder, write: Write) -> Embedded | None:
    """Vectors of what the cycle wrote whose document text is new: merge successors, and entries a fold or a merge
    folded into them gave new tags (RockBot re-embeds on every save: ``UpdateAsync``)."""
    changed: dict[str, Entry] = {}
    for merge in applied.plan.merges:
        before = merge.into.entry if merge.into is not None else None
        if before is None or embeddings.document_text(before) != embeddings.document_text(merge.successor):
            changed[merge.successor.id] = merge.successor
    for fold in folded.folds:
        if embeddings.document_text(fold.survivor.entry) != embeddings.document_text(fold.updated):
            changed[fold.updated.id] = fold.updated
    if not changed:
        return None
    generated = await embeddings.generate(list(changed.values()), embedder)
    written = write(generated.vectors, frozenset(generated.vectors))
    log.info("embeddings: %d vector(s) of entries this cycle wrote (%d written)", len(generated.vectors), written)
    counts = CycleCounts(embeddings_generated=len(generated.vectors), embeddings_failed=generated.failed)
    return Embedded(generated.vectors, counts, (generated.note,) if generated.note else ())


def write_vectors(store: MemoryStore, vectors: Mapping[str, Vector], replace: frozenset[str]) -> int:
    """Each vector where RockBot keeps it; a vector that cannot be written is a cache miss, never a failure."""
    written = 0
    for entry_id, vector in vectors.items():
        try:
            if store.write_embedding(entry_id, embeddings.vector_bytes(vector), replace=entry_id in replace):
                written += 1
        except (OSError, MemoryStoreError) as exc:
            log.warning("embedding of %s not written: %s", entry_id, exc)
    return written


__all__ = ["embed_missing", "embed_written", "write_vectors"]
