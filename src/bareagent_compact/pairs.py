"""Tool call pairing: find and repair ``tool_use``/``tool_result`` blocks without a partner.

Both the Anthropic and the OpenAI APIs reject a request in which a tool result
has no matching tool call before it (HTTP 400), and Anthropic also rejects a tool
call whose result never follows. Compaction can create such orphans by
summarising away one half of a pair; these helpers let a caller check and fix.
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

from bareagent_compact.protocols import Message
from bareagent_compact.serialize import render_block
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


def find_orphans(messages: list[Message]) -> list[Orphan]:
    """List every ``tool_result`` without an earlier ``tool_use`` of the same id, and
    every ``tool_use`` without a later ``tool_result``.

    Tool calls in the last message are not orphans: their results are still to
    come (the agent loop is about to run the tools). Results are listed first
    matching order of appearance, in message order.
    """
    validate_messages(messages)
    result_ids: set[Any] = set()
    for message in messages:
        for block in _blocks(message):
            if _is_block(block, "tool_result"):
                result_ids.add(block.get("tool_use_id"))
    seen_uses: set[Any] = set()
    orphans: list[Orphan] = []
    last = len(messages) - 1
    for m_index, message in enumerate(messages):
        for b_index, block in enumerate(_blocks(message)):
            if _is_block(block, "tool_use"):
                use_id = block.get("id")
                seen_uses.add(use_id)
                if m_index != last and use_id not in result_ids:
                    orphans.append(Orphan("tool_use", m_index, b_index, _as_id(use_id)))
            elif _is_block(block, "tool_result"):
                result_id = block.get("tool_use_id")
                if result_id not in seen_uses:
                    orphans.append(Orphan("tool_result", m_index, b_index, _as_id(result_id)))
    return orphans


def _as_id(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def repair_tool_pairs(messages: list[Message]) -> int:
    """Make every orphan (see :func:`find_orphans`) a plain text block, in place.

    Nothing is dropped and nothing is invented: an orphaned block becomes a
    ``{"type": "text"}`` block holding its transcript rendering (e.g.
    ``[tool_result:unknown] ...`` or ``[tool_use:bash] {...}``) and, for a result,
    the ``tool_use_id`` it referred to. A message whose content was a string is
    never touched. Returns the number of blocks rewritten; running it twice
    rewrites nothing the second time.
    """
    orphans = find_orphans(messages)
    for orphan in orphans:
        content = messages[orphan.message_index]["content"]
        block = content[orphan.block_index]
        text = render_block(block, {})
        if orphan.kind == "tool_result":
            text = f"(orphaned result of tool call {orphan.tool_use_id}) {text}"
        else:
            text = f"(tool call {orphan.tool_use_id} without a result) {text}"
        content[orphan.block_index] = {"type": "text", "text": text}
    return len(orphans)
