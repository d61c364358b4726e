"""The readable transcript format sent to the summarising model (SPEC `_serialize`).

Roles become ``[role]`` header lines, tool calls become ``[tool_use:name] {json}``
and tool results ``[tool_result:name] content``, so the model reads a dialogue
with tool semantics rather than raw JSON blocks.
"""

from __future__ import annotations

import re
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact._json import to_json
from bareagent_compact.dialects import UNKNOWN_TOOL, tool_names
from bareagent_compact.plain import plain_view
from bareagent_compact.protocols import Message
from bareagent_compact.validate import not_a_dict, not_a_list

__all__ = [
    "UNKNOWN_TOOL",
    "_serialize",
    "render_block",
    "render_content",
    "render_message",
    "tool_name_for",
    "tool_names",
]

MAX_DEPTH: Final = 200

_BREAKS: Final = r"\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029"  # every break str.splitlines knows
_ROLE_LINE_RE: Final = re.compile(
    rf"\[(?<![^{_BREAKS}]\[)(?:system|developer|user|assistant|tool)\](?![^{_BREAKS}])"
)


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


def _render_arguments(arguments: Any) -> str:
    if isinstance(arguments, str):
        return arguments
    return to_json({} if arguments is None else arguments)


def render_message(message: Message, names: dict[str, str]) -> str:
    """Render one message's part of its turn: content, tool calls and results.

    Chat tool calls follow the message's text as ``[tool_use:name] {arguments}``,
    Chat ``tool`` messages and Responses results read ``[tool_result:name] ...``,
    and Responses items render what they carry, so a turn reads the same in
    every dialect.
    """
    item_type = message.get("type")
    if isinstance(item_type, str) and item_type != "message":
        if item_type in dialects.RESULT_ITEM_TYPES:
            call_id = message.get("call_id")
            name = names.get(call_id, UNKNOWN_TOOL) if isinstance(call_id, str) else UNKNOWN_TOOL
            return f"[tool_result:{name}] {render_content(message.get('output'), names)}"
        found = dialects.calls(message)
        if found:
            return "\n".join(
                f"[tool_use:{call.name}] {_render_arguments(call.arguments)}" for call in found
            )
        return render_block(message, names)
    if message.get("role") == "tool":
        call_id = message.get("tool_call_id")
        name = names.get(call_id, UNKNOWN_TOOL) if isinstance(call_id, str) else UNKNOWN_TOOL
        return f"[tool_result:{name}] {render_content(message.get('content'), names)}"
    text = render_content(message.get("content"), names)
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list) and tool_calls:
        lines = [] if message.get("content") is None else [text]
        for call in dialects.calls({"tool_calls": tool_calls}):
            lines.append(f"[tool_use:{call.name}] {_render_arguments(call.arguments)}")
        return "\n".join(lines)
    return text


def _escape_role_lines(text: str) -> str:
    """``text`` with a backslash before every line that reads exactly like a role
    header (``[system]``, ``[developer]``, ``[user]``, ``[assistant]``, ``[tool]``),
    so that content (tool output above all) cannot forge a turn of its own."""
    if _ROLE_LINE_RE.search(text) is None:  # the common case allocates nothing
        return text
    return _ROLE_LINE_RE.sub(r"\\\g<0>", text)


def _serialize(messages: list[Any]) -> str:
    """Render a message list as the readable transcript given to the summariser.

    Each turn gets a ``[role]`` header line (tool results read as ``user`` turns,
    in every dialect), then its content; turns are separated by a blank line.

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
    messages = plain_view(messages)  # SDK objects read as the dicts they stand for
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise not_a_dict(index, message)
    names = tool_names(messages)
    # One join over pieces that reference the content strings themselves keeps
    # the peak memory near one copy of the transcript.
    pieces: list[str] = []
    previous: Message | None = None
    for message in messages:
        if previous is not None and dialects.continues(previous, message):
            pieces.append("\n")
        else:
            if pieces:
                pieces.append("\n\n")
            pieces.append(f"[{dialects.role_label(message)}]\n")
        pieces.append(_escape_role_lines(render_message(message, names)))
        previous = message
    # Equal to stripping both ends of the joined text (it always starts with "["),
    # but only the last pieces are stripped, so the transcript is copied once.
    while pieces and (not pieces[-1] or pieces[-1].isspace()):
        pieces.pop()
    if pieces:
        pieces[-1] = pieces[-1].rstrip()
    return "".join(pieces)
