"""``JsonlTranscriptManager``: snapshots saved atomically, listed and loaded under
one directory, with the archive of :mod:`~bareagent_compact.stores.jsonl.archive`."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Final

from bareagent_compact.protocols import Message
from bareagent_compact.stores import codec
from bareagent_compact.stores.codec import (
    ONE_MICROSECOND,
    Clock,
    check_session_id,
    decode_jsonl,
    encode_snapshot,
)
from bareagent_compact.stores.errors import SnapshotNotFoundError
from bareagent_compact.stores.jsonl.archive import JsonlArchive
from bareagent_compact.stores.jsonl.files import (
    _ensure_directory,
    _fsync_directory,
    _is_stale,
    _lock_for,
    _open_regular,
    _read_regular,
    _unlink_quietly,
    _write_all,
)
from bareagent_compact.stores.jsonl.names import (
    SNAPSHOT_SUFFIX,
    Snapshot,
    _format_stamp,
    _parse_snapshot_name,
)

TEMP_PREFIX: Final = ".tmp-"
"""Temporary files start with this; readers ignore them."""

TEMP_MAX_AGE: Final = 60.0
"""Seconds after its last write when a leftover temporary file is removed by ``save``."""


class JsonlTranscriptManager(JsonlArchive):
    """Saves, lists and loads transcript snapshots under one directory.

    Snapshots are ``{session_id}_{timestamp}.jsonl``, one JSON message per line.
    ``save`` is atomic and gives every snapshot its own file; ``load`` and
    ``resume`` read the newest by the timestamp in the file name. ``archive``
    appends tool results that micro-compaction truncates to
    ``{session_id}.archive.jsonl``, so pass ``archive=mgr.archive`` to
    ``Compactor``. The directory is created ``0o700`` and files ``0o600``
    because transcripts hold tool output and may hold secrets.

    ``clock`` returns the time used in new file names (UTC by default).
    ``write_behind=True`` has a writer thread append and ``fsync`` the records
    ``Compactor`` hands over, off its call (see ``archive_behind``); ``flush()``
    and ``close()`` wait for what it holds.
    """

    check_session_id = staticmethod(codec.check_session_id)
    """Validate a session id for use in file names (``Compactor`` calls this early)."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        clock: Clock = codec.utc_now,
        write_behind: bool = False,
    ) -> None:
        codec.check_clock(clock)
        if not os.fspath(directory):
            raise ValueError("directory must not be empty (pass '.' to use the current directory)")
        self.directory = Path(os.fspath(directory)).expanduser().absolute()
        self.clock = clock
        self._last: datetime | None = None
        self._indexes = {}
        self._indexes_lock = threading.Lock()
        self._open_writer(write_behind)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r})"

    def close(self) -> None:
        """Flush and end the writer thread (``write_behind=True``); nothing else to
        release (every file is closed after use)."""
        if self._writer is not None:
            self._writer.close()

    # -- snapshots -----------------------------------------------------------

    def save(self, messages: Sequence[Message], session_id: str) -> Path:
        """Write a new snapshot of ``messages`` atomically and return its path.

        Values JSON cannot encode are written as their ``str`` with a logged
        warning; cyclic or too deeply nested content raises ``ValueError``, and
        then nothing is written.
        """
        session_id = check_session_id(session_id)
        lines = encode_snapshot(messages, session_id)

        _ensure_directory(self.directory)
        self._remove_stale_temp_files()
        temp = self._write_temp_file(b"".join(lines))
        try:
            path = self._rename_into_place(temp, session_id)
        except BaseException:
            _unlink_quietly(temp)
            raise
        _fsync_directory(self.directory)
        return path

    def snapshots(self, session_id: str | None = None) -> list[Snapshot]:
        """Every snapshot (of ``session_id`` if given), newest first."""
        wanted = None if session_id is None else check_session_id(session_id)
        found: list[Snapshot] = []
        try:
            with os.scandir(self.directory) as entries:
                for entry in entries:
                    snapshot = _parse_snapshot_name(self.directory, entry.name)
                    if (
                        snapshot is not None
                        and (wanted is None or snapshot.session_id == wanted)
                        and entry.is_file(follow_symlinks=False)
                    ):
                        found.append(snapshot)
        except FileNotFoundError:
            return []
        found.sort(key=lambda s: (s.timestamp, s.path.name), reverse=True)
        return found

    def snapshot_size(self, snapshot: Snapshot) -> int | None:
        """The size of a snapshot's file in bytes, or ``None`` if it is gone since listed."""
        try:
            return snapshot.path.stat().st_size
        except OSError:
            return None

    def list_sessions(self) -> list[str]:
        """Session ids that have snapshots, the most recently saved first."""
        return list(dict.fromkeys(s.session_id for s in self.snapshots()))

    def get_latest_session(self) -> str | None:
        """The session id of the newest snapshot, or ``None`` when there is none."""
        snapshots = self.snapshots()
        return snapshots[0].session_id if snapshots else None

    def load(self, session_id: str) -> list[Message]:
        """The messages of the newest snapshot of ``session_id``.

        Raises ``SnapshotNotFoundError`` (a ``FileNotFoundError``) when the session
        has no snapshot and ``CorruptTranscriptError`` (a ``ValueError``) naming
        the file and line when a line is corrupt.
        """
        session_id = check_session_id(session_id)
        snapshots = self.snapshots(session_id)
        if not snapshots:
            raise SnapshotNotFoundError(
                f"no transcript for session {session_id!r} in {self.directory}"
            )
        return self.load_snapshot(snapshots[0].path)

    def resume(self, session_id: str | None = None) -> list[Message]:
        """Like ``load``; with no ``session_id``, the newest snapshot of any session.

        Raises ``SnapshotNotFoundError`` when there is nothing to resume.
        """
        if session_id is not None:
            return self.load(session_id)
        snapshots = self.snapshots()
        if not snapshots:
            raise SnapshotNotFoundError(f"no transcripts in {self.directory}")
        return self.load_snapshot(snapshots[0].path)

    @staticmethod
    def load_snapshot(path: str | os.PathLike[str] | Snapshot) -> list[Message]:
        """The messages of one snapshot (a file, or a record from ``snapshots()``).

        Blank lines are skipped; a line that is not UTF-8, not JSON or not an
        object raises ``CorruptTranscriptError`` naming the file and the line
        number. A missing file raises ``SnapshotNotFoundError``; a symbolic link
        or anything but a regular file raises ``OSError``.
        """
        path = path.path if isinstance(path, Snapshot) else Path(path)
        try:
            data = _read_regular(path)
        except FileNotFoundError as exc:
            raise SnapshotNotFoundError(exc.errno, exc.strerror, exc.filename) from None
        return decode_jsonl(path, data)

    # -- helpers -------------------------------------------------------------

    def _rename_into_place(self, temp: Path, session_id: str) -> Path:
        """Rename ``temp`` to the session's next free snapshot name and return that."""
        # Per directory, by inode: managers sharing a directory under other
        # spellings still share the lock, and other directories never wait.
        name_lock = _lock_for(os.stat(self.directory))
        with name_lock.lock:
            moment = self._next_moment()
            while True:
                name = f"{codec.file_stem(session_id)}_{_format_stamp(moment)}{SNAPSHOT_SUFFIX}"
                path = self.directory / name
                if not os.path.lexists(path):
                    break
                moment += ONE_MICROSECOND
            os.replace(temp, path)
            self._last = moment
        return path

    def _next_moment(self) -> datetime:
        """The clock's time as naive UTC, strictly after this manager's previous save."""
        now = codec.clock_time(self.clock)
        if self._last is not None and now <= self._last:
            now = self._last + ONE_MICROSECOND
        return now

    def _write_temp_file(self, data: bytes) -> Path:
        """Write ``data`` to a new ``0o600`` temporary file and ``fsync`` it."""
        temp = self.directory / f"{TEMP_PREFIX}{os.urandom(8).hex()}"
        fd = _open_regular(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        except BaseException:
            _unlink_quietly(temp)
            raise
        return temp

    def _remove_stale_temp_files(self) -> None:
        """Remove temporary files not written to for ``TEMP_MAX_AGE`` seconds."""
        cutoff = time.time() - TEMP_MAX_AGE
        with os.scandir(self.directory) as entries:
            for entry in entries:
                if entry.name.startswith(TEMP_PREFIX) and _is_stale(entry, cutoff):
                    _unlink_quietly(Path(entry.path))
