"""The two measures and RockBot's tokens: the one definition behind every accepted edge.

The batched scans (:mod:`.jaccard`, :mod:`.cosine`) decide each edge with the same formulas as
:func:`similarity`, so a pair's verdict does not depend on the path that found it."""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from dreamkeeper.consolidation.clustering.model import ClusteringError, ClusterItem, F64Array, Tokens

# Runs of Unicode letters/digits/apostrophes longer than 3: that is [^\W_] or "'", but a single class repeats in
# sre's fast loop (2x faster than the alternation), so underscores are turned into spaces first.
_TOKEN_RE = re.compile(r"[\w']{4,}")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})
# RockBot's tokens (FileMemoryStore ``Tokenize``, MarimerLLC/rockbot@8a7e360e): runs of ASCII [a-z0-9'] in the
# lower-cased text, longer than 3 characters. "Kraków" gives "krak"; a typographic apostrophe splits a word.
_ROCKBOT_TOKEN_RE = re.compile(r"[a-z0-9']{4,}")


def jaccard_tokens(text: str) -> frozenset[str]:
    """RockBot's clustering tokens: lowercase runs of letters, digits and apostrophes, longer than 3 chars.

    Unicode-aware (RockBot's ``[a-z0-9']`` dropped accented and non-Latin words); NFC first so composed and
    decomposed accents agree, and typographic apostrophes count as ``'`` so "Rocky’s" matches "Rocky's".
    """
    return frozenset(token_list(text))


def rockbot_token_list(text: str) -> list[str]:
    """RockBot's Jaccard tokens, exactly: what its near-duplicate clusters (and so its cluster hashes) are built on."""
    if not text.isascii():
        # ToLowerInvariant maps one character to one (simple case mapping); Python's lower() turns U+0130 into
        # "i" + a combining dot, which would end the token where .NET continues it.
        text = text.replace("\u0130", "i")
    found: list[str] = _ROCKBOT_TOKEN_RE.findall(text.lower())
    return found


def tokenizer(tokens: Tokens) -> Callable[[str], list[str]]:
    return rockbot_token_list if tokens == "rockbot" else token_list


def token_list(text: str) -> list[str]:
    # A greedy {4,} run never starts mid-run (a shorter run fails at its first char), so this is exactly the
    # maximal runs longer than 3 chars, found in C rather than filtered in Python.
    if not text.isascii():
        text = unicodedata.normalize("NFC", text).translate(_APOSTROPHES)
    tokens: list[str] = _TOKEN_RE.findall(text.lower().replace("_", " "))
    return tokens


def similarity(a: ClusterItem, b: ClusterItem, tokens: Tokens = "unicode") -> tuple[float, str]:
    """Similarity of one pair and its measure: cosine when both have same-dimension usable embeddings."""
    va, vb = usable_vector(a), usable_vector(b)
    if va is not None and vb is not None and va.shape == vb.shape:
        return float(cosine_rows(va[None, :], vb[None, :])[0]), "cosine"
    split = tokenizer(tokens)
    return _jaccard(frozenset(split(a.content)), frozenset(split(b.content))), "jaccard"


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def cosine_rows(a: npt.NDArray[np.floating], b: npt.NDArray[np.floating]) -> F64Array:
    """Row-wise cosine in float32, as RockBot computes it (``EmbeddingCache.CosineSimilarity``, EmbeddingCache.cs
    @08e13c9f: float dot product, ``MathF.Sqrt`` of each norm, a float division), widened to float64 only for the
    comparison with the threshold, which RockBot makes in double (``similarity(i, j) >= similarityThreshold``,
    FileMemoryStore @8a7e360e). The one formula behind every accepted cosine edge and :func:`similarity`.

    Row reductions over a contiguous axis give each row the same result whatever the batch size, so a
    batch-verified edge and a single ``similarity()`` call agree to the last bit at the threshold. (RockBot sums
    with SIMD lanes in another order: a pair within a few float32 ulps of the threshold may be decided otherwise.)
    """
    a32, b32 = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        dots = (a32 * b32).sum(axis=1, dtype=np.float32)
        norms = np.sqrt((a32 * a32).sum(axis=1, dtype=np.float32)) * np.sqrt((b32 * b32).sum(axis=1, dtype=np.float32))
        result: F64Array = np.clip((dots / norms).astype(np.float64), -1.0, 1.0)
    return result


def usable_vector(item: ClusterItem) -> npt.NDArray[np.floating] | None:
    """The item's embedding if cosine can use it; None if absent or degenerate (empty, non-finite, all zero).

    A degenerate vector (a truncated or corrupt .bin file) is data, so the entry falls back to Jaccard;
    a wrong *type* is a caller bug and raises.
    """
    emb = item.embedding
    if emb is None:
        return None
    if not isinstance(emb, np.ndarray):
        raise ClusteringError(
            f"entry {item.id!r}: embedding must be a numpy.ndarray or None, got {type(emb).__name__}; nothing was "
            "clustered"
        )
    if emb.ndim != 1:
        raise ClusteringError(
            f"entry {item.id!r}: embedding must be one-dimensional, got shape {emb.shape}; nothing was clustered"
        )
    kind = emb.dtype.kind
    if kind not in "fiu":
        raise ClusteringError(
            f"entry {item.id!r}: embedding must be real-valued, got dtype {emb.dtype}; nothing was clustered"
        )
    if emb.size == 0:
        return None
    # One reduction catches NaN, infinities, overflow of the squared norm and the all-zero vector.
    wide = emb if kind == "f" else emb.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is the answer sought here, not a warning
        squared = float(np.dot(wide, wide))
    if not math.isfinite(squared) or squared <= 0.0:
        return None
    return emb
