"""The state of one compactor call: what it found, planned and changed.

A :class:`Turn` is made at the start of a call and thrown away at its end;
nothing of it lasts. What lasts between calls is in
:class:`~bareagent_compact.engine.view.View` and
:class:`~bareagent_compact.engine.counter.Counter`.
"""

from __future__ import annotations

from collections.abc import MutableSequence
from dataclasses import dataclass, field
from typing import Any

from bareagent_compact.history import HistoryCache
from bareagent_compact.micro import Due
from bareagent_compact.requests import Queued


@dataclass(slots=True)
class Turn:
    """One call: its arguments, and what the passes learnt and did so far."""

    messages: MutableSequence[Any]
    force: bool
    instructions: str | None
    history: HistoryCache
    """The view's history cache, which this call keeps in step with ``messages``."""
    changes: list[int] | None = None
    """The messages found new or edited since the last call; ``None``: unknown."""
    synced: bool = False
    """Whether the history cache holds the history as it is now."""
    edited_from: int = 0
    """This call changed nothing before this index."""
    touched: bool = False
    """This call planned a change it did not make: a call again might do more."""
    kept_whole: list[tuple[Due, Queued]] = field(default_factory=list)
    """Results kept whole while the archive's writer writes their records."""
    received: list[dict[str, Any]] | None = None
    """With a continuation summariser, when a full compaction may fire: a copy of
    the history as the call received it, before step 1 changed anything."""
    received_at: dict[int, int] = field(default_factory=dict)
    """Where each message of the list (by ``id``) is in :attr:`received`."""
    received_tokens: int = 0
    """The count of the history as received."""
    received_sent: int = 0
    """How many messages of :attr:`received` open the list the last usage report was for."""

    def edited(self, index: int) -> None:
        """This call changed the history from ``index`` on: the cache must look again."""
        self.synced = False
        self.edited_from = min(self.edited_from, index)

    def unchanged(self) -> int:
        """How many of the first messages the caller left as the last call left them
        (this call's own truncations and cuts aside: they move no message)."""
        changes = self.changes
        if changes is None:
            return 0
        return changes[0] if changes else len(self.messages)

    def in_sync(self) -> bool:
        """Whether the history cache holds the history as it is now (brought up to
        date if this call changed it, comparing only from where it did)."""
        if not self.synced:
            self.synced = self.history.sync(self.messages, self.edited_from) is not None
        return self.synced
