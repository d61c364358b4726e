"""What a compactor holds between calls, as the passes see it.

The options and the plug-ins resolved from them, the counter, the view of the
history, the trigger's state, the summary running in the background and the
records with the archive's writer. Each is a small object of its own; this
bundle names them, so that a pass is handed one argument, and answers the two
questions that need several of them (may a call fire; did a plug-in edit the
history).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from bareagent_compact.background import Pending, starts_early
from bareagent_compact.engine.counter import Counter
from bareagent_compact.engine.ports import Ports
from bareagent_compact.engine.turn import Turn
from bareagent_compact.engine.view import View
from bareagent_compact.options import Options
from bareagent_compact.requests import Queued
from bareagent_compact.result import CompactionResult
from bareagent_compact.trigger import Trigger

if TYPE_CHECKING:
    from bareagent_compact.engine.full.attempt import Attempt


@dataclass(slots=True)
class Parts:
    """The lasting parts of one compactor."""

    provider: object
    """The summarising model."""
    options: Options
    ports: Ports
    session_id: str
    counter: Counter
    view: View = field(default_factory=View)
    trigger: Trigger = field(default_factory=Trigger)
    """The failure back-off and the wait while still over the threshold."""
    pending: Pending[Attempt] | None = None
    """A summary made in the background, until a call swaps it in."""
    behind: dict[str, Queued] = field(default_factory=dict)
    """Records with the archive's writer, by handle."""
    last_result: CompactionResult | None = None
    """The result of the latest call."""

    def may_fire(self, tokens: int) -> bool:
        """Whether a call at ``tokens`` may start a full compaction (or a background
        summary)."""
        options = self.options
        watermark = None if self.pending is not None else options.derived.background_tokens
        return tokens > options.derived.threshold or starts_early(
            tokens, options.derived.threshold, watermark, False
        )

    def reread(self, turn: Turn) -> None:
        """A plug-in has just run (or, while it was awaited, another task): if it
        changed the history, what this call learnt of the history no longer holds,
        and the scans and the cache read it all again."""
        if turn.synced and self.view.history.sync(turn.messages) == []:
            return
        turn.edited(0)
        turn.changes = None
        self.view.rescan()
