"""A transcript manager on any DB-API 2 database: sqlite3 by default, PostgreSQL for fleets.

``SqlTranscriptManager`` has the methods of ``JsonlTranscriptManager`` and stores
the same JSONL text, one row per snapshot. Every save is one transaction that
first takes the session's row lock, so concurrent writers (threads, processes,
machines) are serialised per session: no snapshot is lost or torn, and each
session's snapshots are numbered 1, 2, 3, ... in the order they committed.

The library imports no database driver: pass a path (sqlite3, from the standard
library) or a function returning a new DB-API 2 connection (e.g. ``psycopg``).
"""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Final, TypeVar

from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.stores import codec
from bareagent_compact.stores.archiving import ArchiveWrites
from bareagent_compact.stores.codec import (
    DIRECTORY_MODE,
    FILE_MODE,
    ONE_MICROSECOND,
    Clock,
    check_session_id,
    decode_jsonl,
    encode_archive_record,
    encode_snapshot,
)
from bareagent_compact.stores.errors import CorruptTranscriptError, SnapshotNotFoundError

__all__ = [
    "PARAMSTYLES",
    "SCHEMA_VERSION",
    "ConnectionFactory",
    "SqlSnapshot",
    "SqlTranscriptManager",
    "convert_placeholders",
]

# The logger this store has always used.
logger = logging.getLogger("bareagent_compact.sqlstore")

ConnectionFactory = Callable[[], Any]
"""Returns a new DB-API 2 connection; called once per thread (and per process)."""

SCHEMA_VERSION: Final = 1
"""The layout of the tables; stored in ``bareagent_meta`` and checked on connect."""

PARAMSTYLES: Final = ("qmark", "numeric", "named", "format", "pyformat")
"""The DB-API 2 parameter styles this manager can write."""

_T = TypeVar("_T")
_RETRIES: Final = 5
_RETRY_SQLSTATES: Final = frozenset({"40001", "40P01"})  # serialization failure, deadlock
_O_NOFOLLOW: Final[int] = getattr(os, "O_NOFOLLOW", 0)
_PLACEHOLDERS: Final = {
    "numeric": ":{}",
    "named": ":p{}",
    "format": "%s",
    "pyformat": "%(p{})s",
}

# Portable SQL (sqlite3 and PostgreSQL, and any database with CREATE ... IF NOT EXISTS):
# timestamps are ISO text, which sorts by time; no vendor-specific column types.
_SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS bareagent_meta ("
    " name VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS bareagent_sessions ("
    " session_id VARCHAR(255) PRIMARY KEY,"
    " snapshot_seq BIGINT NOT NULL,"
    " archive_seq BIGINT NOT NULL,"
    " saved_at VARCHAR(32))",
    "CREATE TABLE IF NOT EXISTS bareagent_snapshots ("
    " session_id VARCHAR(255) NOT NULL,"
    " seq BIGINT NOT NULL,"
    " saved_at VARCHAR(32) NOT NULL,"
    " message_count BIGINT NOT NULL,"
    " size_bytes BIGINT NOT NULL,"
    " body TEXT NOT NULL,"
    " PRIMARY KEY (session_id, seq))",
    "CREATE INDEX IF NOT EXISTS bareagent_snapshots_saved_at ON bareagent_snapshots (saved_at)",
    "CREATE TABLE IF NOT EXISTS bareagent_archive ("
    " session_id VARCHAR(255) NOT NULL,"
    " seq BIGINT NOT NULL,"
    " archived_at VARCHAR(32) NOT NULL,"
    " record TEXT NOT NULL,"
    " PRIMARY KEY (session_id, seq))",
)
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


class _NoSuchError(Exception):
    """Stands for an exception class a driver does not define; never raised."""


def _driver_module(connection: object) -> ModuleType | None:
    """The DB-API module a connection comes from (the nearest with ``paramstyle``)."""
    name = type(connection).__module__
    while name:
        module = sys.modules.get(name)
        if module is not None and isinstance(getattr(module, "paramstyle", None), str):
            return module
        name = name.rpartition(".")[0]
    return None


def _check_paramstyle(paramstyle: str) -> None:
    if paramstyle not in PARAMSTYLES:
        raise ValueError(f"paramstyle must be one of {', '.join(PARAMSTYLES)}, got {paramstyle!r}")


def convert_placeholders(query: str, paramstyle: str) -> str:
    """Rewrite the ``?`` placeholders of ``query`` into ``paramstyle``.

    >>> convert_placeholders("a = ? AND b = ?", "numeric")
    'a = :1 AND b = :2'
    """
    _check_paramstyle(paramstyle)
    if paramstyle == "qmark":
        return query
    pieces = query.split("?")
    placeholder = _PLACEHOLDERS[paramstyle]
    out = [pieces[0]]
    for number, piece in enumerate(pieces[1:], start=1):
        out.append(placeholder.format(number))
        out.append(piece)
    return "".join(out)


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


def _sqlite_path(text: str) -> Path:
    """The absolute path of a sqlite3 file; anything sqlite3 reads as a URI is refused."""
    if not text or text == ":memory:" or text.startswith("file:"):
        raise ValueError(
            f"a sqlite3 store needs a file path, got {text!r}; pass a connection "
            "factory for anything else"
        )
    return Path(text).expanduser().absolute()


def _create_sqlite_file(path: Path) -> None:
    """A new empty ``0o600`` file at ``path`` (its parent ``0o700`` when missing)."""
    if not path.parent.exists():
        os.makedirs(path.parent, mode=DIRECTORY_MODE, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW
    with suppress(FileExistsError):  # another process created it first
        os.close(os.open(path, flags, FILE_MODE))


def _sqlite_factory(path: Path, create: bool, timeout: float) -> ConnectionFactory:
    """Connections to a sqlite3 file: created ``0o600`` (its parent ``0o700``) when missing."""

    def connect() -> sqlite3.Connection:
        if not path.exists():
            if not create:
                raise FileNotFoundError(f"no transcript database at {path}")
            _create_sqlite_file(path)
        connection = sqlite3.connect(
            str(path), timeout=timeout, isolation_level=None, check_same_thread=False
        )
        try:
            connection.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            connection.execute("PRAGMA synchronous = FULL")
        except BaseException:
            connection.close()
            raise
        return connection

    return connect


def _check_options(paramstyle: str | None, timeout: object) -> None:
    if paramstyle is not None:
        _check_paramstyle(paramstyle)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not math.isfinite(timeout)
        or timeout < 0
    ):
        raise ValueError(f"timeout must be a finite number of seconds >= 0, got {timeout!r}")


def _is_closed(connection: Any) -> bool:
    """Whether other code closed ``connection`` (DB-API drivers with ``closed``, sqlite3)."""
    closed = getattr(connection, "closed", None)
    if closed is not None and not callable(closed):
        return bool(closed)
    if isinstance(connection, sqlite3.Connection):
        try:
            connection.total_changes  # noqa: B018 - raises once the connection is closed
        except sqlite3.ProgrammingError:
            return True
    return False


def _connector(
    connection_factory: str | os.PathLike[str] | ConnectionFactory, create: bool, timeout: float
) -> tuple[Path | None, ConnectionFactory]:
    """The sqlite3 path (or ``None``) and the function that opens connections."""
    if isinstance(connection_factory, str | os.PathLike):
        path = _sqlite_path(os.fspath(connection_factory))
        return path, _sqlite_factory(path, create, timeout)
    if callable(connection_factory):
        return None, connection_factory
    raise TypeError(
        "connection_factory must be a path or a callable returning a DB-API 2 "
        f"connection, got {type(connection_factory).__name__}"
    )


class SqlTranscriptManager(ArchiveWrites[tuple[str, str]]):
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
        _check_options(paramstyle, timeout)
        self.path: Path | None
        self.path, self._factory = _connector(connection_factory, create, float(timeout))
        self.clock = clock
        self.create = bool(create)
        self._paramstyle = paramstyle
        self._last: datetime | None = None
        self._lock = threading.Lock()
        self._local = threading.local()
        self._connections: list[tuple[int, Any]] = []  # (the pid that opened it, connection)
        # A parent's connections after a fork: never used, never closed, and kept
        # referenced so that no finaliser in this process closes them either.
        self._inherited: list[Any] = []
        self._schema_checked = False
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

    def archived_sessions(self) -> list[str]:
        """Session ids that have archived records, sorted."""
        self.flush()
        rows = self._fetchall(
            "SELECT DISTINCT session_id FROM bareagent_archive ORDER BY session_id", ()
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

    # -- archive of truncated tool results -----------------------------------

    @staticmethod
    def _encode_record(record: ArchiveRecord) -> tuple[str, str]:
        """The session id of a record and its JSON text (no newline)."""
        session_id, encoded = encode_archive_record(record)
        return session_id, encoded.decode("utf-8").rstrip("\n")

    def _write_records(self, encoded: Sequence[tuple[str, str]]) -> None:
        """Insert encoded records in one transaction."""
        batches: dict[str, list[str]] = {}
        for session_id, line in encoded:
            batches.setdefault(session_id, []).append(line)
        if not batches:
            return

        def work(run: _Runner) -> None:
            stamp = _stamp(codec.clock_time(self.clock))
            for session_id, lines in batches.items():
                last, _ = run.next_seq(session_id, "archive_seq", len(lines))
                for seq, line in enumerate(lines, start=last - len(lines) + 1):
                    run.execute(
                        "INSERT INTO bareagent_archive (session_id, seq, archived_at, record)"
                        " VALUES (?, ?, ?, ?)",
                        (session_id, seq, stamp, line),
                    )

        self._transaction(work, write=True)

    def load_archive(self, session_id: str) -> list[ArchiveRecord]:
        """The archived records of ``session_id`` in the order they were stored.

        A record that is not a JSON object is skipped with a warning, as the
        JSONL store skips a line a writer killed mid-append left.
        """
        session_id = check_session_id(session_id)
        self.flush()
        rows = self._fetchall(
            "SELECT seq, record FROM bareagent_archive WHERE session_id = ? ORDER BY seq",
            (session_id,),
        )
        return _archive_records(rows, session_id)

    def read_archived(self, session_id: str, handle: str) -> ArchiveRecord | None:
        """The archived record of ``session_id`` whose ``handle`` is ``handle``, or
        ``None`` (only that session's rows are read; see ``docs/recall.md``)."""
        session_id = check_session_id(session_id)
        handle = codec.check_handle(handle)
        self.flush()
        rows = self._fetchall(
            "SELECT seq, record FROM bareagent_archive WHERE session_id = ? AND record LIKE ?"
            " ORDER BY seq",
            (session_id, f"%{handle}%"),
        )
        return codec.matching_record(_archive_records(rows, session_id), session_id, handle)

    # -- connections ---------------------------------------------------------

    def close(self) -> None:
        """Close every connection this manager opened in this process.

        In a forked child, the connections the parent opened are dropped without
        being closed (closing a PostgreSQL connection there would end the
        parent's session); the child opens its own when it is used again. The
        writer thread (``write_behind=True``) is flushed and ended first.
        """
        if self._writer is not None:
            self._writer.close()
        pid = os.getpid()
        with self._lock:
            connections, self._connections = self._connections, []
            self._inherited.extend(c for owner, c in connections if owner != pid)
        self._local = threading.local()
        for owner, connection in connections:
            if owner == pid:
                _close_quietly(connection, "closing a connection failed")

    def _connection(self) -> tuple[Any, _Driver]:
        """This thread's connection, opened when there is none, it was closed by other
        code, or it was inherited from the parent process across a fork."""
        held = getattr(self._local, "held", None)
        if held is not None:
            pid, connection, driver = held
            if pid != os.getpid():  # forked: the parent's, not ours to use or close
                with self._lock:
                    self._inherited.append(connection)
            elif not _is_closed(connection):
                return connection, driver
            else:
                logger.debug("a connection was closed by other code; opening a new one")
                self._discard(connection)
        connection = self._factory()
        driver = _Driver(connection, self._paramstyle)
        self._local.held = (os.getpid(), connection, driver)
        with self._lock:
            self._connections.append((os.getpid(), connection))
        return connection, driver

    def _release_connection(self) -> None:
        """Close this thread's connection (the writer thread's, as it ends)."""
        held = getattr(self._local, "held", None)
        if held is not None and held[0] == os.getpid():
            self._discard(held[1])

    def _discard(self, connection: Any) -> None:
        self._local.held = None
        with self._lock:
            self._connections = [held for held in self._connections if held[1] is not connection]
        _close_quietly(connection, "closing a broken connection failed")

    def _transaction(self, work: Callable[[_Runner], _T], *, write: bool) -> _T:
        """Run ``work`` in one transaction, retried when the database asks for it."""
        connection, driver = self._connection()
        if not self._schema_checked:
            self._ensure_schema(connection, driver)
        for attempt in range(1, _RETRIES + 1):
            try:
                with driver.transaction(connection, write) as run:
                    return work(run)
            except driver.error as exc:
                if driver.should_retry(exc) and attempt < _RETRIES:
                    logger.debug("transaction retried (attempt %d)", attempt, exc_info=True)
                    continue
                if isinstance(exc, driver.broken):
                    self._discard(connection)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def _fetchall(self, query: str, params: tuple[Any, ...]) -> list[Any]:
        """The rows of one read-only query, in a transaction of its own."""

        def work(run: _Runner) -> list[Any]:
            return run.fetchall(query, params)

        return self._transaction(work, write=False)

    def _ensure_schema(self, connection: Any, driver: _Driver) -> None:
        """Create the tables if missing (``create=True``) and check the schema version."""
        for attempt in range(1, _RETRIES + 1):
            version = driver.schema_version(connection, repr(self))
            if version is None and not self.create:
                raise LookupError(f"{self!r} holds no transcript store (no bareagent tables)")
            if version is None:
                try:
                    driver.create_schema(connection)
                except driver.error:
                    # Another process created the tables at the same moment: read again.
                    if attempt == _RETRIES:
                        raise
                    continue
                version = SCHEMA_VERSION
            if version > SCHEMA_VERSION:
                raise RuntimeError(
                    f"{self!r} has schema version {version}; this version of "
                    f"bareagent-compact reads up to {SCHEMA_VERSION}: upgrade it"
                )
            self._schema_checked = True
            return

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


def _close_quietly(connection: Any, failure: str) -> None:
    try:
        connection.close()
    except Exception:
        logger.debug(failure, exc_info=True)


class _Runner:
    """Executes ``?``-placeholder SQL on one cursor in the driver's parameter style."""

    def __init__(self, cursor: Any, paramstyle: str) -> None:
        self.cursor = cursor
        self.paramstyle = paramstyle

    def execute(self, query: str, params: tuple[Any, ...]) -> None:
        sql = convert_placeholders(query, self.paramstyle)
        if self.paramstyle in ("named", "pyformat"):
            self.cursor.execute(sql, {f"p{n}": value for n, value in enumerate(params, 1)})
        else:
            self.cursor.execute(sql, params)

    def fetchall(self, query: str, params: tuple[Any, ...]) -> list[Any]:
        self.execute(query, params)
        return list(self.cursor.fetchall())

    def next_seq(self, session_id: str, column: str, count: int = 1) -> tuple[int, Any]:
        """Add ``count`` to a per-session counter, holding the session row's lock until
        commit.

        Returns the new value (the last of the ``count`` taken) and the session's
        ``saved_at``.
        """
        self.execute(
            f"UPDATE bareagent_sessions SET {column} = {column} + ? WHERE session_id = ?",
            (count, session_id),
        )
        rows = self.fetchall(
            f"SELECT {column}, saved_at FROM bareagent_sessions WHERE session_id = ?",
            (session_id,),
        )
        if rows:
            return int(rows[0][0]), rows[0][1]
        # First write of this session; a concurrent first write makes this an
        # IntegrityError, and the whole transaction is retried.
        self.execute(
            "INSERT INTO bareagent_sessions (session_id, snapshot_seq, archive_seq, saved_at)"
            " VALUES (?, ?, ?, NULL)",
            (session_id, count * (column == "snapshot_seq"), count * (column == "archive_seq")),
        )
        return count, None


class _Driver:
    """What differs between drivers: parameter style, exception classes, sqlite3's BEGIN."""

    def __init__(self, connection: Any, paramstyle: str | None) -> None:
        module = _driver_module(connection)
        style = paramstyle if paramstyle is not None else getattr(module, "paramstyle", None)
        if style is None:
            raise TypeError(
                f"cannot tell the DB-API module of {type(connection).__name__}; "
                "pass paramstyle= to SqlTranscriptManager"
            )
        if style not in PARAMSTYLES:
            raise ValueError(f"unsupported paramstyle {style!r} of the database driver")
        self.paramstyle: str = style
        self.sqlite = isinstance(connection, sqlite3.Connection)
        if self.sqlite:
            connection.isolation_level = None  # transactions are begun explicitly below

        def error_class(name: str) -> type[BaseException]:
            found = getattr(connection, name, None) or getattr(module, name, None)
            return found if isinstance(found, type) else _NoSuchError

        self.error = error_class("Error")
        integrity = error_class("IntegrityError")
        operational = error_class("OperationalError")
        interface = error_class("InterfaceError")
        self.broken: tuple[type[BaseException], ...] = (interface, operational)
        self._integrity = integrity

    def should_retry(self, exc: BaseException) -> bool:
        """A unique-key race on a session's first row, a serialization failure or deadlock."""
        if isinstance(exc, self._integrity):
            return True
        state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
        return state in _RETRY_SQLSTATES

    @contextmanager
    def transaction(self, connection: Any, write: bool) -> Iterator[_Runner]:
        cursor = connection.cursor()
        try:
            if self.sqlite:
                # IMMEDIATE takes the write lock up front, so writers queue on the busy
                # timeout instead of failing when a read lock cannot be upgraded.
                cursor.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            yield _Runner(cursor, self.paramstyle)
            connection.commit()
        except BaseException:
            try:
                connection.rollback()
            except Exception:
                logger.debug("rollback failed", exc_info=True)
            raise
        finally:
            try:
                cursor.close()
            except Exception:
                logger.debug("closing a cursor failed", exc_info=True)

    def schema_version(self, connection: Any, store: str) -> int | None:
        """The stored schema version, or ``None`` when the tables do not exist."""
        try:
            with self.transaction(connection, write=False) as run:
                rows = run.fetchall(
                    "SELECT value FROM bareagent_meta WHERE name = ?", ("schema_version",)
                )
        except self.error:
            return None
        if not rows:
            return None
        try:
            return int(rows[0][0])
        except (TypeError, ValueError):
            raise CorruptTranscriptError(
                f"corrupt transcript store {store}: its schema version is not a number"
            ) from None

    def create_schema(self, connection: Any) -> None:
        if self.sqlite:
            # Outside any transaction: WAL lets readers work while one process writes.
            cursor = connection.cursor()
            try:
                mode = cursor.execute("PRAGMA journal_mode = WAL").fetchone()
            finally:
                cursor.close()
            if mode is None or str(mode[0]).lower() != "wal":
                logger.warning("sqlite3 database is not in WAL mode (%s)", mode)
        with self.transaction(connection, write=True) as run:
            for statement in _SCHEMA:
                run.execute(statement, ())
            rows = run.fetchall(
                "SELECT value FROM bareagent_meta WHERE name = ?", ("schema_version",)
            )
            if not rows:
                run.execute(
                    "INSERT INTO bareagent_meta (name, value) VALUES (?, ?)",
                    ("schema_version", str(SCHEMA_VERSION)),
                )


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
