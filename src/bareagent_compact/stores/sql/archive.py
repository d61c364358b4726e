"""The archive of truncated tool results in the SQL store: records inserted in
one transaction, read back per session."""

from __future__ import annotations

from collections.abc import Sequence

from bareagent_compact.protocols import ArchiveRecord
from bareagent_compact.stores import codec
from bareagent_compact.stores.archiving import ArchiveWrites
from bareagent_compact.stores.codec import Clock, check_session_id, encode_archive_record
from bareagent_compact.stores.sql.connections import SqlConnections
from bareagent_compact.stores.sql.driver import _Runner
from bareagent_compact.stores.sql.rows import _archive_records, _stamp


class SqlArchive(SqlConnections, ArchiveWrites[tuple[str, str]]):
    """``archive``, ``archive_many``, ``load_archive``, ``read_archived`` and
    ``archived_sessions`` of the SQL store (the ``bareagent_archive`` table)."""

    clock: Clock

    def archived_sessions(self) -> list[str]:
        """Session ids that have archived records, sorted."""
        self.flush()
        rows = self._fetchall(
            "SELECT DISTINCT session_id FROM bareagent_archive ORDER BY session_id", ()
        )
        return [str(row[0]) for row in rows]

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
        ``None`` (only that session's rows are read; see ``docs/recall.md``).
        A string that is not a handle's form (``r-1a2b3c4d5e6f``) is ``None``
        without a query, whatever the driver makes of it."""
        session_id = check_session_id(session_id)
        handle = codec.check_handle(handle)
        if not codec.is_handle(handle):
            return None
        self.flush()
        rows = self._fetchall(
            "SELECT seq, record FROM bareagent_archive WHERE session_id = ? AND record LIKE ?"
            " ORDER BY seq",
            (session_id, f"%{handle}%"),
        )
        return codec.matching_record(_archive_records(rows, session_id), session_id, handle)
