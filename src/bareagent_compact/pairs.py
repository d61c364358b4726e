"""Tool call pairing: find and repair ``tool_use``/``tool_result`` blocks without a partner.

The Anthropic Messages API requires every ``tool_use`` block of an assistant
message to be answered by a ``tool_result`` block in the next message, and every
``tool_result`` to answer a ``tool_use`` of the message just before; otherwise
the request fails with HTTP 400. Compaction can break such a pair by summarising
one half away; these helpers let a caller check a history and fix it.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from bareagent_compact.protocols import Message
from bareagent_compact.serialize import render_block, render_content
from bareagent_compact.validate import validate_messages


class Orphan(NamedTuple):
    """One unpaired block: which half it is, where it is, and its tool call id."""

    kind: Literal["tool_use", "tool_result"]
    message_index: int
    block_index: int
    tool_use_id: str | None


def _blocks(message: Message) -> list[Any]:
    content = message.get("content")
    return content if isinstance(content, list) else []


def _is_block(block: Any, block_type: str) -> bool:
    return isinstance(block, dict) and block.get("type") == block_type


def tool_ids(message: Message | None, block_type: str, key: str) -> set[str]:
    """The string ids (``block[key]``) of every ``block_type`` block of ``message``."""
    if message is None:
        return set()
    return {
        b[key] for b in _blocks(message) if _is_block(b, block_type) and isinstance(b.get(key), str)
    }


def _as_id(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def find_orphans(messages: list[Message]) -> list[Orphan]:
    """List every tool block without its partner, in message order.

    A ``tool_use`` is paired when the next non-system message is a ``user``
    message holding a ``tool_result`` with its id; a ``tool_result`` is paired
    when the previous non-system message is an ``assistant`` message holding a
    ``tool_use`` with its id. System messages in between are ignored (APIs take
    them apart from the dialogue). Tool calls in the last non-system message are
    not orphans: their results are still to come.
    """
    validate_messages(messages)
    dialogue = [i for i, m in enumerate(messages) if m["role"] != "system"]
    orphans: list[Orphan] = []
    for position, m_index in enumerate(dialogue):
        previous = messages[dialogue[position - 1]] if position > 0 else None
        following = messages[dialogue[position + 1]] if position + 1 < len(dialogue) else None
        calls = tool_ids(previous, "tool_use", "id") if _role(previous) == "assistant" else set()
        answers = (
            tool_ids(following, "tool_result", "tool_use_id")
            if _role(following) == "user"
            else set()
        )
        for b_index, block in enumerate(_blocks(messages[m_index])):
            if _is_block(block, "tool_use"):
                use_id = _as_id(block.get("id"))
                if following is not None and use_id not in answers:
                    orphans.append(Orphan("tool_use", m_index, b_index, use_id))
            elif _is_block(block, "tool_result"):
                result_id = _as_id(block.get("tool_use_id"))
                if result_id not in calls:
                    orphans.append(Orphan("tool_result", m_index, b_index, result_id))
    return orphans


def _role(message: Message | None) -> Any:
    return None if message is None else message.get("role")


def _orphaned_result_blocks(block: dict[str, Any], tool_use_id: str | None) -> list[Any]:
    """What an orphaned ``tool_result`` becomes: a text header, then its own blocks."""
    status = ", error" if block.get("is_error") else ""
    header = f"(result of tool call {tool_use_id}{status}, whose call is not in the history)"
    content = block.get("content")
    if isinstance(content, list):
        return [{"type": "text", "text": header}, *content]
    return [{"type": "text", "text": f"{header} {render_content(content, {})}"}]


def _repair_once(messages: list[Message], orphans: list[Orphan]) -> None:
    by_message: dict[int, dict[int, Orphan]] = {}
    for orphan in orphans:
        by_message.setdefault(orphan.message_index, {})[orphan.block_index] = orphan
    for m_index, broken in by_message.items():
        results: list[Any] = []
        others: list[Any] = []
        for b_index, block in enumerate(messages[m_index]["content"]):
            found = broken.get(b_index)
            if found is None:
                (results if _is_block(block, "tool_result") else others).append(block)
            elif found.kind == "tool_result":
                others.extend(_orphaned_result_blocks(block, found.tool_use_id))
            else:
                text = f"(tool call {found.tool_use_id} without a result) {render_block(block, {})}"
                others.append({"type": "text", "text": text})
        # Tool results must open a message; the converted text follows them.
        messages[m_index]["content"] = results + others


def repair_tool_pairs(messages: list[Message]) -> int:
    """Turn every orphan (see :func:`find_orphans`) into plain content, in place.

    Nothing is dropped and nothing is invented. An orphaned ``tool_use`` becomes a
    text block with its transcript rendering (``[tool_use:bash] {...}``). An
    orphaned ``tool_result`` becomes a text block naming the call id (and
    ``error`` when ``is_error`` was set) followed by its content: a string result
    inline, a list result's blocks (images included) as they were. In a message
    that had orphans, the remaining ``tool_result`` blocks are moved to the front
    as the API requires. Messages without orphans are not touched. Returns the
    number of blocks rewritten; a second run rewrites nothing.
    """
    total = 0
    orphans = find_orphans(messages)
    while orphans:
        total += len(orphans)
        _repair_once(messages, orphans)
        orphans = find_orphans(messages)
    return total
