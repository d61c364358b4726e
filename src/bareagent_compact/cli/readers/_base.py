"""What every reader shares: the error, the result, parsing JSON or JSONL, and the checks.

A file is parsed once (:func:`parse`); each format's reader turns the parsed
records into messages, and :func:`check_content` refuses what no verb could use
(content nested too deeply, text that is not valid Unicode) with one clear line.
"""

from __future__ import annotations

import io
import json
import os
import re
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TextIO

from bareagent_compact._limits import MAX_DEPTH
from bareagent_compact.protocols import Message

__all__ = [
    "HistoryError",
    "HistoryFile",
    "Parsed",
    "check_content",
    "describe",
    "is_item",
    "parse",
    "read_stream",
    "read_text",
]

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ITEM_TYPES: Final = frozenset(
    {"message", "reasoning", "item_reference", "compaction", "mcp_list_tools"}
)
"""Responses item types besides the ``..._call`` and ``..._output`` ones."""
MAX_INPUT_BYTES = 1 << 30
"""The most of a history file (or of standard input) read: 1 GiB, far above any
session log; a longer one, a line included, is refused rather than read into memory."""
_CHUNK: Final = 1 << 20
_KINDS: Final = (
    (stat.S_ISFIFO, "FIFO"),
    (stat.S_ISCHR, "character device"),
    (stat.S_ISBLK, "block device"),
    (stat.S_ISSOCK, "socket"),
)


class HistoryError(ValueError):
    """A file that cannot be read as a history; the message says why, naming the file."""


@dataclass(frozen=True, slots=True)
class HistoryFile:
    """A history, the format and layout it was read in, and the records left out."""

    messages: list[Message]
    layout: str
    """``"json"``, ``"jsonl"`` or ``"wrapped"``: how ``compact`` writes it back."""
    wrapper: dict[str, Any] | None = None
    """For ``"wrapped"``: the request body, whose ``key`` holds the messages."""
    key: str | None = None
    format: str = "messages"
    """The format the file was read as: ``messages``, ``claude-code``, ``codex``, ..."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Records that are no message of the dialogue, counted by kind."""


@dataclass(frozen=True, slots=True)
class Parsed:
    """A file's JSON value: one document (``json``) or a list of lines (``jsonl``)."""

    name: str
    value: Any
    layout: str

    def records(self) -> list[Any]:
        """The lines of JSONL, the items of a JSON list, or a lone JSON object."""
        if self.layout == "jsonl" or isinstance(self.value, list):
            return list(self.value)
        return [self.value]


def read_text(name: str) -> str:
    """The text of the file ``name`` (UTF-8, a byte-order mark skipped).

    Only a regular file is read: a FIFO would wait for a writer forever and a
    device such as ``/dev/zero`` never ends, so both are refused unopened (and
    a file swapped for one between the check and the opening is refused too).
    """
    file = Path(name).expanduser()
    try:
        _check_regular(name, file.stat())
        fd = os.open(file, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise HistoryError(f"{name}: no such file") from None
    except OSError as exc:
        raise HistoryError(f"{name}: cannot read ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "rb") as stream:
            _check_regular(name, os.fstat(stream.fileno()))
            data = _bounded(name, stream)
    except OSError as exc:
        raise HistoryError(f"{name}: cannot read ({exc.strerror})") from None
    return _decode(name, data)


def read_stream(name: str, stream: TextIO) -> str:
    """The text of ``stream`` (standard input), read to its end but no further than
    ``MAX_INPUT_BYTES``."""
    raw = getattr(stream, "buffer", None)
    if isinstance(raw, io.BufferedIOBase | io.RawIOBase):
        return _decode(name, _bounded(name, raw))
    parts: list[str] = []
    size = 0
    while chunk := stream.read(_CHUNK):
        size += len(chunk)
        if size > MAX_INPUT_BYTES:
            raise _too_large(name)
        parts.append(chunk)
    return "".join(parts)


def _check_regular(name: str, info: os.stat_result) -> None:
    if stat.S_ISDIR(info.st_mode):
        raise HistoryError(f"{name} is a directory, not a history file")
    if not stat.S_ISREG(info.st_mode):
        kind = next((k for test, k in _KINDS if test(info.st_mode)), "special file")
        raise HistoryError(f"{name} is a {kind}, not a regular file; save the log to a file first")
    if info.st_size > MAX_INPUT_BYTES:
        raise _too_large(name)


def _bounded(name: str, stream: io.BufferedIOBase | io.RawIOBase) -> bytes:
    """At most ``MAX_INPUT_BYTES`` of ``stream``; more is an error, not read."""
    data = stream.read(MAX_INPUT_BYTES + 1) or b""
    if len(data) > MAX_INPUT_BYTES:
        raise _too_large(name)
    return data


def _too_large(name: str) -> HistoryError:
    return HistoryError(f"{name} holds more than {MAX_INPUT_BYTES:,} bytes, more than is read")


def _decode(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HistoryError(f"{name} is not UTF-8 text (byte {exc.start})") from None


def _loads(where: str, text: str) -> Any:
    """``json.loads``, with the errors it raises for odd input as ``HistoryError``."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise HistoryError(f"{where}: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise HistoryError(f"{where}: {exc}".split(";")[0]) from None


def parse(name: str, text: str) -> Parsed:
    """The JSON value of ``text``; JSONL (one value a line) becomes a list.

    Lines end at ``\n`` only (and ``\r\n``): JSON writers leave U+2028, U+2029
    and U+0085 unescaped in strings, where ``str.splitlines`` would cut a record.
    """
    try:
        return Parsed(name, _loads(name, text), "json")
    except json.JSONDecodeError as whole:
        lines = [line for line in text.split("\n") if line.strip()]
        if len(lines) < 2:
            raise HistoryError(
                f"{name} is not JSON ({whole.msg} at line {whole.lineno} column {whole.colno})"
            ) from None
    values = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            values.append(_loads(f"{name}, line {number}", line))
        except json.JSONDecodeError as exc:
            raise HistoryError(
                f"{name} is neither JSON nor JSONL (line {number}: {exc.msg} at column {exc.colno})"
            ) from None
    return Parsed(name, values, "jsonl")


def is_item(value: Any) -> bool:
    """Whether ``value`` is a message: an object with a ``role``, or a Responses item."""
    if not isinstance(value, dict):
        return False
    if isinstance(value.get("role"), str):
        return True
    kind = value.get("type")
    return isinstance(kind, str) and (
        kind in _ITEM_TYPES or kind.endswith(("_call", "_output", "_request", "_response"))
    )


def describe(records: list[Any]) -> str:
    """What ``records`` hold, in brief: their types, or else their keys."""
    kinds: Counter[str] = Counter()
    for record in records:
        if isinstance(record, dict):
            kind = record.get("type")
            kinds[f"type {kind!r}" if isinstance(kind, str) else _keys(record)] += 1
        else:
            kinds[f"a JSON {type(record).__name__}"] += 1
    shown = ", ".join(f"{kind} ({number})" for kind, number in kinds.most_common(4))
    more = f" and {len(kinds) - 4} more kinds" if len(kinds) > 4 else ""
    return f"{len(records):,} record{'s' * (len(records) != 1)}: {shown}{more}"


def _keys(record: dict[Any, Any]) -> str:
    keys = sorted(str(k) for k in record)
    return "keys " + ", ".join(keys[:5]) + (", ..." if len(keys) > 5 else "") if keys else "{}"


def check_content(name: str, messages: list[Message]) -> list[Message]:
    """``messages``, unless one is nested too deeply or holds a lone surrogate."""
    for index, message in enumerate(messages):
        problem = _problem(message)
        if problem:
            raise HistoryError(f"{name}: message {index} {problem}")
    return messages


def _problem(message: Any) -> str | None:
    """What no verb can use in ``message``: a walk without recursion over its values."""
    stack: list[tuple[Any, int]] = [(message, 0)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                return "holds a lone surrogate (such as \\ud800): text that is not valid Unicode"
        elif isinstance(value, dict | list):
            if depth > MAX_DEPTH:
                return f"is nested more than {MAX_DEPTH} levels deep"
            items = value.items() if isinstance(value, dict) else enumerate(value)
            stack.extend((part, depth + 1) for pair in items for part in pair)
    return None
