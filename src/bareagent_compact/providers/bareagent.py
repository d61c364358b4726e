"""The BareAgent adapter: a summary from BareAgent's ``provider.create``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, overload

from bareagent_compact.providers._common import (
    DEFAULT_MAX_TOKENS,
    AsyncSummaryFunction,
    Prompt,
    SummaryFunction,
    _check_max_tokens,
    _detect_async,
    _method,
    _split_prompt,
    _sync_or_async,
    _unusable,
)

__all__ = ["bareagent_provider"]


def _read_bareagent(response: object) -> str:
    """The ``text`` of BareAgent's ``LLMResponse``; ``""`` when it has none."""
    text = response if isinstance(response, str) else getattr(response, "text", None)
    if not isinstance(text, str):
        raise TypeError(
            f"expected a response with a str attribute text, got {type(response).__name__}"
        )
    if not text.strip():
        return _unusable("bareagent_provider", "empty text")
    return text


@overload
def bareagent_provider(
    provider: object, max_tokens: int = ..., *, is_async: Literal[False]
) -> SummaryFunction: ...
@overload
def bareagent_provider(
    provider: object, max_tokens: int = ..., *, is_async: Literal[True]
) -> AsyncSummaryFunction: ...
@overload
def bareagent_provider(provider: object, max_tokens: int = ..., *, is_async: None = ...) -> Any: ...
def bareagent_provider(
    provider: object, max_tokens: int = DEFAULT_MAX_TOKENS, *, is_async: bool | None = None
) -> SummaryFunction | AsyncSummaryFunction | Any:
    """A provider calling BareAgent's ``provider.create(messages=..., tools=[], max_tokens=...)``.

    The prompt is passed as it is (BareAgent keeps system messages in the list)
    with no tools; the summary is the response's ``.text``. ``provider.create``
    is looked up at each call, not here, so a placeholder object may be wrapped
    at construction: one without a callable ``create`` raises ``TypeError`` when
    the summary is asked for (inside a compactor, a logged provider failure).
    """
    max_tokens = _check_max_tokens(max_tokens)
    try:
        found: Callable[..., Any] | None = _method(provider, "create")
    except TypeError:
        found = None  # a placeholder: sync unless is_async or its class says otherwise

    def create(**body: Any) -> Any:
        return _method(provider, "create")(**body)

    def request(prompt: Prompt) -> dict[str, Any]:
        _split_prompt(prompt)  # the same checks as the other providers
        messages = [{"role": m.get("role"), "content": m.get("content")} for m in prompt]
        return {"messages": messages, "tools": [], "max_tokens": max_tokens}

    return _sync_or_async(
        create,
        _detect_async(provider, found or create, is_async),
        request,
        _read_bareagent,
        "bareagent_provider",
    )
