"""The JSONL transcript store, under the name the documentation uses.

The store lives in ``bareagent_compact.stores.jsonl``, sharing its codec with
the SQL store (``bareagent_compact.stores.codec``); this module re-exports it.
"""

from __future__ import annotations

from bareagent_compact.stores.codec import (
    MAX_SESSION_ID_BYTES,
    MAX_SESSION_ID_CHARS,
    Clock,
    check_session_id,
)
from bareagent_compact.stores.errors import CorruptTranscriptError, SnapshotNotFoundError
from bareagent_compact.stores.jsonl import (
    ARCHIVE_SUFFIX,
    SNAPSHOT_SUFFIX,
    TEMP_MAX_AGE,
    TEMP_PREFIX,
    JsonlTranscriptManager,
    Snapshot,
)

__all__ = [
    "ARCHIVE_SUFFIX",
    "MAX_SESSION_ID_BYTES",
    "MAX_SESSION_ID_CHARS",
    "SNAPSHOT_SUFFIX",
    "TEMP_MAX_AGE",
    "TEMP_PREFIX",
    "Clock",
    "CorruptTranscriptError",
    "JsonlTranscriptManager",
    "Snapshot",
    "SnapshotNotFoundError",
    "check_session_id",
]
