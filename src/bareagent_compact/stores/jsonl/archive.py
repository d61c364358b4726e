"""The archive of truncated tool results in the JSONL store: one
``{session_id}.archive.jsonl`` per session, appended and ``fsync``-ed."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from bareagent_compact.protocols import ArchiveRecord
from bareagent_compact.stores import codec
from bareagent_compact.stores.archiving import ArchiveWrites
from bareagent_compact.stores.codec import check_session_id, decode_line, encode_archive_record
from bareagent_compact.stores.errors import CorruptTranscriptError
from bareagent_compact.stores.jsonl.files import (
    _append_line,
    _ensure_directory,
    _fsync_directory,
    _open_regular,
    _read_regular,
    _take_back,
)
from bareagent_compact.stores.jsonl.index import FileIndex
from bareagent_compact.stores.jsonl.names import ARCHIVE_SUFFIX

# The logger this store has always used.
logger = logging.getLogger("bareagent_compact.transcripts")


_APPEND_FLAGS: Final = os.O_RDWR | os.O_APPEND | os.O_CREAT


class JsonlArchive(ArchiveWrites[tuple[str, bytes]]):
    """``archive``, ``archive_many``, ``load_archive``, ``read_archived``,
    ``archived_sessions`` and ``archive_path`` of the JSONL store."""

    directory: Path
    _indexes: dict[Path, FileIndex]
    _indexes_lock: threading.Lock

    def archived_sessions(self) -> list[str]:
        """Session ids that have an archive of truncated results, sorted."""
        self.flush()
        try:
            with os.scandir(self.directory) as entries:
                stems = [
                    entry.name[: -len(ARCHIVE_SUFFIX)]
                    for entry in entries
                    if entry.name.endswith(ARCHIVE_SUFFIX) and not entry.name.startswith(".")
                ]
        except FileNotFoundError:
            return []
        found = (codec.session_id_of_stem(stem) for stem in stems)
        return sorted({session_id for session_id in found if session_id is not None})

    def archive_path(self, session_id: str) -> Path:
        """Where the archive of ``session_id`` lives (it may not exist yet)."""
        return self.directory / f"{codec.file_stem(check_session_id(session_id))}{ARCHIVE_SUFFIX}"

    _encode_record = staticmethod(encode_archive_record)

    def _write_records(self, encoded: Sequence[tuple[str, bytes]]) -> None:
        """Append encoded records to their sessions' archives, one write and one
        ``fsync`` per file (and the directory's when a file was created).

        All or none: when any write or ``fsync`` fails, every append of this
        call is taken back (the files cut back to their size before), so the
        retry that follows leaves each record in its archive once.
        """
        batches: dict[str, list[bytes]] = {}
        for session_id, line in encoded:
            batches.setdefault(session_id, []).append(line)
        if not batches:
            return
        _ensure_directory(self.directory)
        done: list[tuple[int, int, int]] = []  # descriptor, size before, size after
        try:
            for session_id, lines in batches.items():
                fd = _open_regular(self.archive_path(session_id), _APPEND_FLAGS)
                try:
                    done.append((fd, *_append_line(fd, b"".join(lines))))
                except BaseException:
                    os.close(fd)
                    raise
                os.fsync(fd)
            if any(size == 0 for _, size, _ in done):
                _fsync_directory(self.directory)  # a file was created
        except BaseException:
            for fd, size, end in done:
                _take_back(fd, size, end)  # not durable: the retry writes it again
            raise
        finally:
            for fd, _, _ in done:
                os.close(fd)

    def load_archive(self, session_id: str) -> list[ArchiveRecord]:
        """The archived records of ``session_id`` in the order they were written.

        An empty list when the session has no archive. A line that is not a
        complete JSON object (what a writer killed mid-append leaves) is skipped
        with a warning naming the file and line. A symbolic link or anything but
        a regular file at the archive's name raises ``OSError``. An archive named
        by the id itself (written before ids were escaped) is read first; only
        its records of this session are taken (on a case-insensitive file
        system, ``Alice``'s old archive is also ``alice``'s).
        """
        return self._archived(check_session_id(session_id))

    def read_archived(self, session_id: str, handle: str) -> ArchiveRecord | None:
        """The archived record of ``session_id`` whose ``handle`` is ``handle``, or
        ``None`` (only that session's archive is read; see ``docs/recall.md``).
        A string that is not a handle's form (``r-1a2b3c4d5e6f``) is ``None``
        without reading.

        Only that record's line is read: an index of where each handle's line
        is, kept in memory, is read on from where it ended (the bytes appended
        since the last recall), so a recall's memory and time follow the
        record's size, not the archive's.
        """
        session_id = check_session_id(session_id)
        handle = codec.check_handle(handle)
        if not codec.is_handle(handle):
            return None
        self.flush()
        legacy = codec.legacy_stem(session_id)
        paths = [self.directory / f"{legacy}{ARCHIVE_SUFFIX}"] if legacy is not None else []
        for path in [*paths, self.archive_path(session_id)]:
            for offset, raw in self._index(path).lines(path, handle):
                try:
                    record = decode_line(path, offset, raw)
                except CorruptTranscriptError:
                    logger.warning(
                        "skipping unreadable record at byte %d of archive %s", offset, path
                    )
                    continue
                if codec.matching_record([record], session_id, handle) is not None:
                    return record
        return None

    def _index(self, path: Path) -> FileIndex:
        """The index of the archive file ``path``, made on first use."""
        with self._indexes_lock:
            found = self._indexes.get(path)
            if found is None:
                found = self._indexes[path] = FileIndex()
            return found

    def _archived(self, session_id: str) -> list[ArchiveRecord]:
        """The records of a checked session id (after the writer thread wrote what it
        holds)."""
        self.flush()
        records: list[ArchiveRecord] = []
        legacy = codec.legacy_stem(session_id)
        if legacy is not None:
            old = self._read_archive(self.directory / f"{legacy}{ARCHIVE_SUFFIX}")
            records.extend(r for r in old if r.get("session_id") == session_id)
        return records + self._read_archive(self.archive_path(session_id))

    @staticmethod
    def _read_archive(path: Path) -> list[ArchiveRecord]:
        """The readable records of one archive file; none when it does not exist."""
        try:
            data = _read_regular(path)
        except FileNotFoundError:
            return []
        records: list[ArchiveRecord] = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                records.append(decode_line(path, number, raw))
            except CorruptTranscriptError:
                logger.warning(
                    "skipping unreadable line %d of archive %s (an interrupted append)",
                    number,
                    path,
                )
        return records
