"""One place that turns arbitrary values into JSON text, with clear errors."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any


def _fallback(value: object) -> str:
    """Render values JSON cannot encode (bytes, sets, objects) as their ``str``."""
    return str(value)


def with_plain_keys(
    value: Any, fallbacks: Counter[str] | None = None, active: set[int] | None = None
) -> Any:
    """A copy of the containers in ``value`` whose dict keys JSON can encode.

    Keys other than ``str``, ``int``, ``float``, ``bool`` and ``None`` become their
    ``str`` (counted by type in ``fallbacks``). A cycle raises ``ValueError``.
    """
    active = set() if active is None else active
    if isinstance(value, dict | list | tuple):
        if id(value) in active:
            raise ValueError("Circular reference detected")
        active.add(id(value))
        try:
            if not isinstance(value, dict):
                return [with_plain_keys(item, fallbacks, active) for item in value]
            plain: dict[Any, Any] = {}
            for key, item in value.items():
                plain_key = key
                if key is not None and not isinstance(key, str | int | float):
                    if fallbacks is not None:
                        fallbacks[type(key).__name__] += 1
                    plain_key = str(key)
                plain[plain_key] = with_plain_keys(item, fallbacks, active)
            return plain
        finally:
            active.discard(id(value))
    return value


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


def json_copy(value: Any) -> Any:
    """A JSON-level deep copy: the structure as JSON would round-trip it."""
    return json.loads(to_json(value))
