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

import logging
from collections.abc import Mapping
from typing import Final

from bareagent_compact.result import SummaryCost
from bareagent_compact.validate import check_int

logger = logging.getLogger(__name__)

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


def _optional(usage: object, *path: str) -> int | None:
    """The ``int`` at ``path`` (``"prompt_tokens_details", "cached_tokens"``), or
    ``None`` when a field on the way is missing or ``None``."""
    value: object = usage
    for name in path:
        value = _field(value, name)
        if value is _MISSING or value is None:
            return None
    return _bounded(f"usage field {path[-1]!r}", check_int(f"usage field {path[-1]!r}", value))


def cost_of(usage: object) -> SummaryCost:
    """What one request used, from its response's usage (Anthropic, OpenAI Chat or
    Responses; dicts and SDK objects alike): a :class:`SummaryCost` of one request.

    >>> cost = cost_of({"input_tokens": 12, "cache_read_input_tokens": 3000,
    ...                 "cache_creation_input_tokens": 40, "output_tokens": 200})
    >>> cost.input_tokens, cost.cache_read_tokens, cost.cache_write_tokens, cost.output_tokens
    (3052, 3000, 40, 200)
    """
    if _field(usage, "prompt_tokens") not in (_MISSING, None):  # OpenAI Chat Completions
        read = _optional(usage, "prompt_tokens_details", "cached_tokens")
        output = _optional(usage, "completion_tokens")
        return SummaryCost(1, _reported_size(usage), read, None, output)
    size = _reported_size(usage)
    output = _optional(usage, "output_tokens")
    if _field(usage, "input_tokens_details") not in (_MISSING, None):  # OpenAI Responses
        return SummaryCost(1, size, _optional(usage, "input_tokens_details", "cached_tokens"),
                           None, output)
    read, write = (_optional(usage, name) for name in _ANTHROPIC_CACHE_FIELDS)
    return SummaryCost(1, size, read, write, output)


def answer_cost(answer: object) -> SummaryCost:
    """What the request that gave ``answer`` used: a provider's answer with a
    ``usage`` (a :class:`~bareagent_compact.providers.SummaryText` of the built-in
    adapters, an SDK response returned as it is, or its dict). One request of
    unknown tokens when it reports none, or a usage that cannot be read (logged)."""
    usage = _field(answer, "usage")
    if usage is _MISSING or usage is None:
        return SummaryCost(1)
    try:
        return cost_of(usage)
    except (TypeError, ValueError):
        logger.info("the summary answer's usage could not be read; its cost is unknown",
                    exc_info=True)
        return SummaryCost(1)
