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

Everything else in the library asks this package instead of reading keys, so the
compaction logic is written once. Each dialect lives in a module of its own and
provides one object behind the same few operations, the :class:`Dialect`
protocol (find tool calls and results, read and replace a result's content,
render a message, say what it weighs, rewrite an unpaired call or result):
:mod:`.anthropic`, :mod:`.openai_chat`, :mod:`.openai_responses`; what they
share is in ``_common`` and ``_content``. The registered dialects are listed once
(:func:`registered`, in registration order); :func:`dialect_of` says which one a
message belongs to, and the functions here ask it, one message at a time. The
units they work with:

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

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from bareagent_compact.dialects import anthropic, openai_chat, openai_responses
from bareagent_compact.dialects._common import (
    MESSAGE_TYPE,
    NESTED_KEYS,
    SPOKEN_ROLES,
    SYSTEM_ROLES,
    UNKNOWN_TOOL,
    Call,
    Kind,
    Parts,
    Slot,
    Unpaired,
    typed_item,
)
from bareagent_compact.dialects._content import (
    TOOL_RESULT,
    TOOL_USE,
    block_slot,
    render_block,
    render_content,
    tool_name_for,
)
from bareagent_compact.dialects._protocol import BlockParts, Dialect
from bareagent_compact.dialects.openai_chat import TOOL_ROLE, plain_tool_calls, request_shape
from bareagent_compact.dialects.openai_responses import (
    CALL_ITEM_NAMES,
    RESULT_ITEM_TYPES,
    RESULT_KEY,
    TEXT_RESULT_ITEM_TYPES,
)
from bareagent_compact.dialects.server import (
    COMPACTION_TYPE,
    ServerScan,
    compaction_positions,
    dead_indices,
    holds_compaction,
    live_indices,
    live_view,
    server_compaction_index,
)
from bareagent_compact.protocols import Message

__all__ = [
    "BLOCK_PARTS",
    "CALL_ITEM_NAMES",
    "COMPACTION_TYPE",
    "DIALECTS",
    "EXTRA_PARTS",
    "KNOWN_ROLES",
    "MESSAGE_TYPE",
    "NESTED_KEYS",
    "RESULT_ITEM_TYPES",
    "RESULT_KEY",
    "SYSTEM_ROLES",
    "TEXT_RESULT_ITEM_TYPES",
    "TOOL_RESULT",
    "TOOL_ROLE",
    "TOOL_USE",
    "UNKNOWN_TOOL",
    "BlockParts",
    "Call",
    "Dialect",
    "Kind",
    "Parts",
    "Slot",
    "Unpaired",
    "add_extra_parts",
    "block_slot",
    "call_ids",
    "calls",
    "claims_item_type",
    "compaction_positions",
    "continues",
    "dead_indices",
    "dialect_of",
    "fixed_end",
    "dialogue_turns",
    "holders",
    "holds_compaction",
    "holds_objects",
    "is_system",
    "kind",
    "live_indices",
    "live_view",
    "own_result_slot",
    "plain_tool_calls",
    "register",
    "registered",
    "render_block",
    "render_content",
    "render_message",
    "request_shape",
    "result_ids",
    "result_slots",
    "results",
    "rewrite_unpaired",
    "role_label",
    "server_compaction_index",
    "ServerScan",
    "tool_name_for",
    "tool_names",
    "turn_start",
    "turn_starts",
    "typed_item",
    "unregister",
]

# -- the registry ---------------------------------------------------------------------

_registry: tuple[Dialect, ...] = ()
"""The registered dialects, in registration order; the first reads every message no
other one claims."""
_default: Dialect
_any_item: Dialect
_by_item_type: dict[str, Dialect] = {}
_by_role: dict[Any, Dialect] = {}
_by_key: tuple[tuple[str, Dialect], ...] = ()
"""What :func:`dialect_of` looks up, built from the registry: a newer dialect may
claim what an older one would read (such as item types the Responses dialect
keeps as opaque data)."""

BLOCK_PARTS: Final[dict[str, BlockParts]] = {}
"""What the content blocks that carry neither ``text`` nor ``content`` weigh, by type,
as the registered dialects say (kept up to date in place, so it may be bound once)."""

KNOWN_ROLES: Final[set[str]] = set()
"""The roles a role message may have: the built-in dialects' and every registered
dialect's own (kept up to date in place, so it may be bound once)."""

EXTRA_PARTS: Final[list[tuple[str, Callable[[Parts, Message], None]]]] = []
"""``(key, add_parts)`` of each registered dialect that weighs something beyond
``content``: a message holding ``key`` has ``add_parts`` gather it (kept up to date
in place, so it may be bound once)."""


def register(dialect: Dialect) -> None:
    """Add ``dialect`` to the registry, after the ones there; its name must be new."""
    if any(known.name == dialect.name for known in _registry):
        raise ValueError(f"a dialect named {dialect.name!r} is registered already")
    _set_registry((*_registry, dialect))


def unregister(dialect: Dialect) -> None:
    """Remove ``dialect`` from the registry (the others keep their order)."""
    if dialect not in _registry:
        raise ValueError(f"the dialect {dialect.name!r} is not registered")
    _set_registry(tuple(known for known in _registry if known is not dialect))


def registered() -> tuple[Dialect, ...]:
    """The registered dialects, in registration order."""
    return _registry


def _set_registry(dialects: tuple[Dialect, ...]) -> None:
    global _registry, _default, _any_item, _by_key  # noqa: PLW0603 (the one registry)
    if not dialects:
        raise ValueError("the registry needs a dialect to read plain role messages")
    _registry, _default = dialects, dialects[0]
    _any_item = next((d for d in reversed(dialects) if d.any_item), _default)
    _by_item_type.clear()
    _by_role.clear()
    for dialect in dialects[1:]:  # in order: the newest registration wins
        _by_item_type.update(dict.fromkeys(dialect.item_types, dialect))
        _by_role.update(dict.fromkeys(dialect.roles, dialect))
    _by_key = tuple((key, d) for d in reversed(dialects[1:]) for key in d.keys)
    KNOWN_ROLES.clear()
    KNOWN_ROLES.update(SPOKEN_ROLES)
    BLOCK_PARTS.clear()
    for dialect in dialects:
        BLOCK_PARTS.update(dialect.block_parts)
        KNOWN_ROLES.update(dialect.roles)
    EXTRA_PARTS[:] = [
        (dialect.parts_key, dialect.add_parts) for dialect in dialects if dialect.parts_key
    ]


register(anthropic.DIALECT)
register(openai_chat.DIALECT)
register(openai_responses.DIALECT)

DIALECTS: Final = tuple(dialect.name for dialect in _registry)
"""The names of the built-in dialects, which the library's own tools speak (the
recall tool, :func:`bareagent_compact.check_request`)."""


def dialect_of(message: Message) -> Dialect:
    """The registered dialect ``message`` (a plain dict) belongs to: a typed item's
    by its type, a role message's by its role, then by its keys (see
    :class:`Dialect`), else the first registered (plain role messages)."""
    item_type = message.get("type")
    if item_type is not None and isinstance(item_type, str) and item_type != MESSAGE_TYPE:
        return _by_item_type.get(item_type, _any_item)
    try:
        found = _by_role.get(message.get("role"))
    except TypeError:  # a role that is no key (a list ...): no dialect's own
        found = None
    if found is not None:
        return found
    for key, dialect in _by_key:
        if key in message:
            return dialect
    return _default


def claims_item_type(item_type: str) -> bool:
    """True when a registered dialect claims typed items of ``item_type`` as its own."""
    return item_type in _by_item_type


def fixed_end(messages: Sequence[Message]) -> int:
    """The first index a full compaction may summarise: 0 without a server compaction
    artefact; else just after the message holding the newest one, and after the
    results answering that message's own tool calls (the block is never split,
    moved or summarised, nor are its calls parted from their results)."""
    index = server_compaction_index(messages)
    if index < 0:
        return 0
    end = index + 1
    if calls(messages[index]):
        while end < len(messages) and kind(messages[end]) in (Kind.RESULTS, Kind.RESULT):
            end += 1
    return end


def kind(message: Message) -> Kind:
    """Say what ``message`` (a plain dict) is."""
    return dialect_of(message).kind(message)


def is_system(message: Message) -> bool:
    """True for a ``system`` or ``developer`` message."""
    return message.get("role") in SYSTEM_ROLES and typed_item(message) is None


def continues(previous: Message, message: Message) -> bool:
    """True when ``message`` belongs to the same turn as ``previous`` just before it.

    Chat ``tool`` messages in a row are one turn, and so are Responses result
    items in a row; Responses items the model produced (``reasoning``,
    ``function_call`` ...) continue the assistant turn before them; a user message
    continues the user input or tool results before it.
    """
    if type(previous) is not dict or type(message) is not dict:
        return False  # an SDK object not converted yet: a boundary, to be safe
    return dialect_of(message).continues(previous, message, kind)


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
    """Every tool call ``message`` makes, in order: a Responses call item's one call,
    or a message's ``tool_use`` blocks, then its Chat ``tool_calls``."""
    return dialect_of(message).calls(message)


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
    return dialect_of(message).results(message)


def result_slots(message: Message) -> Iterator[Slot]:
    """Where each tool result of ``message`` keeps its content, in order.

    Only results whose content may be replaced by a string are listed: Anthropic
    ``tool_result`` blocks (of a message with any role, as the specification
    reads them), Chat ``tool`` messages, and Responses ``function_call_output``
    and ``custom_tool_call_output`` items.
    """
    return dialect_of(message).result_slots(message)


def own_result_slot(message: Message) -> Slot | None:
    """The slot of a message that is one result by itself (a Chat ``tool`` message, a
    Responses text result item), else ``None``."""
    return dialect_of(message).own_result_slot(message)


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


def render_message(message: Message, names: dict[str, str]) -> str:
    """Render one message's part of its turn: content, tool calls and results.

    Chat tool calls follow the message's text as ``[tool_use:name] {arguments}``,
    Chat ``tool`` messages and Responses results read ``[tool_result:name] ...``,
    and Responses items render what they carry, so a turn reads the same in
    every dialect.
    """
    return dialect_of(message).render(message, names)


def add_extra_parts(parts: Parts, message: Message) -> None:
    """Gather into ``parts`` what ``message`` weighs beyond its ``content``: Chat
    ``tool_calls``, and what a Responses item carries (each registered dialect whose
    :attr:`~Dialect.parts_key` the message holds adds its part)."""
    for key, add_parts in EXTRA_PARTS:
        if key in message:
            add_parts(parts, message)


def rewrite_unpaired(message: Message, broken: Mapping[int, Unpaired]) -> bool:
    """Turn the unpaired calls and results of ``message`` (by position) into plain
    content, in place; True when the message became a ``user`` message (an OpenAI
    result), which must follow the results it stood among."""
    return dialect_of(message).rewrite_unpaired(message, broken)


def holders(message: Any) -> Iterator[object]:
    """The message and the blocks of its ``content`` list: every object a tool result
    can live in (a block, or the message itself)."""
    yield message
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        yield from content


def holds_objects(messages: Iterable[Any]) -> bool:
    """True when one of ``messages`` is not a dict, or holds something other than a dict
    in its ``content`` list or its ``tool_calls`` list (an SDK object)."""
    # Runs every turn over the whole history: exact type checks, no call per item.
    for message in messages:
        if type(message) is not dict:
            return True
        content = message.get("content")
        if type(content) is list:
            for item in content:
                if type(item) is not dict:
                    return True
        if "tool_calls" in message:
            tool_calls = message["tool_calls"]
            if type(tool_calls) is list:
                for item in tool_calls:
                    if type(item) is not dict:
                        return True
    return False
