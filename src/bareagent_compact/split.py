"""Where a history is cut for a full compaction: the pending turn, the tool calls
kept with it, and an optional verbatim tail. Pure functions over the message list,
in every dialect (see :mod:`bareagent_compact.dialects`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from bareagent_compact import dialects
from bareagent_compact.protocols import Message


def pending_start(messages: Sequence[Message]) -> int:
    """Where the pending turn begins: the last dialogue turn when it is user input or
    tool results (SPEC 11.2 step 3); ``len(messages)`` when nothing is pending.

    A trailing run of Chat ``tool`` messages or Responses results is pending as a
    whole, so fresh results reach the model before they are ever summarised.
    System (or ``developer``) messages after the last dialogue message, such as a
    reminder an agent appends every turn, belong to the pending turn and stay
    after it: the user's request is still the last message the model answers.
    """
    last = _last_dialogue_index(messages)
    if last is None or dialects.kind(messages[last]) not in (
        dialects.Kind.USER,
        dialects.Kind.RESULTS,
        dialects.Kind.RESULT,
    ):
        return len(messages)
    return dialects.turn_start(messages, last)


def paired_tail_start(head: Sequence[Message], pending: Sequence[Message]) -> int:
    """Index in ``head`` from which messages stay verbatim so that every tool result
    in the kept tail (pending turn included) keeps its tool call.

    For each needed id the nearest earlier call counts (ids reused across turns
    must not pull in the whole history); the tail grows back to the start of the
    turn holding it, and on until nothing more is needed or can be found. Each
    message is read a bounded number of times: linear in the history.
    """
    needed: set[str] = set()
    for message in pending:
        needed -= dialects.call_ids(message)
        needed |= dialects.result_ids(message)
    start = len(head)
    index = start
    while needed and index > 0:
        index -= 1
        message = head[index]
        if dialects.is_system(message) or not (dialects.call_ids(message) & needed):
            continue
        new_start = dialects.turn_start(head, index)
        for absorbed in range(start - 1, new_start - 1, -1):
            message = head[absorbed]
            if dialects.is_system(message):
                continue
            needed -= dialects.call_ids(message)
            needed |= dialects.result_ids(message)
        start = index = new_start
    return start


def _last_dialogue_index(messages: Sequence[Message]) -> int | None:
    """Index of the last message that is not a system message, if any."""
    for index in range(len(messages) - 1, -1, -1):
        if not dialects.is_system(messages[index]):
            return index
    return None


def trailing_calls_start(head: Sequence[Message]) -> int | None:
    """Start of the last dialogue turn when it is an assistant turn making tool calls
    whose results are still to come; ``None`` otherwise."""
    last = _last_dialogue_index(head)
    if last is None or dialects.kind(head[last]) is not dialects.Kind.ASSISTANT:
        return None
    start = dialects.turn_start(head, last)
    if any(dialects.calls(head[index]) for index in range(start, last + 1)):
        return start
    return None


def verbatim_tail_start(
    head: Sequence[Message], start: int, budget: int, size: Callable[[Message], int]
) -> int:
    """Where a verbatim tail of at most ``budget`` tokens (``size`` per message) begins,
    at or before ``start`` in ``head``.

    The tail is cut at a safe point only: the start of a turn that is not tool
    results, so a call never loses its results; among the safe points within the
    budget the earliest one that opens a user text turn is preferred, else the
    earliest safe point. The first dialogue turn is never taken into the tail, so
    there is always something left to summarise. ``start`` itself when nothing
    more fits.
    """
    first = next((i for i, m in enumerate(head) if not dialects.is_system(m)), len(head))
    used = 0
    best_any = best_user = start
    index = start
    while index > first + 1:
        index -= 1
        message = head[index]
        if dialects.is_system(message):
            continue
        used += size(message)
        if used > budget:
            break
        if dialects.continues(head[index - 1], message):  # index > first >= 0
            continue  # inside a turn: not a place to cut (one look back, not a walk)
        kind = dialects.kind(message)
        if kind in (dialects.Kind.RESULTS, dialects.Kind.RESULT):
            continue
        best_any = index
        if kind is dialects.Kind.USER:
            best_user = index
    return best_user if best_user < start else best_any
