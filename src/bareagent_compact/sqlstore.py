"""The SQL transcript store, under the name the documentation uses.

The store lives in ``bareagent_compact.stores.sql``, sharing its codec with the
JSONL store (``bareagent_compact.stores.codec``); this module re-exports it.
Importing it imports ``sqlite3``.
"""

from __future__ import annotations

from bareagent_compact.stores.errors import CorruptTranscriptError, SnapshotNotFoundError
from bareagent_compact.stores.sql import (
    PARAMSTYLES,
    SCHEMA_VERSION,
    ConnectionFactory,
    SqlSnapshot,
    SqlTranscriptManager,
    convert_placeholders,
)

__all__ = [
    "PARAMSTYLES",
    "SCHEMA_VERSION",
    "ConnectionFactory",
    "CorruptTranscriptError",
    "SnapshotNotFoundError",
    "SqlSnapshot",
    "SqlTranscriptManager",
    "convert_placeholders",
]
