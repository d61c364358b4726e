"""Pydantic AI ``ModelMessage`` objects read as Anthropic Messages dicts.

Each message becomes one dict or more (a request's system prompt parts become
system messages of their own, so that compaction keeps them), and every block
remembers the part it came from: :class:`Converted` holds that map, so that the
messages compaction did not change go back as the very objects they were.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pydantic_ai import messages as pm

Origin = tuple[int, int, int | None]
"""Where a block came from: the message's index, the part's index in its ``parts``,
and the item's index in a ``UserPromptPart``'s sequence content (else ``None``)."""


@dataclass
class Source:
    """What one produced dict stands for: its message and, per block, the part."""

    message: int
    blocks: list[Origin] = field(default_factory=list)
    """One origin per block of a list content; one origin for a ``str`` content."""


@dataclass
class Converted:
    """The dicts of a list of ``ModelMessage`` and where each came from."""

    messages: list[pm.ModelMessage]
    dicts: list[dict[str, Any]] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    tool_names: dict[str, str] = field(default_factory=dict)
    """Tool call ids to tool names, for a result the library writes anew."""

    def add(self, message: dict[str, Any], source: Source) -> None:
        self.dicts.append(message)
        self.sources.append(source)


def part_text(part: object) -> str:
    """The text a part stands for when it has no block of its own: its ``content``
    when that is a ``str``, else its kind in brackets."""
    content = getattr(part, "content", None)
    if isinstance(content, str):
        return content
    return f"[{getattr(part, 'part_kind', type(part).__name__)}]"


def _tool_input(part: pm.ToolCallPart) -> dict[str, Any]:
    """The call's arguments as a dict (arguments that are no JSON object are kept as
    their text under ``"args"``)."""
    try:
        return part.args_as_dict()
    except (ValueError, TypeError, AssertionError):
        return {"args": part.args if isinstance(part.args, str) else json.dumps(part.args)}


def _return_text(part: pm.ToolReturnPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return part.model_response_str()


def _retry_text(part: pm.RetryPromptPart) -> str:
    return part.content if isinstance(part.content, str) else part.model_response()


def _user_blocks(part: pm.UserPromptPart, where: tuple[int, int]) -> list[tuple[Any, Origin]]:
    items = [part.content] if isinstance(part.content, str) else list(part.content)
    blocks: list[tuple[Any, Origin]] = []
    for k, item in enumerate(items):
        text = item if isinstance(item, str) else f"[{getattr(item, 'kind', 'content')}]"
        item_index = None if isinstance(part.content, str) else k
        blocks.append(({"type": "text", "text": text}, (*where, item_index)))
    return blocks


def request_block(part: pm.ModelRequestPart) -> dict[str, Any]:
    """The block of one request part that is no user prompt."""
    if isinstance(part, pm.ToolReturnPart):
        block: dict[str, Any] = {
            "type": "tool_result", "tool_use_id": part.tool_call_id, "content": _return_text(part)
        }
        if getattr(part, "outcome", "success") != "success":
            block["is_error"] = True
        return block
    if isinstance(part, pm.RetryPromptPart) and part.tool_name is not None:
        return {
            "type": "tool_result", "tool_use_id": part.tool_call_id,
            "content": _retry_text(part), "is_error": True,
        }
    if isinstance(part, pm.RetryPromptPart):
        return {"type": "text", "text": _retry_text(part)}
    return {"type": "text", "text": part_text(part)}


def _add_request(out: Converted, index: int, message: pm.ModelRequest) -> None:
    results: list[tuple[Any, Origin]] = []
    others: list[tuple[Any, Origin]] = []
    for p, part in enumerate(message.parts):
        if isinstance(part, pm.SystemPromptPart):
            out.add({"role": "system", "content": part.content}, Source(index, [(index, p, None)]))
        elif isinstance(part, pm.UserPromptPart):
            others.extend(_user_blocks(part, (index, p)))
        else:
            block = request_block(part)
            kept = results if block["type"] == "tool_result" else others
            kept.append((block, (index, p, None)))
    blocks = results + others  # Anthropic wants a user turn's tool results first
    if not blocks:
        return
    parts = [origin for _, origin in blocks]
    if len(blocks) == 1 and not results and parts[0][2] is None and _is_str_prompt(message, parts):
        out.add({"role": "user", "content": blocks[0][0]["text"]}, Source(index, parts))
        return
    out.add({"role": "user", "content": [block for block, _ in blocks]}, Source(index, parts))


def _is_str_prompt(message: pm.ModelRequest, parts: list[Origin]) -> bool:
    part = message.parts[parts[0][1]]
    return isinstance(part, pm.UserPromptPart) and isinstance(part.content, str)


RESPONSE_BLOCKS: Final = ("text", "thinking", "redacted_thinking", "tool_use")


def response_block(part: pm.ModelResponsePart, tool_names: dict[str, str]) -> dict[str, Any]:
    """The block of one response part (a part of another kind as a text block)."""
    if isinstance(part, pm.TextPart):
        return {"type": "text", "text": part.content}
    if isinstance(part, pm.ThinkingPart):
        if part.id == "redacted_thinking" and part.signature is not None:
            return {"type": "redacted_thinking", "data": part.signature}
        block: dict[str, Any] = {"type": "thinking", "thinking": part.content}
        if part.signature is not None:
            block["signature"] = part.signature
        return block
    if isinstance(part, pm.ToolCallPart):
        tool_names[part.tool_call_id] = part.tool_name
        return {
            "type": "tool_use", "id": part.tool_call_id, "name": part.tool_name,
            "input": _tool_input(part),
        }
    return {"type": "text", "text": part_text(part)}


def to_dicts(messages: Sequence[pm.ModelMessage]) -> Converted:
    """``messages`` as Anthropic Messages dicts, with the map back to their parts.

    A ``ModelRequest`` gives a system message per ``SystemPromptPart`` and one user
    message for its other parts (tool returns and tool retries as ``tool_result``
    blocks first, then the prompt's texts; a lone text prompt as a ``str``); a
    ``ModelResponse`` gives one assistant message of ``thinking``, ``text`` and
    ``tool_use`` blocks. A part of another kind is a text block of its text.
    """
    out = Converted(list(messages))
    for index in range(len(out.messages)):
        add_message(out, index)
    return out


def add_message(out: Converted, index: int) -> None:
    """Append the dicts of ``out.messages[index]`` to ``out``."""
    message = out.messages[index]
    if isinstance(message, pm.ModelRequest):
        _add_request(out, index, message)
    elif isinstance(message, pm.ModelResponse):
        blocks = [response_block(part, out.tool_names) for part in message.parts]
        origins: list[Origin] = [(index, p, None) for p in range(len(message.parts))]
        out.add({"role": "assistant", "content": blocks}, Source(index, origins))
    else:
        raise TypeError(
            f"messages[{index}] must be a Pydantic AI ModelRequest or ModelResponse, "
            f"got {type(message).__name__}"
        )
