"""Clearing old thinking: Anthropic ``thinking``/``redacted_thinking`` blocks and
Responses ``reasoning`` items of assistant turns older than the last N, never
those of the current turn (from the last user input on: the tool loop it
continues needs them back, as both APIs document).

An Anthropic message left with no block keeps one text block,
:data:`CLEARED_TEXT`, since the API refuses empty content.
"""

from __future__ import annotations

from collections.abc import MutableSequence
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact.protocols import Message

THINKING_TYPES: Final = frozenset({"thinking", "redacted_thinking"})
"""Anthropic block types cleared."""

REASONING_TYPE: Final = "reasoning"
"""The Responses item type cleared."""

CLEARED_TEXT: Final = "(thinking cleared)"
"""The text an assistant message keeps when it held only thinking blocks."""


def _last_user_input(messages: MutableSequence[Any]) -> int:
    """The index of the last user input (not tool results) that opens a turn, or -1.
    User text right after tool results (a reminder) continues their turn: the tool
    loop is still the current one (the API merges the two messages)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if not isinstance(message, dict) or dialects.kind(message) is not dialects.Kind.USER:
            continue
        opening = messages[dialects.turn_start(messages, index)]
        if dialects.kind(opening) is dialects.Kind.USER:
            return index
    return -1


def _old_turns(messages: MutableSequence[Any], keep_turns: int) -> list[list[int]]:
    """The assistant turns to clear: past the fixed part, before the last user input,
    and not among the last ``keep_turns`` assistant turns."""
    current = _last_user_input(messages)
    if current < 0:
        return []
    fixed = dialects.fixed_end(messages)
    turns = [
        turn
        for turn in dialects.dialogue_turns(messages)
        if dialects.kind(messages[turn[0]]) is dialects.Kind.ASSISTANT
    ]
    older = turns[: max(len(turns) - keep_turns, 0)]
    return [turn for turn in older if turn[0] >= fixed and turn[-1] < current]


def _clear_blocks(message: Message) -> int:
    """Drop the thinking blocks of one Anthropic message, in place."""
    content = message.get("content")
    if type(content) is not list:
        return 0
    kept = [b for b in content if not (type(b) is dict and b.get("type") in THINKING_TYPES)]
    cleared = len(content) - len(kept)
    if cleared:
        message["content"] = kept or [{"type": "text", "text": CLEARED_TEXT}]
    return cleared


def clear_thinking(messages: MutableSequence[Any], keep_turns: int) -> int:
    """Clear the thinking of assistant turns older than the last ``keep_turns``, in
    place; returns how many blocks and items were removed."""
    cleared = 0
    dropped: list[int] = []
    for turn in _old_turns(messages, keep_turns):
        for index in turn:
            message = messages[index]
            if dialects.typed_item(message) == REASONING_TYPE:
                dropped.append(index)
            elif dialects.typed_item(message) is None:
                cleared += _clear_blocks(message)
    for index in reversed(dropped):
        del messages[index]
    return cleared + len(dropped)
