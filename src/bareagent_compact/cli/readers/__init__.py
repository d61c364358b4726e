"""Readers of saved histories: one module per format, the format found from the records.

``read_history`` parses a file once (JSON, or JSONL), asks each format in turn
whether the records are its own (Claude Code, Codex CLI, SWE-agent,
mini-swe-agent, then plain messages and request bodies), and reads them as the first that
says yes, or as the format named. A file of no known format is an error
naming what it holds.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Final, TextIO

from bareagent_compact.cli.readers import claude_code, codex, messages, swe_agent
from bareagent_compact.cli.readers._base import (
    HistoryError,
    HistoryFile,
    Parsed,
    check_content,
    describe,
    parse,
    read_stream,
    read_text,
)

__all__ = ["AUTO", "FORMATS", "HistoryError", "HistoryFile", "read_history"]

AUTO: Final = "auto"
_READERS: Final[dict[str, tuple[Callable[[Parsed], bool], Callable[[Parsed], HistoryFile]]]] = {
    claude_code.NAME: (claude_code.detect, claude_code.read),
    codex.NAME: (codex.detect, codex.read),
    swe_agent.NAME: (swe_agent.detect, swe_agent.read),
    messages.MINI_SWE_AGENT: (messages.detect_mini, messages.read_mini),
    messages.NAME: (messages.detect, messages.read),
}
"""Each format's test and reader, in the order they are tried."""
FORMATS: Final = (AUTO, *_READERS)
"""What ``--format`` takes."""


def read_history(
    path: str | os.PathLike[str], stdin: TextIO | None = None, fmt: str = AUTO
) -> HistoryFile:
    """Read a history file (``-`` reads ``stdin``); ``HistoryError`` says what is wrong."""
    name = os.fspath(path)
    if name == "-":
        name = "<stdin>"
        text = read_stream(name, stdin or sys.stdin)
    else:
        text = read_text(name)
    if not text.strip():
        raise HistoryError(f"{name} is empty")
    parsed = parse(name, text)
    found = _reader(parsed, fmt)(parsed)
    if not found.messages and found.format != messages.NAME:
        raise HistoryError(
            f"{name} holds no message of the dialogue when read as {found.format}; "
            f"it holds {describe(parsed.records())}"
        )
    check_content(name, found.messages)
    return found


def _reader(parsed: Parsed, fmt: str) -> Callable[[Parsed], HistoryFile]:
    """The reader of the format named, or of the first format that knows the records."""
    if fmt != AUTO:
        if fmt not in _READERS:
            raise HistoryError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")
        return _READERS[fmt][1]
    for detect, read in _READERS.values():
        if detect(parsed):
            return read
    raise HistoryError(
        f"{parsed.name} is not a message history in any known format; it holds "
        f"{describe(parsed.records())} (--format names one of {', '.join(_READERS)})"
    )
