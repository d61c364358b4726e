"""The running facts of one full-compaction attempt, and how it ends without one."""

from __future__ import annotations

from dataclasses import dataclass

from bareagent_compact.result import Action, CompactionResult, Reason, SummaryCost
from bareagent_compact.trigger import Trigger


@dataclass(slots=True)
class Attempt:
    """What one full-compaction attempt found and did so far."""

    force: bool
    tokens: int
    truncated: int
    saved: bool = False
    calls: int = 0
    parts: int = 0
    summary: str | None = None
    pinned_identifiers: int = 0
    cost: SummaryCost | None = None
    """What the summary requests used; ``None`` while none was sent."""

    def quiet(self, reason: Reason | None = None) -> CompactionResult:
        """No full compaction: what micro-compaction did, and why not."""
        action = Action.MICRO if self.truncated else Action.NONE
        return CompactionResult(action, self.tokens, self.tokens, self.truncated, reason=reason)

    def failure(self, trigger: Trigger, reason: Reason) -> CompactionResult:
        """A failed full compaction, which also starts (or extends) the back-off."""
        trigger.failed(self.tokens)
        return CompactionResult(
            Action.FAILED,
            self.tokens,
            self.tokens,
            self.truncated,
            self.saved,
            reason,
            self.calls,
            self.parts,
            cost=self.cost,
        )


LEFT_AS_IT_WAS = "history left as it was"
LEFT_AS_MICRO_LEFT_IT = "history left as micro-compaction left it"


def left_as(truncated: int) -> str:
    """How a failed full compaction leaves the history, for a log line: unchanged,
    unless micro-compaction truncated results in the same call."""
    return LEFT_AS_MICRO_LEFT_IT if truncated else LEFT_AS_IT_WAS
