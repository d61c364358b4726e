"""Tool call pairing: find and repair ``tool_use``/``tool_result`` blocks without a partner.

The Anthropic Messages API requires every ``tool_use`` block of an assistant
message to be answered by a ``tool_result`` block in the next message, and every
``tool_result`` to answer a ``tool_use`` of the message just before; otherwise
the request fails with HTTP 400. OpenAI's APIs have the same rule for Chat
``tool_calls`` and ``tool`` messages, and for Responses ``function_call`` and
``function_call_output`` items. Compaction can break such a pair by summarising
one half away; these helpers let a caller check a history and fix it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal, NamedTuple

from bareagent_compact import dialects
from bareagent_compact.plain import plain_messages, plain_view
from bareagent_compact.protocols import Message
from bareagent_compact.validate import validate_messages


class Orphan(NamedTuple):
    """One unpaired tool call or result: which half it is, where it is, and its call id.

    ``block_index`` is the index of the block in ``content`` (Anthropic), of the
    entry in ``tool_calls`` (a Chat tool call), or 0 for a message that is one
    result or call by itself (a Chat ``tool`` message, a Responses item).
    """

    kind: Literal["tool_use", "tool_result"]
    message_index: int
    block_index: int
    tool_use_id: str | None


_CALL_KINDS: Final = (dialects.Kind.ASSISTANT,)
_RESULT_KINDS: Final = (dialects.Kind.RESULTS, dialects.Kind.RESULT)


def _turn_ids(
    messages: Sequence[Message],
    turn: list[int] | None,
    kinds: tuple[dialects.Kind, ...],
    ids_of: Callable[[Message], set[str]],
) -> set[str]:
    """The ids ``ids_of`` reads in the messages of ``turn``, when its first message is
    one of ``kinds``; empty otherwise (or without a turn)."""
    if turn is None or dialects.kind(messages[turn[0]]) not in kinds:
        return set()
    found: set[str] = set()
    for index in turn:
        found |= ids_of(messages[index])
    return found


def _orphans(messages: Sequence[Message]) -> list[Orphan]:
    turns = dialects.dialogue_turns(messages)
    orphans: list[Orphan] = []
    for position, turn in enumerate(turns):
        previous = turns[position - 1] if position > 0 else None
        following = turns[position + 1] if position + 1 < len(turns) else None
        calls_before = _turn_ids(messages, previous, _CALL_KINDS, dialects.call_ids)
        answers = _turn_ids(messages, following, _RESULT_KINDS, dialects.result_ids)
        for index in turn:
            message = messages[index]
            for call in dialects.calls(message):
                if following is not None and call.call_id not in answers:
                    orphans.append(Orphan("tool_use", index, call.position, call.call_id))
            for result_position, call_id in dialects.results(message):
                if call_id not in calls_before:
                    orphans.append(Orphan("tool_result", index, result_position, call_id))
    orphans.sort(key=lambda orphan: (orphan.message_index, orphan.block_index))
    return orphans


def find_orphans(messages: Sequence[Any]) -> list[Orphan]:
    """List every tool call or result without its partner, in message order.

    A tool call is paired when the next turn holds a result with its id; a result
    is paired when the turn just before is an assistant turn making that call
    (a turn: one message, or a run of Chat ``tool`` messages or Responses items,
    see :mod:`bareagent_compact.dialects`). System messages in between are
    ignored (APIs take them apart from the dialogue). Tool calls in the last
    turn are not orphans: their results are still to come. SDK objects are read
    as the dicts they stand for; the list is not changed.
    """
    view = plain_view(messages)
    validate_messages(view)
    return _orphans(view)


def _repair_once(messages: list[Message], orphans: list[Orphan]) -> None:
    by_message: dict[int, dict[int, Orphan]] = {}
    for orphan in orphans:
        by_message.setdefault(orphan.message_index, {})[orphan.block_index] = orphan
    moved: set[int] = set()
    for m_index, broken in by_message.items():
        message = messages[m_index]
        if dialects.rewrite_unpaired(message, broken):
            moved.add(id(message))
    if moved:
        _move_after_results(messages, moved)


def _move_after_results(messages: list[Message], moved: set[int]) -> None:
    """Put repaired results after the results they stood among, as an Anthropic
    repair puts its text after the remaining ``tool_result`` blocks: a run of
    results must stay unbroken for its calls to stay paired."""
    index = 0
    while index < len(messages):
        end = index
        while end < len(messages) and (
            id(messages[end]) in moved or dialects.kind(messages[end]) is dialects.Kind.RESULT
        ):
            end += 1
        if end - index > 1:
            segment = messages[index:end]
            messages[index:end] = [m for m in segment if id(m) not in moved] + [
                m for m in segment if id(m) in moved
            ]
        index = max(end, index + 1)


def _unalias(messages: list[Message]) -> None:
    """Give every repeated message object after its first place a copy of its own,
    so that a repair computed for one place is applied to that place only."""
    seen: set[int] = set()
    for index, message in enumerate(messages):
        if id(message) in seen:
            copied = dict(message)
            for key in dialects.NESTED_KEYS:
                if isinstance(copied.get(key), list):
                    copied[key] = list(copied[key])
            messages[index] = copied
        else:
            seen.add(id(message))


def repair_tool_pairs(messages: list[Any]) -> int:
    """Turn every orphan (see :func:`find_orphans`) into plain content, in place.

    Nothing is dropped and nothing is invented. An orphaned Anthropic
    ``tool_use`` becomes a text block with its transcript rendering
    (``[tool_use:bash] {...}``); an orphaned ``tool_result`` a text block naming
    the call id (and ``error`` when ``is_error`` was set) followed by its content:
    a string result inline, a list result's blocks (images included) as they
    were. In a message that had orphans, the remaining ``tool_result`` blocks are
    moved to the front as the API requires. In OpenAI histories an orphaned Chat
    tool call leaves ``tool_calls`` and its rendering is appended to the
    message's text; an orphaned ``tool`` message or Responses result becomes a
    ``user`` message with the same header and its content; an orphaned Responses
    call becomes an ``assistant`` message with its rendering. SDK objects are
    first turned into plain dicts, and a message object listed twice gets a copy
    of its own at its second place. Messages without orphans are not touched.
    Returns the number of calls and results rewritten; a second run rewrites nothing.
    """
    plain_messages(messages)
    validate_messages(messages)
    total = 0
    orphans = _orphans(messages)
    if orphans:
        _unalias(messages)
    while orphans:
        total += len(orphans)
        _repair_once(messages, orphans)
        orphans = _orphans(messages)
    return total
