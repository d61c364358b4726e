"""A file-backed transcript manager: atomic JSONL snapshots and an archive of truncated results.

Snapshots use BareAgent's layout, ``{session_id}_{timestamp}.jsonl`` with one
message per line in readable UTF-8, so either program can read the other's
files. A session id is written as it is when it is a plain lower-case file
name; any other character is escaped (see ``codec.file_stem``), and files
named by the id itself (as before ids were escaped) are read too. A snapshot
is written to a temporary file, flushed to disk and renamed into place, so a
crash leaves either the whole snapshot or none of it.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Final

from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.stores import codec
from bareagent_compact.stores.archiving import ArchiveWrites
from bareagent_compact.stores.codec import (
    DIRECTORY_MODE,
    FILE_MODE,
    ONE_MICROSECOND,
    Clock,
    check_session_id,
    decode_jsonl,
    decode_line,
    encode_archive_record,
    encode_snapshot,
)
from bareagent_compact.stores.errors import CorruptTranscriptError, SnapshotNotFoundError

__all__ = [
    "ARCHIVE_SUFFIX",
    "SNAPSHOT_SUFFIX",
    "TEMP_MAX_AGE",
    "TEMP_PREFIX",
    "JsonlTranscriptManager",
    "Snapshot",
]

# The logger this store has always used.
logger = logging.getLogger("bareagent_compact.transcripts")

SNAPSHOT_SUFFIX: Final = ".jsonl"
"""Every snapshot is named ``{session_id}_{timestamp}.jsonl``."""

ARCHIVE_SUFFIX: Final = ".archive.jsonl"
"""The archive of a session is ``{session_id}.archive.jsonl``; never taken for a snapshot."""

TEMP_PREFIX: Final = ".tmp-"
"""Temporary files start with this; readers ignore them."""

TEMP_MAX_AGE: Final = 60.0
"""Seconds after its last write when a leftover temporary file is removed by ``save``."""

_STAMP_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})(?:-(\d{6}))?", re.ASCII
)
_O_BINARY: Final[int] = getattr(os, "O_BINARY", 0)  # Windows: no newline translation
_O_NOFOLLOW: Final[int] = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK: Final[int] = getattr(os, "O_NONBLOCK", 0)  # a FIFO cannot block the open
# What opening a symbolic link with O_NOFOLLOW fails with (Linux, FreeBSD, NetBSD).
_LINK_ERRNOS: Final = frozenset(
    getattr(errno, name) for name in ("ELOOP", "EMLINK", "EFTYPE") if hasattr(errno, name)
)


class _InodeLock:
    """A lock for one file or directory, shared by everything in the process using it."""

    __slots__ = ("__weakref__", "lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()


# One lock per file or directory (by device and inode), kept while anyone holds it.
# The registry's own lock is held only to look a lock up, never across any I/O.
_LOCKS: Final[weakref.WeakValueDictionary[tuple[int, int], _InodeLock]] = (
    weakref.WeakValueDictionary()
)
_LOCKS_LOCK: Final = threading.Lock()


def _lock_for(info: os.stat_result) -> _InodeLock:
    """The lock of the file or directory ``info`` describes (keep it while it is held)."""
    key = (info.st_dev, info.st_ino)
    with _LOCKS_LOCK:
        found = _LOCKS.get(key)
        if found is None:
            found = _LOCKS[key] = _InodeLock()
        return found


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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written <= 0:
            raise OSError(errno.EIO, "write made no progress")
        view = view[written:]


def _open_regular(path: Path, flags: int) -> int:
    """Open ``path`` only if it is a regular file, and return the descriptor.

    A symbolic link at ``path`` is not followed (``O_NOFOLLOW``; where that flag
    does not exist, a link is refused up front) and the open cannot block on a
    FIFO (``O_NONBLOCK``). Anything that is not a regular file (FIFO, socket,
    device, directory) raises ``OSError`` before a byte is read or written.
    """
    if not _O_NOFOLLOW and os.path.islink(path):
        raise OSError(errno.ELOOP, "refusing to follow a symbolic link", str(path))
    try:
        fd = os.open(path, flags | _O_NOFOLLOW | _O_NONBLOCK | _O_BINARY, FILE_MODE)
    except OSError as exc:
        if exc.errno in _LINK_ERRNOS and os.path.islink(path):
            raise OSError(exc.errno, "refusing to follow a symbolic link", str(path)) from None
        raise
    try:
        _check_regular(fd, path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _check_regular(fd: int, path: Path) -> None:
    """Refuse a descriptor that is not a regular file; make it blocking again."""
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        raise OSError(errno.EINVAL, "refusing a file that is not a regular file", str(path))
    if _O_NONBLOCK:
        os.set_blocking(fd, True)


def _read_regular(path: Path) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`_open_regular`)."""
    with open(_open_regular(path, os.O_RDONLY), "rb") as file:
        return file.read()


def _fsync_directory(directory: Path) -> None:
    """Make a rename or a new file in ``directory`` durable (no-op on Windows)."""
    if os.name == "nt":  # directories cannot be opened there; NTFS journals renames
        return
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:
        # Some file systems do not support fsync on a directory.
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
            raise
    finally:
        os.close(fd)


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        logger.debug("could not remove temporary file %s", path, exc_info=True)


def _append_line(fd: int, line: bytes) -> int:
    """Append ``line`` on a line of its own under the file's lock; the size it had before."""
    # Appends to one file are serialised within the process; the lock is
    # that file's own, so a stalled write never holds up another archive.
    file_lock = _lock_for(os.fstat(fd))
    with file_lock.lock:
        size = os.fstat(fd).st_size
        if size:
            os.lseek(fd, -1, os.SEEK_END)
            if os.read(fd, 1) != b"\n":
                # A writer was killed mid-line: start on a fresh line.
                line = b"\n" + line
        _write_all(fd, line)
    return size


class JsonlTranscriptManager(ArchiveWrites[tuple[str, bytes]]):
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

        self._ensure_directory()
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

    # -- archive of truncated tool results -----------------------------------

    def archive_path(self, session_id: str) -> Path:
        """Where the archive of ``session_id`` lives (it may not exist yet)."""
        return self.directory / f"{codec.file_stem(check_session_id(session_id))}{ARCHIVE_SUFFIX}"

    _encode_record = staticmethod(encode_archive_record)

    def _write_records(self, encoded: Sequence[tuple[str, bytes]]) -> None:
        """Append encoded records to their sessions' archives, one write and one
        ``fsync`` per file (and the directory's when a file was created)."""
        batches: dict[str, list[bytes]] = {}
        for session_id, line in encoded:
            batches.setdefault(session_id, []).append(line)
        if not batches:
            return
        self._ensure_directory()
        created = False
        for session_id, lines in batches.items():
            created |= self._append(self.archive_path(session_id), b"".join(lines))
        if created:
            _fsync_directory(self.directory)

    @staticmethod
    def _append(path: Path, data: bytes) -> bool:
        """Append ``data`` to the archive file ``path`` and ``fsync`` it; whether the
        file was empty (new) before."""
        fd = _open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
            size = _append_line(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        return not size

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
        ``None`` (only that session's archive is read; see ``docs/recall.md``)."""
        session_id = check_session_id(session_id)
        handle = codec.check_handle(handle)
        needle = handle.encode("utf-8")
        return codec.matching_record(self._archived(session_id, needle), session_id, handle)

    def _archived(self, session_id: str, needle: bytes = b"") -> list[ArchiveRecord]:
        """The records of a checked session id; with ``needle``, only lines holding it
        (after the writer thread wrote what it holds)."""
        self.flush()
        records: list[ArchiveRecord] = []
        legacy = codec.legacy_stem(session_id)
        if legacy is not None:
            old = self._read_archive(self.directory / f"{legacy}{ARCHIVE_SUFFIX}", needle)
            records.extend(r for r in old if r.get("session_id") == session_id)
        return records + self._read_archive(self.archive_path(session_id), needle)

    @staticmethod
    def _read_archive(path: Path, needle: bytes = b"") -> list[ArchiveRecord]:
        """The readable records of one archive file; none when it does not exist."""
        try:
            data = _read_regular(path)
        except FileNotFoundError:
            return []
        records: list[ArchiveRecord] = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip() or needle not in raw:
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

    def _ensure_directory(self) -> None:
        try:
            os.makedirs(self.directory, mode=DIRECTORY_MODE)
        except FileExistsError:
            return
        os.chmod(self.directory, DIRECTORY_MODE)  # the umask may have narrowed it oddly

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


def _is_stale(entry: os.DirEntry[str], cutoff: float) -> bool:
    """Whether ``entry`` is a regular file last written before ``cutoff``."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff
