"""What the ledger keeps per message: its copy, features, content key and charge;
a new message's entry, and the map of entries by content."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from operator import attrgetter
from typing import Any, Final

from bareagent_compact.ledger.reading import read_message
from bareagent_compact.protocols import Message
from bareagent_compact.validate import not_a_dict


class _Entry:
    """What the ledger knows about one message."""

    __slots__ = ("charge", "copy", "features", "key", "message", "provisional")

    def __init__(self, message: Message, copy: Message | None = None) -> None:
        self.message = message
        # The copy is compared with the message to see in-place edits; the key
        # finds an equal message under another identity. A copy the history cache
        # already holds of the same content is shared rather than kept twice.
        own, features, self.key = read_message(message)
        self.copy = own if copy is None else copy
        self.features: Sequence[float] = array("d", features)
        self.provisional = False  # charged its estimate by the first report
        self.charge: float | None = None  # its share of the last report, if it was in it


class _Absent:
    """Stands for a message not seen before: its copy equals nothing."""

    __slots__ = ("copy",)

    def __init__(self) -> None:
        self.copy = object()


_ABSENT: Final[Any] = _Absent()
_DROPPED: Final[Sequence[float]] = array("d")
"""The features of a charged message: not kept (only uncharged ones are predicted)."""
_COPY_OF: Final = attrgetter("copy")
_KEY_OF: Final = attrgetter("key")
_CHARGE_OF: Final = attrgetter("charge")


def _new_entry(
    index: int,
    message: Message,
    by_content: dict[int, _Entry],
    copies: Sequence[Message] | None = None,
) -> _Entry:
    """The entry of a message not seen under this identity (or edited): it keeps
    the charge of an equal message seen before under another identity.
    ``copies``: the history cache's copies of the list, to share."""
    if not isinstance(message, dict):
        raise not_a_dict(index, message)
    entry = _Entry(message, None if copies is None else copies[index])
    same = by_content.get(entry.key)
    if same is not None and same.charge is not None and message == same.copy:
        entry.charge = same.charge  # the same content, another identity
    return entry


def _remap(by_content: dict[int, _Entry], left: list[_Entry], new: Iterable[_Entry]) -> None:
    """Keep the content map of the entries in place: ``left`` left it, ``new`` came."""
    for entry in left:
        if by_content.get(entry.key) is entry:
            del by_content[entry.key]
    for entry in new:
        by_content[entry.key] = entry
