"""What every role message shares: content as transcript text, and the ``tool_use``
and ``tool_result`` blocks of its ``content``.

Shared by the dialects: Anthropic blocks (``text``, ``tool_use``, ``tool_result``
...), Chat content parts and Responses ``output_text`` parts all read through it.
Blocks are read in a role message of any dialect, as the specification reads
them (a Chat assistant message may hold ``tool_use`` blocks beside its
``tool_calls``); a message holding ``tool_result`` blocks is a tool-result unit
by itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from bareagent_compact._json import to_json
from bareagent_compact._limits import MAX_DEPTH, too_deep
from bareagent_compact.dialects._common import (
    MESSAGE_TYPE,
    UNKNOWN_TOOL,
    Call,
    Kind,
    Slot,
    Unpaired,
    as_id,
    as_name,
    orphaned_result_text,
    typed_item,
    unanswered_call_text,
)
from bareagent_compact.protocols import Message

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


# -- the tool blocks of a role message ---------------------------------------------


def has_tool_result_block(content: Any) -> bool:
    """True when ``content`` is a list holding a ``tool_result`` block."""
    if type(content) is not list:
        return False
    for block in content:  # noqa: SIM110 (a loop: no generator per call on the hot path)
        if type(block) is dict and block.get("type") == TOOL_RESULT:
            return True
    return False


def block_calls(message: Message) -> list[Call]:
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


def block_results(message: Message) -> list[tuple[int, str | None]]:
    """The ``tool_result`` blocks of ``message``, as ``(position, call id)``."""
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [
        (position, as_id(block.get("tool_use_id")))
        for position, block in enumerate(content)
        if isinstance(block, dict) and block.get("type") == TOOL_RESULT
    ]


def block_result_slots(message: Message) -> Iterator[Slot]:
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


def rewrite_blocks(message: Message, broken: Mapping[int, Unpaired]) -> None:
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


# -- what a role message is, and which turn it is part of --------------------------

_ROLE_KINDS: Final[dict[Any, Kind]] = {
    "assistant": Kind.ASSISTANT,
    "system": Kind.SYSTEM,
    "developer": Kind.SYSTEM,
    "tool": Kind.RESULT,
}
"""What a role message other than ``user`` is; another role (e.g. a legacy
``function`` message) is not user input, so it counts as the assistant's."""

_INPUT_KINDS: Final = frozenset({Kind.USER, Kind.RESULTS, Kind.RESULT})


def role_kind(message: Message) -> Kind:
    """What a role message (or a Responses ``message`` item) is, by its role and blocks."""
    role = message.get("role")
    if role == "user":
        content = message.get("content")
        return Kind.RESULTS if has_tool_result_block(content) else Kind.USER
    return _ROLE_KINDS.get(role, Kind.ASSISTANT)


def role_continues(previous: Message, message: Message, kind: Callable[[Message], Kind]) -> bool:
    """True when the role message ``message`` belongs to the turn of ``previous``
    (a message of any dialect, whose kind ``kind`` says).

    A user message continues user input or tool results before it: one turn (the
    APIs merge them), such as a reminder an agent sends after the user's request.
    An assistant Responses ``message`` item continues an item the model produced
    (not a result) or an assistant ``message`` item.
    """
    role = message.get("role")
    if role == "user":
        plain = message.get("type") in (None, MESSAGE_TYPE)
        return plain and kind(previous) in _INPUT_KINDS and kind(message) is Kind.USER
    if role == "assistant" and message.get("type") == MESSAGE_TYPE:
        if typed_item(previous) is not None:
            return kind(previous) is Kind.ASSISTANT
        return previous.get("type") == MESSAGE_TYPE and previous.get("role") == "assistant"
    return False
