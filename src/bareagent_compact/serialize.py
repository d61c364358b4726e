"""The readable transcript format sent to the summarising model (SPEC `_serialize`).

Roles become ``[role]`` header lines, tool calls become ``[tool_use:name] {json}``
and tool results ``[tool_result:name] content``, so the model reads a dialogue
with tool semantics rather than raw JSON blocks.
"""

from __future__ import annotations

from typing import Any, Final

from bareagent_compact._json import to_json
from bareagent_compact.protocols import Message
from bareagent_compact.validate import not_a_dict, not_a_list

UNKNOWN_TOOL: Final = "unknown"
"""The tool name shown for a result whose ``tool_use`` is not in the history."""

MAX_DEPTH: Final = 200


def tool_names(messages: list[Message]) -> dict[str, str]:
    """Map every ``tool_use`` block's ``id`` to its ``name`` (SPEC 11.1 step 1)."""
    names: dict[str, str] = {}
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_use":
                block_id = block.get("id")
                if isinstance(block_id, str):
                    names[block_id] = str(block.get("name", UNKNOWN_TOOL))
    return names


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
        raise ValueError(f"message content is nested more than {MAX_DEPTH} levels deep")
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
    if block_type == "tool_use":
        return f"[tool_use:{block.get('name', UNKNOWN_TOOL)}] {to_json(block.get('input', {}))}"
    if block_type == "tool_result":
        text = render_content(block.get("content"), names, depth)
        return f"[tool_result:{tool_name_for(block, names)}] {text}"
    if "text" in block:
        return render_content(block.get("text"), names, depth)
    return f"[{block_type}]" if isinstance(block_type, str) else to_json(block)


def _serialize(messages: list[Message]) -> str:
    """Render a message list as the readable transcript given to the summariser.

    >>> print(_serialize([{"role": "user", "content": "hello"},
    ...                   {"role": "assistant", "content": "hi"}]))
    [user]
    hello
    <BLANKLINE>
    [assistant]
    hi
    """
    if not isinstance(messages, list):
        raise not_a_list(messages)
    names = tool_names(messages)
    # One join over pieces that reference the content strings themselves keeps
    # the peak memory near one copy of the transcript.
    pieces: list[str] = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise not_a_dict(index, message)
        if pieces:
            pieces.append("\n\n")
        pieces.append(f"[{message.get('role')}]\n")
        pieces.append(render_content(message.get("content"), names))
    text = "".join(pieces)
    # Equal to stripping both ends: the text always starts with "[".
    return text.rstrip() if text[-1:].isspace() else text
