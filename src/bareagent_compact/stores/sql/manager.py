"""``SqlTranscriptManager``: snapshots saved, listed and loaded in a SQL database,
on the connections of :mod:`~bareagent_compact.stores.sql.connections` and
with the archive of :mod:`~bareagent_compact.stores.sql.archive`."""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import datetime
from types import TracebackType
from typing import Any

from bareagent_compact.protocols import Message
from bareagent_compact.stores import codec
from bareagent_compact.stores.codec import (
    ONE_MICROSECOND,
    Clock,
    check_session_id,
    encode_snapshot,
)
from bareagent_compact.stores.errors import SnapshotNotFoundError
from bareagent_compact.stores.sql.archive import SqlArchive
from bareagent_compact.stores.sql.connections import ConnectionFactory
from bareagent_compact.stores.sql.driver import _Runner
from bareagent_compact.stores.sql.rows import (
    _SNAPSHOT_COLUMNS,
    SqlSnapshot,
    _decode_body,
    _parse_stamp,
    _snapshot,
    _stamp,
)


class SqlTranscriptManager(SqlArchive):
    """Saves, lists and loads transcript snapshots in a SQL database.

    ``connection_factory`` is a path to a sqlite3 file (created ``0o600`` and put
    in WAL mode) or a function returning a new DB-API 2 connection; it is called
    once per thread and per process, and the connections are kept until
    ``close()``. The tables are created when missing (unless ``create=False``)
    and their schema version is checked. ``paramstyle`` overrides the one the
    driver module declares. Session ids follow ``check_session_id``, so every id
    is also valid for ``JsonlTranscriptManager``. ``write_behind=True`` has a
    writer thread (with its own connection) store the records ``Compactor``
    hands over, off its call (see ``archive_behind``); ``flush()`` and
    ``close()`` wait for what it holds.
    """

    check_session_id = staticmethod(codec.check_session_id)
    """Validate a session id (``Compactor`` calls this early); the JSONL rules."""

    def __init__(
        self,
        connection_factory: str | os.PathLike[str] | ConnectionFactory,
        *,
        clock: Clock = codec.utc_now,
        paramstyle: str | None = None,
        create: bool = True,
        timeout: float = 30.0,
        write_behind: bool = False,
    ) -> None:
        codec.check_clock(clock)
        self._init_connections(connection_factory, paramstyle, create, timeout)
        self.clock = clock
        self._last: datetime | None = None
        self._open_writer(write_behind, on_exit=self._release_connection)

    def __repr__(self) -> str:
        if self.path is not None:
            return f"{type(self).__name__}({str(self.path)!r})"
        name = getattr(self._factory, "__qualname__", type(self._factory).__name__)
        return f"{type(self).__name__}(<{name}>)"

    def __enter__(self) -> SqlTranscriptManager:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close every connection this manager opened in this process.

        In a forked child, the connections the parent opened are dropped without
        being closed (closing a PostgreSQL connection there would end the
        parent's session); the child opens its own when it is used again. The
        writer thread (``write_behind=True``) is flushed and ended first.
        """
        if self._writer is not None:
            self._writer.close()
        self._close_connections()

    # -- snapshots -----------------------------------------------------------

    def save(self, messages: Sequence[Message], session_id: str) -> SqlSnapshot:
        """Store a new snapshot of ``messages`` in one transaction and return its record.

        Values JSON cannot encode are stored as their ``str`` with a logged
        warning; cyclic or too deeply nested content raises ``ValueError`` and
        nothing is written.
        """
        session_id = check_session_id(session_id)
        lines = encode_snapshot(messages, session_id)
        data = b"".join(lines)
        body = data.decode("utf-8")
        count = len(lines)

        def work(run: _Runner) -> SqlSnapshot:
            seq, previous = run.next_seq(session_id, "snapshot_seq")
            moment = self._next_moment(self._previous_time(session_id, previous))
            stamp = _stamp(moment)
            run.execute(
                "UPDATE bareagent_sessions SET saved_at = ? WHERE session_id = ?",
                (stamp, session_id),
            )
            run.execute(
                f"INSERT INTO bareagent_snapshots ({_SNAPSHOT_COLUMNS}, body)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, seq, stamp, count, len(data), body),
            )
            return SqlSnapshot(session_id, moment, seq, count, len(data))

        snapshot = self._transaction(work, write=True)
        with self._lock:
            if self._last is None or snapshot.timestamp > self._last:
                self._last = snapshot.timestamp
        return snapshot

    def snapshots(self, session_id: str | None = None) -> list[SqlSnapshot]:
        """Every snapshot (of ``session_id`` if given), newest first."""
        wanted = None if session_id is None else check_session_id(session_id)
        if wanted is None:
            query = (
                f"SELECT {_SNAPSHOT_COLUMNS} FROM bareagent_snapshots"
                " ORDER BY saved_at DESC, session_id DESC, seq DESC"
            )
            params: tuple[Any, ...] = ()
        else:
            query = (
                f"SELECT {_SNAPSHOT_COLUMNS} FROM bareagent_snapshots"
                " WHERE session_id = ? ORDER BY seq DESC"
            )
            params = (wanted,)
        rows = self._fetchall(query, params)
        store = repr(self)
        return [_snapshot(row, store) for row in rows]

    def snapshot_size(self, snapshot: SqlSnapshot) -> int | None:
        """The size of a snapshot's JSONL text in bytes, as recorded when it was saved."""
        return snapshot.size

    def list_sessions(self) -> list[str]:
        """Session ids that have snapshots, the most recently saved first."""
        rows = self._fetchall(
            "SELECT session_id FROM bareagent_sessions WHERE saved_at IS NOT NULL"
            " ORDER BY saved_at DESC, session_id DESC",
            (),
        )
        return [str(row[0]) for row in rows]

    def get_latest_session(self) -> str | None:
        """The session id of the newest snapshot, or ``None`` when there is none."""
        sessions = self.list_sessions()
        return sessions[0] if sessions else None

    def load(self, session_id: str) -> list[Message]:
        """The messages of the newest snapshot of ``session_id``.

        Raises ``SnapshotNotFoundError`` (a ``FileNotFoundError``, as in the JSONL
        store) when the session has no snapshot, and ``CorruptTranscriptError``
        (a ``ValueError``) naming the snapshot and line when a line is corrupt.
        """
        session_id = check_session_id(session_id)
        found = self._load_where("WHERE session_id = ? ORDER BY seq DESC", (session_id,))
        if found is None:
            raise SnapshotNotFoundError(f"no transcript for session {session_id!r} in {self!r}")
        return found

    def resume(self, session_id: str | None = None) -> list[Message]:
        """Like ``load``; with no ``session_id``, the newest snapshot of any session."""
        if session_id is not None:
            return self.load(session_id)
        found = self._load_where("ORDER BY saved_at DESC, session_id DESC, seq DESC", ())
        if found is None:
            raise SnapshotNotFoundError(f"no transcripts in {self!r}")
        return found

    def load_snapshot(self, snapshot: SqlSnapshot) -> list[Message]:
        """The messages of one snapshot record from ``snapshots()`` (e.g. an older one)."""
        if not isinstance(snapshot, SqlSnapshot):
            raise TypeError(
                f"snapshot must be a SqlSnapshot from snapshots(), got {type(snapshot).__name__}"
            )
        found = self._load_where(
            "WHERE session_id = ? AND seq = ?", (snapshot.session_id, snapshot.seq)
        )
        if found is None:
            raise SnapshotNotFoundError(
                f"no snapshot {snapshot.seq} of session {snapshot.session_id!r} in {self!r}"
            )
        return found

    # -- helpers -------------------------------------------------------------

    def _previous_time(self, session_id: str, stored: object) -> datetime | None:
        """The time of the session's previous snapshot, as ``bareagent_sessions`` holds it."""
        if stored is None:
            return None
        return _parse_stamp(stored, f"{self!r} session {session_id!r}")

    def _next_moment(self, previous: datetime | None) -> datetime:
        """The clock's time, after the session's previous save and this manager's last."""
        now = codec.clock_time(self.clock)
        with self._lock:
            last = self._last
        for floor in (previous, last):
            if floor is not None and now <= floor:
                now = floor + ONE_MICROSECOND
        return now

    def _load_where(self, clause: str, params: tuple[Any, ...]) -> list[Message] | None:
        rows = self._fetchall(
            f"SELECT session_id, seq, body FROM bareagent_snapshots {clause} LIMIT 1", params
        )
        if not rows:
            return None
        session_id, seq, body = rows[0]
        return _decode_body(f"{self!r} session {session_id!r} snapshot {seq}", body)
