"""Read and write a saved history: a JSON list, JSONL, or a request body holding one.

Accepted layouts, detected from the text:

- a JSON array of messages (``[{"role": ...}, ...]``);
- JSONL, one message per line (what the transcript stores write);
- a JSON object holding the list under ``messages`` (Anthropic and OpenAI Chat
  request bodies) or ``input`` (OpenAI Responses request bodies).

A message is an object with a ``role`` or a ``type`` (Responses items such as
``function_call`` have only a type). ``write_history`` writes the same layout back.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

from bareagent_compact.protocols import Message

__all__ = ["HistoryError", "HistoryFile", "read_history", "write_history"]

WRAPPER_KEYS: Final = ("messages", "input")
"""Keys of a request body that hold the history, tried in this order."""


class HistoryError(ValueError):
    """A file that cannot be read as a history; the message says why, naming the file."""


@dataclass(frozen=True, slots=True)
class HistoryFile:
    """A history and the layout it was read in, so that it can be written back alike."""

    messages: list[Message]
    layout: str
    """``"json"``, ``"jsonl"`` or ``"wrapped"``."""
    wrapper: dict[str, Any] | None = None
    """For ``"wrapped"``: the request body, whose ``key`` holds the messages."""
    key: str | None = None


def _parse(name: str, text: str) -> tuple[Any, str]:
    """The JSON value of ``text`` and its layout; JSONL becomes a list."""
    try:
        return json.loads(text), "json"
    except RecursionError:
        raise HistoryError(f"{name}: JSON nested too deeply") from None
    except json.JSONDecodeError as whole:
        lines = [line for line in text.splitlines() if line.strip()]
        if len(lines) < 2:
            raise HistoryError(
                f"{name} is not JSON ({whole.msg} at line {whole.lineno} column {whole.colno})"
            ) from None
        values = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                values.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise HistoryError(
                    f"{name} is neither JSON nor JSONL (line {number}: {exc.msg} "
                    f"at column {exc.colno})"
                ) from None
            except RecursionError:
                raise HistoryError(f"{name}, line {number}: JSON nested too deeply") from None
        return values, "jsonl"


def _check_messages(name: str, value: Any) -> list[Message]:
    if not isinstance(value, list):
        raise HistoryError(
            f"{name} is not a message history: expected a list of messages, "
            f"got a JSON {type(value).__name__}"
        )
    for index, message in enumerate(value):
        if not isinstance(message, dict):
            raise HistoryError(
                f"{name} is not a message history: item {index} is a JSON "
                f"{type(message).__name__}, not an object"
            )
        if not isinstance(message.get("role"), str) and not isinstance(message.get("type"), str):
            raise HistoryError(
                f"{name} is not a message history: item {index} has neither a 'role' nor a 'type'"
            )
    return value


def read_history(path: str | os.PathLike[str], stdin: TextIO | None = None) -> HistoryFile:
    """Read a history file (``-`` reads ``stdin``); ``HistoryError`` says what is wrong."""
    name = os.fspath(path)
    if name == "-":
        text = (stdin or sys.stdin).read()
        name = "<stdin>"
    else:
        text = _read_text(name)
    if not text.strip():
        raise HistoryError(f"{name} is empty")
    value, layout = _parse(name, text)
    if isinstance(value, dict) and layout == "json":
        return _from_object(name, value)
    return HistoryFile(_check_messages(name, value), layout)


def _read_text(name: str) -> str:
    """The text of the file ``name`` (UTF-8, a byte-order mark skipped)."""
    file = Path(name).expanduser()
    try:
        data = file.read_bytes()
    except FileNotFoundError:
        raise HistoryError(f"{name}: no such file") from None
    except IsADirectoryError:
        raise HistoryError(f"{name} is a directory, not a history file") from None
    except OSError as exc:
        raise HistoryError(f"{name}: cannot read ({exc.strerror})") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise HistoryError(f"{name} is not UTF-8 text (byte {exc.start})") from None


def _from_object(name: str, value: dict[str, Any]) -> HistoryFile:
    """A file holding one JSON object: a single message, or a request body."""
    if isinstance(value.get("role"), str) or isinstance(value.get("type"), str):
        return HistoryFile([value], "jsonl")  # JSONL of one message
    for key in WRAPPER_KEYS:
        if isinstance(value.get(key), list):
            return HistoryFile(_check_messages(name, value[key]), "wrapped", value, key)
    raise HistoryError(
        f"{name} is not a message history: a JSON object without a "
        f"{' or '.join(repr(k) for k in WRAPPER_KEYS)} list"
    )


def dump_history(history: HistoryFile, messages: list[Message]) -> str:
    """``messages`` as text in the layout of ``history``."""
    if history.layout == "jsonl":
        return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)
    if history.layout == "wrapped" and history.wrapper is not None and history.key is not None:
        value: Any = {**history.wrapper, history.key: messages}
    else:
        value = messages
    return json.dumps(value, ensure_ascii=False, indent=2) + "\n"


def write_history(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` atomically (a temporary file renamed into place)."""
    target = Path(path).expanduser()
    fd, temp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
