"""Many conversations on one compactor: what it remembers between calls, kept
per session id, at most :data:`MAX_CONVERSATIONS` of them, least recently used
first out.

Per conversation (each is about one history): the view (history cache, scans,
recall handles of the last plan, idle), the counter (usage ledger or anchor,
the time of the last request for the cache clock), the trigger (back-off, the
wait while still over), the summary running in the background, and the records
with the archive's writer (by handle, found again in that history). Shared: the
options, the plug-ins, and ``last_result`` (the result of the latest call,
whichever conversation it was for).

The compactor's own session (``get_session_id()``) lives in :class:`Parts`
itself, as always. A call for another session swaps that session's state into
the parts for the length of the call and back out after it: the passes see one
conversation, as before. Calls are serialised by the drivers' locks.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from bareagent_compact.background import Pending
from bareagent_compact.engine.counter import Counter
from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.ports import Ports
from bareagent_compact.engine.view import View
from bareagent_compact.options import Options
from bareagent_compact.requests import Queued
from bareagent_compact.trigger import Trigger

if TYPE_CHECKING:
    from bareagent_compact.engine.full.attempt import Attempt

logger = logging.getLogger("bareagent_compact.compactor")

MAX_CONVERSATIONS: Final = 64
"""How many conversations besides the compactor's own session are remembered."""


@dataclass(slots=True)
class Conversation:
    """What one conversation's calls leave for its next call."""

    view: View
    counter: Counter
    trigger: Trigger
    pending: Pending[Attempt] | None
    behind: dict[str, Queued]
    options: Options
    """The options it was last used with (another: it reads everything again)."""
    ports: Ports

    @classmethod
    def new(cls, parts: Parts) -> Conversation:
        """A conversation not seen before."""
        return cls(View(), Counter(parts.options), Trigger(), None, {}, parts.options, parts.ports)

    @classmethod
    def taken(cls, parts: Parts) -> Conversation:
        """The conversation the parts hold now."""
        return cls(
            parts.view, parts.counter, parts.trigger, parts.pending, parts.behind,
            parts.options, parts.ports,
        )  # fmt: skip

    def put(self, parts: Parts) -> None:
        """Into the parts, brought up to the parts' options."""
        if self.options is not parts.options:
            self.view.idle = False
            self.view.rescan()
            self.counter.configure(parts.options)
            if self.ports.archive != parts.ports.archive:
                self.behind.clear()
        parts.view, parts.counter, parts.trigger = self.view, self.counter, self.trigger
        parts.pending, parts.behind = self.pending, self.behind


class Conversations:
    """The conversations other than the compactor's own session, by session id."""

    __slots__ = ("_held", "limit")

    def __init__(self, limit: int = MAX_CONVERSATIONS) -> None:
        self._held: OrderedDict[str, Conversation] = OrderedDict()
        self.limit = limit

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._held

    def __len__(self) -> int:
        return len(self._held)

    def discard(self, session_id: str) -> None:
        """Forget ``session_id``'s conversation (it became the compactor's own)."""
        self._held.pop(session_id, None)

    def pending(self) -> list[Pending[Attempt]]:
        """The background summaries of the conversations held."""
        return [c.pending for c in self._held.values() if c.pending is not None]

    def drop_pending(self) -> list[object]:
        """Forget every held conversation's background summary; their handles."""
        handles = []
        for conversation in self._held.values():
            if conversation.pending is not None:
                handles.append(conversation.pending.handle)
                conversation.pending = None
        return handles

    @contextmanager
    def entered(self, parts: Parts, session_id: str | None) -> Iterator[None]:
        """Run a call of ``session_id``'s conversation (``None`` or the compactor's
        own session id: its own state, as always)."""
        if session_id is None or session_id == parts.session_id:
            yield
            return
        own = Conversation.taken(parts)
        own_id = parts.session_id
        conversation = self._held.pop(session_id, None) or Conversation.new(parts)
        conversation.put(parts)
        parts.session_id = session_id
        try:
            yield
        finally:
            self._held[session_id] = Conversation.taken(parts)
            own.put(parts)
            parts.session_id = own_id
            self._evict()

    def _evict(self) -> None:
        """Keep at most :attr:`limit` conversations, least recently used first out."""
        while len(self._held) > self.limit:
            session_id, gone = self._held.popitem(last=False)
            if gone.pending is not None:
                logger.info(
                    "background summary of session %r dropped: more than %d conversations",
                    session_id, self.limit,
                )  # fmt: skip
                _cancel(gone.pending.handle)


def _cancel(handle: object) -> None:
    """Cancel a background summary's task, when it is one (the async driver's)."""
    cancel = getattr(handle, "cancel", None)
    if callable(cancel):
        cancel()
