"""Where each handle's record lies in an archive file, so that a recall reads that
record alone: an index of byte offsets per file, kept in memory and read on as
the file grows (only the bytes appended since the last recall are scanned).

The index is found by scanning the file's bytes in chunks for newlines and
``"handle": "r-..."`` keys, never decoding a record; each place it gives is
checked when read (the line is decoded and its handle and session compared),
so a stale or wrong entry can only cost a read, never return the wrong record.
A file replaced or cut shorter since (another inode, a smaller size) is indexed
anew.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from bareagent_compact.stores.jsonl.files import _open_regular

CHUNK: Final = 1 << 20
"""How many bytes one read of a scan takes."""

# A newline ends a record; a handle key names the record it is in. An unescaped
# `"` only occurs around JSON keys and strings, never inside a string's text.
_KEY: Final = b'"handle": "'
_KEY_VALUE: Final = re.compile(rb'"handle": "([a-z]-[0-9a-f]{12})"')
_LONGEST: Final = len(b'"handle": "r-0123456789ab"')


class FileIndex:
    """The records of one archive file by handle: the offset and length of their lines."""

    __slots__ = ("covered", "identity", "lock", "places")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.identity: tuple[int, int] | None = None
        self.covered = 0  # the file's bytes indexed so far: whole lines only
        self.places: dict[str, tuple[int, ...]] = {}  # offset, length, offset, ...

    def lines(self, path: Path, handle: str) -> Iterator[tuple[int, bytes]]:
        """The offset and bytes of every line that may hold ``handle``'s record, in
        file order; none when the file does not exist."""
        try:
            fd = _open_regular(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            with self.lock:
                self._update(fd)
                places = self.places.get(handle, ())
            for offset, length in zip(places[::2], places[1::2], strict=True):
                os.lseek(fd, offset, os.SEEK_SET)
                yield offset, _read_exactly(fd, length)
        finally:
            os.close(fd)

    def _update(self, fd: int) -> None:
        """Index what was appended to the file since the last look."""
        info = os.fstat(fd)
        identity = (info.st_dev, info.st_ino)
        if identity != self.identity or info.st_size < self.covered:
            self.identity, self.covered, self.places = identity, 0, {}
        if info.st_size > self.covered:
            self._scan(fd, info.st_size)

    def _scan(self, fd: int, size: int) -> None:
        """Index the whole lines between ``covered`` and ``size``."""
        position = line_start = self.covered
        pending: list[str] = []  # the handles of the line not ended yet
        tail = b""
        os.lseek(fd, position, os.SEEK_SET)
        while position < size:
            chunk = os.read(fd, min(CHUNK, size - position))
            if not chunk:
                break
            data, base = tail + chunk, position - len(tail)
            position += len(chunk)
            start = 0
            while True:
                newline = data.find(b"\n", start)
                stop = newline if newline >= 0 else len(data) - _LONGEST + 1
                pending.extend(_handles(data, start, stop, newline >= 0))
                if newline < 0:
                    break
                end = base + newline
                for handle in pending:
                    self.places[handle] = (
                        *self.places.get(handle, ()),
                        line_start,
                        end - line_start,
                    )
                line_start, pending, start = end + 1, [], newline + 1
            tail = data[max(start, len(data) - _LONGEST + 1) :]  # a key the chunk split
        self.covered = line_start  # an unended line is read again next time


def _handles(data: bytes, start: int, stop: int, ended: bool) -> Iterator[str]:
    """The handles of the keys in ``data`` starting from ``start`` to ``stop`` (the
    line's end, within which they end; or, for a line the chunk cut, the last
    start a whole key fits after)."""
    end = stop if ended else len(data)
    found = data.find(_KEY, start, end)
    while 0 <= found < stop:
        match = _KEY_VALUE.match(data, found, end)
        if match is not None:
            yield match.group(1).decode("ascii")
        found = data.find(_KEY, found + 1, end)


def _read_exactly(fd: int, length: int) -> bytes:
    parts: list[bytes] = []
    while length > 0:
        part = os.read(fd, min(length, CHUNK))
        if not part:
            break
        parts.append(part)
        length -= len(part)
    return b"".join(parts)
