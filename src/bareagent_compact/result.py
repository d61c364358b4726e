"""What one call of :class:`~bareagent_compact.Compactor` did."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Action(str, enum.Enum):
    """The outcome of one compaction call."""

    NONE = "none"
    """Nothing changed."""
    MICRO = "micro"
    """Micro-compaction truncated old tool results; no summary was made."""
    FULL = "full"
    """The history was summarised and rebuilt."""
    FAILED = "failed"
    """A full compaction was due but did not happen; history is as micro-compaction left it."""


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """An immutable report of one ``compactor(messages)`` call.

    ``tokens_before`` is the estimate after micro-compaction (the number compared
    with the threshold); ``tokens_after`` is the estimate when the call returned.
    ``reason`` says why a full compaction failed or was skipped, else ``None``.
    """

    action: Action
    tokens_before: int
    tokens_after: int
    truncated: int = 0
    snapshot_saved: bool = False
    reason: str | None = None

    @property
    def compacted(self) -> bool:
        """True when the history was summarised (``action is Action.FULL``)."""
        return self.action is Action.FULL
