"""The count of a caller's ``token_counter``, anchored on the usage the API reports.

Without a counter of the caller's, :class:`~bareagent_compact.ledger.UsageLedger`
anchors the built-in estimate. With one, this smaller anchor is used: the last
reported input size stands for the messages it was reported for, and only what
was appended since is counted with the caller's counter. The anchor holds while
those messages are still the history's first ones (the same objects, none
removed) and the compactor has not edited them; otherwise the counter counts
the whole history, as it does before any report.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Count = Callable[[list[Any]], int]


class ReportedCount:
    """The last reported input size and the messages it was reported for."""

    __slots__ = ("_messages", "_tokens")

    def __init__(self) -> None:
        self._messages: list[Any] = []
        self._tokens: int | None = None

    def record(self, messages: Sequence[Any], tokens: int) -> None:
        """Anchor on ``tokens`` for a request that carried exactly ``messages``."""
        self._messages = list(messages)
        self._tokens = tokens

    def forget(self) -> None:
        """Drop the anchor (the compactor changed messages it covers)."""
        self._messages = []
        self._tokens = None

    def count(self, history: Sequence[Any], count: Count) -> int:
        """The reported size plus ``count`` of what was appended since, while the
        recorded messages open ``history``; else ``count(history)``."""
        recorded = self._messages
        size = len(recorded)
        if self._tokens is None or len(history) < size or any(
            now is not then for now, then in zip(history, recorded, strict=False)
        ):
            return count(list(history))
        if len(history) == size:
            return self._tokens
        return self._tokens + count(list(history[size:]))
