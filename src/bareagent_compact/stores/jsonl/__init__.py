"""A file-backed transcript manager: atomic JSONL snapshots and an archive of truncated results.

Snapshots use BareAgent's layout, ``{session_id}_{timestamp}.jsonl`` with one
message per line in readable UTF-8, so either program can read the other's
files. A session id is written as it is when it is a plain lower-case file
name; any other character is escaped (see ``codec.file_stem``), and files
named by the id itself (as before ids were escaped) are read too. A snapshot
is written to a temporary file, flushed to disk and renamed into place, so a
crash leaves either the whole snapshot or none of it.

``stores.jsonl.manager`` holds ``JsonlTranscriptManager`` and its snapshots,
``stores.jsonl.archive`` its archive, ``stores.jsonl.names`` the file names and
``stores.jsonl.files`` the file operations. This package re-exports the public
names.
"""

from __future__ import annotations

from bareagent_compact.stores.jsonl.manager import (
    TEMP_MAX_AGE,
    TEMP_PREFIX,
    JsonlTranscriptManager,
)
from bareagent_compact.stores.jsonl.names import ARCHIVE_SUFFIX, SNAPSHOT_SUFFIX, Snapshot

__all__ = [
    "ARCHIVE_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "TEMP_MAX_AGE",
    "TEMP_PREFIX",
    "JsonlTranscriptManager",
    "Snapshot",
]
