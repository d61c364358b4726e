"""Read and write a saved history: the readers (``readers``) and the writing back.

``read_history`` reads any format the ``readers`` package knows; ``dump_history``
writes the messages in the layout they were read in, and ``write_history``
writes a file atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from bareagent_compact.cli.readers import FORMATS, HistoryError, HistoryFile, read_history
from bareagent_compact.protocols import Message

__all__ = [
    "FORMATS",
    "HistoryError",
    "HistoryFile",
    "dump_history",
    "read_history",
    "write_history",
]


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
    """Write ``text`` to ``path`` atomically (a temporary file renamed into place).

    A place that cannot be written raises ``HistoryError``, with nothing left behind.
    """
    where = f"cannot write {os.fspath(path)!r}"
    try:
        _write_atomically(Path(path).expanduser(), text)
    except OSError as exc:
        raise HistoryError(f"{where}: {exc.strerror or exc}") from None
    except UnicodeEncodeError:
        raise HistoryError(f"{where}: the text holds a lone surrogate") from None


def _write_atomically(target: Path, text: str) -> None:
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
