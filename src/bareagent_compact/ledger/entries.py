"""What the ledger keeps per message: its copy, features, content key and charge;
a new message's entry, and the map of entries by content."""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from itertools import compress
from operator import attrgetter, ne
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
_MESSAGE_OF: Final = attrgetter("message")


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


def _charge(
    entries: list[_Entry], predictions: list[float], scale: float, even: float | None = None
) -> None:
    """Charge each new entry its prediction, scaled (or an ``even`` share of a total)."""
    share = even / len(entries) if even is not None and entries else None
    for entry, prediction in zip(entries, predictions, strict=True):
        entry.charge = share if share is not None else prediction * scale
        if not entry.provisional:
            entry.features = _DROPPED  # charged: never predicted again


def made_anew(
    resolved: list[_Entry],
    copies: list[Any],
    messages: list[Message],
    same: Sequence[Message],
    ids: list[int],
) -> list[int] | None:
    """Where the last list's messages changed, when ``messages`` opens with them as
    equal but other objects (a history made anew from JSON every turn, perhaps
    edited since); each entry of ``resolved`` then stands for the message at its
    place. ``None`` otherwise. ``same``: ``messages``, or the copies that equal it."""
    known = len(copies)
    if not known or len(ids) < known:
        return None
    present = set(ids)
    if len(present) != len(ids) or not present.isdisjoint(map(id, map(_MESSAGE_OF, resolved))):
        return None  # objects of the last list among them: moved, not made anew
    edited = list(compress(range(known), map(ne, same, copies)))
    if len(edited) * 2 > known:
        return None
    for entry, message in zip(resolved, messages, strict=False):
        entry.message = message  # held, so that its id stays its own
    return edited
