"""Open a transcript store named on the command line, and read either kind the same way."""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any, Final, TypeAlias

from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.stores.jsonl import JsonlTranscriptManager
from bareagent_compact.stores.reader import SnapshotRecord, TranscriptReader
from bareagent_compact.stores.sql import SqlTranscriptManager

__all__ = [
    "POSTGRES_DRIVERS",
    "POSTGRES_SCHEMES",
    "SQLITE_HEADER",
    "Store",
    "StoreError",
    "StoredSnapshot",
    "archive_size",
    "close",
    "load",
    "open_store",
    "snapshots",
]

Store: TypeAlias = TranscriptReader[Any]
"""Either store, through the read interface they share."""

SQLITE_HEADER: Final = b"SQLite format 3\x00"
POSTGRES_SCHEMES: Final = ("postgresql://", "postgres://")
POSTGRES_DRIVERS: Final = ("psycopg", "psycopg2")


class StoreError(ValueError):
    """A store location that cannot be opened; the message says why."""


@dataclass(frozen=True, slots=True)
class StoredSnapshot:
    """A snapshot of either store: when, how large, and the record that loads it."""

    session_id: str
    timestamp: datetime
    size: int
    record: SnapshotRecord


def _postgres(location: str) -> SqlTranscriptManager:
    for name in POSTGRES_DRIVERS:
        try:
            driver: Any = importlib.import_module(name)
        except ImportError:
            continue
        return SqlTranscriptManager(partial(driver.connect, location), create=False)
    raise StoreError(
        "a PostgreSQL store needs a driver: pip install 'bareagent-compact[postgres]' (psycopg)"
    )


def _sqlite_header(location: str, path: Path) -> bytes:
    try:
        with path.open("rb") as file:
            return file.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise StoreError(f"{location}: cannot read ({exc.strerror})") from None


def open_store(location: str) -> tuple[Store, str]:
    """The store at ``location`` and its kind (``jsonl``, ``sqlite`` or ``postgresql``).

    A directory is a JSONL store, a sqlite3 file a SQL store, and a
    ``postgresql://`` URL a PostgreSQL store. Nothing is created.
    """
    if location.startswith(POSTGRES_SCHEMES):
        return _postgres(location), "postgresql"
    path = Path(location).expanduser()
    if path.is_dir():
        return JsonlTranscriptManager(path), "jsonl"
    if not path.exists():
        raise StoreError(f"{location}: no such file or directory")
    if _sqlite_header(location, path) != SQLITE_HEADER:
        raise StoreError(
            f"{location} is neither a directory of JSONL transcripts nor a sqlite3 database"
        )
    return SqlTranscriptManager(path, create=False), "sqlite"


def snapshots(store: Store, session_id: str | None = None) -> list[StoredSnapshot]:
    """Every snapshot (of ``session_id``), newest first, with its size in bytes.

    A snapshot removed between the listing and the size is left out.
    """
    found = []
    for record in store.snapshots(session_id):
        size = store.snapshot_size(record)
        if size is not None:
            found.append(StoredSnapshot(record.session_id, record.timestamp, size, record))
    return found


def load(store: Store, snapshot: StoredSnapshot) -> list[Message]:
    """The messages of one snapshot (``TypeError`` for a record of another kind of store)."""
    return store.load_snapshot(snapshot.record)


def archive_size(records: list[ArchiveRecord]) -> int:
    """The size of archived records as JSONL, in UTF-8 bytes."""
    return sum(
        len(json.dumps(r, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass")) + 1
        for r in records
    )


def close(store: Store) -> None:
    """Close the database connections of a SQL store (a JSONL store holds none)."""
    store.close()
