"""A transcript manager on any DB-API 2 database: sqlite3 by default, PostgreSQL for fleets.

``SqlTranscriptManager`` has the methods of ``JsonlTranscriptManager`` and stores
the same JSONL text, one row per snapshot. Every save is one transaction that
first takes the session's row lock, so concurrent writers (threads, processes,
machines) are serialised per session: no snapshot is lost or torn, and each
session's snapshots are numbered 1, 2, 3, ... in the order they committed.

The library imports no database driver: pass a path (sqlite3, from the standard
library) or a function returning a new DB-API 2 connection (e.g. ``psycopg``).

``stores.sql.manager`` holds ``SqlTranscriptManager`` and its snapshots,
``stores.sql.archive`` its archive, ``stores.sql.connections`` the connections
and transactions, ``stores.sql.driver`` what differs between drivers,
``stores.sql.schema`` the tables and ``stores.sql.rows`` what the rows hold.
This package re-exports the public names.
"""

from __future__ import annotations

from bareagent_compact.stores.sql.connections import ConnectionFactory
from bareagent_compact.stores.sql.driver import PARAMSTYLES, convert_placeholders
from bareagent_compact.stores.sql.manager import SqlTranscriptManager
from bareagent_compact.stores.sql.rows import SqlSnapshot
from bareagent_compact.stores.sql.schema import SCHEMA_VERSION

__all__ = [
    "PARAMSTYLES",
    "SCHEMA_VERSION",
    "ConnectionFactory",
    "SqlSnapshot",
    "SqlTranscriptManager",
    "convert_placeholders",
]
