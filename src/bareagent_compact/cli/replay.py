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
from dataclasses import dataclass, replace
from typing import Any

from bareagent_compact import dialects
from bareagent_compact.cli.turns import CountingProvider, PromptCache, TurnRecord
from bareagent_compact.compactor import Compactor
from bareagent_compact.prompts import DEFAULT_THRESHOLD
from bareagent_compact.protocols import Message, SummaryProvider
from bareagent_compact.result import Action, SummaryCost
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
    keep_recent: int | None = None,
    keep_tool_pairs: bool = True,
    progress: Progress | None = None,
    cache: PromptCache | None = None,
    **options: Any,
) -> ReplayResult:
    """Replay ``messages`` (left unchanged) through a fresh ``Compactor`` with these options.

    ``options`` are more of the ``Compactor``'s (``micro``, ``language``, ...).
    Each request sent to the model meets ``cache`` (a fresh :class:`PromptCache`
    by default), and each turn records how, with its summary requests' size.
    """
    counting = CountingProvider(provider)
    compactor = Compactor(
        counting,
        threshold=threshold,
        keep_recent=keep_recent,
        keep_tool_pairs=keep_tool_pairs,
        **options,
    )
    loop = _Loop(messages, compactor, counting, PromptCache() if cache is None else cache)
    starts = model_call_indices(messages)
    for number, start in enumerate(starts, start=1):
        loop.turn(number, start)
        if progress is not None:
            progress(number, len(starts))
    loop.working.extend(_copies(messages[loop.fed :]))
    return ReplayResult(loop.turns, loop.working, threshold)


def _known(cost: SummaryCost | None, name: str, estimate: int) -> int:
    """What the summary requests' ``cost`` reported under ``name``, else ``estimate``."""
    value = None if cost is None else getattr(cost, name)
    return estimate if value is None else int(value)


class _Loop:
    """The agent loop a replay plays again: the working history, what was fed, the turns."""

    def __init__(
        self,
        recorded: list[Message],
        compactor: Compactor,
        counting: CountingProvider,
        cache: PromptCache,
    ) -> None:
        self.recorded = recorded
        self.compactor = compactor
        self.counting = counting
        self.cache = cache
        self.working: list[Message] = []
        self.turns: list[TurnRecord] = []
        self.fed = 0

    def turn(self, number: int, start: int) -> None:
        """Append the input up to ``start``, compact, send, and append the recorded output."""
        new = _copies(self.recorded[self.fed : start])
        self.working.extend(new)
        # The estimate of the list as the turn starts (one pass over it, as the
        # compactor's own count makes anyway).
        tokens_in = estimate_tokens(self.working)
        counting = self.counting
        calls, sent, got = counting.calls, counting.input_tokens, counting.output_tokens
        result = self.compactor(self.working)
        record = TurnRecord.of(
            result,
            turn=number,
            index=start,
            tokens_in=tokens_in,
            messages=len(self.working),
            summary_calls=counting.calls - calls,
        )
        cost = result.cost
        self.turns.append(
            replace(
                record,
                summary_input_tokens=_known(cost, "input_tokens", counting.input_tokens - sent),
                summary_output_tokens=_known(cost, "output_tokens", counting.output_tokens - got),
                summary_cache_read=_known(cost, "cache_read_tokens", 0),
                summary_cache_written=_known(cost, "cache_write_tokens", 0),
                cache=self.cache.request(self.working, result.tokens_after),
            )
        )
        # The recorded model output (the run of it that starts here) joins the history.
        self.fed = _output_end(self.recorded, start)
        output = _copies(self.recorded[start : self.fed])
        self.working.extend(output)
