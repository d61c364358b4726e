"""Content as transcript text: a string, a list of blocks or parts, or any other value.

Shared by the dialects: Anthropic blocks (``text``, ``tool_use``, ``tool_result``
...), Chat content parts and Responses ``output_text`` parts all read through it.
"""

from __future__ import annotations

from typing import Any, Final

from bareagent_compact._json import to_json
from bareagent_compact._limits import MAX_DEPTH, too_deep
from bareagent_compact.dialects._common import UNKNOWN_TOOL, Call

TOOL_USE: Final = "tool_use"
"""The block type of an Anthropic tool call."""

TOOL_RESULT: Final = "tool_result"
"""The block type of an Anthropic tool result."""


def tool_name_for(block: dict[str, Any], names: dict[str, str]) -> str:
    """The name of the tool that produced a ``tool_result`` block."""
    tool_use_id = block.get("tool_use_id")
    if isinstance(tool_use_id, str):
        return names.get(tool_use_id, UNKNOWN_TOOL)
    return UNKNOWN_TOOL


def render_content(content: Any, names: dict[str, str], depth: int = 0) -> str:
    """Render a message's (or a tool result's) content as text.

    A string stays as it is, ``None`` is empty, a list renders each block on its
    own line, and any other value becomes JSON text.
    """
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if depth > MAX_DEPTH:
        raise too_deep()
    if isinstance(content, list):
        return "\n".join([render_block(block, names, depth + 1) for block in content])
    return to_json(content)


def render_block(block: Any, names: dict[str, str], depth: int = 0) -> str:
    """Render one content block (see :func:`render_content`)."""
    if not isinstance(block, dict):
        return render_content(block, names, depth)
    if "type" not in block:
        return to_json(block)  # a dict without a type is data, not a block
    block_type = block.get("type")
    if block_type == "text":
        return render_content(block.get("text"), names, depth)
    if block_type == TOOL_USE:
        return f"[tool_use:{block.get('name', UNKNOWN_TOOL)}] {to_json(block.get('input', {}))}"
    if block_type == TOOL_RESULT:
        text = render_content(block.get("content"), names, depth)
        return f"[tool_result:{tool_name_for(block, names)}] {text}"
    if "text" in block:
        return render_content(block.get("text"), names, depth)
    return f"[{block_type}]" if isinstance(block_type, str) else to_json(block)


def render_arguments(arguments: Any) -> str:
    """Tool-call arguments as text: a string (JSON text already) as it is."""
    if isinstance(arguments, str):
        return arguments
    return to_json({} if arguments is None else arguments)


def render_call(call: Call) -> str:
    """One Chat or Responses tool call as a transcript line."""
    return f"[tool_use:{call.name}] {render_arguments(call.arguments)}"
