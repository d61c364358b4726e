"""OpenAI Responses input items: typed items (``function_call``, its
``function_call_output`` by ``call_id``, ``reasoning``, and any other type, kept as
opaque data) beside ``message`` items, which read like role messages.

A run of result items is one turn and one tool-result unit; a run of items the
model produced (reasoning, an assistant message, calls ...) is one turn.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from bareagent_compact import images
from bareagent_compact.dialects._common import (
    MESSAGE_TYPE,
    Call,
    Kind,
    Parts,
    Slot,
    Unpaired,
    add_arguments,
    as_id,
    as_name,
    name_for,
    orphaned_result_text,
    typed_item,
    unanswered_call_text,
)
from bareagent_compact.dialects._content import render_block, render_call, render_content
from bareagent_compact.protocols import Message

__all__ = [
    "BLOCK_PARTS",
    "DIALECT",
    "CALL_ITEM_NAMES",
    "RESULT_ITEM_TYPES",
    "RESULT_KEY",
    "TEXT_RESULT_ITEM_TYPES",
    "add_parts",
    "calls",
    "is_result_item",
    "item_slot",
    "render",
    "result_slots",
    "results",
    "rewrite_unpaired",
]

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

RESULT_KEY: Final = "output"
"""Where a result item keeps its result."""

REASONING_TYPE: Final = "reasoning"
"""The type of a reasoning item, which counts its summary text."""


def is_result_item(message: Message) -> bool:
    """True for a Responses item answering a tool call."""
    return typed_item(message) in RESULT_ITEM_TYPES


def _arguments(message: Message) -> Any:
    return message.get("arguments", message.get("input", message.get("action")))


def calls(message: Message) -> list[Call]:
    """The one tool call a call item makes; none for any other item."""
    item_type = typed_item(message)
    if item_type is None or item_type not in CALL_ITEM_NAMES:
        return []
    fixed = CALL_ITEM_NAMES[item_type]
    name = fixed if fixed is not None else message.get("name")
    return [Call(as_id(message.get("call_id")), as_name(name), _arguments(message))]


def results(message: Message) -> list[tuple[int, str | None]]:
    """A result item's one result, as ``(0, call id)``; none for any other item."""
    if typed_item(message) in RESULT_ITEM_TYPES:
        return [(0, as_id(message.get("call_id")))]
    return []


def result_slots(message: Message) -> Iterator[Slot]:
    """Where a result item with a text ``output`` keeps it."""
    item_type = typed_item(message)
    if item_type is not None:
        slot = item_slot(message, item_type)
        if slot is not None:
            yield slot


def item_slot(message: Message, item_type: str) -> Slot | None:
    """Where an item of type ``item_type`` keeps its result, when it is one with a
    text ``output``."""
    if item_type in TEXT_RESULT_ITEM_TYPES:
        return Slot(message, RESULT_KEY, as_id(message.get("call_id")))
    return None


def render(message: Message, names: dict[str, str]) -> str:
    """A typed item as transcript text: a result as ``[tool_result:name] output``, a
    call as ``[tool_use:name] arguments``, any other item what it carries."""
    if typed_item(message) in RESULT_ITEM_TYPES:
        name = name_for(message.get("call_id"), names)
        return f"[tool_result:{name}] {render_content(message.get('output'), names)}"
    found = calls(message)
    if found:
        return "\n".join(render_call(call) for call in found)
    return render_block(message, names)


def add_parts(parts: Parts, message: Message) -> None:
    """What a typed item weighs: a call its name and arguments, a result its
    ``output``, reasoning its summary text, an item of another type (opaque data)
    its JSON text."""
    item_type = typed_item(message)
    if item_type is None:
        return
    if item_type in CALL_ITEM_NAMES:
        name = message.get("name")
        if isinstance(name, str):
            parts.strings.append(name)
        add_arguments(parts, _arguments(message))
    elif item_type in RESULT_ITEM_TYPES:
        _add_output(parts, message.get("output"))
    elif item_type == REASONING_TYPE:
        summary = message.get("summary")
        if isinstance(summary, list):
            parts.add(summary, 1)
    elif "content" not in message:
        parts.json_values.append(message)


def _add_output(parts: Parts, output: Any) -> None:
    if isinstance(output, str):
        parts.strings.append(output)
    elif isinstance(output, list):
        parts.add(output, 1)
    elif output is not None:
        parts.add((output,), 0)


def rewrite_unpaired(message: Message, unpaired: Unpaired) -> bool:
    """Turn an unpaired item into plain content, in place; True when it became a
    ``user`` message (a result), which must follow the results it stood among.

    A result becomes a ``user`` message with a header and its output; a call an
    assistant ``message`` item with its rendering, staying part of its turn.
    """
    if unpaired.kind == "tool_result":
        header = orphaned_result_text(unpaired.tool_use_id, False)
        new: Message = {
            "role": "user",
            "content": f"{header} {render_content(message.get('output'), {})}",
        }
    else:
        text = unanswered_call_text(unpaired.tool_use_id, render(message, {}))
        part = {"type": "output_text", "text": text, "annotations": []}
        new = {"type": MESSAGE_TYPE, "role": "assistant", "content": [part]}
    message.clear()
    message.update(new)
    return unpaired.kind == "tool_result"


def _add_image(parts: Parts, block: dict[str, Any], depth: int) -> None:
    """An ``input_image`` part (or a ``computer_screenshot``): a ``data:`` URL by its
    size and ``detail``; a URL or a file id as an image of unknown size."""
    parts.fixed.append(images.openai_image(block.get("image_url"), block.get("detail")))


def _add_file(parts: Parts, block: dict[str, Any], depth: int) -> None:
    """An ``input_file`` part: a document, by the size of its ``file_data``."""
    parts.fixed.append(images.document_tokens(block.get("file_data")))


BLOCK_PARTS: Final[dict[str, Callable[[Parts, dict[str, Any], int], None]]] = {
    "input_image": _add_image,
    "computer_screenshot": _add_image,
    "input_file": _add_file,
}
"""What the content parts that carry no ``text`` weigh, by type."""


class _Responses:
    """The Responses dialect: typed items (``message`` items read as role messages)."""

    __slots__ = ()

    name: Final = "openai_responses"
    block_parts: Final = BLOCK_PARTS
    parts_key: Final = "type"
    item_types: Final = frozenset[str]()
    any_item: Final = True  # item types it does not know are opaque data
    roles: Final = frozenset[str]()
    keys: Final = ()

    # Asked of typed items only (the registry's rule), so ``type`` is read as it is.

    def kind(self, message: Message) -> Kind:
        return Kind.RESULT if message["type"] in RESULT_ITEM_TYPES else Kind.ASSISTANT

    def continues(
        self, previous: Message, message: Message, kind: Callable[[Message], Kind]
    ) -> bool:
        if message["type"] in RESULT_ITEM_TYPES:
            return is_result_item(previous)
        return kind(previous) is Kind.ASSISTANT

    calls = staticmethod(calls)
    results = staticmethod(results)
    result_slots = staticmethod(result_slots)

    def own_result_slot(self, message: Message) -> Slot | None:
        return item_slot(message, message["type"])

    render = staticmethod(render)
    add_parts = staticmethod(add_parts)

    def rewrite_unpaired(self, message: Message, broken: Mapping[int, Unpaired]) -> bool:
        return rewrite_unpaired(message, broken[0])


DIALECT: Final = _Responses()
"""The Responses dialect object."""
