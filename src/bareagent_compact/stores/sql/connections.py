"""Connection handling of the SQL store: the sqlite3 file or the caller's factory,
one connection per thread and per process, and the transactions run on them."""

from __future__ import annotations

import logging
import math
import os
import sqlite3
import threading
from collections.abc import Callable
from contextlib import suppress
from pathlib import Path
from typing import Any, Final, TypeVar

from bareagent_compact.stores.codec import DIRECTORY_MODE, FILE_MODE
from bareagent_compact.stores.sql.driver import _RETRIES, _check_paramstyle, _Driver, _Runner
from bareagent_compact.stores.sql.schema import ensure_schema

# The logger this store has always used.
logger = logging.getLogger("bareagent_compact.sqlstore")

ConnectionFactory = Callable[[], Any]
"""Returns a new DB-API 2 connection; called once per thread (and per process)."""

_T = TypeVar("_T")
_O_NOFOLLOW: Final[int] = getattr(os, "O_NOFOLLOW", 0)


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


def _close_quietly(connection: Any, failure: str) -> None:
    try:
        connection.close()
    except Exception:
        logger.debug(failure, exc_info=True)


class SqlConnections:
    """This thread's connection (opened on first use, again after a fork or when
    other code closed it), the transactions run on it, and closing them all."""

    path: Path | None
    create: bool

    def _init_connections(
        self,
        connection_factory: str | os.PathLike[str] | ConnectionFactory,
        paramstyle: str | None,
        create: bool,
        timeout: float,
    ) -> None:
        """Check the options and keep what opens connections; none is opened yet."""
        _check_options(paramstyle, timeout)
        self.path, self._factory = _connector(connection_factory, create, float(timeout))
        self.create = bool(create)
        self._paramstyle = paramstyle
        self._lock = threading.Lock()
        self._local = threading.local()
        self._connections: list[tuple[int, Any]] = []  # (the pid that opened it, connection)
        # A parent's connections after a fork: never used, never closed, and kept
        # referenced so that no finaliser in this process closes them either.
        self._inherited: list[Any] = []
        self._schema_checked = False

    def _close_connections(self) -> None:
        """Close every connection opened in this process; drop the parent's unclosed."""
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
        try:
            driver = _Driver(connection, self._paramstyle)
        except BaseException:  # a driver it cannot tell: the connection is not kept
            _close_quietly(connection, "closing a connection of an unknown driver failed")
            raise
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
            ensure_schema(connection, driver, create=self.create, store=repr(self))
            self._schema_checked = True
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
