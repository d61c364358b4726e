"""What every verb shares: the two error kinds, exit codes, progress and output helpers."""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final, TextIO

from bareagent_compact.cli.histories import HistoryError, HistoryFile, read_history
from bareagent_compact.cli.readers import AUTO
from bareagent_compact.protocols import Message
from bareagent_compact.tokens import estimate_tokens

PROG: Final = "bareagent-compact"
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
LOGGER: Final = "bareagent_compact.cli"
"""The verbs' logger (a child of the library's ``bareagent_compact``)."""


class CliError(Exception):
    """Bad usage or bad input: reported on stderr with exit code 2."""


class CommandFailed(Exception):
    """The operation itself failed: reported on stderr with exit code 1."""


class Progress:
    """``label n/total`` on a terminal's stderr, at most ten times a second; nothing otherwise."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.label = label
        self.enabled = self.stream.isatty()
        self._shown = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.enabled and (now - self._shown >= 0.1 or done == total):
            self._shown = now
            self.stream.write(f"\r{self.label} {done:,}/{total:,}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def emit_json(out: TextIO, value: Any) -> None:
    out.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")


def read_file(path: str, fmt: str = AUTO) -> HistoryFile:
    """The history in ``path`` (``-``: stdin) read as ``fmt``; none is a usage error."""
    try:
        return read_history(path, fmt=fmt)
    except HistoryError as exc:
        raise CliError(str(exc)) from None


def describe_skipped(skipped: dict[str, int]) -> str:
    """``3 records that are no message: progress 2, summary 1``."""
    kinds = ", ".join(f"{kind} {number:,}" for kind, number in sorted(skipped.items()))
    return f"{count(sum(skipped.values()), 'record')} that are no message: {kinds}"


def require_turns(file: str, history: HistoryFile, turns: int) -> None:
    """A replay that found no turn (no model call follows input) is a usage error."""
    if turns:
        return
    found = f"{count(len(history.messages), 'message')} read as {history.format}"
    if history.skipped:
        found += f", {describe_skipped(history.skipped)}"
    raise CliError(f"{file}: no turn to replay ({found}; no model call follows input)")


def count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'s' * (number != 1)}"


def size(nbytes: int) -> str:
    if nbytes < 1024:
        return f"{nbytes} B"
    if nbytes < 1024 * 1024:
        return f"{nbytes / 1024:.1f} KB"
    return f"{nbytes / 1024 / 1024:.1f} MB"


def tokens_or_none(messages: list[Message]) -> int | None:
    try:
        return estimate_tokens(messages)
    except (TypeError, ValueError):
        return None


def check_output_path(path: str, *inputs: str) -> Path:
    """An output path whose directory exists and which is none of ``inputs``."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise CliError(f"{path} is a directory")
    if not target.parent.resolve().is_dir():
        raise CliError(f"{path}: the directory {target.parent} does not exist")
    try:  # so that no work is done for a result that cannot be written
        with tempfile.TemporaryFile(dir=target.parent):
            pass
    except OSError as exc:
        raise CliError(f"{path}: cannot write in {target.parent} ({exc.strerror})") from None
    for name in inputs:
        if name != "-" and target.resolve() == Path(name).expanduser().resolve():
            raise CliError(f"{path} is the input file; write the result elsewhere")
    return target
