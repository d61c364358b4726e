"""The APIs' own compaction artefacts: Anthropic ``compaction`` blocks and Responses
``compaction`` items.

An Anthropic block (``{"type": "compaction", "content", "encrypted_content"?,
"signature"?, "tool_changes"?}``) opens the ``content`` of the assistant message
that carries it; a Responses item (``{"type": "compaction", "id",
"encrypted_content", "created_by"?}``) is an input item of its own. Either one
stands for everything before it: the server reads the history from the newest
one onwards (plus the system messages). Nothing in the library changes one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

COMPACTION_TYPE: Final = "compaction"
"""The ``type`` of a compaction block (Anthropic) and of a compaction item (Responses)."""

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


def _type_of(value: Any) -> Any:
    if isinstance(value, dict):
        return value.get("type")
    return getattr(value, "type", None)  # an SDK object not converted yet


def _content_of(message: Any) -> Any:
    if isinstance(message, dict):
        return message.get("content")
    return getattr(message, "content", None)


def compaction_positions(message: Any) -> list[int]:
    """Where ``message`` holds compaction artefacts: the indices of its ``content``
    blocks of type ``compaction``, or ``[0]`` for a Responses compaction item."""
    if _type_of(message) == COMPACTION_TYPE:
        return [0]
    content = _content_of(message)
    if type(content) is not list:
        return []
    return [i for i, block in enumerate(content) if _type_of(block) == COMPACTION_TYPE]


def holds_compaction(message: Any) -> bool:
    """True when ``message`` is, or holds, a server compaction artefact."""
    return bool(compaction_positions(message))


def server_compaction_index(messages: Sequence[Any]) -> int:
    """The index of the message holding the newest server compaction artefact, or
    ``-1`` when there is none: where the part the server reads begins."""
    for index in range(len(messages) - 1, -1, -1):
        if holds_compaction(messages[index]):
            return index
    return -1


def is_system_message(message: Any) -> bool:
    """A ``system`` or ``developer`` role message (not a typed item)."""
    return (
        isinstance(message, dict)
        and message.get("role") in _SYSTEM_ROLES
        and message.get("type") in (None, "message")
    )


def live_view(messages: Sequence[Any]) -> Sequence[Any]:
    """What the server reads of ``messages``: the system messages before the newest
    compaction artefact, then everything from the message that holds it. The list
    itself when there is none."""
    index = server_compaction_index(messages)
    if index <= 0:
        return messages
    return [m for m in messages[:index] if is_system_message(m)] + list(messages[index:])


def dead_indices(messages: Sequence[Any]) -> list[int]:
    """The indices of the messages the server no longer reads: every message before
    the newest compaction artefact, system messages aside."""
    index = server_compaction_index(messages)
    return [i for i in range(max(index, 0)) if not is_system_message(messages[i])]
