"""Tool call pairing: find and repair ``tool_use``/``tool_result`` blocks without a partner.

The Anthropic Messages API requires every ``tool_use`` block of an assistant
message to be answered by a ``tool_result`` block in the next message, and every
``tool_result`` to answer a ``tool_use`` of the message just before; otherwise
the request fails with HTTP 400 (consecutive messages of one role are joined
into one turn first, so results may be split over several user messages).
OpenAI's APIs have the same rule for Chat
``tool_calls`` and ``tool`` messages, and for Responses ``function_call`` and
``function_call_output`` items. Compaction can break such a pair by summarising
one half away; these helpers let a caller check a history and fix it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
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


def _is_user(message: Message) -> bool:
    """A ``user`` role message (not a Responses typed item)."""
    return message.get("role") == "user" and dialects.typed_item(message) is None


def _side(message: Message) -> str | None:
    """``"user"`` or ``"assistant"`` for a role message the Messages API joins with
    its neighbours of the same role (an assistant message without Chat
    ``tool_calls``, whose results must follow it at once); else ``None``."""
    if dialects.typed_item(message) is not None:
        return None
    role = message.get("role")
    if role == "user" or (role == "assistant" and "tool_calls" not in message):
        return str(role)
    return None


def api_turns(messages: Sequence[Message]) -> list[list[int]]:
    """The turns of ``messages`` as the APIs read them: :func:`dialects.dialogue_turns`,
    with consecutive turns made only of ``user`` messages, or only of assistant
    messages without Chat ``tool_calls``, joined into one (the Messages API
    combines consecutive messages of one role into a single turn: tool results
    split over several user messages answer the calls before them all)."""
    turns: list[list[int]] = []
    side: str | None = None
    for turn in dialects.dialogue_turns(messages):
        sides = {_side(messages[index]) for index in turn}
        this = sides.pop() if len(sides) == 1 else None
        if this is not None and this == side:
            turns[-1].extend(turn)
        else:
            turns.append(list(turn))
        side = this
    return turns


def leading_results(messages: Sequence[Message], turn: list[int]) -> set[tuple[int, int]]:
    """``(message index, block index)`` of the ``tool_result`` blocks that open a turn
    of ``user`` messages, read as one message: those before its first other block
    or text (the only ones the Messages API takes as the answers of the calls just
    before)."""
    found: set[tuple[int, int]] = set()
    for index in turn:
        content = messages[index].get("content")
        if not isinstance(content, list):
            return found
        for position, block in enumerate(content):
            if not isinstance(block, dict) or block.get("type") != dialects.TOOL_RESULT:
                return found
            found.add((index, position))
    return found


class _Answers(NamedTuple):
    """The results a turn holds, as its calls' partners read them: their ids, and
    (for a turn of ``user`` messages) where the results that count are."""

    ids: set[str]
    where: set[tuple[int, int]] | None


def _answers(messages: Sequence[Message], turn: list[int]) -> _Answers:
    found: set[str] = set()
    if all(_is_user(messages[index]) for index in turn):
        where = leading_results(messages, turn)
        for index, position in where:
            call_id = messages[index]["content"][position].get("tool_use_id")
            if isinstance(call_id, str):
                found.add(call_id)
        return _Answers(found, where)
    for index in turn:
        if dialects.kind(messages[index]) in _RESULT_KINDS:
            found |= dialects.result_ids(messages[index])
    return _Answers(found, None)


def _calls_before(messages: Sequence[Message], turn: list[int] | None) -> set[str]:
    """The ids of the calls an assistant turn makes (empty for another turn)."""
    if turn is None or dialects.kind(messages[turn[0]]) not in _CALL_KINDS:
        return set()
    found: set[str] = set()
    for index in turn:
        found |= dialects.call_ids(messages[index])
    return found


def _turn_orphans(
    messages: Sequence[Message],
    turn: list[int],
    calls_before: set[str],
    answers: _Answers | None,
    counted: set[tuple[int, int]] | None,
) -> Iterator[Orphan]:
    """The orphans of one turn: calls the next turn (``answers``; ``None`` for the
    last turn) does not answer, results no call of the turn before makes or that
    do not open a turn of user messages (``counted``: those that do)."""
    for index in turn:
        message = messages[index]
        for call in dialects.calls(message):
            if answers is not None and call.call_id not in answers.ids:
                yield Orphan("tool_use", index, call.position, call.call_id)
        for position, call_id in dialects.results(message):
            late = counted is not None and (index, position) not in counted
            if late or call_id not in calls_before:
                yield Orphan("tool_result", index, position, call_id)


def _orphans(messages: Sequence[Message]) -> list[Orphan]:
    turns = api_turns(messages)
    held = [_answers(messages, turn) for turn in turns]
    orphans: list[Orphan] = []
    for position, turn in enumerate(turns):
        calls_before = _calls_before(messages, turns[position - 1] if position else None)
        answers = held[position + 1] if position + 1 < len(turns) else None
        orphans += _turn_orphans(messages, turn, calls_before, answers, held[position].where)
    orphans.sort(key=lambda orphan: (orphan.message_index, orphan.block_index))
    return orphans


def find_orphans(messages: Sequence[Any]) -> list[Orphan]:
    """List every tool call or result without its partner, in message order.

    A tool call is paired when the next turn holds a result with its id; a result
    is paired when the turn just before is an assistant turn making that call
    (a turn: one message, or a run of Chat ``tool`` messages or Responses items,
    see :mod:`bareagent_compact.dialects`; consecutive user messages, and
    consecutive assistant messages without Chat ``tool_calls``, are one turn, as
    the Messages API joins them: see :func:`api_turns`). In a turn of user
    messages only the ``tool_result`` blocks before its first other block or text
    count (the API wants them first). System messages in between are
    ignored (APIs take them apart from the dialogue). Tool calls in the last
    turn are not orphans: their results are still to come. SDK objects are read
    as the dicts they stand for; the list is not changed.
    """
    view = plain_view(messages)
    validate_messages(view)
    return _orphans(view)


def _check_rewritable(messages: list[Message], orphans: list[Orphan]) -> None:
    """Raise ``TypeError`` naming the index of a message with an orphaned Chat tool
    call whose ``content`` is neither a string, a list nor ``None`` (the rendering
    of the call cannot join it), before anything is changed."""
    for orphan in orphans:
        message = messages[orphan.message_index]
        content = message.get("content")
        odd = content is not None and not isinstance(content, str | list)
        if odd and orphan.kind == "tool_use" and "tool_calls" in message:
            raise TypeError(
                f"messages[{orphan.message_index}]['content'] must be a str, a list or "
                f"None for its tool calls to be repaired, got {type(content).__name__}"
            )


def _repair_once(messages: list[Message], orphans: list[Orphan]) -> None:
    by_message: dict[int, dict[int, Orphan]] = {}
    for orphan in orphans:
        by_message.setdefault(orphan.message_index, {})[orphan.block_index] = orphan
    moved: set[int] = set()
    for m_index, broken in by_message.items():
        message = messages[m_index]
        to_text = any(orphan.kind == "tool_result" for orphan in broken.values())
        if dialects.rewrite_unpaired(message, broken) or (to_text and _is_user(message)):
            moved.add(id(message))
    if moved:
        _move_after_results(messages, moved)


def _move_after_results(messages: list[Message], moved: set[int]) -> None:
    """Put repaired results after the results they stood among, as an Anthropic
    repair puts its text after the remaining ``tool_result`` blocks: a run of
    results must stay unbroken for its calls to stay paired (and the user
    messages the Messages API joins into one must hold their ``tool_result``
    blocks before any text, so a user message whose result became text goes
    after the result messages that follow it)."""
    index = 0
    while index < len(messages):
        end = index
        while end < len(messages) and (
            id(messages[end]) in moved or dialects.kind(messages[end]) in _RESULT_KINDS
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
    moved to the front as the API requires, and a user message whose result became
    text goes after the result messages that follow it (the turn the API joins
    keeps its results first). In OpenAI histories an orphaned Chat
    tool call leaves ``tool_calls`` and its rendering is appended to the
    message's text; an orphaned ``tool`` message or Responses result becomes a
    ``user`` message with the same header and its content; an orphaned Responses
    call becomes an ``assistant`` message with its rendering. SDK objects are
    first turned into plain dicts, and a message object listed twice gets a copy
    of its own at its second place. Messages without orphans are not touched.
    Returns the number of calls and results rewritten; a second run rewrites nothing.

    Raises ``TypeError`` naming the index, before anything is changed, for what
    :func:`find_orphans` refuses, and for a Chat message with an orphaned call
    whose ``content`` is neither a string, a list nor ``None``.
    """
    plain_messages(messages)
    validate_messages(messages)
    total = 0
    orphans = _orphans(messages)
    if orphans:
        _check_rewritable(messages, orphans)
        _unalias(messages)
    while orphans:
        total += len(orphans)
        _repair_once(messages, orphans)
        orphans = _orphans(messages)
        _check_rewritable(messages, orphans)
    return total
