"""Replay a recorded session turn by turn through a :class:`Compactor`.

The recorded history is fed back as an agent loop would have built it: the
messages up to each model call are appended to a working list, the compactor
runs on it (as it does at the start of every turn), and the recorded model
output follows. Each turn yields a :class:`TurnRecord` of what compaction did,
so different settings can be compared on a real session without a model.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass

from bareagent_compact import dialects
from bareagent_compact.cli.turns import CountingProvider, TurnRecord
from bareagent_compact.compactor import Compactor
from bareagent_compact.micro import DEFAULT_KEEP_RECENT
from bareagent_compact.prompts import DEFAULT_THRESHOLD
from bareagent_compact.protocols import Message, SummaryProvider
from bareagent_compact.result import Action
from bareagent_compact.tokens import estimate_tokens

__all__ = [
    "CountingProvider",
    "ReplayResult",
    "TurnRecord",
    "is_model_output",
    "model_call_indices",
    "replay",
]

Progress = Callable[[int, int], object]
"""Called with (turns done, turns in all) as a replay goes on."""


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """Every turn of a replay and the compacted history it ended with."""

    turns: list[TurnRecord]
    messages: list[Message]
    threshold: int

    @property
    def summary_calls(self) -> int:
        return sum(t.summary_calls for t in self.turns)

    def count(self, action: Action) -> int:
        return sum(1 for t in self.turns if t.action is action)


def is_model_output(message: Message) -> bool:
    """True for what a model call returns: assistant messages, Responses calls and reasoning."""
    return dialects.kind(message) is dialects.Kind.ASSISTANT


def model_call_indices(messages: list[Message]) -> list[int]:
    """The indices at which the agent loop calls the model (one turn starts at each).

    A turn starts before each run of model output that follows input (a user
    message, tool results), and once more at the end when the history ends with
    input still to be answered. System messages start no turn and end none.
    """
    starts = []
    previous_was_output = True
    for index, message in enumerate(messages):
        if dialects.is_system(message):
            continue
        output = is_model_output(message)
        if output and not previous_was_output:
            starts.append(index)
        previous_was_output = output
    if messages and not previous_was_output:
        starts.append(len(messages))
    return starts


def _output_end(messages: list[Message], start: int) -> int:
    """The end of the run of recorded model output that starts at ``start``."""
    end = start
    while end < len(messages) and is_model_output(messages[end]):
        end += 1
    return end


def _copies(messages: list[Message]) -> list[Message]:
    return [copy.deepcopy(m) for m in messages]


def replay(
    messages: list[Message],
    provider: SummaryProvider,
    *,
    threshold: int = DEFAULT_THRESHOLD,
    keep_recent: int = DEFAULT_KEEP_RECENT,
    keep_tool_pairs: bool = True,
    progress: Progress | None = None,
) -> ReplayResult:
    """Replay ``messages`` (left unchanged) through a fresh ``Compactor`` with these options."""
    counting = CountingProvider(provider)
    compactor = Compactor(
        counting, threshold=threshold, keep_recent=keep_recent, keep_tool_pairs=keep_tool_pairs
    )
    working: list[Message] = []
    turns: list[TurnRecord] = []
    starts = model_call_indices(messages)
    fed = 0
    tokens = 0
    for number, start in enumerate(starts, start=1):
        new = _copies(messages[fed:start])
        working.extend(new)
        tokens_in = tokens + estimate_tokens(new)  # the previous turn's estimate plus the new
        calls = counting.calls
        result = compactor(working)
        turns.append(
            TurnRecord.of(
                result,
                turn=number,
                index=start,
                tokens_in=tokens_in,
                messages=len(working),
                summary_calls=counting.calls - calls,
            )
        )
        if progress is not None:
            progress(number, len(starts))
        # The recorded model output (the run of it that starts here) joins the history.
        fed = _output_end(messages, start)
        output = _copies(messages[start:fed])
        working.extend(output)
        tokens = result.tokens_after + estimate_tokens(output)
    working.extend(_copies(messages[fed:]))
    return ReplayResult(turns, working, threshold)
