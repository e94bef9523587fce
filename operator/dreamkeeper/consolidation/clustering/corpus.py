"""The entries of one scan in id order, flattened into arrays (token numbers, hashes, dimensions, scopes).

Validating and tokenising happen once here, so the Jaccard and cosine scans work on numbers, never on
strings, and the hash seed is fixed for a corpus and fresh when it changes."""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dreamkeeper.consolidation.clustering.model import (
    ClusteringError,
    ClusterItem,
    F32Array,
    IntArray,
    Tokens,
    U64Array,
)
from dreamkeeper.consolidation.clustering.similarity import tokenizer, usable_vector
from dreamkeeper.consolidation.clustering.stats import ClusteringStats

logger = logging.getLogger(__name__)

_ENTRY_BATCH = 4096  # entries tokenised and numbered together (their token strings are held only meanwhile)


@dataclass(slots=True)
class Corpus:
    """Entries in id order, flattened into arrays."""

    ids: list[str]
    token_ptr: IntArray  # CSR offsets into token_ids, length n + 1
    token_ids: IntArray  # vocabulary ids, ascending within each entry
    token_hashes: U64Array  # 64-bit content hash per vocabulary id (input-order independent)
    dims: IntArray  # embedding dimension, -1 when absent or degenerate
    vectors: list[npt.NDArray[np.floating] | None]
    scopes: list[str | None]
    seed: int  # hash seed derived from ids and contents

    def vector(self, index: int) -> npt.NDArray[np.floating]:
        vector = self.vectors[index]
        if vector is None:  # only called for entries with dims >= 0
            raise ClusteringError(f"internal error: entry {self.ids[index]!r} has no usable embedding")
        return vector

    @property
    def token_counts(self) -> IntArray:
        counts: IntArray = np.diff(self.token_ptr)
        return counts

    @property
    def vocabulary(self) -> int:
        return len(self.token_hashes)


def prepare(items: Sequence[ClusterItem], stats: ClusteringStats, tokens: Tokens = "unicode") -> Corpus:
    """The corpus of ``items`` (checked, in id order); counts empty token sets and usable embeddings."""
    ordered = _checked_in_id_order(items)
    vectors, dims = _usable_vectors(ordered, stats)
    # Tokens only matter for Jaccard pairs; a corpus embedded throughout with one model has none.
    if len(ordered) and (dims.min() < 0 or dims.min() != dims.max()):
        token_ids, counts, hashes = _numbered_tokens(ordered, tokens)
    else:
        token_ids, counts, hashes = np.empty(0, np.int64), np.zeros(len(ordered), np.int64), np.empty(0, np.uint64)
    corpus = Corpus(
        ids=[item.id for item in ordered],
        token_ptr=np.concatenate(([0], np.cumsum(counts))).astype(np.int64),
        token_ids=token_ids,
        token_hashes=hashes,
        dims=dims,
        vectors=vectors,
        scopes=list(map(functools.lru_cache(maxsize=None)(_top_level), (item.category for item in ordered))),
        seed=_corpus_seed(ordered),
    )
    stats.empty_token_items = int(np.count_nonzero(corpus.token_counts == 0))
    stats.embedded_items = int(np.count_nonzero(dims >= 0))
    return corpus


def _checked_in_id_order(items: Sequence[ClusterItem]) -> list[ClusterItem]:
    for item in items:
        if not isinstance(item, ClusterItem):
            raise ClusteringError(f"expected ClusterItem, got {type(item).__name__}; nothing was clustered")
        if not isinstance(item.id, str) or not item.id:
            raise ClusteringError(f"entry id must be a non-empty string, got {item.id!r}; nothing was clustered")
        if not isinstance(item.content, str):
            raise ClusteringError(f"entry {item.id!r}: content must be a string; nothing was clustered")
    ordered = sorted(items, key=lambda item: item.id)
    for before, after in itertools.pairwise(ordered):
        if before.id == after.id:
            raise ClusteringError(f"entry id {after.id!r} appears more than once; nothing was clustered")
    return ordered


def _usable_vectors(
    ordered: Sequence[ClusterItem], stats: ClusteringStats
) -> tuple[list[npt.NDArray[np.floating] | None], IntArray]:
    """Each entry's embedding if cosine can use it and its dimension (-1 if not); degenerate ones are counted."""
    vectors = [usable_vector(item) for item in ordered]
    dims = np.fromiter((-1 if v is None else v.shape[0] for v in vectors), dtype=np.int64, count=len(ordered))
    stats.degenerate_embeddings = sum(
        1 for v, item in zip(vectors, ordered, strict=True) if v is None and item.embedding is not None
    )
    if stats.degenerate_embeddings:
        logger.warning(
            "near-duplicate scan: %d embedding(s) empty, non-finite or all-zero — those entries are compared by "
            "Jaccard; the vectors were left as they are",
            stats.degenerate_embeddings,
        )
    return vectors, dims


def _numbered_tokens(ordered: Sequence[ClusterItem], tokens: Tokens) -> tuple[IntArray, IntArray, U64Array]:
    """Each entry's distinct token numbers (ascending, concatenated), how many each has, and a 64-bit content
    hash per vocabulary number.

    Tokens become vocabulary numbers a batch of entries at a time, so beyond a batch only one string per distinct
    token is held.
    """
    token_list = tokenizer(tokens)
    vocabulary: dict[str, int] = {}
    numbered: list[IntArray] = []
    sized: list[IntArray] = []
    for lo in range(0, len(ordered), _ENTRY_BATCH):
        token_lists = [token_list(item.content) for item in ordered[lo : lo + _ENTRY_BATCH]]
        flat = list(itertools.chain.from_iterable(token_lists))
        fresh = [token for token in dict.fromkeys(flat) if token not in vocabulary]
        vocabulary.update(zip(fresh, range(len(vocabulary), len(vocabulary) + len(fresh)), strict=True))
        numbers = np.fromiter(map(vocabulary.__getitem__, flat), dtype=np.int64, count=len(flat))
        lengths = np.fromiter(map(len, token_lists), dtype=np.int64, count=len(token_lists))
        owners = np.repeat(np.arange(len(token_lists), dtype=np.int64), lengths)
        order = np.lexsort((numbers, owners))  # each entry's token numbers ascending, repeats adjacent
        numbers, owners = numbers[order], owners[order]
        distinct = np.ones(len(numbers), dtype=bool)
        distinct[1:] = (numbers[1:] != numbers[:-1]) | (owners[1:] != owners[:-1])
        numbered.append(numbers[distinct])
        sized.append(np.bincount(owners[distinct], minlength=len(token_lists)).astype(np.int64))
    token_ids: IntArray = np.concatenate(numbered)
    del numbered
    counts: IntArray = np.concatenate(sized)
    hashes = np.fromiter(
        (
            int.from_bytes(hashlib.blake2b(token.encode(errors="surrogatepass"), digest_size=8).digest(), "little")
            for token in vocabulary
        ),
        dtype=np.uint64,
        count=len(vocabulary),
    )
    return token_ids, counts, hashes


def _top_level(category: str | None) -> str | None:
    if category is None:
        return None
    return category.strip().strip("/").split("/", 1)[0].strip().casefold()


def _corpus_seed(ordered: Sequence[ClusterItem]) -> int:
    """Hash seed from ids and contents: fixed for a given corpus, fresh when it changes.

    A pair LSH happens to miss (probability <= 0.001) is thereby not missed forever: any edit re-draws it.
    """
    digest = hashlib.blake2b(digest_size=8)
    digest.update("\x00".join(item.id for item in ordered).encode(errors="surrogatepass"))
    digest.update(b"\x01")
    digest.update("\x00".join(item.content for item in ordered).encode(errors="surrogatepass"))
    return int.from_bytes(digest.digest(), "little")


def rows_per_block(dim: int, bytes_per_value: int) -> int:
    """Rows per block so a block of vectors takes about 16 MB whatever the embedding dimension."""
    return max(64, (16 << 20) // max(1, dim * bytes_per_value))


def normalised(corpus: Corpus, members: IntArray) -> F32Array:
    """Unit rows in float32 for screening; normalised blockwise in float64 so huge components cannot overflow."""
    result: F32Array = np.empty((len(members), corpus.dims[members[0]]), dtype=np.float32)
    indices = members.tolist()
    step = rows_per_block(result.shape[1], 8)
    for start in range(0, len(indices), step):
        block = np.stack([corpus.vector(k) for k in indices[start : start + step]]).astype(np.float64)
        block /= np.sqrt(np.einsum("ij,ij->i", block, block))[:, None]
        result[start : start + step] = block
    return result
