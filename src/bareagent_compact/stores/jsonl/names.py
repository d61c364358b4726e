"""The names of the JSONL store's files: a snapshot's ``{session_id}_{timestamp}.jsonl``
(BareAgent's layout), an archive's ``{session_id}.archive.jsonl``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from bareagent_compact.stores import codec

SNAPSHOT_SUFFIX: Final = ".jsonl"
"""Every snapshot is named ``{session_id}_{timestamp}.jsonl``."""

ARCHIVE_SUFFIX: Final = ".archive.jsonl"
"""The archive of a session is ``{session_id}.archive.jsonl``; never taken for a snapshot."""

_STAMP_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})(?:-(\d{6}))?", re.ASCII
)


def _format_stamp(moment: datetime) -> str:
    """``2025-01-02T03-04-05-123456``: BareAgent's format, sortable and free of ``_``."""
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}-{moment.minute:02d}-{moment.second:02d}-{moment.microsecond:06d}"
    )


def _parse_stamp(text: str) -> datetime | None:
    match = _STAMP_RE.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second, micro = (int(part) for part in match.groups("0"))
    try:
        return datetime(year, month, day, hour, minute, second, micro)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One snapshot file: whose it is, when it was saved (from its name) and where."""

    session_id: str
    timestamp: datetime
    """Naive; UTC with the default clock (BareAgent itself writes local time)."""
    path: Path


def _parse_snapshot_name(directory: Path, name: str) -> Snapshot | None:
    """The snapshot a file name denotes, or ``None`` for any other file."""
    if name.startswith(".") or not name.endswith(SNAPSHOT_SUFFIX) or name.endswith(ARCHIVE_SUFFIX):
        return None
    stem, sep, stamp = name[: -len(SNAPSHOT_SUFFIX)].rpartition("_")
    timestamp = _parse_stamp(stamp) if sep else None
    session_id = codec.session_id_of_stem(stem) if timestamp is not None else None
    if timestamp is None or session_id is None:
        return None
    return Snapshot(session_id, timestamp, directory / name)
