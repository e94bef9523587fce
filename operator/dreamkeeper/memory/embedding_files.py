"""The agent's vectors beside its entries: ``.embeddings/{id}.bin`` as RockBot's EmbeddingCache keeps them (raw
little-endian float32). A part of ``MemoryStore`` (``store.py``), apart because it reads no entry file."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from dreamkeeper.memory.atomic import MUST_NOT_EXIST, UNCHECKED, replace_file
from dreamkeeper.memory.errors import ConflictError
from dreamkeeper.memory.files import MiB, read_regular
from dreamkeeper.memory.paths import embedding_file_name, validate_id

if TYPE_CHECKING:
    import numpy as np

EMBEDDING_FILE_LIMIT = 1 * MiB  # 262,144 float32 dimensions; a larger .bin is ignored, as a ragged one is


class EmbeddingFiles:
    """``MemoryStore``'s vector files; ``_embeddings_dir`` is set by the store (``.embeddings/`` under its root)."""

    _embeddings_dir: str

    @property
    def embeddings_dir(self) -> str:
        """Where the vectors are (``.embeddings/`` under the root), as a plain string."""
        return self._embeddings_dir

    def embedding_files(self) -> frozenset[str]:
        """Casefolded names of the files in ``.embeddings/`` (one listing): a caller about to load the embeddings of
        a whole corpus skips the entries without one instead of failing an open for each."""
        try:
            return frozenset(name.casefold() for name in os.listdir(self._embeddings_dir))
        except OSError:
            return frozenset()

    def embedding_sizes(self) -> dict[str, int]:
        """Casefolded name -> size of each regular file in ``.embeddings/`` (one listing)."""
        sizes: dict[str, int] = {}
        try:
            with os.scandir(self._embeddings_dir) as listing:
                for child in listing:
                    try:
                        if child.is_file(follow_symlinks=False):
                            sizes[child.name.casefold()] = child.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            return {}
        return sizes

    def write_embedding(self, entry_id: str, data: bytes, *, replace: bool) -> bool:
        """Write ``.embeddings/{id}.bin`` as RockBot's EmbeddingCache names it. ``replace`` False creates only (a
        vector the agent wrote meanwhile wins); True overwrites, as RockBot's ``UpdateAsync`` does after a save.
        Returns whether it was written."""
        validate_id(entry_id)
        directory = Path(self._embeddings_dir)
        if directory.is_symlink():
            raise ConflictError(directory, "is a symlink; no vector is written through it")
        directory.mkdir(exist_ok=True)
        path = directory / embedding_file_name(entry_id)
        try:
            replace_file(path, data, UNCHECKED if replace else MUST_NOT_EXIST)
        except ConflictError:
            return False
        return True

    def load_embedding(self, entry_id: str) -> np.ndarray | None:
        """Raw float32 vector at ``.embeddings/{id}.bin``; absent, empty or ragged → None (never required)."""
        validate_id(entry_id)
        try:
            # A plain string path: this runs for every embedded entry each cycle, and pathlib objects cost more
            # than the read. Never a FIFO or device, never more than the limit.
            path = os.path.join(self._embeddings_dir, embedding_file_name(entry_id))
            data = read_regular(path, EMBEDDING_FILE_LIMIT, follow_symlinks=False)
        except OSError:
            return None
        if not data or len(data) % 4:
            return None
        import numpy as np  # once a vector is read: a store whose agent keeps none never loads numpy

        vector = np.frombuffer(data, dtype="<f4")
        if not np.all(np.isfinite(vector)):
            return None
        return vector


__all__ = ["EMBEDDING_FILE_LIMIT", "EmbeddingFiles"]
