"""What the three dialects share: the kinds of message, a tool call, a result slot,
the typed-item test, ids and names, and the texts an unpaired call or result becomes."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from typing import Any, Final, Literal, NamedTuple, Protocol

from bareagent_compact.protocols import Message

SYSTEM_ROLES: Final = frozenset({"system", "developer"})
"""Roles kept through every compaction, as system messages."""

SPOKEN_ROLES: Final = frozenset({*SYSTEM_ROLES, "user", "assistant", "tool", "function"})
"""The roles the built-in dialects' role messages have (Chat's legacy ``function``
included); a registered dialect adds its own :attr:`~Dialect.roles`."""

MESSAGE_TYPE: Final = "message"
"""The ``type`` of a Responses message item, which reads like a role message."""

NESTED_KEYS: Final = ("content", "tool_calls")
"""The keys of a message whose lists may hold SDK objects (blocks, Chat tool calls)."""

UNKNOWN_TOOL: Final = "unknown"
"""The tool name shown for a result whose call is not in the history."""


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


class Unpaired(Protocol):
    """One call or result without its partner, as the writers need it
    (:class:`bareagent_compact.pairs.Orphan` is one)."""

    @property
    def kind(self) -> Literal["tool_use", "tool_result"]: ...

    @property
    def tool_use_id(self) -> str | None: ...


class Parts(Protocol):
    """Where the estimate gathers what a message weighs: strings weighed as they are,
    values weighed as their JSON text, whole tokens (an image, a file), and values
    to read ``depth`` levels deep."""

    strings: list[str]
    json_values: list[Any]
    fixed: list[int]

    def add(self, values: Iterable[Any], depth: int) -> None: ...


def typed_item(message: Message) -> str | None:
    """The ``type`` of a Responses typed item (anything but a ``message`` item), else ``None``.

    The one test of the library for "this is a Responses item, not a role message".
    """
    item_type = message.get("type")
    if isinstance(item_type, str) and item_type != MESSAGE_TYPE:
        return item_type
    return None


def as_id(value: Any) -> str | None:
    """A call id as read: a string, or ``None`` for anything else."""
    return value if isinstance(value, str) else None


def as_name(value: Any) -> str:
    """A tool name as read: a string as it is, ``None`` as :data:`UNKNOWN_TOOL`, else ``str``."""
    if isinstance(value, str):
        return value
    if value is None:
        return UNKNOWN_TOOL
    try:
        return str(value)
    except RecursionError:
        raise ValueError("a tool name is nested too deeply to render") from None


def name_for(call_id: Any, names: dict[str, str]) -> str:
    """The name of the tool whose call has id ``call_id``, per ``names``."""
    return names.get(call_id, UNKNOWN_TOOL) if isinstance(call_id, str) else UNKNOWN_TOOL


def add_arguments(parts: Parts, arguments: Any) -> None:
    """Tool-call arguments: a string (OpenAI's JSON text) as it is, else its JSON text."""
    if isinstance(arguments, str):
        parts.strings.append(arguments)
    elif arguments is not None:
        parts.json_values.append(arguments)


def orphaned_result_text(tool_use_id: str | None, is_error: bool) -> str:
    """The header of a result whose call is not in the history."""
    status = ", error" if is_error else ""
    return f"(result of tool call {tool_use_id}{status}, whose call is not in the history)"


def unanswered_call_text(call_id: str | None, rendering: str) -> str:
    """The text a tool call without a result becomes."""
    return f"(tool call {call_id} without a result) {rendering}"
