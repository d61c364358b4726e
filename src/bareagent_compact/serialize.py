"""The readable transcript format sent to the summarising model (SPEC `_serialize`).

Roles become ``[role]`` header lines, tool calls become ``[tool_use:name] {json}``
and tool results ``[tool_result:name] content``, so the model reads a dialogue
with tool semantics rather than raw JSON blocks.
"""

from __future__ import annotations

import re
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact._limits import MAX_DEPTH
from bareagent_compact.dialects import (
    UNKNOWN_TOOL,
    render_block,
    render_content,
    render_message,
    tool_name_for,
    tool_names,
)
from bareagent_compact.plain import plain_view
from bareagent_compact.protocols import Message
from bareagent_compact.validate import not_a_dict, not_a_list

__all__ = [
    "MAX_DEPTH",
    "UNKNOWN_TOOL",
    "_serialize",
    "render_block",
    "render_content",
    "render_message",
    "tool_name_for",
    "tool_names",
]

_BREAKS: Final = r"\n\r\x0b\x0c\x1c-\x1e\x85\u2028\u2029"  # every break str.splitlines knows
_ROLE_LINE_RE: Final = re.compile(
    rf"\[(?<![^{_BREAKS}]\[)(?:system|developer|user|assistant|tool)\](?![^{_BREAKS}])"
)


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
    messages = _plain_dicts(messages)
    names = tool_names(messages)
    # One join over pieces that reference the content strings themselves keeps
    # the peak memory near one copy of the transcript.
    pieces: list[str] = []
    previous: Message | None = None
    for message in messages:
        if previous is None:
            pieces.append(f"[{dialects.role_label(message)}]\n")
        elif message.get("role") != "user" and dialects.continues(previous, message):
            pieces.append("\n")  # the same speaker goes on; each user message is labelled
        else:
            pieces.append(f"\n\n[{dialects.role_label(message)}]\n")
        pieces.append(_escape_role_lines(render_message(message, names)))
        previous = message
    return _joined_stripped(pieces)


def _plain_dicts(messages: Any) -> list[Any]:
    """``messages`` checked to be a list of dicts, SDK objects read as the dicts they
    stand for."""
    if not isinstance(messages, list):
        raise not_a_list(messages)
    view = plain_view(messages)
    for index, message in enumerate(view):
        if not isinstance(message, dict):
            raise not_a_dict(index, message)
    return view


def _joined_stripped(pieces: list[str]) -> str:
    """The pieces joined, with whitespace stripped at the end.

    Equal to stripping both ends of the joined text (it always starts with "["),
    but only the last pieces are stripped, so the transcript is copied once.
    """
    while pieces and (not pieces[-1] or pieces[-1].isspace()):
        pieces.pop()
    if pieces:
        pieces[-1] = pieces[-1].rstrip()
    return "".join(pieces)
