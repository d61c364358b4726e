"""What compaction did at each turn (model call) of a session, as replay and demo record it."""

from __future__ import annotations

from dataclasses import dataclass

from bareagent_compact.protocols import HasText, Message, SummaryProvider
from bareagent_compact.result import Action, CompactionResult

__all__ = ["CountingProvider", "TurnRecord"]


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What compaction did at one turn (one model call) of a replayed session."""

    turn: int
    """1 for the first model call."""
    index: int
    """How many messages of the recorded history the loop had appended by then."""
    tokens_in: int
    """The estimate when the turn started, before compaction."""
    tokens_before: int
    """The estimate after micro-compaction (compared with the threshold)."""
    tokens_after: int
    """The estimate sent to the model."""
    action: Action
    truncated: int
    messages: int
    """The length of the working history after compaction."""
    summary_calls: int
    """Calls of the summary provider during this turn."""
    reason: str | None = None

    @classmethod
    def of(
        cls,
        result: CompactionResult,
        *,
        turn: int,
        index: int,
        tokens_in: int,
        messages: int,
        summary_calls: int,
    ) -> TurnRecord:
        """The record of ``result``, what the compactor returned at this turn."""
        return cls(
            turn=turn,
            index=index,
            tokens_in=tokens_in,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            action=result.action,
            truncated=result.truncated,
            messages=messages,
            summary_calls=summary_calls,
            reason=result.reason,
        )


class CountingProvider:
    """Counts the calls of a summary provider."""

    def __init__(self, provider: SummaryProvider) -> None:
        self.provider = provider
        self.calls = 0

    def __call__(self, prompt: list[Message], /) -> str | HasText:
        self.calls += 1
        return self.provider(prompt)
