"""Anthropic Messages: ``tool_use`` and ``tool_result`` blocks in a message's ``content``.

Blocks are read in a message of any role, as the specification reads them; a
message holding ``tool_result`` blocks is a tool-result unit by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from bareagent_compact import images
from bareagent_compact.dialects._common import (
    Call,
    Parts,
    Slot,
    Unpaired,
    as_id,
    as_name,
    orphaned_result_text,
    unanswered_call_text,
)
from bareagent_compact.dialects._content import TOOL_RESULT, TOOL_USE, render_block, render_content
from bareagent_compact.protocols import Message

__all__ = [
    "BLOCK_PARTS",
    "TOOL_RESULT",
    "TOOL_USE",
    "block_slot",
    "calls",
    "has_tool_result_block",
    "holds_call",
    "result_slots",
    "results",
    "rewrite_unpaired",
]


def has_tool_result_block(content: Any) -> bool:
    """True when ``content`` is a list holding a ``tool_result`` block."""
    if type(content) is not list:
        return False
    for block in content:  # noqa: SIM110 (a loop: no generator per call on the hot path)
        if type(block) is dict and block.get("type") == TOOL_RESULT:
            return True
    return False


def calls(message: Message) -> list[Call]:
    """The ``tool_use`` blocks of ``message``, in order."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    found: list[Call] = []
    for position, block in enumerate(content):
        if isinstance(block, dict) and block.get("type") == TOOL_USE:
            name = as_name(block.get("name"))
            found.append(Call(as_id(block.get("id")), name, block.get("input", {}), position))
    return found


def results(message: Message) -> list[tuple[int, str | None]]:
    """The ``tool_result`` blocks of ``message``, as ``(position, call id)``."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [
        (position, as_id(block.get("tool_use_id")))
        for position, block in enumerate(content)
        if isinstance(block, dict) and block.get("type") == TOOL_RESULT
    ]


def result_slots(message: Message) -> Iterator[Slot]:
    """Where each ``tool_result`` block of ``message`` keeps its content."""
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == TOOL_RESULT:
                yield block_slot(block)


def block_slot(block: dict[str, Any]) -> Slot:
    """Where one ``tool_result`` block keeps its content."""
    return Slot(block, "content", as_id(block.get("tool_use_id")))


def holds_call(message: Message, position: int, call_id: str | None) -> bool:
    """True when ``content[position]`` is the ``tool_use`` block with id ``call_id``
    (rather than a Chat ``tool_calls`` entry at the same position); the id is
    compared as read (``None`` for one that is not a string, as the call reports it)."""
    content = message.get("content")
    if not isinstance(content, list) or position >= len(content):
        return False
    block = content[position]
    return (
        isinstance(block, dict)
        and block.get("type") == TOOL_USE
        and as_id(block.get("id")) == call_id
    )


def _orphaned_result_blocks(block: dict[str, Any], tool_use_id: str | None) -> list[Any]:
    """What an orphaned ``tool_result`` becomes: a text header, then its own blocks."""
    header = orphaned_result_text(tool_use_id, bool(block.get("is_error")))
    content = block.get("content")
    if isinstance(content, list):
        return [{"type": "text", "text": header}, *content]
    return [{"type": "text", "text": f"{header} {render_content(content, {})}"}]


def rewrite_unpaired(message: Message, broken: Mapping[int, Unpaired]) -> None:
    """Turn the unpaired blocks of ``message`` (by position) into text; the remaining
    ``tool_result`` blocks move to the front, as the API requires."""
    results_kept: list[Any] = []
    others: list[Any] = []
    for position, block in enumerate(message["content"]):
        found = broken.get(position)
        if found is None:
            is_result = isinstance(block, dict) and block.get("type") == TOOL_RESULT
            (results_kept if is_result else others).append(block)
        elif found.kind == "tool_result":
            others.extend(_orphaned_result_blocks(block, found.tool_use_id))
        else:
            text = unanswered_call_text(found.tool_use_id, render_block(block, {}))
            others.append({"type": "text", "text": text})
    # Tool results must open a message; the converted text follows them.
    message["content"] = results_kept + others


def _add_image(parts: Parts, block: dict[str, Any], depth: int) -> None:
    """An ``image`` block: its size read from its base64 ``source``, else the cost of
    the largest image (a URL, a file id)."""
    source = block.get("source")
    data = source.get("data") if isinstance(source, dict) else None
    parts.fixed.append(images.anthropic_image(data))


def _add_document(parts: Parts, block: dict[str, Any], depth: int) -> None:
    """A ``document`` block: a plain-text source as its text, a content source as its
    blocks, a PDF by the size of its data, anything else as one page."""
    source = block.get("source")
    if not isinstance(source, dict):
        parts.fixed.append(images.document_tokens(None))
        return
    source_type = source.get("type")
    if source_type == "text" and isinstance(source.get("data"), str):
        parts.strings.append(source["data"])
    elif source_type == "content":
        parts.add((source.get("content"),), depth + 1)
    else:
        parts.fixed.append(images.document_tokens(source.get("data")))


def _add_thinking(parts: Parts, block: dict[str, Any], depth: int) -> None:
    """A ``thinking`` block: its text (not its signature)."""
    thinking = block.get("thinking")
    if isinstance(thinking, str):
        parts.strings.append(thinking)


def _add_redacted_thinking(parts: Parts, block: dict[str, Any], depth: int) -> None:
    """A ``redacted_thinking`` block: its encrypted ``data``, weighed as text (it grows
    with the thinking it hides)."""
    data = block.get("data")
    if isinstance(data, str):
        parts.strings.append(data)


BLOCK_PARTS: Final[dict[str, Callable[[Parts, dict[str, Any], int], None]]] = {
    "image": _add_image,
    "document": _add_document,
    "thinking": _add_thinking,
    "redacted_thinking": _add_redacted_thinking,
}
"""What the blocks that carry neither ``text`` nor ``content`` weigh, by type."""
