"""What a message dialect answers: the one interface the rest of the library asks.

A dialect is one object (:func:`bareagent_compact.dialects.registered` lists the
registered ones); each operation is asked of the dialect a message belongs to,
one message at a time (:func:`bareagent_compact.dialects.dialect_of`), so the
compaction logic never reads a dialect's keys itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

from bareagent_compact.dialects._common import Call, Kind, Parts, Slot, Unpaired
from bareagent_compact.protocols import Message

BlockParts = Callable[[Parts, dict[str, Any], int], None]
"""What a content block with neither ``text`` nor ``content`` weighs: gathered into
the parts, given the block and its depth."""


class Dialect(Protocol):
    """One message dialect: how its messages are recognised, read, rendered, weighed
    and repaired.

    A dialect claims messages by data the registry looks up, not by a call per
    message: typed items (a ``str`` ``type`` other than ``"message"``) by
    :attr:`item_types` (else the dialect with :attr:`any_item`), role messages by
    :attr:`roles`, then by :attr:`keys`; the newest registration wins. The first
    registered dialect reads every message no other one claims (plain role
    messages).
    """

    @property
    def name(self) -> str:
        """The dialect's name (``"anthropic"``, ``"openai_chat"`` ...)."""
        ...

    @property
    def block_parts(self) -> Mapping[str, BlockParts]:
        """What the content blocks of this dialect that carry neither ``text`` nor
        ``content`` weigh (images, files, thinking), by block type."""
        ...

    @property
    def parts_key(self) -> str | None:
        """The message key whose presence means :meth:`add_parts` has something to
        weigh beyond ``content`` (for a message of any dialect); ``None``: nothing."""
        ...

    @property
    def item_types(self) -> frozenset[str]:
        """The types of the typed items that are this dialect's."""
        ...

    @property
    def any_item(self) -> bool:
        """True for the dialect that reads a typed item of a type no dialect lists."""
        ...

    @property
    def roles(self) -> frozenset[str]:
        """The roles of the role messages that are this dialect's."""
        ...

    @property
    def keys(self) -> tuple[str, ...]:
        """Keys that make a role message (of another role) this dialect's."""
        ...

    def kind(self, message: Message) -> Kind:
        """What ``message`` is, for compaction."""
        ...

    def continues(
        self, previous: Message, message: Message, kind: Callable[[Message], Kind]
    ) -> bool:
        """True when ``message`` belongs to the same turn as ``previous`` just before it
        (a message of any dialect; ``kind`` says what any message is)."""
        ...

    def calls(self, message: Message) -> list[Call]:
        """Every tool call ``message`` makes, in order."""
        ...

    def results(self, message: Message) -> list[tuple[int, str | None]]:
        """Every tool result ``message`` holds, as ``(position, call id)``."""
        ...

    def result_slots(self, message: Message) -> Iterator[Slot]:
        """Where each tool result of ``message`` whose content may be replaced by a
        string keeps it, in order."""
        ...

    def own_result_slot(self, message: Message) -> Slot | None:
        """The slot of a message that is one result by itself, else ``None``."""
        ...

    def render(self, message: Message, names: dict[str, str]) -> str:
        """``message``'s part of its turn in the transcript (``names``: tool call ids
        to tool names)."""
        ...

    def add_parts(self, parts: Parts, message: Message) -> None:
        """Gather into ``parts`` what ``message`` (of any dialect, holding
        :attr:`parts_key`) weighs beyond its ``content``."""
        ...

    def rewrite_unpaired(self, message: Message, broken: Mapping[int, Unpaired]) -> bool:
        """Turn the unpaired calls and results of ``message`` (by position) into plain
        content, in place; True when the message became a ``user`` message, which
        must follow the results it stood among."""
        ...
