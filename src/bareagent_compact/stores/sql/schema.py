"""The tables of the SQL store: their portable definitions, the stored schema
version, creating them when missing and checking the version at first use."""

from __future__ import annotations

import logging
from typing import Any, Final

from bareagent_compact.stores.errors import CorruptTranscriptError
from bareagent_compact.stores.sql.driver import _RETRIES, _Driver

# The logger this store has always used.
logger = logging.getLogger("bareagent_compact.sqlstore")

SCHEMA_VERSION: Final = 1
"""The layout of the tables; stored in ``bareagent_meta`` and checked on connect."""

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


def schema_version(driver: _Driver, connection: Any, store: str) -> int | None:
    """The stored schema version, or ``None`` when the tables do not exist."""
    try:
        with driver.transaction(connection, write=False) as run:
            rows = run.fetchall(
                "SELECT value FROM bareagent_meta WHERE name = ?", ("schema_version",)
            )
    except driver.error:
        return None
    if not rows:
        return None
    try:
        return int(rows[0][0])
    except (TypeError, ValueError):
        raise CorruptTranscriptError(
            f"corrupt transcript store {store}: its schema version is not a number"
        ) from None


def create_schema(driver: _Driver, connection: Any) -> None:
    """Create the tables (and record the schema version) where they are missing."""
    if driver.sqlite:
        # Outside any transaction: WAL lets readers work while one process writes.
        cursor = connection.cursor()
        try:
            mode = cursor.execute("PRAGMA journal_mode = WAL").fetchone()
        finally:
            cursor.close()
        if mode is None or str(mode[0]).lower() != "wal":
            logger.warning("sqlite3 database is not in WAL mode (%s)", mode)
    with driver.transaction(connection, write=True) as run:
        for statement in _SCHEMA:
            run.execute(statement, ())
        rows = run.fetchall("SELECT value FROM bareagent_meta WHERE name = ?", ("schema_version",))
        if not rows:
            run.execute(
                "INSERT INTO bareagent_meta (name, value) VALUES (?, ?)",
                ("schema_version", str(SCHEMA_VERSION)),
            )


def ensure_schema(connection: Any, driver: _Driver, *, create: bool, store: str) -> None:
    """Create the tables if missing (``create=True``) and check the schema version."""
    for attempt in range(1, _RETRIES + 1):
        version = schema_version(driver, connection, store)
        if version is None and not create:
            raise LookupError(f"{store} holds no transcript store (no bareagent tables)")
        if version is None:
            try:
                create_schema(driver, connection)
            except driver.error:
                # Another process created the tables at the same moment: read again.
                if attempt == _RETRIES:
                    raise
                continue
            version = SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise RuntimeError(
                f"{store} has schema version {version}; this version of "
                f"bareagent-compact reads up to {SCHEMA_VERSION}: upgrade it"
            )
        return
