"""Anthropic Messages: ``tool_use`` and ``tool_result`` blocks in a message's ``content``.

Blocks are read in a message of any role, as the specification reads them; a
message holding ``tool_result`` blocks is a tool-result unit by itself. What
every role message shares (the blocks, the role rules) is in ``_content``; the
first registered dialect, this one reads every message no other dialect claims.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from bareagent_compact import images
from bareagent_compact.dialects._common import Kind, Parts, Slot, Unpaired
from bareagent_compact.dialects._content import (
    TOOL_RESULT,
    TOOL_USE,
    block_slot,
    has_tool_result_block,
    holds_call,
    render_content,
    role_continues,
    role_kind,
)
from bareagent_compact.dialects._content import block_calls as calls
from bareagent_compact.dialects._content import block_result_slots as result_slots
from bareagent_compact.dialects._content import block_results as results
from bareagent_compact.dialects._content import rewrite_blocks as rewrite_unpaired
from bareagent_compact.protocols import Message

__all__ = [
    "BLOCK_PARTS",
    "DIALECT",
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


class _Anthropic:
    """The Anthropic dialect: plain role messages, read by their blocks."""

    __slots__ = ()

    name: Final = "anthropic"
    block_parts: Final = BLOCK_PARTS
    parts_key: Final = None
    item_types: Final = frozenset[str]()
    any_item: Final = False
    roles: Final = frozenset[str]()  # the first dialect: what no other claims is its
    keys: Final = ()

    kind = staticmethod(role_kind)

    def continues(
        self, previous: Message, message: Message, kind: Callable[[Message], Kind]
    ) -> bool:
        return role_continues(previous, message, kind)

    calls = staticmethod(calls)
    results = staticmethod(results)
    result_slots = staticmethod(result_slots)

    def own_result_slot(self, message: Message) -> Slot | None:
        return None

    def render(self, message: Message, names: dict[str, str]) -> str:
        return render_content(message.get("content"), names)

    def add_parts(self, parts: Parts, message: Message) -> None:
        return None

    def rewrite_unpaired(self, message: Message, broken: Mapping[int, Unpaired]) -> bool:
        if broken:
            rewrite_unpaired(message, broken)
        return False


DIALECT: Final = _Anthropic()
"""The Anthropic dialect object."""
