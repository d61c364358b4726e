"""The JSONL store's file operations: regular files only (no links, FIFOs or
devices), whole writes, ``fsync`` of files and directories, and one lock per
file or directory shared by the whole process."""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
import weakref
from pathlib import Path
from typing import Final

from bareagent_compact.stores.codec import DIRECTORY_MODE, FILE_MODE

# The logger this store has always used.
logger = logging.getLogger("bareagent_compact.transcripts")

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


def _append_line(fd: int, line: bytes) -> tuple[int, int]:
    """Append ``line`` on a line of its own under the file's lock; the size the file
    had before and the size it has after the append.

    A write that fails is taken back (see :func:`_take_back`), so that writing
    the same line again leaves it in the file once.
    """
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
        try:
            _write_all(fd, line)
        except BaseException:
            _cut_back(fd, size, size + len(line))
            raise
    return size, size + len(line)


def _take_back(fd: int, size: int, end: int) -> None:
    """Cut the file back to ``size`` after an append to ``end`` that failed (its
    ``fsync``), so that the retry's lines are the only copy."""
    try:
        file_lock = _lock_for(os.fstat(fd))
    except OSError:
        logger.warning("could not take back a failed append to an archive", exc_info=True)
        return
    with file_lock.lock:
        _cut_back(fd, size, end)


def _cut_back(fd: int, size: int, end: int) -> None:
    """Truncate to ``size`` when what follows it is at most this append's ``end``
    (no other writer appended since); otherwise leave the file with a warning."""
    try:
        now = os.fstat(fd).st_size
        if size <= now <= end:
            os.ftruncate(fd, size)
            return
    except OSError:
        logger.warning("could not take back a failed append to an archive", exc_info=True)
        return
    logger.warning(
        "a failed append to an archive stays in the file (another writer appended "
        "after it): its records may be there twice after the retry"
    )


def _ensure_directory(directory: Path) -> None:
    """Create ``directory`` ``0o700`` when it is missing."""
    try:
        os.makedirs(directory, mode=DIRECTORY_MODE)
    except FileExistsError:
        return
    os.chmod(directory, DIRECTORY_MODE)  # the umask may have narrowed it oddly


def _is_stale(entry: os.DirEntry[str], cutoff: float) -> bool:
    """Whether ``entry`` is a regular file last written before ``cutoff``."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(info.st_mode) and info.st_mtime < cutoff
