"""What any message is, in the three message dialects the library reads.

A history may hold messages of any of these, recognised one message at a time,
with no configuration:

- **Anthropic Messages**: ``{"role": "user" | "assistant", "content": str | [block]}``
  with ``tool_use`` blocks in assistant messages and ``tool_result`` blocks in
  user messages; ``system`` messages may live in the list.
- **OpenAI Chat Completions**: ``system``/``developer``/``user``/``assistant``
  messages (an assistant message may carry ``tool_calls``) and ``tool`` messages
  answering one call each by ``tool_call_id``.
- **OpenAI Responses input items**: ``message`` items (or the
  ``{"role", "content"}`` shorthand), ``function_call`` items and their
  ``function_call_output`` items (by ``call_id``), ``reasoning`` items, and any
  other item type, kept as opaque data.

Everything else in the library asks this module instead of reading keys, so the
compaction logic is written once. The units it works with:

- a **turn**: one Anthropic or Chat message; a run of Chat ``tool`` messages; a
  run of Responses output items (``function_call_output`` ...); a run of
  Responses items the assistant produced (``reasoning``, an assistant
  ``message``, ``function_call`` ...). System messages are turns of their own
  and are skipped when deciding what is next to what, as the APIs take them apart.
- a **tool-result unit**: a turn of results (one Anthropic user message holding
  ``tool_result`` blocks, or one run of result messages): what micro-compaction
  counts and what a pending turn may be.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Sequence
from typing import Any, Final, NamedTuple

from bareagent_compact.protocols import Message

SYSTEM_ROLES: Final = frozenset({"system", "developer"})
"""Roles kept through every compaction, as system messages."""

RESULT_ITEM_TYPES: Final = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "computer_call_output",
        "local_shell_call_output",
        "shell_call_output",
        "apply_patch_call_output",
    }
)
"""Responses item types that answer a tool call by ``call_id``."""

TEXT_RESULT_ITEM_TYPES: Final = frozenset({"function_call_output", "custom_tool_call_output"})
"""Responses result items whose ``output`` may be a string, so may be truncated."""

CALL_ITEM_NAMES: Final = {
    "function_call": None,  # the name is the item's "name"
    "custom_tool_call": None,
    "computer_call": "computer",
    "local_shell_call": "local_shell",
    "shell_call": "shell",
    "apply_patch_call": "apply_patch",
}
"""Responses item types that make a tool call with a ``call_id``, and the tool
name of those that carry none."""


class Kind(enum.Enum):
    """What one message is, for compaction."""

    SYSTEM = "system"
    """A ``system`` or ``developer`` message: always kept."""
    USER = "user"
    """Input from the user (no tool results)."""
    ASSISTANT = "assistant"
    """Something the model produced: text, tool calls, reasoning, opaque items."""
    RESULTS = "results"
    """An Anthropic user message holding ``tool_result`` blocks: a unit by itself."""
    RESULT = "result"
    """One Chat ``tool`` message or one Responses result item: runs make a unit."""


class Call(NamedTuple):
    """One tool call: its id, the tool's name, the arguments as sent, and where it is
    (the index of its block in ``content``, of its entry in ``tool_calls``, or 0
    for a Responses item)."""

    call_id: str | None
    name: str
    arguments: Any
    position: int = 0


class Slot(NamedTuple):
    """Where one tool result's content lives: ``holder[key]``, answering ``call_id``."""

    holder: dict[str, Any]
    key: str
    call_id: str | None


UNKNOWN_TOOL: Final = "unknown"
"""The tool name shown for a result whose call is not in the history."""


def _has_tool_result_block(content: Any) -> bool:
    if type(content) is not list:
        return False
    for block in content:  # noqa: SIM110 (a loop: no generator per call on the hot path)
        if type(block) is dict and block.get("type") == "tool_result":
            return True
    return False


def kind(message: Message) -> Kind:
    """Say what ``message`` (a plain dict) is."""
    item_type = message.get("type")
    if item_type is not None and item_type != "message" and isinstance(item_type, str):
        if item_type in RESULT_ITEM_TYPES:
            return Kind.RESULT
        return Kind.ASSISTANT
    role = message.get("role")
    if role == "user":
        return Kind.RESULTS if _has_tool_result_block(message.get("content")) else Kind.USER
    if role == "assistant":
        return Kind.ASSISTANT
    if role in SYSTEM_ROLES:
        return Kind.SYSTEM
    if role == "tool":
        return Kind.RESULT
    return Kind.ASSISTANT  # another role (e.g. a legacy "function" message): not user input


def is_system(message: Message) -> bool:
    """True for a ``system`` or ``developer`` message."""
    return message.get("role") in SYSTEM_ROLES and not _is_typed_item(message)


def _is_typed_item(message: Message) -> bool:
    item_type = message.get("type")
    return isinstance(item_type, str) and item_type != "message"


def continues(previous: Message, message: Message) -> bool:
    """True when ``message`` belongs to the same turn as ``previous`` just before it.

    Chat ``tool`` messages in a row are one turn, and so are Responses result
    items in a row; Responses items the model produced (``reasoning``,
    ``function_call`` ...) continue the assistant turn before them.
    """
    if type(previous) is not dict or type(message) is not dict:
        return False  # an SDK object not converted yet: a boundary, to be safe
    item_type = message.get("type")
    if isinstance(item_type, str) and item_type != "message":
        if item_type in RESULT_ITEM_TYPES:
            previous_type = previous.get("type")
            return isinstance(previous_type, str) and previous_type in RESULT_ITEM_TYPES
        return kind(previous) is Kind.ASSISTANT
    role = message.get("role")
    if role == "tool":
        return previous.get("role") == "tool" and not _is_typed_item(previous)
    if role == "assistant" and item_type == "message":
        previous_type = previous.get("type")
        return (
            isinstance(previous_type, str)
            and previous_type != "message"
            and previous_type not in RESULT_ITEM_TYPES
        ) or (previous_type == "message" and previous.get("role") == "assistant")
    return False


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """The index at which each turn of ``messages`` begins, in order."""
    starts: list[int] = []
    previous: Message | None = None
    for index, message in enumerate(messages):
        if previous is None or not continues(previous, message):
            starts.append(index)
        previous = message
    return starts


def turn_start(messages: Sequence[Message], index: int) -> int:
    """The index at which the turn holding ``messages[index]`` begins."""
    while index > 0 and continues(messages[index - 1], messages[index]):
        index -= 1
    return index


def calls(message: Message) -> list[Call]:
    """Every tool call ``message`` makes, in order."""
    item_type = message.get("type")
    if isinstance(item_type, str) and item_type != "message":
        if item_type not in CALL_ITEM_NAMES:
            return []
        fixed = CALL_ITEM_NAMES[item_type]
        name = fixed if fixed is not None else message.get("name")
        arguments = message.get("arguments", message.get("input", message.get("action")))
        return [Call(_as_id(message.get("call_id")), _as_name(name), arguments)]
    found: list[Call] = []
    content = message.get("content")
    if isinstance(content, list):
        for position, block in enumerate(content):
            if isinstance(block, dict) and block.get("type") == "tool_use":
                name = _as_name(block.get("name"))
                found.append(Call(_as_id(block.get("id")), name, block.get("input", {}), position))
    tool_calls = message.get("tool_calls")
    if isinstance(tool_calls, list):
        for position, call in enumerate(tool_calls):
            if not isinstance(call, dict):
                continue
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            name = _as_name(function.get("name"))
            found.append(Call(_as_id(call.get("id")), name, function.get("arguments"), position))
    return found


def call_ids(message: Message) -> set[str]:
    """The string ids of the tool calls ``message`` makes."""
    return {call.call_id for call in calls(message) if call.call_id is not None}


def result_ids(message: Message) -> set[str]:
    """The string ids of the tool calls ``message`` answers."""
    return {call_id for _, call_id in results(message) if call_id is not None}


def results(message: Message) -> list[tuple[int, str | None]]:
    """Every tool result ``message`` holds, as ``(position, call id)``.

    The position is the index of a ``tool_result`` block in ``content`` (found in
    a message of any role, as the specification reads them), or 0 for a Chat
    ``tool`` message or a Responses result item, which are one result each.
    """
    item_type = message.get("type")
    if isinstance(item_type, str) and item_type != "message":
        if item_type in RESULT_ITEM_TYPES:
            return [(0, _as_id(message.get("call_id")))]
        return []
    if message.get("role") == "tool":
        return [(0, _as_id(message.get("tool_call_id")))]
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [
        (position, _as_id(block.get("tool_use_id")))
        for position, block in enumerate(content)
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]


def dialogue_turns(messages: Sequence[Message]) -> list[list[int]]:
    """The indices of the non-system messages of ``messages``, grouped into turns."""
    turns: list[list[int]] = []
    previous: Message | None = None
    for index, message in enumerate(messages):
        if is_system(message):
            continue
        if previous is not None and continues(previous, message):
            turns[-1].append(index)
        else:
            turns.append([index])
        previous = message
    return turns


def result_slots(message: Message) -> Iterator[Slot]:
    """Where each tool result of ``message`` keeps its content, in order.

    Only results whose content may be replaced by a string are listed: Anthropic
    ``tool_result`` blocks (of a message with any role, as the specification
    reads them), Chat ``tool`` messages, and Responses ``function_call_output``
    and ``custom_tool_call_output`` items.
    """
    item_type = message.get("type")
    if isinstance(item_type, str) and item_type != "message":
        if item_type in TEXT_RESULT_ITEM_TYPES:
            yield Slot(message, "output", _as_id(message.get("call_id")))
        return
    if message.get("role") == "tool":
        yield Slot(message, "content", _as_id(message.get("tool_call_id")))
        return
    content = message.get("content")
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") == "tool_result":
                yield Slot(block, "content", _as_id(block.get("tool_use_id")))


def tool_names(messages: Sequence[Any]) -> dict[str, str]:
    """Map every tool call's id to its tool's name, in any dialect (SPEC 11.1 step 1)."""
    names: dict[str, str] = {}
    for message in messages:
        if not isinstance(message, dict):
            continue
        for call in calls(message):
            if call.call_id is not None:
                names[call.call_id] = call.name
    return names


def _as_id(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _as_name(value: Any) -> str:
    if isinstance(value, str):
        return value
    if value is None:
        return UNKNOWN_TOOL
    try:
        return str(value)
    except RecursionError:
        raise ValueError("a tool name is nested too deeply to render") from None


def role_label(message: Message) -> str:
    """The role shown in the transcript's ``[role]`` header for the turn ``message`` opens.

    Results are shown as ``user`` turns in every dialect, as Anthropic sends them.
    """
    message_kind = kind(message)
    if message_kind in (Kind.RESULT, Kind.RESULTS):
        return "user"
    role = message.get("role")
    if isinstance(role, str):
        return role
    return "assistant" if message_kind is Kind.ASSISTANT else str(role)
