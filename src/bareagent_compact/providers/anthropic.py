"""The Anthropic adapters: a summary from ``client.messages.create``, and the
on-demand server compaction of ``client.beta.messages.create``."""

from __future__ import annotations

from typing import Any, Literal, overload

from bareagent_compact.protocols import ServerCompactionRequest, ServerSummary
from bareagent_compact.providers._common import (
    DEFAULT_MAX_TOKENS,
    AsyncServerSummaryFunction,
    AsyncSummaryFunction,
    Prompt,
    ServerSummaryFunction,
    SummaryFunction,
    _check_max_tokens,
    _check_model,
    _detect_async,
    _get,
    _is_list,
    _method,
    _split_prompt,
    _sync_or_async,
    _texts,
    _unusable,
    logger,
)
from bareagent_compact.providers._server import (
    ANTHROPIC_COMPACTION_BETA,
    _as_sent,
    _check_request,
    _server_sync_or_async,
    _systems,
    _with_beta,
)

__all__ = ["anthropic_provider", "anthropic_server_compaction"]


def _read_anthropic(response: object) -> str:
    """Text blocks of a Messages API response; ``""`` on a refusal or without text."""
    content = _get(response, "content")
    if not _is_list(content):
        raise TypeError(
            "expected an Anthropic Message with a content list (streaming is not supported), "
            f"got {type(response).__name__}"
        )
    stop = _get(response, "stop_reason")
    if stop == "refusal":
        return _unusable("anthropic_provider", "the model refused")
    text = "".join(_texts(content, "text"))
    if not text.strip():
        return _unusable("anthropic_provider", f"no text in the answer, stop_reason {stop!r}")
    if stop == "max_tokens":
        logger.warning("anthropic_provider: the summary was cut at max_tokens; kept as it is")
    return text


@overload
def anthropic_provider(
    client: object,
    model: str,
    max_tokens: int = ...,
    *,
    is_async: Literal[False],
    **create_kwargs: Any,
) -> SummaryFunction: ...
@overload
def anthropic_provider(
    client: object,
    model: str,
    max_tokens: int = ...,
    *,
    is_async: Literal[True],
    **create_kwargs: Any,
) -> AsyncSummaryFunction: ...
@overload
def anthropic_provider(
    client: object,
    model: str,
    max_tokens: int = ...,
    *,
    is_async: None = ...,
    **create_kwargs: Any,
) -> Any: ...
def anthropic_provider(
    client: object,
    model: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    *,
    is_async: bool | None = None,
    **create_kwargs: Any,
) -> SummaryFunction | AsyncSummaryFunction | Any:
    """A provider calling ``client.messages.create`` (Anthropic Messages API).

    The prompt's system message becomes ``system=``, the user message the only
    entry of ``messages=``; ``create_kwargs`` (``temperature``, ``metadata``,
    ``extra_headers``, ...) are passed on. The summary is the text blocks of the
    answer joined; a refusal or an answer without text gives ``""``.
    """
    create = _method(client, "messages.create")
    model = _check_model(model)
    max_tokens = _check_max_tokens(max_tokens)

    def request(prompt: Prompt) -> dict[str, Any]:
        return {**transcript_body(prompt, model, max_tokens), **create_kwargs}

    return _sync_or_async(
        create,
        _detect_async(client, create, is_async),
        request,
        _read_anthropic,
        "anthropic_provider",
    )


def transcript_body(prompt: Prompt, model: str, max_tokens: int) -> dict[str, Any]:
    """The Messages request of the transcript prompt: its system message as
    ``system=``, its user message the only entry of ``messages=``."""
    system, dialogue = _split_prompt(prompt)
    body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": dialogue}
    if system:
        body["system"] = system
    return body


def _read_anthropic_compaction(response: object) -> ServerSummary:
    """The one compaction block of an on-demand compaction's answer, as sent."""
    content = _get(response, "content")
    if not _is_list(content):
        raise TypeError(f"expected an Anthropic Message, got {type(response).__name__}")
    blocks = [_as_sent(b) for b in content if _get(b, "type") == "compaction"]
    if len(blocks) != 1:
        stop = _get(response, "stop_reason")
        raise ValueError(f"expected one compaction block, got {len(blocks)} (stop_reason {stop!r})")
    text = blocks[0].get("content")
    if not isinstance(text, str) or not text:
        raise ValueError("the compaction block has no content (a no-op block)")
    return ServerSummary(({"role": "assistant", "content": blocks},), text)


@overload
def anthropic_server_compaction(
    client: object, model: str, max_tokens: int = ..., *,
    is_async: Literal[False], **create_kwargs: Any,
) -> ServerSummaryFunction: ...
@overload
def anthropic_server_compaction(
    client: object, model: str, max_tokens: int = ..., *,
    is_async: Literal[True], **create_kwargs: Any,
) -> AsyncServerSummaryFunction: ...
@overload
def anthropic_server_compaction(
    client: object, model: str, max_tokens: int = ..., *,
    is_async: None = ..., **create_kwargs: Any,
) -> Any: ...
def anthropic_server_compaction(
    client: object,
    model: str,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    *,
    is_async: bool | None = None,
    **create_kwargs: Any,
) -> ServerSummaryFunction | AsyncServerSummaryFunction | Any:
    """A server summariser: Anthropic's on-demand compaction.

    Calls ``client.beta.messages.create(model=, max_tokens=, messages=,
    compaction={"type": "summarize", "instructions"?: focus})`` with the
    conversation's own messages; its system messages become ``system=`` unless
    ``create_kwargs`` give one. Pass the conversation's ``tools=`` (and
    ``betas=``, ``system=`` ...) in ``create_kwargs``, as the API wants the
    request to be the conversation's own. The request carries the beta the
    ``compaction`` parameter requires (``compact-2026-09-04``), added to the
    ``betas=`` given (or to an ``anthropic-beta`` header in ``extra_headers``).
    The answer's compaction block, exactly as sent, becomes one assistant
    message that the rebuild puts in place of the messages it summarises. An
    answer without one block with content raises ``ValueError`` (a failed step:
    ``Reason.SERVER_COMPACTION_FAILED``).
    """
    create = _method(client, "beta.messages.create")
    model = _check_model(model)
    max_tokens = _check_max_tokens(max_tokens)
    create_kwargs = _with_beta(create_kwargs, ANTHROPIC_COMPACTION_BETA)

    def request(compaction: ServerCompactionRequest) -> dict[str, Any]:
        systems, dialogue = _systems(_check_request(compaction).messages)
        config: dict[str, Any] = {"type": "summarize"}
        if compaction.instructions:
            config["instructions"] = compaction.instructions
        body: dict[str, Any] = {
            "model": model, "max_tokens": max_tokens, "messages": dialogue, "compaction": config
        }
        if systems and "system" not in create_kwargs:
            body["system"] = "\n\n".join(systems)
        return {**body, **create_kwargs}

    return _server_sync_or_async(
        create,
        _detect_async(client, create, is_async),
        request,
        _read_anthropic_compaction,
        "anthropic_server_compaction",
    )
