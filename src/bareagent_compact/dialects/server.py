"""The APIs' own compaction artefacts: Anthropic ``compaction`` blocks and Responses
``compaction`` items.

An Anthropic block (``{"type": "compaction", "content", "encrypted_content"?,
"signature"?, "tool_changes"?}``) opens the ``content`` of the assistant message
that carries it; a Responses item (``{"type": "compaction", "id",
"encrypted_content", "created_by"?}``) is an input item of its own. Either one
stands for everything before it: the server reads the history from the newest
one onwards (plus the system messages). Nothing in the library changes one.

An Anthropic block with ``content: null`` is a compaction that failed: the server
takes it as a no-op, so it stands for nothing and the history before it is still
read. It is kept as it is, like any other block.
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


def _stands_for_history(block: Any) -> bool:
    """A compaction block that replaces what came before it: any but one whose
    ``content`` is ``null``."""
    if isinstance(block, dict):
        return block.get("type") == COMPACTION_TYPE and block.get("content", "") is not None
    return _type_of(block) == COMPACTION_TYPE and getattr(block, "content", "") is not None


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
    """True when ``message`` is, or holds, a server compaction artefact that stands
    for the history before it (not a failed block with ``content: null``)."""
    if _type_of(message) == COMPACTION_TYPE:
        return True
    content = _content_of(message)
    return type(content) is list and any(map(_stands_for_history, content))


def server_compaction_index(messages: Sequence[Any], start: int = 0) -> int:
    """The index of the message holding the newest server compaction artefact, or
    ``-1`` when there is none: where the part the server reads begins. Only
    ``messages[start:]`` are read.

    A block is only ever in a message the model wrote, so user messages (most of
    them tool results) are passed over unread; a failed block (``content: null``)
    is passed over too.
    """
    # Runs over every message appended: plain dicts are read inline.
    for index in range(len(messages) - 1, start - 1, -1):
        message = messages[index]
        if type(message) is not dict:
            if holds_compaction(message):
                return index
            continue
        if message.get("type") == COMPACTION_TYPE:
            return index
        content = message.get("content")
        if type(content) is list and message.get("role") != "user":
            for block in content:
                if type(block) is dict and block.get("type") != COMPACTION_TYPE:
                    continue  # the common case, decided inline
                if _stands_for_history(block):
                    return index
    return -1


class ServerScan:
    """:func:`server_compaction_index` of a history that grows by appending, reading
    only what was appended since the last call.

    While the last message read is still at its place (the same object), or the
    caller knows the messages before it are unchanged (``unchanged``), they are
    taken as read; otherwise (a rebuilt or shortened list) the whole list is read
    again.
    """

    __slots__ = ("_index", "_last", "_read")

    def __init__(self) -> None:
        self._read = 0
        self._last: object = None
        self._index = -1

    def index(self, messages: Sequence[Any], unchanged: int = 0) -> int:
        """Where the part the server reads begins in ``messages`` (``-1``: all of it);
        ``unchanged``: how many of the first messages are known to equal those of
        the last call (a list made anew from JSON, say)."""
        read = self._read
        moved = read > unchanged and read <= len(messages) and messages[read - 1] is not self._last
        if not read or len(messages) < read or moved:
            read, self._index = 0, -1
        newest = server_compaction_index(messages, read)
        if newest >= 0:
            self._index = newest
        self._read = len(messages)
        self._last = messages[-1] if messages else None
        return self._index


def is_system_message(message: Any) -> bool:
    """A ``system`` or ``developer`` role message (not a typed item)."""
    return (
        isinstance(message, dict)
        and message.get("role") in _SYSTEM_ROLES
        and message.get("type") in (None, "message")
    )


def live_view(messages: Sequence[Any], index: int | None = None) -> Sequence[Any]:
    """What the server reads of ``messages``: the system messages before the newest
    compaction artefact, then everything from the message that holds it. The list
    itself when there is none. ``index``: that message's index, when known."""
    if index is None:
        index = server_compaction_index(messages)
    if index <= 0:
        return messages
    return [m for m in messages[:index] if is_system_message(m)] + list(messages[index:])


def live_indices(messages: Sequence[Any]) -> list[int]:
    """The indices of the messages :func:`live_view` holds, in its order."""
    index = max(server_compaction_index(messages), 0)
    return [i for i in range(index) if is_system_message(messages[i])] + list(
        range(index, len(messages))
    )


def dead_indices(messages: Sequence[Any]) -> list[int]:
    """The indices of the messages the server no longer reads: every message before
    the newest compaction artefact, system messages aside."""
    index = server_compaction_index(messages)
    return [i for i in range(max(index, 0)) if not is_system_message(messages[i])]
