"""Transcript stores: JSONL files and SQL databases, one codec, one read interface.

``stores.codec`` is what both share (session ids, the line format, the clock),
``stores.errors`` the errors both raise, ``stores.reader`` the read interface,
``stores.jsonl`` and ``stores.sql`` the two stores, and ``stores.open`` opens a
store named on the command line. Names are loaded on first use, so importing
this package loads neither store (and never ``sqlite3``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from bareagent_compact.stores.codec import check_session_id
    from bareagent_compact.stores.errors import CorruptTranscriptError, SnapshotNotFoundError
    from bareagent_compact.stores.jsonl import JsonlTranscriptManager, Snapshot
    from bareagent_compact.stores.reader import SnapshotRecord, TranscriptReader
    from bareagent_compact.stores.sql import SqlSnapshot, SqlTranscriptManager

__all__ = [
    "CorruptTranscriptError",
    "JsonlTranscriptManager",
    "Snapshot",
    "SnapshotNotFoundError",
    "SnapshotRecord",
    "SqlSnapshot",
    "SqlTranscriptManager",
    "TranscriptReader",
    "check_session_id",
]

_HOMES: Final = {
    "CorruptTranscriptError": "errors",
    "SnapshotNotFoundError": "errors",
    "check_session_id": "codec",
    "JsonlTranscriptManager": "jsonl",
    "Snapshot": "jsonl",
    "SnapshotRecord": "reader",
    "TranscriptReader": "reader",
    "SqlSnapshot": "sql",
    "SqlTranscriptManager": "sql",
}


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (the SQL store imports ``sqlite3``)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
