"""The OpenAI Responses adapters: a summary from ``client.responses.create``, and
the server compaction of ``client.responses.compact``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal, overload

from bareagent_compact.protocols import ServerCompactionRequest, ServerSummary
from bareagent_compact.providers._common import (
    AsyncServerSummaryFunction,
    AsyncSummaryFunction,
    Prompt,
    ServerSummaryFunction,
    SummaryFunction,
    _check_model,
    _detect_async,
    _get,
    _is_list,
    _method,
    _split_prompt,
    _sync_or_async,
    _unusable,
    logger,
)
from bareagent_compact.providers._server import (
    _as_sent,
    _check_request,
    _server_sync_or_async,
    _systems,
)

__all__ = ["openai_responses_compaction", "openai_responses_provider"]


def _read_responses(response: object) -> str:
    """The ``output_text`` parts of the output messages; ``""`` on a refusal or failure."""
    output = _get(response, "output")
    if not _is_list(output):
        raise TypeError(
            "expected a Responses API Response with an output list (streaming is not "
            f"supported), got {type(response).__name__}"
        )
    status = _get(response, "status")
    if status in ("failed", "cancelled") or _get(response, "error"):
        return _unusable("openai_responses_provider", f"the response has status {status!r}")
    texts = _output_texts(output)
    if texts is None:
        return _unusable("openai_responses_provider", "the model refused")
    text = "".join(texts)
    if not text.strip():
        return _unusable("openai_responses_provider", f"no text in the answer, status {status!r}")
    if status == "incomplete":
        logger.warning("openai_responses_provider: the summary is incomplete; kept as it is")
    return text


def _output_texts(output: Iterable[object]) -> list[str] | None:
    """The ``output_text`` parts of the output messages, in order; ``None`` at a refusal."""
    texts: list[str] = []
    for item in output:
        if _get(item, "type") != "message":
            continue  # reasoning and other items carry no answer text
        for part in _get(item, "content") or ():
            kind = _get(part, "type")
            if kind == "refusal":
                return None
            text = _get(part, "text")
            if kind == "output_text" and isinstance(text, str):
                texts.append(text)
    return texts


@overload
def openai_responses_provider(
    client: object, model: str, *, is_async: Literal[False], **create_kwargs: Any
) -> SummaryFunction: ...
@overload
def openai_responses_provider(
    client: object, model: str, *, is_async: Literal[True], **create_kwargs: Any
) -> AsyncSummaryFunction: ...
@overload
def openai_responses_provider(
    client: object, model: str, *, is_async: None = ..., **create_kwargs: Any
) -> Any: ...
def openai_responses_provider(
    client: object, model: str, *, is_async: bool | None = None, **create_kwargs: Any
) -> SummaryFunction | AsyncSummaryFunction | Any:
    """A provider calling ``client.responses.create`` (OpenAI Responses API).

    The prompt's system message becomes ``instructions=``, the user message the
    ``input=``; ``create_kwargs`` (``max_output_tokens``, ``store``,
    ``reasoning``, ...) are passed on. The summary is the ``output_text`` parts
    of the output messages joined; a refusal, a failed response or no text
    gives ``""``.
    """
    create = _method(client, "responses.create")
    model = _check_model(model)

    def request(prompt: Prompt) -> dict[str, Any]:
        return {**transcript_body(prompt, model), **create_kwargs}

    return _sync_or_async(
        create,
        _detect_async(client, create, is_async),
        request,
        _read_responses,
        "openai_responses_provider",
    )


def transcript_body(prompt: Prompt, model: str) -> dict[str, Any]:
    """The Responses request of the transcript prompt: its system message as
    ``instructions=``, its user message the only input item."""
    system, dialogue = _split_prompt(prompt)
    body: dict[str, Any] = {"model": model, "input": dialogue}
    if system:
        body["instructions"] = system
    return body


def _read_compacted(response: object) -> ServerSummary:
    """The output window of ``responses.compact``: items as sent, one compaction item last."""
    output = _get(response, "output")
    if not _is_list(output):
        raise TypeError(f"expected a CompactedResponse, got {type(response).__name__}")
    items = [_as_sent(item) for item in output]
    kinds = [item.get("type") for item in items]
    if kinds.count("compaction") != 1 or kinds[-1] != "compaction":
        raise ValueError("expected an output window ending with its one compaction item")
    return ServerSummary(tuple(items))


@overload
def openai_responses_compaction(
    client: object, model: str, *, is_async: Literal[False], **compact_kwargs: Any
) -> ServerSummaryFunction: ...
@overload
def openai_responses_compaction(
    client: object, model: str, *, is_async: Literal[True], **compact_kwargs: Any
) -> AsyncServerSummaryFunction: ...
@overload
def openai_responses_compaction(
    client: object, model: str, *, is_async: None = ..., **compact_kwargs: Any
) -> Any: ...
def openai_responses_compaction(
    client: object, model: str, *, is_async: bool | None = None, **compact_kwargs: Any
) -> ServerSummaryFunction | AsyncServerSummaryFunction | Any:
    """A server summariser: OpenAI's ``client.responses.compact``.

    Sends the conversation's own items as ``input=``; its system and developer
    messages of text, then the focus instructions, become ``instructions=``
    (after the ``instructions`` of ``compact_kwargs`` when given). The output
    window (the user messages, then one compaction item), exactly as sent, is
    what the rebuild puts in place of the items it summarises. An answer of
    another shape raises ``ValueError`` (``Reason.SERVER_COMPACTION_FAILED``).
    """
    compact = _method(client, "responses.compact")
    model = _check_model(model)

    def request(compaction: ServerCompactionRequest) -> dict[str, Any]:
        systems, items = _systems(_check_request(compaction).messages)
        given = compact_kwargs.get("instructions")
        texts = [t for t in (given, *systems, compaction.instructions) if t]
        body: dict[str, Any] = {**compact_kwargs, "model": model, "input": items}
        if texts:
            body["instructions"] = "\n\n".join(texts)
        return body

    return _server_sync_or_async(
        compact,
        _detect_async(client, compact, is_async),
        request,
        _read_compacted,
        "openai_responses_compaction",
    )
