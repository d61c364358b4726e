"""The full input size of a request, read from the usage a model API reported.

Providers name and split the number differently:

- Anthropic Messages: ``input_tokens`` excludes what was read from or written to
  the prompt cache, so the size is ``input_tokens + cache_read_input_tokens +
  cache_creation_input_tokens`` (fields that are ``None`` or missing count as 0);
- OpenAI Chat Completions: ``prompt_tokens`` (cached tokens already included);
- OpenAI Responses: ``input_tokens`` (cached tokens already included).

Dicts and SDK objects are read alike (by key or by attribute), so no SDK is imported.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from bareagent_compact.validate import check_int

_ANTHROPIC_CACHE_FIELDS: Final = ("cache_read_input_tokens", "cache_creation_input_tokens")
_MISSING: Final = object()

MAX_INPUT_TOKENS: Final = 2**53 - 1
"""The largest size a usage may report (far beyond any context window, exact as a float)."""


def _field(usage: object, name: str) -> object:
    """``usage[name]`` for a mapping, ``usage.name`` otherwise; ``_MISSING`` if absent."""
    if isinstance(usage, Mapping):
        return usage.get(name, _MISSING)
    return getattr(usage, name, _MISSING)


def _tokens(usage: object, name: str, *, optional: bool = False) -> int:
    """The non-negative ``int`` in field ``name``; ``None`` counts as 0 when ``optional``."""
    value = _field(usage, name)
    if value is _MISSING or value is None:
        if optional:
            return 0
        raise ValueError(f"usage field {name!r} is {'None' if value is None else 'missing'}")
    return _bounded(f"usage field {name!r}", check_int(f"usage field {name!r}", value))


def _bounded(name: str, size: int) -> int:
    """``size`` unless it is beyond ``MAX_INPUT_TOKENS`` (which no request reaches)."""
    if size > MAX_INPUT_TOKENS:
        raise ValueError(
            f"{name} must be at most {MAX_INPUT_TOKENS}, got a {size.bit_length()}-bit number"
        )
    return size


def input_tokens_of(usage: object) -> int:
    """The full input size of one request, from the usage its response reported.

    ``usage`` is an ``int`` (taken as is), or the usage object or dict of an
    Anthropic, OpenAI Chat or OpenAI Responses response. Raises ``TypeError`` for
    anything else (a ``float`` too), ``ValueError`` for a negative or missing size
    or one above ``MAX_INPUT_TOKENS``.

    >>> input_tokens_of({"input_tokens": 12, "cache_read_input_tokens": 3000,
    ...                  "cache_creation_input_tokens": None})
    3012
    >>> input_tokens_of({"prompt_tokens": 2048, "completion_tokens": 17})
    2048
    """
    if isinstance(usage, int):
        return _plain_size(usage)
    if usage is None or isinstance(usage, (str, bytes, float)):
        raise TypeError(f"usage must be an int or a usage object, got {type(usage).__name__}")
    return _reported_size(usage)


def _plain_size(usage: int) -> int:
    """An ``int`` taken as the size itself (not a ``bool``, never negative)."""
    if isinstance(usage, bool):
        raise TypeError("usage must be an int or a usage object, got bool")
    if usage < 0:
        raise ValueError(f"usage must be >= 0, got {usage}")
    return _bounded("usage", usage)


def _reported_size(usage: object) -> int:
    """The size in a usage object or dict, whichever API's fields it has."""
    if _field(usage, "prompt_tokens") not in (_MISSING, None):
        return _tokens(usage, "prompt_tokens")  # OpenAI Chat Completions
    if _field(usage, "input_tokens") is _MISSING:
        raise TypeError(
            "usage has neither input_tokens nor prompt_tokens: expected an int or the usage "
            f"of an Anthropic or OpenAI response, got {type(usage).__name__}"
        )
    fields = ("input_tokens", *_ANTHROPIC_CACHE_FIELDS)
    if all(_field(usage, name) in (_MISSING, None) for name in fields):
        raise ValueError("usage field 'input_tokens' is None")
    # Anthropic reports cached tokens apart; OpenAI Responses has no such fields.
    return _bounded("usage", sum(_tokens(usage, name, optional=True) for name in fields))
