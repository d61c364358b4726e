"""One message read for the ledger: a copy of its dicts and lists, the text the
model reads in it (not its structure or encoded payloads), and its features."""

from __future__ import annotations

from typing import Any, Final

from bareagent_compact._limits import MAX_DEPTH, too_deep
from bareagent_compact.ledger.features import text_features
from bareagent_compact.protocols import Message

_STRUCTURE_KEYS: Final = frozenset(("role", "type"))
_KEY_ENDS: Final = 64
_MEDIA_TYPES: Final = frozenset(
    ("image", "document", "image_url", "input_image", "input_file", "file", "input_audio")
)
"""Block types that carry an image, a file or audio: each costs about a fixed amount."""
_PAYLOAD: Final = 256
"""Strings longer than this that are encoded payloads are not read as text."""


def _read(value: dict[Any, Any] | list[Any], strings: list[str], media: list[int]) -> Any:
    """A copy of the dicts and lists in message ``value`` (everything else shared),
    appending the text the model reads to ``strings``.

    The keys of a data dict (a tool's input) are text; those of a message or a
    block (a dict with a ``role`` or a ``type``) are structure, as are the values
    of ``role`` and ``type``. Images and files are counted in ``media``; their
    encoded payload (a ``data:`` URL, a ``source``'s ``data``) is not text.
    """
    if isinstance(value, dict):
        return _read_dict(value, 0, False, strings, media)
    return _read_list(value, 0, False, strings, media)


def _read_dict(
    value: dict[Any, Any], depth: int, data: bool, strings: list[str], media: list[int]
) -> dict[Any, Any]:
    """:func:`_read` of a dict: decides whether it is a data dict (``data``, or
    neither ``role`` nor ``type``) or a message or block, and counts its media."""
    if depth > MAX_DEPTH:
        raise too_deep()
    keys = data or not ("type" in value or "role" in value)
    block_type = value.get("type")
    if type(block_type) is str and block_type in _MEDIA_TYPES:
        media.append(1)
    payload = "media_type" in value  # an Anthropic source: its "data" is encoded
    if keys:
        return _read_data(value, depth, strings, media, payload)
    return _read_block(value, depth, strings, media, payload)


def _read_data(
    value: dict[Any, Any], depth: int, strings: list[str], media: list[int], payload: bool
) -> dict[Any, Any]:
    """A data dict (one with neither ``role`` nor ``type``, such as a tool's input, and
    every dict below one): every key and value is text, nested ones too."""
    add = strings.append
    copy: dict[Any, Any] = {}
    for key, item in value.items():
        add(key if type(key) is str else str(key))
        kind = type(item)
        if kind is dict:
            copy[key] = _read_dict(item, depth + 1, True, strings, media)
        elif kind is list:
            copy[key] = _read_list(item, depth + 1, True, strings, media)
        else:
            copy[key] = item
            if item is None:
                continue
            if kind is not str:
                add(str(item))
            elif len(item) <= _PAYLOAD or not _is_payload(item, key, payload):
                add(item)
    return copy


def _read_block(
    value: dict[Any, Any], depth: int, strings: list[str], media: list[int], payload: bool
) -> dict[Any, Any]:
    """A message or a block: its keys and the values of ``role`` and ``type`` are
    structure, its other values text."""
    add = strings.append
    copy: dict[Any, Any] = {}
    for key, item in value.items():
        kind = type(item)
        if kind is dict:
            copy[key] = _read_dict(item, depth + 1, False, strings, media)
        elif kind is list:
            copy[key] = _read_list(item, depth + 1, False, strings, media)
        else:
            copy[key] = item
            if item is None or key in _STRUCTURE_KEYS:
                continue
            if kind is not str:
                add(str(item))
            elif len(item) <= _PAYLOAD or not _is_payload(item, key, payload):
                add(item)
    return copy


def _is_payload(text: str, key: Any, payload: bool) -> bool:
    """Whether a long string is encoded data (a ``data:`` URL, a source's ``data``)."""
    return text.startswith("data:") or (payload and key == "data")


def _read_list(
    value: list[Any], depth: int, data: bool, strings: list[str], media: list[int]
) -> list[Any]:
    """:func:`_read` of a list: its items are read as the values of its dict."""
    if depth > MAX_DEPTH:
        raise too_deep()
    add = strings.append
    items: list[Any] = []
    for item in value:
        kind = type(item)
        if kind is dict:
            items.append(_read_dict(item, depth + 1, data, strings, media))
            continue
        if kind is list:
            items.append(_read_list(item, depth + 1, data, strings, media))
            continue
        if item is not None:
            add(item if kind is str else str(item))
        items.append(item)
    return items


def read_message(message: Message) -> tuple[Message, list[float], int]:
    """A copy of ``message``'s dicts and lists, its feature vector (see
    :data:`FEATURES`) and a hash of its text (equal messages, equal hashes)."""
    strings: list[str] = []
    media: list[int] = []
    copy = _read(message, strings, media)
    text = "\n".join(strings)
    features = [1.0, float(len(strings)), float(len(media)), *text_features(text)]
    # Equal messages have equal keys; unequal ones rarely do (a copy comparison decides).
    return copy, features, hash((*features, text[:_KEY_ENDS], text[-_KEY_ENDS:]))


def message_features(message: Message) -> list[float]:
    """The feature vector of one message (see :data:`FEATURES`)."""
    return read_message(message)[1]
