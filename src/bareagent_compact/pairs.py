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

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple

from bareagent_compact import dialects
from bareagent_compact.plain import plain_messages, plain_view
from bareagent_compact.protocols import Message
from bareagent_compact.serialize import render_block, render_content, render_message
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


def _orphans(messages: Sequence[Message]) -> list[Orphan]:
    turns = dialects.dialogue_turns(messages)
    orphans: list[Orphan] = []
    results_kinds = (dialects.Kind.RESULTS, dialects.Kind.RESULT)
    for position, turn in enumerate(turns):
        calls_before: set[str] = set()
        if position > 0:
            previous = turns[position - 1]
            if dialects.kind(messages[previous[0]]) is dialects.Kind.ASSISTANT:
                for index in previous:
                    calls_before |= dialects.call_ids(messages[index])
        answers: set[str] = set()
        has_next = position + 1 < len(turns)
        if has_next:
            following = turns[position + 1]
            if dialects.kind(messages[following[0]]) in results_kinds:
                for index in following:
                    answers |= dialects.result_ids(messages[index])
        for index in turn:
            message = messages[index]
            for call in dialects.calls(message):
                if has_next and call.call_id not in answers:
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


def _orphaned_result_text(content: Any, tool_use_id: str | None, is_error: bool) -> str:
    status = ", error" if is_error else ""
    return f"(result of tool call {tool_use_id}{status}, whose call is not in the history)"


def _orphaned_result_blocks(block: dict[str, Any], tool_use_id: str | None) -> list[Any]:
    """What an orphaned ``tool_result`` becomes: a text header, then its own blocks."""
    header = _orphaned_result_text(None, tool_use_id, bool(block.get("is_error")))
    content = block.get("content")
    if isinstance(content, list):
        return [{"type": "text", "text": header}, *content]
    return [{"type": "text", "text": f"{header} {render_content(content, {})}"}]


def _call_text(call_id: str | None, rendering: str) -> str:
    return f"(tool call {call_id} without a result) {rendering}"


def _repair_blocks(message: Message, broken: dict[int, Orphan]) -> None:
    """Anthropic: orphaned blocks become text; remaining results move to the front."""
    results: list[Any] = []
    others: list[Any] = []
    for b_index, block in enumerate(message["content"]):
        found = broken.get(b_index)
        if found is None:
            (results if _is_block(block, "tool_result") else others).append(block)
        elif found.kind == "tool_result":
            others.extend(_orphaned_result_blocks(block, found.tool_use_id))
        else:
            text = _call_text(found.tool_use_id, render_block(block, {}))
            others.append({"type": "text", "text": text})
    # Tool results must open a message; the converted text follows them.
    message["content"] = results + others


def _repair_chat_calls(message: Message, broken: dict[int, Orphan]) -> None:
    """Chat: orphaned entries leave ``tool_calls`` and are appended to the text."""
    kept: list[Any] = []
    texts: list[str] = []
    for position, call in enumerate(message["tool_calls"]):
        found = broken.get(position)
        if found is None:
            kept.append(call)
            continue
        rendering = render_message({"role": "assistant", "tool_calls": [call]}, {})
        texts.append(_call_text(found.tool_use_id, rendering))
    content = message.get("content")
    if isinstance(content, list):
        message["content"] = [*content, *({"type": "text", "text": t} for t in texts)]
    else:
        message["content"] = "\n".join([*([content] if content else []), *texts])
    if kept:
        message["tool_calls"] = kept
    else:
        del message["tool_calls"]


def _replace(message: Message, new: Message) -> None:
    message.clear()
    message.update(new)


def _repair_once(messages: list[Message], orphans: list[Orphan]) -> None:
    by_message: dict[int, dict[int, Orphan]] = {}
    for orphan in orphans:
        by_message.setdefault(orphan.message_index, {})[orphan.block_index] = orphan
    moved: set[int] = set()
    for m_index, broken in by_message.items():
        message = messages[m_index]
        item_type = message.get("type")
        if isinstance(item_type, str) and item_type != "message":
            orphan = broken[0]
            if orphan.kind == "tool_result":
                header = _orphaned_result_text(None, orphan.tool_use_id, False)
                text = f"{header} {render_content(message.get('output'), {})}"
                _replace(message, {"role": "user", "content": text})
                moved.add(id(message))
            else:
                # An assistant message item stays part of the assistant turn.
                text = _call_text(orphan.tool_use_id, render_message(message, {}))
                part = {"type": "output_text", "text": text, "annotations": []}
                _replace(message, {"type": "message", "role": "assistant", "content": [part]})
        elif message.get("role") == "tool":
            orphan = broken[0]
            header = _orphaned_result_text(None, orphan.tool_use_id, False)
            text = f"{header} {render_content(message.get('content'), {})}"
            _replace(message, {"role": "user", "content": text})
            moved.add(id(message))
        else:
            blocks = {i: o for i, o in broken.items() if _in_content(message, o)}
            chat = {i: o for i, o in broken.items() if not _in_content(message, o)}
            if blocks:
                _repair_blocks(message, blocks)
            if chat:
                _repair_chat_calls(message, chat)
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


def _in_content(message: Message, orphan: Orphan) -> bool:
    """True when the orphan is a block of ``content`` (not a Chat ``tool_calls`` entry)."""
    if orphan.kind == "tool_result":
        return True
    content = message.get("content")
    return (
        isinstance(content, list)
        and orphan.block_index < len(content)
        and _is_block(content[orphan.block_index], "tool_use")
        and content[orphan.block_index].get("id") == orphan.tool_use_id
    )


def _is_block(block: Any, block_type: str) -> bool:
    return isinstance(block, dict) and block.get("type") == block_type


def _unalias(messages: list[Message]) -> None:
    """Give every repeated message object after its first place a copy of its own,
    so that a repair computed for one place is applied to that place only."""
    seen: set[int] = set()
    for index, message in enumerate(messages):
        if id(message) in seen:
            copied = dict(message)
            for key in ("content", "tool_calls"):
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
