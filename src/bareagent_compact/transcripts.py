"""A file-backed transcript manager: atomic JSONL snapshots and an archive of truncated results.

Snapshots use BareAgent's layout, ``{session_id}_{timestamp}.jsonl`` with one
message per line in readable UTF-8, so either program can read the other's
files. A snapshot is written to a temporary file, flushed to disk and renamed
into place, so a crash leaves either the whole snapshot or none of it.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import secrets
import stat
import threading
import time
import unicodedata
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Final, TypeAlias

from bareagent_compact._json import has_only_str_keys, log_renamed, with_plain_keys
from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.validate import not_a_dict, not_a_list

__all__ = [
    "ARCHIVE_SUFFIX",
    "MAX_SESSION_ID_BYTES",
    "MAX_SESSION_ID_CHARS",
    "SNAPSHOT_SUFFIX",
    "TEMP_MAX_AGE",
    "TEMP_PREFIX",
    "Clock",
    "JsonlTranscriptManager",
    "Snapshot",
    "check_session_id",
]

logger = logging.getLogger(__name__)

Clock: TypeAlias = Callable[[], datetime]
"""Returns the current time; an aware value is converted to UTC, a naive one is used as is."""

MAX_SESSION_ID_CHARS: Final = 128
"""The longest session id, in characters."""

MAX_SESSION_ID_BYTES: Final = 200
"""The longest session id in UTF-8 bytes, so file names stay under the 255-byte limit."""

SNAPSHOT_SUFFIX: Final = ".jsonl"
"""Every snapshot is named ``{session_id}_{timestamp}.jsonl``."""

ARCHIVE_SUFFIX: Final = ".archive.jsonl"
"""The archive of a session is ``{session_id}.archive.jsonl``; never taken for a snapshot."""

TEMP_PREFIX: Final = ".tmp-"
"""Temporary files start with this; readers ignore them."""

TEMP_MAX_AGE: Final = 60.0
"""Seconds after its last write when a leftover temporary file is removed by ``save``."""

DIRECTORY_MODE: Final = 0o700
FILE_MODE: Final = 0o600

_FORBIDDEN_CHARS: Final = frozenset('/\\<>:"|?*')
_RESERVED_NAMES: Final = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{port}{n}" for port in ("COM", "LPT") for n in "0123456789\u00b9\u00b2\u00b3"}
)
_STAMP_RE: Final = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2})-(\d{2})-(\d{2})(?:-(\d{6}))?", re.ASCII
)
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
_ONE_MICROSECOND: Final = timedelta(microseconds=1)
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


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


def _shown(session_id: str) -> str:
    """A bounded repr for error messages."""
    return repr(session_id[:40] + "...") if len(session_id) > 40 else repr(session_id)


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` (NFC-normalised) if it is safe as part of a file name.

    It must be a non-empty ``str`` of at most 128 characters and 200 UTF-8 bytes,
    not start with ``.``, contain only printable characters (no NUL, control or
    format characters) and none of ``/ \\ < > : " | ? *``, and not be a Windows
    device name (``CON``, ``NUL``, ``COM1``, ...). Raises ``TypeError`` or
    ``ValueError`` otherwise, before anything touches the disk.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
    if not session_id:
        raise ValueError("session_id must not be empty")
    if len(session_id) <= MAX_SESSION_ID_CHARS:
        for char in session_id:
            if char in _FORBIDDEN_CHARS or not char.isprintable():
                raise ValueError(
                    f"session_id must be a plain file name; {char!r} is not allowed "
                    f"in {_shown(session_id)}"
                )
        session_id = unicodedata.normalize("NFC", session_id)
    if len(session_id) > MAX_SESSION_ID_CHARS:
        raise ValueError(
            f"session_id must be at most {MAX_SESSION_ID_CHARS} characters, "
            f"got {len(session_id)}: {_shown(session_id)}"
        )
    if session_id.startswith("."):
        raise ValueError(f"session_id must not start with '.', got {_shown(session_id)}")
    if len(session_id.encode("utf-8")) > MAX_SESSION_ID_BYTES:
        raise ValueError(
            f"session_id must be at most {MAX_SESSION_ID_BYTES} bytes in UTF-8, "
            f"got {_shown(session_id)}"
        )
    if session_id.split(".", 1)[0].rstrip(" ").upper() in _RESERVED_NAMES:
        raise ValueError(f"session_id must not be a device name, got {_shown(session_id)}")
    return session_id


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
    session_id, sep, stamp = name[: -len(SNAPSHOT_SUFFIX)].rpartition("_")
    timestamp = _parse_stamp(stamp) if sep else None
    if timestamp is None:
        return None
    try:
        session_id = check_session_id(session_id)
    except ValueError:
        return None
    return Snapshot(session_id, timestamp, directory / name)


def _encode_line(value: Any, fallbacks: Counter[str], renamed: Counter[str]) -> bytes:
    """One JSON line in UTF-8, non-ASCII kept readable.

    Values JSON cannot encode (and dict keys it cannot) become their ``str`` and
    are counted by type in ``fallbacks``. Keys of one dict that JSON would write
    alike (``1`` and ``"1"``) are kept apart by a ``#n`` suffix on the later one,
    counted in ``renamed``. Cyclic or too deeply nested data raises
    ``ValueError``. Unpaired surrogates are written as ``\\uXXXX`` escapes.
    """

    counted: Counter[str] = Counter()
    collided: Counter[str] = Counter()

    def fallback(obj: object) -> str:
        counted[type(obj).__name__] += 1
        return str(obj)

    try:
        if has_only_str_keys(value):
            text = json.dumps(value, ensure_ascii=False, default=fallback)
        else:  # keys JSON would write as text: they may collide with other keys
            plain = with_plain_keys(value, counted, collided, set())
            text = json.dumps(plain, ensure_ascii=False, default=fallback)
    except RecursionError:
        raise ValueError("message content is nested too deeply to encode as JSON") from None
    except ValueError as exc:
        raise ValueError(f"message content cannot be encoded as JSON: {exc}") from None
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # Surrogates can only occur inside JSON strings, where an escape is valid.
        escaped = _SURROGATE_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
        data = escaped.encode("utf-8")
    fallbacks.update(counted)
    renamed.update(collided)
    return data + b"\n"


def _log_fallbacks(
    what: str, session_id: str, fallbacks: Counter[str], renamed: Counter[str]
) -> None:
    log_renamed(f"{what} for session {session_id!r}", renamed, logger)
    if fallbacks:
        logger.warning(
            "%s for session %r: %d value(s) JSON cannot encode were written as their str() "
            "(types: %s)",
            what,
            session_id,
            sum(fallbacks.values()),
            ", ".join(sorted(fallbacks)),
        )


def _decode_line(path: Path, number: int, raw: bytes) -> dict[str, Any]:
    """Parse one line into a dict, or raise ``ValueError`` naming the file and line."""
    where = f"corrupt transcript {path}, line {number}"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where}: invalid UTF-8 at byte {exc.start}") from None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}: invalid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise ValueError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # an integer longer than Python converts
        raise ValueError(f"{where}: invalid JSON value ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(value).__name__}")
    return value


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
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "refusing a file that is not a regular file", str(path))
        if _O_NONBLOCK:
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


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


def encode_snapshot(messages: Sequence[Message], session_id: str) -> list[bytes]:
    """One JSON line per message of a snapshot, with the encoding fallbacks logged.

    Raises ``TypeError`` for a value that is not a list of dicts, ``ValueError``
    for cyclic or too deeply nested content; nothing is written by either.
    """
    if not isinstance(messages, list | tuple):
        raise not_a_list(messages)
    fallbacks: Counter[str] = Counter()
    renamed: Counter[str] = Counter()
    lines = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise not_a_dict(index, message)
        lines.append(_encode_line(message, fallbacks, renamed))
    _log_fallbacks("snapshot", session_id, fallbacks, renamed)
    return lines


class JsonlTranscriptManager:
    """Saves, lists and loads transcript snapshots under one directory.

    Snapshots are ``{session_id}_{timestamp}.jsonl``, one JSON message per line.
    ``save`` is atomic and gives every snapshot its own file; ``load`` and
    ``resume`` read the newest by the timestamp in the file name. ``archive``
    appends tool results that micro-compaction truncates to
    ``{session_id}.archive.jsonl``, so pass ``archive=mgr.archive`` to
    ``Compactor``. The directory is created ``0o700`` and files ``0o600``
    because transcripts hold tool output and may hold secrets.

    ``clock`` returns the time used in new file names (UTC by default).
    """

    def __init__(self, directory: str | os.PathLike[str], *, clock: Clock = _utc_now) -> None:
        if not callable(clock):
            raise TypeError(f"clock must be callable, got {type(clock).__name__}")
        if not os.fspath(directory):
            raise ValueError("directory must not be empty (pass '.' to use the current directory)")
        self.directory = Path(os.fspath(directory)).expanduser().absolute()
        self.clock = clock
        self._last: datetime | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.directory)!r})"

    @staticmethod
    def check_session_id(session_id: object) -> str:
        """Validate a session id for use in file names (``Compactor`` calls this early)."""
        return check_session_id(session_id)

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
            # Per directory, by inode: managers sharing a directory under other
            # spellings still share the lock, and other directories never wait.
            name_lock = _lock_for(os.stat(self.directory))
            with name_lock.lock:
                moment = self._next_moment()
                while True:
                    path = self.directory / f"{session_id}_{_format_stamp(moment)}{SNAPSHOT_SUFFIX}"
                    if not os.path.lexists(path):
                        break
                    moment += _ONE_MICROSECOND
                os.replace(temp, path)
                self._last = moment
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

    def list_sessions(self) -> list[str]:
        """Session ids that have snapshots, the most recently saved first."""
        return list(dict.fromkeys(s.session_id for s in self.snapshots()))

    def get_latest_session(self) -> str | None:
        """The session id of the newest snapshot, or ``None`` when there is none."""
        snapshots = self.snapshots()
        return snapshots[0].session_id if snapshots else None

    def load(self, session_id: str) -> list[Message]:
        """The messages of the newest snapshot of ``session_id``.

        Raises ``FileNotFoundError`` when the session has no snapshot and
        ``ValueError`` naming the file and line when a line is corrupt.
        """
        session_id = check_session_id(session_id)
        snapshots = self.snapshots(session_id)
        if not snapshots:
            raise FileNotFoundError(f"no transcript for session {session_id!r} in {self.directory}")
        return self.load_snapshot(snapshots[0].path)

    def resume(self, session_id: str | None = None) -> list[Message]:
        """Like ``load``; with no ``session_id``, the newest snapshot of any session.

        Raises ``FileNotFoundError`` when there is nothing to resume.
        """
        if session_id is not None:
            return self.load(session_id)
        snapshots = self.snapshots()
        if not snapshots:
            raise FileNotFoundError(f"no transcripts in {self.directory}")
        return self.load_snapshot(snapshots[0].path)

    @staticmethod
    def load_snapshot(path: str | os.PathLike[str]) -> list[Message]:
        """The messages of one snapshot file (e.g. an older one from ``snapshots()``).

        Blank lines are skipped; a line that is not UTF-8, not JSON or not an
        object raises ``ValueError`` naming the file and the line number. A
        symbolic link or anything but a regular file raises ``OSError``.
        """
        path = Path(path)
        messages: list[Message] = []
        for number, raw in enumerate(_read_regular(path).split(b"\n"), start=1):
            if raw.strip():
                messages.append(_decode_line(path, number, raw))
        return messages

    # -- archive of truncated tool results -----------------------------------

    def archive_path(self, session_id: str) -> Path:
        """Where the archive of ``session_id`` lives (it may not exist yet)."""
        return self.directory / f"{check_session_id(session_id)}{ARCHIVE_SUFFIX}"

    def archive(self, record: ArchiveRecord) -> None:
        """Append one truncated tool result to its session's archive file.

        ``record`` is what ``Compactor`` passes its ``archive`` hook: ``session_id``,
        ``tool_use_id``, ``tool_name`` and the original ``content``. The line is
        written with one append and ``fsync``-ed before this returns; any failure
        raises, so the compactor keeps the result whole.
        """
        if not isinstance(record, dict):
            raise TypeError(f"archive record must be a dict, got {type(record).__name__}")
        if "session_id" not in record:
            raise ValueError("archive record has no 'session_id'")
        session_id = check_session_id(record["session_id"])
        path = self.archive_path(session_id)
        fallbacks: Counter[str] = Counter()
        renamed: Counter[str] = Counter()
        line = _encode_line(record, fallbacks, renamed)
        _log_fallbacks("archive record", session_id, fallbacks, renamed)

        self._ensure_directory()
        fd = _open_regular(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        try:
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
            os.fsync(fd)
        finally:
            os.close(fd)
        if not size:
            _fsync_directory(self.directory)

    def load_archive(self, session_id: str) -> list[ArchiveRecord]:
        """The archived records of ``session_id`` in the order they were written.

        An empty list when the session has no archive. A line that is not a
        complete JSON object (what a writer killed mid-append leaves) is skipped
        with a warning naming the file and line. A symbolic link or anything but
        a regular file at the archive's name raises ``OSError``.
        """
        path = self.archive_path(session_id)
        try:
            data = _read_regular(path)
        except FileNotFoundError:
            return []
        records: list[ArchiveRecord] = []
        for number, raw in enumerate(data.split(b"\n"), start=1):
            if not raw.strip():
                continue
            try:
                records.append(_decode_line(path, number, raw))
            except ValueError:
                logger.warning(
                    "skipping unreadable line %d of archive %s (an interrupted append)",
                    number,
                    path,
                )
        return records

    # -- helpers -------------------------------------------------------------

    def _next_moment(self) -> datetime:
        """The clock's time as naive UTC, strictly after this manager's previous save."""
        now = self.clock()
        if not isinstance(now, datetime):
            raise TypeError(f"clock must return a datetime, got {type(now).__name__}")
        if now.tzinfo is not None:
            now = now.astimezone(timezone.utc).replace(tzinfo=None)
        if self._last is not None and now <= self._last:
            now = self._last + _ONE_MICROSECOND
        return now

    def _ensure_directory(self) -> None:
        try:
            os.makedirs(self.directory, mode=DIRECTORY_MODE)
        except FileExistsError:
            return
        os.chmod(self.directory, DIRECTORY_MODE)  # the umask may have narrowed it oddly

    def _write_temp_file(self, data: bytes) -> Path:
        """Write ``data`` to a new ``0o600`` temporary file and ``fsync`` it."""
        temp = self.directory / f"{TEMP_PREFIX}{secrets.token_hex(8)}"
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
                if not entry.name.startswith(TEMP_PREFIX):
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff:
                    _unlink_quietly(Path(entry.path))
