"""What differs between DB-API 2 drivers: the parameter style, the exception
classes, sqlite3's BEGIN; and one transaction on one cursor."""

from __future__ import annotations

import logging
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any, Final

# The logger this store has always used.
logger = logging.getLogger("bareagent_compact.sqlstore")

PARAMSTYLES: Final = ("qmark", "numeric", "named", "format", "pyformat")
"""The DB-API 2 parameter styles this manager can write."""

_RETRIES: Final = 5
"""How many times a transaction (or the creation of the tables) is tried."""
_RETRY_SQLSTATES: Final = frozenset({"40001", "40P01"})  # serialization failure, deadlock
_PLACEHOLDERS: Final = {
    "numeric": ":{}",
    "named": ":p{}",
    "format": "%s",
    "pyformat": "%(p{})s",
}


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
