"""Opening a store named on the command line: re-exported from ``stores.open``."""

from __future__ import annotations

from bareagent_compact.stores.open import (
    POSTGRES_DRIVERS,
    POSTGRES_SCHEMES,
    SQLITE_HEADER,
    Store,
    StoredSnapshot,
    StoreError,
    archive_size,
    close,
    load,
    open_store,
    snapshots,
)

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
