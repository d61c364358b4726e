"""Recognise a model API's "the request does not fit the context window" error.

:func:`is_context_overflow` reads an exception the way the SDKs and servers
report the error (HTTP status, error code or type, message text), duck-typed,
so no SDK is imported. It lets an agent loop react to the one error that
compaction can cure: compact with ``force=True`` and send the request again.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Final

__all__ = ["is_context_overflow"]

_MAX_LINKS: Final = 32
"""How many exceptions of a cause/context chain are read at most."""

_OVERFLOW_CODES: Final = frozenset(
    {
        "context_length_exceeded",  # OpenAI, Azure OpenAI, Groq, DeepSeek and most compatibles
        "exceed_context_size_error",  # llama.cpp server
        "model_context_window_exceeded",
        "request_too_large",  # Anthropic 413: the request body itself is too big
    }
)
"""Error codes and types that name the overflow itself."""

_NOT_OVERFLOW_CODES: Final = frozenset(
    {
        "rate_limit_exceeded",
        "rate_limit_error",
        "overloaded_error",
        "authentication_error",
        "permission_error",
        "insufficient_quota",
        "invalid_api_key",
        "billing_error",
    }
)
"""Error codes and types that settle it the other way, whatever the message says."""

_NOT_OVERFLOW_STATUS: Final = frozenset({401, 402, 403, 404, 408, 409, 429, 502, 503, 504, 529})
"""Authentication, billing, missing model, timeouts, rate limits, overload, gateways."""

_RATE_LIMIT_WORDS: Final = re.compile(
    r"rate[ _-]?limit|per min(ute)?\b|\(tpm\)|\btpm\b|quota|too many requests"
)
"""Wording of rate limits: "Request too large ... on tokens per min (TPM)" is not an overflow."""

_OVERFLOW_TEXT: Final = re.compile(
    "|".join(
        (
            r"prompt is too long",  # Anthropic: "prompt is too long: 213462 tokens > 200000 ..."
            r"prompt too long",
            r"exceed context limit",  # Anthropic: "input length and `max_tokens` exceed ..."
            r"maximum context length",  # OpenAI, vLLM, OpenRouter, DeepSeek, Mistral, Azure
            r"context[ _](length|window)[ _](is |has been |was )?exceeded",
            r"exceeds? (the )?(model's )?(maximum )?context (length|window|size|limit)",
            r"exceeds the available context size",  # llama.cpp server
            r"exceed_context_size",
            r"reduce the length of the messages",  # OpenAI, Groq, Cerebras
            r"longer than the maximum model length",  # vLLM: "The decoder prompt (length N) is ..."
            r"maximum prompt length",  # xAI
            r"exceeds the maximum number of tokens allowed",  # Gemini OpenAI-compatible endpoint
            r"input is too long",  # Amazon Bedrock
            r"too many input tokens",
            r"greater than the context length",  # LM Studio (n_keep > n_ctx)
            r"context length of only",  # LM Studio: "loaded with context length of only N tokens"
            r"tokens \+ `?max_new_tokens`? must be",  # TGI, Together, Hugging Face endpoints
            r"too large for model with \d+ maximum context",  # Mistral
            r"input length exceeds (the )?(maximum )?context length",  # Ollama
        )
    )
)
"""Message text of context-length errors, matched in lower case."""


def is_context_overflow(exc: BaseException) -> bool:
    """True if ``exc`` says the request was longer than the model's context window.

    Recognises the Anthropic SDK (400 ``invalid_request_error`` "prompt is too
    long", 413 ``request_too_large``), the OpenAI SDK (``context_length_exceeded``,
    "maximum context length", "exceeds the context window") and OpenAI-compatible
    servers (vLLM, llama.cpp, Ollama, LM Studio, TGI/Together, Groq, Mistral,
    Azure, OpenRouter, Gemini, xAI, Bedrock) by status, error code and message.

    Rate limits (even "request too large ... tokens per minute"), overload (503,
    529), authentication, billing and network errors are ``False``. The chain
    of ``__cause__`` and ``__context__`` (unless suppressed with ``from None``)
    and the members of an exception group are read too; the first exception
    that settles the question decides, starting from ``exc`` itself.
    """
    if not isinstance(exc, BaseException):
        raise TypeError(f"exc must be an exception, got {type(exc).__name__}")
    for link in _chain(exc):
        verdict = _classify(link)
        if verdict is not None:
            return verdict
    return False


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc``, then its causes, contexts and group members, each once, breadth first."""
    seen: set[int] = set()
    queue: list[BaseException] = [exc]
    while queue and len(seen) < _MAX_LINKS:
        link = queue.pop(0)
        if id(link) in seen:
            continue
        seen.add(id(link))
        yield link
        members = getattr(link, "exceptions", None)
        if isinstance(members, (tuple, list)):
            queue.extend(m for m in members if isinstance(m, BaseException))
        if link.__cause__ is not None:
            queue.append(link.__cause__)
        if link.__context__ is not None and not link.__suppress_context__:
            queue.append(link.__context__)


def _classify(exc: BaseException) -> bool | None:
    """True or False when this one exception settles the question, else ``None``."""
    if _is_network_error(exc):
        return False
    status = _status(exc)
    codes = _codes(exc)
    text = _text(exc)
    if status in _NOT_OVERFLOW_STATUS or codes & _NOT_OVERFLOW_CODES:
        return False
    if _RATE_LIMIT_WORDS.search(text):
        return False
    if codes & _OVERFLOW_CODES or _OVERFLOW_TEXT.search(text):
        return True
    return None


def _is_network_error(exc: BaseException) -> bool:
    """Connection failures and timeouts: the request never got an answer."""
    if isinstance(exc, OSError):  # ConnectionError, TimeoutError, socket errors
        return True
    name = type(exc).__name__
    return name.endswith(("ConnectionError", "ConnectError", "TimeoutError", "Timeout"))


def _status(exc: BaseException) -> int | None:
    """The HTTP status the exception carries, if any."""
    candidates = [getattr(exc, name, None) for name in ("status_code", "status", "http_status")]
    candidates.append(getattr(getattr(exc, "response", None), "status_code", None))
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _error_objects(exc: BaseException) -> Iterator[Mapping[object, object]]:
    """The JSON error bodies the exception holds: ``body`` and its ``error`` member."""
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        yield body
        inner = body.get("error")
        if isinstance(inner, Mapping):
            yield inner


def _codes(exc: BaseException) -> set[str]:
    """Error codes and types, lower case: attributes first, then the JSON body."""
    values: list[object] = [getattr(exc, name, None) for name in ("code", "type", "error_code")]
    for error in _error_objects(exc):
        values.extend(error.get(key) for key in ("code", "type"))
    return {value.lower() for value in values if isinstance(value, str)}


def _text(exc: BaseException) -> str:
    """Every message the exception carries, lower case, joined."""
    pieces: list[str] = []
    try:
        pieces.append(str(exc))
    except Exception:  # a broken __str__ must not hide the rest
        pieces.append(type(exc).__name__)
    for name in ("message", "body"):  # the OpenAI SDK keeps a string ``error`` as the body
        value = getattr(exc, name, None)
        if isinstance(value, str):
            pieces.append(value)
    for error in _error_objects(exc):
        for key in ("message", "detail", "error"):
            value = error.get(key)
            if isinstance(value, str):
                pieces.append(value)
    return "\n".join(pieces).lower()
