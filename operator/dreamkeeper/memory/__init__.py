"""Memory store: RockBot-compatible entry files, archive tier, durable atomic writes, locking, restore, purge."""

from dreamkeeper.memory.atomic import Fingerprint, create_exclusive, replace_file
from dreamkeeper.memory.entry import (
    REASON_EPHEMERAL,
    REASON_MERGED_INTO,
    Entry,
    format_timestamp,
    utcnow,
)
from dreamkeeper.memory.errors import (
    ConflictError,
    EntryNotFoundError,
    InvalidCategoryError,
    InvalidIdError,
    LockHeldError,
    MemoryStoreError,
    PathEscapeError,
    StateDirError,
    StoreWriteError,
)
from dreamkeeper.memory.fingerprints import cluster_hash, fold_key, review_hash
from dreamkeeper.memory.lock import CycleLock, ensure_state_dir, read_state_json, state_dir
from dreamkeeper.memory.paths import (
    EMBEDDINGS_DIR,
    embedding_file_name,
    memory_root,
    validate_category,
    validate_id,
)
from dreamkeeper.memory.store import (
    HighValueFloor,
    MalformedFile,
    MemoryStore,
    PurgeReport,
    ScanResult,
    StoredEntry,
    entry_summary,
)

__all__ = [
    "EMBEDDINGS_DIR",
    "REASON_EPHEMERAL",
    "REASON_MERGED_INTO",
    "ConflictError",
    "CycleLock",
    "Entry",
    "EntryNotFoundError",
    "Fingerprint",
    "HighValueFloor",
    "InvalidCategoryError",
    "InvalidIdError",
    "LockHeldError",
    "MalformedFile",
    "MemoryStore",
    "MemoryStoreError",
    "PathEscapeError",
    "PurgeReport",
    "ScanResult",
    "StateDirError",
    "StoreWriteError",
    "StoredEntry",
    "cluster_hash",
    "create_exclusive",
    "embedding_file_name",
    "ensure_state_dir",
    "entry_summary",
    "fold_key",
    "format_timestamp",
    "memory_root",
    "read_state_json",
    "replace_file",
    "review_hash",
    "state_dir",
    "utcnow",
    "validate_category",
    "validate_id",
]
