"""Turn SDK model objects in a history into the plain dicts the SDK accepts as input.

Agent loops append what the SDKs return: Anthropic's ``response.content`` (a list
of ``TextBlock``/``ToolUseBlock`` objects) inside a message dict, OpenAI's
``completion.choices[0].message``, or Responses ``response.output`` items. Each is
a pydantic model; nothing here imports an SDK: anything with ``model_dump`` is
taken for one, unless its class comes from an agent framework (LangChain, Pydantic
AI, smolagents), whose messages are refused with a ``TypeError`` naming the
framework, before anything is changed. An SDK object becomes, in place and once,
the request shape: fields that are ``None`` are dropped (responses carry
``"citations": None``, ``"refusal": None`` ...), and so are the response-only
fields of a Chat assistant message (``annotations``, ``parsed``; ``audio`` is
reduced to its ``id``), so the list stays valid to send and every other part of
the library sees real content.
"""

from __future__ import annotations

import logging
from collections.abc import MutableSequence, Sequence
from typing import Any

from bareagent_compact.dialects import COMPACTION_TYPE, NESTED_KEYS, holds_objects, request_shape
from bareagent_compact.validate import foreign, is_sdk_object, not_a_dict, not_a_list

logger = logging.getLogger(__name__)


def is_model(value: object) -> bool:
    """True for an SDK model object (anything with pydantic's ``model_dump`` that is no
    agent framework's message)."""
    return is_sdk_object(value)


def dump_model(value: Any) -> dict[str, Any]:
    """The request-shaped dict of one SDK model object.

    A server compaction block or item is dumped with exactly the fields the
    server sent (``exclude_unset``: a field it sent as ``null`` stays, none is
    added or dropped), as the APIs want it back unchanged, also inside a message
    object. The one exception is an ``encrypted_content`` of ``None``, which
    is left out: the ``anthropic`` SDK's stream accumulator sets it from each
    ``compaction_delta`` whether the server sent one or not, and the API reads a
    missing one as ``null`` (``BetaCompactionBlockParam``).
    """
    if getattr(value, "type", None) == COMPACTION_TYPE:
        return _dump_compaction(value)
    try:
        data = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    except TypeError:  # a model_dump without pydantic's keywords
        data = value.model_dump()
    if not isinstance(data, dict):
        raise TypeError(
            f"{type(value).__name__}.model_dump() must return a dict, got {type(data).__name__}"
        )
    data = request_shape({key: item for key, item in data.items() if item is not None})
    _redump_compaction_blocks(value, data)
    return data


def _redump_compaction_blocks(value: Any, data: dict[str, Any]) -> None:
    """The compaction blocks inside a dumped message object, dumped again as sent
    (``exclude_none`` would drop the ``content: null`` of a failed one)."""
    blocks = getattr(value, "content", None)
    dumped = data.get("content")
    if not isinstance(blocks, list) or not isinstance(dumped, list):
        return
    if len(blocks) != len(dumped):
        return
    for position, block in enumerate(blocks):
        if is_model(block) and getattr(block, "type", None) == COMPACTION_TYPE:
            dumped[position] = _dump_compaction(block)


def _dump_compaction(value: Any) -> dict[str, Any]:
    """A compaction block or item as the server sent it (see :func:`dump_model`)."""
    try:
        data = value.model_dump(mode="json", by_alias=True, exclude_unset=True)
    except TypeError:  # a model_dump without pydantic's keywords
        data = value.model_dump()
    if not isinstance(data, dict):
        raise TypeError(
            f"{type(value).__name__}.model_dump() must return a dict, got {type(data).__name__}"
        )
    if "encrypted_content" in data and data["encrypted_content"] is None:
        del data["encrypted_content"]
    return data


def plain_messages(messages: MutableSequence[Any], only: Sequence[int] | None = None) -> int:
    """Convert every SDK object in ``messages`` to a plain dict, in place.

    Messages (or Responses items) may be objects; inside a message dict, the
    items of ``content`` and ``tool_calls`` may be. Anything else that is not a
    dict raises ``TypeError`` naming its index before anything is changed.
    ``only``: the indices that may hold objects (the others are known to hold
    none). Returns how many objects were converted.
    """
    if not isinstance(messages, MutableSequence):
        raise not_a_list(messages)
    if only is not None:
        part = [messages[index] for index in only]
        converted = plain_messages(part)
        for index, message in zip(only, part, strict=True):
            messages[index] = message
        return converted
    # Runs every turn over the whole history: a plain history is read once, with
    # exact type checks and no call per item.
    if not holds_objects(messages):
        return 0
    return _convert(messages)


def _nested_objects(index: int, message: dict[str, Any]) -> list[tuple[list[Any], int]]:
    """Where the SDK objects inside ``message`` (at ``index``)'s nested lists are:
    ``(list, index)``."""
    found: list[tuple[list[Any], int]] = []
    for key in NESTED_KEYS:
        items = message.get(key)
        if type(items) is list:
            found.extend(
                (items, position)
                for position, item in enumerate(items)
                if _is_object(item, index, key, position)
            )
    return found


def _convert(messages: MutableSequence[Any]) -> int:
    top: list[int] = []
    nested: list[tuple[list[Any], int]] = []
    for index, message in enumerate(messages):
        if isinstance(message, dict):
            nested.extend(_nested_objects(index, message))
        elif is_model(message):
            top.append(index)
        else:
            raise not_a_dict(index, message)
    if not top and not nested:
        return 0
    # Every dump is made before anything is replaced: a failing one changes nothing.
    top_dumps = [dump_model(messages[index]) for index in top]
    nested_dumps = [dump_model(items[position]) for items, position in nested]
    for index, data in zip(top, top_dumps, strict=True):
        messages[index] = data
    for (items, position), data in zip(nested, nested_dumps, strict=True):
        items[position] = data
    logger.debug("converted %d SDK object(s) to plain dicts", len(top) + len(nested))
    return len(top) + len(nested)


def plain_view(messages: Sequence[Any]) -> list[Any]:
    """``messages`` as plain dicts, without changing it: the list itself when it holds
    no SDK object, else a new list whose converted messages are copies."""
    if not isinstance(messages, Sequence) or isinstance(messages, str | bytes):
        raise not_a_list(messages)
    view: list[Any] | None = None
    for index, message in enumerate(messages):
        replacement = _plain_copy(index, message)
        if replacement is None:
            continue
        if view is None:
            view = list(messages)
        view[index] = replacement
    if view is None:
        return messages if isinstance(messages, list) else list(messages)
    return view


def _plain_copy(index: int, message: Any) -> dict[str, Any] | None:
    """A plain copy of ``message`` when it is, or holds, an SDK object; else ``None``
    (a value that is neither a dict nor an object is left for the caller to report,
    an agent framework's message is refused)."""
    if not isinstance(message, dict):
        if is_model(message):
            return dump_model(message)
        error = foreign(f"messages[{index}]", message)
        if error is not None:
            raise error
        return None
    copied: dict[str, Any] | None = None
    for key in NESTED_KEYS:
        items = message.get(key)
        plain = _plain_items(index, key, items) if type(items) is list else None
        if plain is not None:
            copied = dict(message) if copied is None else copied
            copied[key] = plain
    return copied


def _plain_items(index: int, key: str, items: list[Any]) -> list[Any] | None:
    """A copy of ``messages[index][key]`` with its SDK objects dumped, ``None`` if it
    holds none."""
    objects = [_is_object(item, index, key, position) for position, item in enumerate(items)]
    if not any(objects):
        return None
    pairs = zip(items, objects, strict=True)
    return [dump_model(item) if is_object else item for item, is_object in pairs]


def _is_object(item: Any, index: int, key: str, position: int) -> bool:
    """True for an SDK object at ``messages[index][key][position]``; an agent
    framework's object there is refused."""
    if type(item) is dict:
        return False
    if is_model(item):
        return True
    error = foreign(f"messages[{index}][{key!r}][{position}]", item)
    if error is not None:
        raise error
    return False
