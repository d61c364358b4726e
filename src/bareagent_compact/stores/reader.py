"""The read interface both transcript stores implement, so tools read either the same way."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol, TypeVar

from bareagent_compact.protocols import ArchiveRecord, Message

__all__ = ["SnapshotRecord", "TranscriptReader"]


class SnapshotRecord(Protocol):
    """What every store's snapshot record says: whose snapshot it is and when it was saved."""

    @property
    def session_id(self) -> str: ...

    @property
    def timestamp(self) -> datetime: ...


_S = TypeVar("_S", bound=SnapshotRecord)


class TranscriptReader(Protocol[_S]):
    """Listing and reading a store: ``JsonlTranscriptManager`` and ``SqlTranscriptManager``.

    ``_S`` is the store's own snapshot record (``Snapshot`` or ``SqlSnapshot``):
    a record from ``snapshots()`` is what ``snapshot_size`` and
    ``load_snapshot`` of the same store take. ``check_session_id`` applies the
    one set of session-id rules both stores share (``TypeError`` for a non-str,
    ``ValueError`` otherwise). Missing snapshots raise ``SnapshotNotFoundError``
    and corrupt data ``CorruptTranscriptError``, from either store.
    """

    def check_session_id(self, session_id: object, /) -> str: ...

    def list_sessions(self) -> list[str]: ...

    def archived_sessions(self) -> list[str]: ...

    def snapshots(self, session_id: str | None = None, /) -> list[_S]: ...

    def snapshot_size(self, snapshot: _S, /) -> int | None: ...

    def load_snapshot(self, snapshot: _S, /) -> list[Message]: ...

    def load_archive(self, session_id: str, /) -> list[ArchiveRecord]: ...

    def close(self) -> None: ...
