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
compaction logic is written once. Each dialect lives in a module of its own
behind the same few operations (find tool calls and results, read and replace a
result's content, render a message, say what it weighs, rewrite an unpaired
call or result): :mod:`.anthropic`, :mod:`.openai_chat`,
:mod:`.openai_responses`; what they share is in ``_common`` and ``_content``.
This module dispatches one message at a time. The units it works with:

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

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final

from bareagent_compact.dialects import anthropic, openai_chat, openai_responses
from bareagent_compact.dialects._common import (
    MESSAGE_TYPE,
    NESTED_KEYS,
    SYSTEM_ROLES,
    UNKNOWN_TOOL,
    Call,
    Kind,
    Parts,
    Slot,
    Unpaired,
    typed_item,
)
from bareagent_compact.dialects._content import render_content
from bareagent_compact.dialects.openai_responses import (
    CALL_ITEM_NAMES,
    RESULT_ITEM_TYPES,
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
    "CALL_ITEM_NAMES",
    "COMPACTION_TYPE",
    "NESTED_KEYS",
    "RESULT_ITEM_TYPES",
    "SYSTEM_ROLES",
    "TEXT_RESULT_ITEM_TYPES",
    "UNKNOWN_TOOL",
    "Call",
    "Kind",
    "Parts",
    "Slot",
    "Unpaired",
    "add_extra_parts",
    "call_ids",
    "calls",
    "compaction_positions",
    "continues",
    "dead_indices",
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
    "render_message",
    "result_ids",
    "result_slots",
    "results",
    "rewrite_unpaired",
    "role_label",
    "server_compaction_index",
    "ServerScan",
    "tool_names",
    "turn_start",
    "turn_starts",
    "typed_item",
]


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


_ROLE_KINDS: Final[dict[Any, Kind]] = {
    "assistant": Kind.ASSISTANT,
    "system": Kind.SYSTEM,
    "developer": Kind.SYSTEM,
    "tool": Kind.RESULT,
}
"""What a role message other than ``user`` is; another role (e.g. a legacy
``function`` message) is not user input, so it counts as the assistant's."""


def kind(message: Message) -> Kind:
    """Say what ``message`` (a plain dict) is."""
    item_type = typed_item(message)
    if item_type is not None:
        return Kind.RESULT if item_type in RESULT_ITEM_TYPES else Kind.ASSISTANT
    role = message.get("role")
    if role == "user":
        content = message.get("content")
        return Kind.RESULTS if anthropic.has_tool_result_block(content) else Kind.USER
    return _ROLE_KINDS.get(role, Kind.ASSISTANT)


def is_system(message: Message) -> bool:
    """True for a ``system`` or ``developer`` message."""
    return message.get("role") in SYSTEM_ROLES and typed_item(message) is None


_INPUT_KINDS: Final = frozenset({Kind.USER, Kind.RESULTS, Kind.RESULT})


def _continues_input(previous: Message, message: Message) -> bool:
    """A user message continues user input or tool results before it: one turn (the
    APIs merge them), such as a reminder an agent sends after the user's request."""
    plain = message.get("type") in (None, MESSAGE_TYPE)
    return plain and kind(previous) in _INPUT_KINDS and kind(message) is Kind.USER


def continues(previous: Message, message: Message) -> bool:
    """True when ``message`` belongs to the same turn as ``previous`` just before it.

    Chat ``tool`` messages in a row are one turn, and so are Responses result
    items in a row; Responses items the model produced (``reasoning``,
    ``function_call`` ...) continue the assistant turn before them.
    """
    if type(previous) is not dict or type(message) is not dict:
        return False  # an SDK object not converted yet: a boundary, to be safe
    item_type = typed_item(message)
    if item_type is not None:
        if item_type in RESULT_ITEM_TYPES:
            return openai_responses.is_result_item(previous)
        return kind(previous) is Kind.ASSISTANT
    role = message.get("role")
    if role == "user":
        return _continues_input(previous, message)
    if role == openai_chat.TOOL_ROLE:
        return openai_chat.is_tool_message(previous)
    if role == "assistant" and message.get("type") == MESSAGE_TYPE:
        return openai_responses.follows_output(previous)
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
    """Every tool call ``message`` makes, in order: a Responses call item's one call,
    or a message's ``tool_use`` blocks, then its Chat ``tool_calls``."""
    if typed_item(message) is not None:
        return openai_responses.calls(message)
    found = anthropic.calls(message)
    if "tool_calls" in message:
        found += openai_chat.calls(message)
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
    if typed_item(message) is not None:
        return openai_responses.results(message)
    if message.get("role") == openai_chat.TOOL_ROLE:
        return openai_chat.results(message)
    return anthropic.results(message)


def result_slots(message: Message) -> Iterator[Slot]:
    """Where each tool result of ``message`` keeps its content, in order.

    Only results whose content may be replaced by a string are listed: Anthropic
    ``tool_result`` blocks (of a message with any role, as the specification
    reads them), Chat ``tool`` messages, and Responses ``function_call_output``
    and ``custom_tool_call_output`` items.
    """
    if typed_item(message) is not None:
        return openai_responses.result_slots(message)
    if message.get("role") == openai_chat.TOOL_ROLE:
        return openai_chat.result_slots(message)
    return anthropic.result_slots(message)


def own_result_slot(message: Message) -> Slot | None:
    """The slot of a message that is one result by itself (a Chat ``tool`` message, a
    Responses text result item), else ``None``."""
    item_type = typed_item(message)
    if item_type is not None:
        return openai_responses.item_slot(message, item_type)
    if message.get("role") == openai_chat.TOOL_ROLE:
        return openai_chat.message_slot(message)
    return None


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
    if typed_item(message) is not None:
        return openai_responses.render(message, names)
    if message.get("role") == openai_chat.TOOL_ROLE:
        return openai_chat.render_result(message, names)
    return openai_chat.render_calls(message, render_content(message.get("content"), names))


def add_extra_parts(parts: Parts, message: Message) -> None:
    """Gather into ``parts`` what ``message`` weighs beyond its ``content``: Chat
    ``tool_calls``, and what a Responses item carries."""
    if "tool_calls" in message:
        openai_chat.add_parts(parts, message)
    if "type" in message:
        openai_responses.add_parts(parts, message)


def rewrite_unpaired(message: Message, broken: Mapping[int, Unpaired]) -> bool:
    """Turn the unpaired calls and results of ``message`` (by position) into plain
    content, in place; True when the message became a ``user`` message (an OpenAI
    result), which must follow the results it stood among."""
    if typed_item(message) is not None:
        return openai_responses.rewrite_unpaired(message, broken[0])
    if message.get("role") == openai_chat.TOOL_ROLE:
        openai_chat.result_to_text(message, broken[0])
        return True
    blocks = {
        position: unpaired
        for position, unpaired in broken.items()
        if unpaired.kind == "tool_result"
        or anthropic.holds_call(message, position, unpaired.tool_use_id)
    }
    chat = {position: unpaired for position, unpaired in broken.items() if position not in blocks}
    if blocks:
        anthropic.rewrite_unpaired(message, blocks)
    if chat:
        openai_chat.drop_calls(message, chat)
    return False


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
