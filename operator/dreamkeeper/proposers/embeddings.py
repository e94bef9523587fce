"""An OpenAI-compatible embeddings endpoint (``POST {baseURL}/embeddings``) that fills in missing vectors.

Configured by the ``embeddings`` section of the cycle settings (``EmbeddingsConfig``), the ``dream`` command's
``--embeddings-*`` flags, or a DreamSchedule's ``spec.embeddings``; the key, like the proposer's, is never
configuration: ``DREAMKEEPER_EMBEDDINGS_API_KEY`` from the environment (mounted from a Secret by the operator),
which a loopback or in-cluster server without keys may leave unset. The request is RockBot's: the model name and
the texts, nothing else (no ``input_type``: RockBot's generator sends none, so a server's default applies to both
engines alike); vectors are asked for as floats.

What comes back is checked before anything is written: one vector per text, every one of the same dimension, every
value finite. Anything else is an ``EmbeddingError`` for that batch: its entries stay without a vector this cycle
and are compared by Jaccard (as RockBot does after a failed batch), and the cycle says so.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from dreamkeeper.consolidation import Embedder, EmbeddingError, Vector

if TYPE_CHECKING:
    # Imported where a client is made: ``openai`` is half of a cycle process's imports (~0.45 s of ~0.9 s on the
    # bench machine), and a cycle without embeddings or a model (the offline proposer) never needs it.
    from openai import AsyncOpenAI

EMBEDDINGS_SECTION = "embeddings"
EMBEDDINGS_API_KEY_ENV = "DREAMKEEPER_EMBEDDINGS_API_KEY"
NO_KEY = "none"  # the openai client refuses an empty key; a server that needs none accepts any
_LOOPBACK = re.compile(r"^https?://(localhost|127(?:\.\d{1,3}){3}|\[::1\])(?::\d+)?(?:/.*)?$")


class EmbeddingsConfig(BaseModel):
    """The embeddings endpoint. Strict and bounded, as every settings model."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    base_url: str = Field(min_length=1, max_length=2048, pattern=r"^https?://\S+$")
    model: str = Field(min_length=1, max_length=256)
    timeout: float = Field(default=60.0, gt=0, le=3600, description="seconds per request")
    max_retries: int = Field(default=2, ge=0, le=20)
    batch_size: int = Field(default=64, ge=1, le=4096, description="texts per request")


class MissingEmbeddingsKeyError(ValueError):
    pass


class OpenAIEmbedder:
    """``Embedder`` over the ``openai`` client."""

    def __init__(self, config: EmbeddingsConfig, client: AsyncOpenAI | None = None) -> None:
        key = os.environ.get(EMBEDDINGS_API_KEY_ENV)
        if not key:
            if not _LOOPBACK.match(config.base_url) and client is None:
                raise MissingEmbeddingsKeyError(
                    f"{EMBEDDINGS_API_KEY_ENV} is not set: the embeddings endpoint {config.base_url} is not on "
                    "loopback, and its key is read from the environment only; nothing was changed"
                )
            key = NO_KEY
        self.config = config
        self.name = f"openai-embeddings:{config.model}"
        self.batch_size = config.batch_size
        if client is None:
            from openai import AsyncOpenAI

            client = AsyncOpenAI(
                base_url=config.base_url, api_key=key, timeout=config.timeout, max_retries=config.max_retries
            )
        self._client = client

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        if not texts:
            return []
        import openai  # loaded with the client already (``__init__``): a lookup in sys.modules

        try:
            response = await self._client.embeddings.create(
                model=self.config.model, input=list(texts), encoding_format="float"
            )
        except openai.OpenAIError as exc:
            raise EmbeddingError(f"{self.config.base_url}: {type(exc).__name__}: {_short(exc)}") from exc
        return _vectors(response.data, len(texts))

    async def aclose(self) -> None:
        await self._client.close()


def _short(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _vectors(data: Sequence[Any], expected: int) -> list[Vector]:
    import numpy as np  # here: a cycle without embeddings loads no numpy (consolidation/embeddings.py)

    if len(data) != expected:
        raise EmbeddingError(f"{len(data)} vector(s) for {expected} text(s)")
    ordered = sorted(data, key=lambda item: int(getattr(item, "index", 0)))
    out: list[Vector] = []
    dimension: int | None = None
    for item in ordered:
        raw = getattr(item, "embedding", None)
        if not isinstance(raw, list) or not raw or not all(isinstance(v, int | float) for v in raw):
            raise EmbeddingError("a vector is not a non-empty list of numbers")
        if not all(math.isfinite(float(v)) for v in raw):
            raise EmbeddingError("a vector holds a value that is not finite")
        if dimension is not None and len(raw) != dimension:
            raise EmbeddingError(f"vectors of dimensions {dimension} and {len(raw)} in one reply")
        dimension = len(raw)
        vector = np.asarray(raw, dtype=np.float32)
        if not np.all(np.isfinite(vector)):
            raise EmbeddingError("a vector holds a value beyond float32")
        out.append(vector)
    return out


def make_embedder(config: EmbeddingsConfig | None) -> Embedder | None:
    return OpenAIEmbedder(config) if config is not None else None


__all__ = [
    "EMBEDDINGS_API_KEY_ENV",
    "EMBEDDINGS_SECTION",
    "EmbeddingsConfig",
    "MissingEmbeddingsKeyError",
    "OpenAIEmbedder",
    "make_embedder",
]
