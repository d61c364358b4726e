"""One place that turns arbitrary values into JSON text, with clear errors."""

from __future__ import annotations

import json
from typing import Any


def _fallback(value: object) -> str:
    """Render values JSON cannot encode (bytes, sets, objects) as their ``str``."""
    return str(value)


def to_json(value: Any) -> str:
    """``json.dumps(value, ensure_ascii=False)`` that never fails on odd types.

    Values JSON cannot encode are rendered with ``str``. Cyclic or pathologically
    deep data raises ``ValueError`` instead of a ``RecursionError`` from inside.
    """
    try:
        return json.dumps(value, ensure_ascii=False, default=_fallback)
    except RecursionError:
        raise ValueError("message content is nested too deeply to encode as JSON") from None
    except ValueError as exc:  # "Circular reference detected", NaN handling is allowed
        raise ValueError(f"message content cannot be encoded as JSON: {exc}") from None


def json_copy(value: Any) -> Any:
    """A JSON-level deep copy: the structure as JSON would round-trip it."""
    return json.loads(to_json(value))
