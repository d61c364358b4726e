"""OpenAI Chat Completions: an assistant message's ``tool_calls`` and the ``tool``
messages answering them, one call each, by ``tool_call_id``.

A run of ``tool`` messages is one turn and one tool-result unit. A message with
``tool_calls`` is this dialect's too; its ``content`` reads as every role
message's does (``_content``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from bareagent_compact import images
from bareagent_compact.dialects._common import (
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
from bareagent_compact.dialects._content import (
    block_calls,
    block_result_slots,
    block_results,
    holds_call,
    render_call,
    render_content,
    rewrite_blocks,
    role_continues,
    role_kind,
)
from bareagent_compact.protocols import Message

__all__ = [
    "BLOCK_PARTS",
    "DIALECT",
    "TOOL_ROLE",
    "add_parts",
    "calls",
    "drop_calls",
    "is_tool_message",
    "message_slot",
    "plain_tool_calls",
    "render_calls",
    "render_result",
    "request_shape",
    "result_slots",
    "result_to_text",
    "results",
]

TOOL_ROLE: Final = "tool"
"""The role of a message answering one tool call."""

_RESPONSE_ONLY: Final = ("annotations", "parsed")
"""Fields of an assistant message that only a response carries."""


def is_tool_message(message: Message) -> bool:
    """True for a ``tool`` message (not a Responses item that happens to have the role)."""
    return message.get("role") == TOOL_ROLE and typed_item(message) is None


def plain_tool_calls(message: Message) -> bool:
    """False when ``message``'s ``tool_calls`` list holds something other than a dict
    (an SDK object)."""
    tool_calls = message.get("tool_calls")
    return type(tool_calls) is not list or all(type(call) is dict for call in tool_calls)


def calls(message: Message) -> list[Call]:
    """The entries of ``message``'s ``tool_calls``, in order."""
    tool_calls = message.get("tool_calls")
    if not isinstance(tool_calls, list):
        return []
    found: list[Call] = []
    for position, call in enumerate(tool_calls):
        if not isinstance(call, dict):
            continue
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        name = as_name(function.get("name"))
        found.append(Call(as_id(call.get("id")), name, function.get("arguments"), position))
    return found


def results(message: Message) -> list[tuple[int, str | None]]:
    """A ``tool`` message's one result, as ``(0, call id)``."""
    return [(0, as_id(message.get("tool_call_id")))]


def result_slots(message: Message) -> Iterator[Slot]:
    """Where a ``tool`` message keeps its result: its ``content``."""
    yield message_slot(message)


def message_slot(message: Message) -> Slot:
    """Where a ``tool`` message keeps its result: its ``content``."""
    return Slot(message, "content", as_id(message.get("tool_call_id")))


def render_result(message: Message, names: dict[str, str]) -> str:
    """A ``tool`` message as ``[tool_result:name] content``."""
    name = name_for(message.get("tool_call_id"), names)
    return f"[tool_result:{name}] {render_content(message.get('content'), names)}"


def render_calls(message: Message, text: str) -> str:
    """``text`` (the rendered ``content``) followed by one line per entry of
    ``tool_calls``, when there are any."""
    tool_calls = message.get("tool_calls")
    if not isinstance(tool_calls, list) or not tool_calls:
        return text
    lines = [] if message.get("content") is None else [text]
    lines.extend(render_call(call) for call in calls({"tool_calls": tool_calls}))
    return "\n".join(lines)


def add_parts(parts: Parts, message: Message) -> None:
    """What ``tool_calls`` weighs: each function's name and arguments, as an Anthropic
    ``tool_use`` block counts its name and input."""
    tool_calls = message.get("tool_calls")
    if not isinstance(tool_calls, list):
        return
    for call in tool_calls:
        function = call.get("function") if isinstance(call, dict) else None
        if isinstance(function, dict):
            name = function.get("name")
            if isinstance(name, str):
                parts.strings.append(name)
            add_arguments(parts, function.get("arguments"))


def result_to_text(message: Message, unpaired: Unpaired) -> None:
    """An orphaned ``tool`` message becomes a ``user`` message: a header, then its content."""
    header = orphaned_result_text(unpaired.tool_use_id, False)
    text = f"{header} {render_content(message.get('content'), {})}"
    message.clear()
    message.update({"role": "user", "content": text})


def drop_calls(message: Message, broken: Mapping[int, Unpaired]) -> None:
    """Unpaired entries leave ``tool_calls`` (by position); their renderings are
    appended to the message's text."""
    kept: list[Any] = []
    texts: list[str] = []
    for position, call in enumerate(message["tool_calls"]):
        found = broken.get(position)
        if found is None:
            kept.append(call)
            continue
        rendering = render_calls({"role": "assistant", "tool_calls": [call]}, "")
        texts.append(unanswered_call_text(found.tool_use_id, rendering))
    content = message.get("content")
    if isinstance(content, list):
        message["content"] = [*content, *({"type": "text", "text": t} for t in texts)]
    else:
        message["content"] = "\n".join([*([content] if content else []), *texts])
    if kept:
        message["tool_calls"] = kept
    else:
        del message["tool_calls"]


def request_shape(data: dict[str, Any]) -> dict[str, Any]:
    """Drop from a dumped Chat object what only a response carries, in place: a tool
    call's ``parsed_arguments``; an assistant message's ``annotations`` and ``parsed``,
    its ``audio`` reduced to its ``id``."""
    _drop_parsed_arguments(data)
    if data.get("role") == "assistant" and "type" not in data:
        for key in _RESPONSE_ONLY:
            data.pop(key, None)
        audio = data.get("audio")
        if isinstance(audio, dict):
            data["audio"] = {"id": audio["id"]} if "id" in audio else audio
        for call in data.get("tool_calls") or ():
            if isinstance(call, dict):
                _drop_parsed_arguments(call)  # from .parse(): not request input
    return data


def _drop_parsed_arguments(call: dict[str, Any]) -> None:
    function = call.get("function")
    if isinstance(function, dict):
        function.pop("parsed_arguments", None)


def _add_image(parts: Parts, block: dict[str, Any], depth: int) -> None:
    """An ``image_url`` part: a ``data:`` URL by its size and ``detail``, another URL
    as an image of unknown size."""
    image_url = block.get("image_url")
    if isinstance(image_url, dict):
        parts.fixed.append(images.openai_image(image_url.get("url"), image_url.get("detail")))
    else:
        parts.fixed.append(images.openai_image(image_url, block.get("detail")))


def _add_file(parts: Parts, block: dict[str, Any], depth: int) -> None:
    """A ``file`` part: a document, by the size of its ``file_data``."""
    file = block.get("file")
    parts.fixed.append(
        images.document_tokens(file.get("file_data") if isinstance(file, dict) else None)
    )


BLOCK_PARTS: Final[dict[str, Callable[[Parts, dict[str, Any], int], None]]] = {
    "image_url": _add_image,
    "file": _add_file,
}
"""What the content parts that carry no ``text`` weigh, by type."""


def _unpaired_result(message: Message, broken: Mapping[int, Unpaired]) -> Unpaired | None:
    """The unpaired result a ``tool`` message is (not a ``tool_use`` block its
    content may hold), else ``None``."""
    own = broken.get(0) if message.get("role") == TOOL_ROLE else None
    return own if own is not None and own.kind == "tool_result" else None


class _Chat:
    """The Chat dialect: ``tool`` messages, and messages with ``tool_calls``."""

    __slots__ = ()

    name: Final = "openai_chat"
    block_parts: Final = BLOCK_PARTS
    parts_key: Final = "tool_calls"
    item_types: Final = frozenset[str]()
    any_item: Final = False
    roles: Final = frozenset({TOOL_ROLE})
    keys: Final = ("tool_calls",)

    kind = staticmethod(role_kind)

    def continues(
        self, previous: Message, message: Message, kind: Callable[[Message], Kind]
    ) -> bool:
        if message.get("role") == TOOL_ROLE:
            return is_tool_message(previous)
        return role_continues(previous, message, kind)

    def calls(self, message: Message) -> list[Call]:
        found = block_calls(message)
        if "tool_calls" in message:
            found += calls(message)
        return found

    def results(self, message: Message) -> list[tuple[int, str | None]]:
        if message.get("role") == TOOL_ROLE:
            return results(message)
        return block_results(message)

    def result_slots(self, message: Message) -> Iterator[Slot]:
        if message.get("role") == TOOL_ROLE:
            return result_slots(message)
        return block_result_slots(message)

    def own_result_slot(self, message: Message) -> Slot | None:
        return message_slot(message) if message.get("role") == TOOL_ROLE else None

    def render(self, message: Message, names: dict[str, str]) -> str:
        if message.get("role") == TOOL_ROLE:
            return render_result(message, names)
        return render_calls(message, render_content(message.get("content"), names))

    add_parts = staticmethod(add_parts)

    def rewrite_unpaired(self, message: Message, broken: Mapping[int, Unpaired]) -> bool:
        own = _unpaired_result(message, broken)
        if own is not None:
            result_to_text(message, own)
            return True
        blocks = {
            position: unpaired
            for position, unpaired in broken.items()
            if unpaired.kind == "tool_result" or holds_call(message, position, unpaired.tool_use_id)
        }
        chat = {position: found for position, found in broken.items() if position not in blocks}
        if blocks:
            rewrite_blocks(message, blocks)
        if chat:
            drop_calls(message, chat)
        return False


DIALECT: Final = _Chat()
"""The Chat dialect object."""
