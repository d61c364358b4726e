"""The errors both transcript stores raise alike, whichever holds the data."""

from __future__ import annotations

__all__ = ["CorruptTranscriptError", "SnapshotNotFoundError"]


class CorruptTranscriptError(ValueError):
    """Stored data that cannot be read back: a line or a row that is not what was written.

    The message names the file and line (JSONL) or the session, snapshot and
    line (SQL), never the content. A ``ValueError``, as the stores have always
    raised for corrupt data, so code catching that keeps working.
    """


class SnapshotNotFoundError(FileNotFoundError):
    """No snapshot where one was asked for: of a session, of the store, or the one named.

    A ``FileNotFoundError``, as the stores have always raised in that case.
    """
