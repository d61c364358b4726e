"""What the SQL store's rows hold and how they are read back: snapshot records,
stored times, JSONL bodies and archive records."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.stores.codec import decode_jsonl
from bareagent_compact.stores.errors import CorruptTranscriptError

# The logger this store has always used.
logger = logging.getLogger("bareagent_compact.sqlstore")

_SNAPSHOT_COLUMNS: Final = "session_id, seq, saved_at, message_count, size_bytes"


@dataclass(frozen=True, slots=True)
class SqlSnapshot:
    """One stored snapshot: pass it to ``load_snapshot`` to read its messages."""

    session_id: str
    timestamp: datetime
    """Naive; UTC with the default clock."""
    seq: int
    """1 for the session's first snapshot, then 2, 3, ... in commit order."""
    messages: int
    """How many messages it holds."""
    size: int
    """Its JSONL text in UTF-8 bytes (the size the same snapshot has as a file)."""


def _stamp(moment: datetime) -> str:
    return moment.isoformat(sep=" ", timespec="microseconds")


def _parse_stamp(text: object, where: str) -> datetime:
    """A stored time, or ``CorruptTranscriptError`` naming the row it came from."""
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        raise CorruptTranscriptError(
            f"corrupt transcript {where}: the stored time {str(text)[:40]!r} is not a time"
        ) from None


def _snapshot(row: Sequence[Any], store: str) -> SqlSnapshot:
    """The record of one ``_SNAPSHOT_COLUMNS`` row; a malformed row is corrupt data."""
    session_id, seq, saved_at, count, size = row[:5]
    where = f"{store} session {session_id!r} snapshot {seq!r}"
    timestamp = _parse_stamp(saved_at, where)
    try:
        return SqlSnapshot(str(session_id), timestamp, int(seq), int(count), int(size))
    except (TypeError, ValueError):
        raise CorruptTranscriptError(
            f"corrupt transcript {where}: a number column holds "
            f"{type(count).__name__}/{type(size).__name__}, not integers"
        ) from None


def _decode_body(where: str, body: object) -> list[Message]:
    """The messages of a stored JSONL text (see ``codec.decode_jsonl``)."""
    if isinstance(body, bytes | bytearray | memoryview):
        return decode_jsonl(where, bytes(body))
    return decode_jsonl(where, str(body))


def _archive_records(rows: list[Any], session_id: str) -> list[ArchiveRecord]:
    """The archive records of ``rows`` (``seq``, ``record``); an unreadable record is
    skipped with a warning, as the JSONL store skips a line a killed writer left."""
    records: list[ArchiveRecord] = []
    for seq, text in rows:
        try:
            records.extend(_decode_body(f"archive {session_id!r} record {seq}", text))
        except CorruptTranscriptError:
            logger.warning("skipping unreadable archive record %s of %r", seq, session_id)
    return records
