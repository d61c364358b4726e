"""All counting of a compactor: the estimate (or the caller's counter), and the
count anchored on the usage the API reports.

Without a ``token_counter`` of the caller's, the history's count is anchored on
the reported usage by a :class:`~bareagent_compact.ledger.UsageLedger`; with
one, on the last report only (:class:`~bareagent_compact.anchor.ReportedCount`).
Each report also notes the time of the request (by the ``clock`` option), from
which :meth:`Counter.cache_cold` tells whether the prompt cache has expired.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact.anchor import ReportedCount
from bareagent_compact.engine.turn import Turn
from bareagent_compact.engine.view import View
from bareagent_compact.ledger import UsageLedger
from bareagent_compact.options import Options
from bareagent_compact.plain import plain_view
from bareagent_compact.tokens import estimate_tokens

logger = logging.getLogger("bareagent_compact.compactor")

_DICTS: Final = frozenset((dict,))


class Counter:
    """Counts messages, and the history as the trigger compares it."""

    __slots__ = ("_anchor", "_ledger", "_options", "_requested", "_sent")

    def __init__(self, options: Options) -> None:
        self._options = options
        self._anchor = ReportedCount()
        self._ledger: UsageLedger | None = None
        self._requested: float | None = None  # by the clock, at the last report
        self._sent: list[Any] = []  # the list the last report was for, as the server read it
        self.reset()

    def configure(self, options: Options) -> None:
        """Count with ``options`` from now on (a new counter starts counting anew;
        a time read on another clock is forgotten)."""
        custom = self._options.derived.custom_counter
        if options.clock is not self._options.clock:
            self._requested = None
        self._options = options
        if options.derived.custom_counter != custom:
            self.reset()

    def reset(self) -> None:
        """Forget every report: the ledger (or, with a counter of the caller's, the
        anchor) starts again."""
        self._ledger = None if self._options.derived.custom_counter else UsageLedger()
        self._anchor.forget()
        self._sent = []

    def edited(self) -> None:
        """The compactor changed messages a report covers: its size no longer fits."""
        self._anchor.forget()

    def count(self, read: Sequence[Any]) -> int:
        """The token count of ``read`` as it is; a failing or malformed counter falls
        back to the built-in estimate, with a warning."""
        try:
            tokens = self._options.derived.token_counter(read)  # type: ignore[arg-type]
        except Exception:
            logger.warning("token_counter failed; using the built-in estimate", exc_info=True)
            return estimate_tokens(list(read))
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            logger.warning(
                "token_counter returned %s, not an int >= 0; using the built-in estimate",
                type(tokens).__name__ if not isinstance(tokens, int) else tokens,
            )
            return estimate_tokens(list(read))
        return tokens

    def count_live(self, messages: Sequence[Any]) -> int:
        """The count of what the server reads of ``messages`` (past its own
        compaction, see :func:`~bareagent_compact.dialects.live_view`)."""
        return self.count(dialects.live_view(messages))

    def history(self, view: View, turn: Turn, cached: bool = True) -> int:
        """The count of the whole history, the one the trigger compares (``cached``:
        with the history cache's weights, brought up to date if needed)."""
        messages = turn.messages
        live = dialects.live_view(messages, view.server_scan.index(messages, turn.unchanged()))
        ledger = self._ledger
        if ledger is None:
            return self._anchor.count(live, self.count)
        synced = live is messages and cached and turn.in_sync()
        if not ledger.reported and synced:
            return view.history.tokens(messages)  # the estimate, weighing what is new
        return ledger.count(list(live), view.history.copies if synced else None)

    def record(self, view: View, messages: Sequence[Any], tokens: int) -> None:
        """Anchor the count on ``tokens`` reported for a request carrying ``messages``,
        and note when it was made (the clock is read only with a micro policy that
        may wait; otherwise the time is unknown)."""
        spec = self._options.derived.micro_options.is_spec
        self._requested = None if spec else self._now()
        if self._ledger is None:
            live_messages = dialects.live_view(messages)
            self._anchor.record(live_messages, tokens)
            self._sent = list(live_messages)  # read before this call changes them
            return
        source: Any = messages
        index = view.server_scan.index(messages) if isinstance(messages, list) else None
        if not (isinstance(source, list) and _DICTS.issuperset(map(type, source))):
            source = plain_view(messages)  # SDK objects read as dicts, the list unchanged
        live = list(dialects.live_view(source, index))
        copies = view.history.copies
        # The history as the last call left it: the ledger shares the cache's copies.
        shared = copies if index is not None and index <= 0 and live == copies else None
        self._ledger.record(live, tokens, shared)
        self._sent = self._ledger.copies()

    def sent_prefix(self, messages: Sequence[Any]) -> int:
        """How many of the first ``messages`` (plain dicts) are those the last report
        was for: the model accepted a request carrying them (and more, when fewer)."""
        try:
            sent = plain_view(self._sent)
        except (TypeError, ValueError):  # an object that does not read as a message
            return 0
        same = 0
        for now, then in zip(messages, sent, strict=False):
            if now != then:
                break
            same += 1
        return same

    def may_go_cold(self) -> bool:
        """Whether the prompt cache can expire with time alone: a request was
        recorded, and ``cache_ttl`` is finite."""
        return self._requested is not None and math.isfinite(self._options.derived.cache_ttl)

    def cache_cold(self) -> bool:
        """Whether the prompt cache has expired: a request was recorded, and
        ``cache_ttl`` seconds or more have passed since it by ``clock``. Unknown
        (no request recorded, or a clock that fails) is warm."""
        if self._requested is None:
            return False
        now = self._now()
        return now is not None and now - self._requested >= self._options.derived.cache_ttl

    def _now(self) -> float | None:
        """The clock's time; ``None``, with a warning, when it fails."""
        try:
            now = self._options.clock()
        except Exception:
            logger.warning("clock failed; the prompt cache is taken as warm", exc_info=True)
            return None
        if isinstance(now, bool) or not isinstance(now, int | float):
            logger.warning(
                "clock returned %s, not a number; the prompt cache is taken as warm",
                type(now).__name__,
            )
            return None
        return float(now)

    def idle_safe(self) -> bool:
        """Whether a call that changed nothing may be answered by counting alone
        (never with a counter of the caller's)."""
        return not self._options.derived.custom_counter


