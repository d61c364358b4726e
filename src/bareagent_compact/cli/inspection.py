"""What fills a history: estimated tokens by role, by tool, and the largest messages.

Works on the three message shapes: Anthropic (``tool_use`` / ``tool_result``
blocks), OpenAI Chat (``tool_calls`` and ``role: "tool"`` messages) and OpenAI
Responses (``function_call`` / ``function_call_output`` items).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact.protocols import Message
from bareagent_compact.tokens import estimate_tokens

__all__ = ["Breakdown", "MessageSize", "RoleSize", "ToolSize", "breakdown", "message_label"]

UNKNOWN_TOOL: Final = dialects.UNKNOWN_TOOL
LARGEST: Final = 10


@dataclass(slots=True)
class RoleSize:
    """The messages of one role (or item type) and their estimated tokens."""

    messages: int = 0
    tokens: int = 0


@dataclass(slots=True)
class ToolSize:
    """One tool: how often it was called, how many results came back, their tokens."""

    calls: int = 0
    results: int = 0
    call_tokens: int = 0
    result_tokens: int = 0

    @property
    def tokens(self) -> int:
        return self.call_tokens + self.result_tokens


@dataclass(frozen=True, slots=True)
class MessageSize:
    """One message: where it is, who wrote it, how large it is, how it begins."""

    index: int
    label: str
    tokens: int
    preview: str


@dataclass(slots=True)
class Breakdown:
    """The estimate of a whole history and of its parts."""

    messages: int
    tokens: int
    by_role: dict[str, RoleSize] = field(default_factory=dict)
    by_tool: dict[str, ToolSize] = field(default_factory=dict)
    largest: list[MessageSize] = field(default_factory=list)


def _tokens(part: Any) -> int:
    """The estimate of any content part (a string, blocks, a JSON value)."""
    return estimate_tokens([{"role": "part", "content": part}])


def message_label(message: Message) -> str:
    """The role, or for a Responses item without one, its type (``function_call``, ...)."""
    role = message.get("role")
    if isinstance(role, str):
        return role
    kind = message.get("type")
    return kind if isinstance(kind, str) else "?"


def _tool_parts(message: Message) -> Iterator[tuple[str, str | None, str | None, Any]]:
    """Each tool call or result in ``message``: (kind, call id, tool name, payload).

    ``kind`` is ``"call"`` or ``"result"``; the name of a result is ``None`` (found
    from its call). The payload is the part whose tokens are the tool's.
    """
    for call in dialects.calls(message):
        yield "call", call.call_id, call.name, call.arguments
    content = message.get("content")
    for position, call_id in dialects.results(message):
        if dialects.kind(message) is dialects.Kind.RESULT:
            payload = message.get("output") if "output" in message else content
        else:
            block = content[position] if isinstance(content, list) else {}
            payload = block.get("content") if isinstance(block, dict) else None
        yield "result", call_id, None, payload


def message_tokens(message: Message) -> int:
    """The estimate of one message (tool calls and results outside ``content`` included)."""
    return estimate_tokens([message])


def _preview(message: Message, width: int = 60) -> str:
    text = " ".join(_preview_text(message).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _preview_text(message: Message) -> str:
    """The text of ``message``, or its tool calls, results and text blocks in brief."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    pieces = [
        f"[{kind}:{name}]" if kind == "call" else f"[result] {payload!s}"
        for kind, _, name, payload in _tool_parts(message)
    ]
    pieces += _text_blocks(content)
    return " ".join(str(p) for p in pieces) or str(content if content is not None else "")


def _text_blocks(content: Any) -> list[Any]:
    """The ``text`` of each block of a content list that has one."""
    if not isinstance(content, list):
        return []
    return [b["text"] for b in content if isinstance(b, dict) and b.get("text")]


def breakdown(messages: list[Message], largest: int = LARGEST) -> Breakdown:
    """Estimate ``messages`` as a whole, by role, by tool, and list the ``largest`` ones."""
    names = dialects.tool_names(messages)
    result = Breakdown(messages=len(messages), tokens=estimate_tokens(messages))
    sizes: list[MessageSize] = []
    for index, message in enumerate(messages):
        label = message_label(message)
        tokens = message_tokens(message)
        role = result.by_role.setdefault(label, RoleSize())
        role.messages += 1
        role.tokens += tokens
        sizes.append(MessageSize(index, label, tokens, _preview(message)))
        for kind, call_id, name, payload in _tool_parts(message):
            if kind == "call":
                tool = result.by_tool.setdefault(name or UNKNOWN_TOOL, ToolSize())
                tool.calls += 1
                tool.call_tokens += _tokens([name, payload])
            else:
                owner = names.get(call_id, UNKNOWN_TOOL) if call_id else UNKNOWN_TOOL
                tool = result.by_tool.setdefault(owner, ToolSize())
                tool.results += 1
                tool.result_tokens += _tokens(payload)
    sizes.sort(key=lambda s: (-s.tokens, s.index))
    result.largest = sizes[:largest]
    return result
