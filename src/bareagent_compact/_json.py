"""One place that turns arbitrary values into JSON text, with clear errors."""

from __future__ import annotations

import json
import logging
import math
from collections import Counter
from typing import Any, Final

logger = logging.getLogger(__name__)

SUFFIX_SEPARATOR: Final = "#"
"""A key that collides with an earlier one is kept as ``key#2`` (or the next free number)."""


def _fallback(value: object) -> str:
    """Render values JSON cannot encode (bytes, sets, objects) as their ``str``."""
    return str(value)


def _key_text(key: object) -> str | None:
    """The text ``json.dumps`` writes for a dict key, or ``None`` when it cannot write it."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        if math.isnan(key):
            return "NaN"
        if math.isinf(key):
            return "Infinity" if key > 0 else "-Infinity"
        return float.__repr__(key)
    return None


def has_only_str_keys(value: Any) -> bool:
    """Whether every dict inside ``value`` has ``str`` keys only.

    Then JSON writes every key as it is and reads every value back. The walk
    uses no recursion and visits each container once, so deep or cyclic data
    is left for the encoder to refuse.
    """
    stack = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if id(item) in seen:
                continue
            seen.add(id(item))
            for key in item:
                if not isinstance(key, str):
                    return False
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            if id(item) in seen:
                continue
            seen.add(id(item))
            stack.extend(item)
    return True


def _free_key(text: str, taken: set[str]) -> str:
    """``text#n`` with the smallest ``n >= 2`` not in ``taken``."""
    number = 2
    while f"{text}{SUFFIX_SEPARATOR}{number}" in taken:
        number += 1
    return f"{text}{SUFFIX_SEPARATOR}{number}"


def with_plain_keys(
    value: Any,
    fallbacks: Counter[str] | None = None,
    renamed: Counter[str] | None = None,
    active: set[int] | None = None,
) -> Any:
    """A copy of the containers in ``value`` whose dict keys are the strings JSON writes.

    A key becomes the text JSON would write for it (``1`` -> ``"1"``); a key JSON
    cannot encode becomes its ``str`` (counted by type in ``fallbacks``). When a
    key comes out as the text of an earlier key of the same dict (``1`` and
    ``"1"``), it is kept as ``key#2`` (the smallest free number, never the text
    of another key of that dict) and counted by type in ``renamed``, so that no
    value is lost. A cycle raises ``ValueError``.
    """
    active = set() if active is None else active
    if not isinstance(value, dict | list | tuple):
        return value
    if id(value) in active:
        raise ValueError("Circular reference detected")
    active.add(id(value))
    try:
        if not isinstance(value, dict):
            return [with_plain_keys(item, fallbacks, renamed, active) for item in value]
        texts = _key_texts(value, fallbacks)
        taken = set(texts)
        plain: dict[str, Any] = {}
        for wanted, (key, item) in zip(texts, value.items(), strict=True):
            text = wanted
            if text in plain:
                text = _free_key(wanted, taken)
                taken.add(text)
                if renamed is not None:
                    renamed[type(key).__name__] += 1
            plain[text] = with_plain_keys(item, fallbacks, renamed, active)
        return plain
    finally:
        active.discard(id(value))


def _key_texts(value: dict[Any, Any], fallbacks: Counter[str] | None) -> list[str]:
    """The text JSON writes for each key of ``value``, or its ``str`` (counted by type
    in ``fallbacks``) for a key JSON cannot encode."""
    texts: list[str] = []
    for key in value:
        text = _key_text(key)
        if text is None:
            if fallbacks is not None:
                fallbacks[type(key).__name__] += 1
            text = str(key)
        texts.append(text)
    return texts


def to_json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)`` that never fails on odd types.

    Values JSON cannot encode are rendered with ``str``, and so are dict keys it
    cannot encode. Cyclic or pathologically deep data raises ``ValueError``
    instead of a ``RecursionError`` from inside.
    """
    try:
        try:
            return json.dumps(value, ensure_ascii=False, default=_fallback)
        except TypeError:  # a dict key that is not str, int, float, bool or None
            return json.dumps(with_plain_keys(value), ensure_ascii=False, default=_fallback)
    except RecursionError:
        raise ValueError("message content is nested too deeply to encode as JSON") from None
    except ValueError as exc:  # "Circular reference detected", NaN handling is allowed
        raise ValueError(f"message content cannot be encoded as JSON: {exc}") from None


def log_renamed(what: str, renamed: Counter[str], log: logging.Logger = logger) -> None:
    """Warn on ``log`` that keys were renamed to keep their values (counts and types only)."""
    if renamed:
        log.warning(
            "%s: %d dict key(s) would have replaced another key of the same dict once "
            "written as JSON (such as 1 and \"1\"); each was kept under a '%sn' suffix "
            "(types: %s)",
            what,
            sum(renamed.values()),
            SUFFIX_SEPARATOR,
            ", ".join(sorted(renamed)),
        )


def json_copy(value: Any) -> Any:
    """A JSON-level deep copy: the structure as JSON would round-trip it.

    Keys of one dict that JSON would write alike (``1`` and ``"1"``) are kept
    apart by a suffix on the later one (see :func:`with_plain_keys`), with a
    warning, instead of one value silently replacing the other.
    """
    if has_only_str_keys(value):
        return json.loads(to_json(value))
    renamed: Counter[str] = Counter()
    try:
        plain = with_plain_keys(value, None, renamed)
    except RecursionError:
        raise ValueError("message content is nested too deeply to encode as JSON") from None
    except ValueError as exc:
        raise ValueError(f"message content cannot be encoded as JSON: {exc}") from None
    copied = json.loads(to_json(plain))
    log_renamed("JSON-level copy", renamed)
    return copied
