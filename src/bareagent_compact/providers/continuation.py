"""Continuation summarisers: the summary asked on the loop's own cached prefix.

Each factory is given what the loop sends with every request (``system=`` or
``instructions=``, ``tools=``, the cache settings, any other request keywords)
and returns a provider marked as a continuation summariser. For a full
compaction the compactor calls it with a
:class:`~bareagent_compact.protocols.ContinuationRequest`: the request is the
loop's own (same model, system prompt, tools and message bytes) with one user
message after the history, the instruction. Called with the two-message prompt
(the fallback), it makes the transcript request of the plain adapters.

``tool_choice`` is left as the loop sends it (absent, or given in the request
keywords): Anthropic documents a ``tool_choice`` change as invalidating the
cached message blocks, and OpenAI caches a prefix only when the request's
start is the same. An answer holding a tool call is read for its text; with
none, it is an unusable summary (the history is kept, a warning logged).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

from bareagent_compact.protocols import CONTINUATION_ATTRIBUTE, ContinuationRequest, Message
from bareagent_compact.providers import anthropic, openai_chat, openai_responses
from bareagent_compact.providers._common import (
    DEFAULT_MAX_TOKENS,
    AsyncSummaryFunction,
    Prompt,
    SummaryFunction,
    _check_max_tokens,
    _check_model,
    _detect_async,
    _get,
    _is_list,
    _method,
    _sync_or_async,
    logger,
)
from bareagent_compact.providers._server import _systems
from bareagent_compact.providers.anthropic import _read_anthropic
from bareagent_compact.providers.openai_chat import _read_chat
from bareagent_compact.providers.openai_responses import _read_responses

__all__ = [
    "anthropic_continuation_provider",
    "openai_chat_continuation_provider",
    "openai_responses_continuation_provider",
]

MAX_BREAKPOINTS: Final = 4
"""Anthropic takes at most four ``cache_control`` breakpoints per request."""

SYSTEM_ROLES: Final = ("system", "developer")


def _check_list(name: str, value: object) -> list[Any] | None:
    """``value`` as a list (``None`` stays ``None``), or a clear TypeError."""
    if value is None:
        return None
    if not _is_list(value):
        raise TypeError(f"{name} must be a list or None, got {type(value).__name__}")
    return list(cast(Sequence[Any], value))


def _check_mapping(name: str, value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise TypeError(f"{name} must be a dict or None, got {type(value).__name__}")
    return dict(value)


def _continuing(
    create: Callable[..., Any],
    is_async: bool,
    *,
    continuation: Callable[[ContinuationRequest], dict[str, Any]],
    transcript: Callable[[Prompt], dict[str, Any]],
    read: Callable[[object], str],
    label: str,
) -> SummaryFunction | AsyncSummaryFunction:
    """One provider around ``create``, marked as a continuation summariser: the
    continuation request for a ContinuationRequest, the transcript request for a
    prompt."""

    def request(prompt: Prompt) -> dict[str, Any]:
        if isinstance(prompt, ContinuationRequest):
            return continuation(prompt)
        return transcript(prompt)

    summarize = _sync_or_async(create, is_async, request, _reading(read, label), label)
    setattr(summarize, CONTINUATION_ATTRIBUTE, True)
    return summarize


def _reading(read: Callable[[object], str], label: str) -> Callable[[object], str]:
    """``read``, telling when the answer is a tool call (its text, if any, is used)."""

    def read_answer(response: object) -> str:
        text = read(response)
        if _called_tool(response):
            logger.warning(
                "%s: the model answered with a tool call%s", label,
                "; its text is used" if text else ": no summary",
            )
        return text

    return read_answer


def _called_tool(response: object) -> bool:
    """Whether an Anthropic, Chat or Responses answer holds a tool call."""
    content = _get(response, "content")
    if _is_list(content) and any(_get(b, "type") == "tool_use" for b in content):
        return True
    choices = _get(response, "choices")
    if _is_list(choices) and choices and _get(_get(choices[0], "message"), "tool_calls"):
        return True
    output = _get(response, "output")
    return _is_list(output) and any(_get(i, "type") == "function_call" for i in output)


def _breakpoints(value: object) -> int:
    """How many ``cache_control`` markers ``value`` holds, at any depth."""
    if isinstance(value, Mapping):
        own = 1 if value.get("cache_control") is not None else 0
        return own + sum(_breakpoints(v) for v in value.values())
    if isinstance(value, list | tuple):
        return sum(_breakpoints(v) for v in value)
    return 0


def _anthropic_split(
    messages: Sequence[Message], system: object
) -> tuple[object, list[Message]]:
    """The ``system=`` to send (the one given, else the texts of the history's
    system messages joined, else ``None``) and the history without its system
    messages."""
    texts, rest = _systems(messages)
    if system is None and texts:
        system = "\n\n".join(texts)
    return system, [cast(Message, m) for m in rest if m.get("role") not in SYSTEM_ROLES]


def anthropic_continuation_provider(
    client: object,
    model: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    *,
    system: object = None,
    tools: Sequence[Any] | None = None,
    cache_control: Mapping[str, Any] | None = None,
    is_async: bool | None = None,
    **create_kwargs: Any,
) -> Any:
    """A continuation summariser calling ``client.messages.create``.

    ``system``, ``tools`` and ``create_kwargs`` (``tool_choice``, ``thinking``,
    a top-level ``cache_control`` as ``extra_body``, ``betas`` ...) are the ones
    the loop sends, passed as they are. ``cache_control`` (e.g.
    ``{"type": "ephemeral"}``): the breakpoint the loop puts on its last block,
    put on the instruction's block (left out when the request already holds the
    API's four). The history's system messages, if any, become ``system=`` when
    none is given.
    """
    create = _method(client, "messages.create")
    model = _check_model(model)
    max_tokens = _check_max_tokens(max_tokens)
    tools = _check_list("tools", tools)
    marker = _check_mapping("cache_control", cache_control)
    plain_kwargs = _without_tools(create_kwargs)

    def continuation(request: ContinuationRequest) -> dict[str, Any]:
        given, dialogue = _anthropic_split(request.messages, system)
        block: dict[str, Any] = {"type": "text", "text": request.instruction}
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens}
        if given is not None:
            body["system"] = given
        if tools is not None:
            body["tools"] = tools
        if marker is not None and _breakpoints([given, tools, dialogue]) < MAX_BREAKPOINTS:
            block["cache_control"] = marker
        body["messages"] = [*dialogue, {"role": "user", "content": [block]}]
        return {**body, **create_kwargs}

    def transcript(prompt: Prompt) -> dict[str, Any]:
        return {**anthropic.transcript_body(prompt, model, max_tokens), **plain_kwargs}

    return _continuing(
        create, _detect_async(client, create, is_async), continuation=continuation,
        transcript=transcript, read=_read_anthropic, label="anthropic_continuation_provider",
    )


def _without_tools(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The request keywords for the transcript request: no tool settings."""
    return {k: v for k, v in kwargs.items() if k not in ("tool_choice", "parallel_tool_calls")}


def openai_chat_continuation_provider(
    client: object,
    model: str,
    *,
    tools: Sequence[Any] | None = None,
    is_async: bool | None = None,
    **create_kwargs: Any,
) -> Any:
    """A continuation summariser calling ``client.chat.completions.create``.

    The history (its system message included, as the loop keeps it) is sent as
    it is, with ``tools`` and ``create_kwargs`` (``tool_choice``,
    ``prompt_cache_key``, ``max_completion_tokens`` ...) as the loop sends them,
    then the instruction as one user message.
    """
    create = _method(client, "chat.completions.create")
    model = _check_model(model)
    tools = _check_list("tools", tools)
    plain_kwargs = _without_tools(create_kwargs)

    def continuation(request: ContinuationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": [*request.messages, {"role": "user", "content": request.instruction}],
        }
        if tools is not None:
            body["tools"] = tools
        return {**body, **create_kwargs}

    def transcript(prompt: Prompt) -> dict[str, Any]:
        return {**openai_chat.transcript_body(prompt, model), **plain_kwargs}

    return _continuing(
        create, _detect_async(client, create, is_async), continuation=continuation,
        transcript=transcript, read=_read_chat, label="openai_chat_continuation_provider",
    )


def openai_responses_continuation_provider(
    client: object,
    model: str,
    *,
    instructions: str | None = None,
    tools: Sequence[Any] | None = None,
    is_async: bool | None = None,
    **create_kwargs: Any,
) -> Any:
    """A continuation summariser calling ``client.responses.create``.

    The history's items are sent as ``input=`` as they are, after them the
    instruction as one user message, with ``instructions``, ``tools`` and
    ``create_kwargs`` (``tool_choice``, ``prompt_cache_key``, ``reasoning``,
    ``store`` ...) as the loop sends them.
    """
    create = _method(client, "responses.create")
    model = _check_model(model)
    tools = _check_list("tools", tools)
    plain_kwargs = _without_tools(create_kwargs)
    if instructions is not None and not isinstance(instructions, str):
        raise TypeError(f"instructions must be a str or None, got {type(instructions).__name__}")

    def continuation(request: ContinuationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "input": [*request.messages, {"role": "user", "content": request.instruction}],
        }
        if instructions is not None:
            body["instructions"] = instructions
        if tools is not None:
            body["tools"] = tools
        return {**body, **create_kwargs}

    def transcript(prompt: Prompt) -> dict[str, Any]:
        return {**openai_responses.transcript_body(prompt, model), **plain_kwargs}

    return _continuing(
        create, _detect_async(client, create, is_async), continuation=continuation,
        transcript=transcript, read=_read_responses, label="openai_responses_continuation_provider",
    )
