"""The OpenAI Chat Completions adapter: a summary from
``client.chat.completions.create``, for OpenAI and every compatible server."""

from __future__ import annotations

from typing import Any, Literal, overload

from bareagent_compact.providers._common import (
    AsyncSummaryFunction,
    Prompt,
    SummaryFunction,
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

__all__ = ["openai_chat_provider"]


def _read_chat(response: object) -> str:
    """The first choice's message content; ``""`` on a refusal, a filter or no content."""
    choices = _get(response, "choices")
    if not _is_list(choices):
        raise TypeError(
            "expected a ChatCompletion with choices (streaming is not supported), "
            f"got {type(response).__name__}"
        )
    if not choices:
        return _unusable("openai_chat_provider", "no choices in the answer")
    choice = choices[0]
    message = _get(choice, "message")
    finish = _get(choice, "finish_reason")
    if _get(message, "refusal"):
        return _unusable("openai_chat_provider", "the model refused")
    if finish == "content_filter":
        return _unusable("openai_chat_provider", "the answer was filtered")
    content = _chat_content(_get(message, "content"))
    if not isinstance(content, str) or not content.strip():
        return _unusable("openai_chat_provider", f"no text in the answer, finish_reason {finish!r}")
    if finish == "length":
        logger.warning("openai_chat_provider: the summary was cut at the token limit; kept")
    return content


def _chat_content(content: object) -> object:
    """A message's content; text parts joined, as some compatible servers answer."""
    if isinstance(content, list):
        return "".join(_texts(content, "text"))
    return content


@overload
def openai_chat_provider(
    client: object, model: str, *, is_async: Literal[False], **create_kwargs: Any
) -> SummaryFunction: ...
@overload
def openai_chat_provider(
    client: object, model: str, *, is_async: Literal[True], **create_kwargs: Any
) -> AsyncSummaryFunction: ...
@overload
def openai_chat_provider(
    client: object, model: str, *, is_async: None = ..., **create_kwargs: Any
) -> Any: ...
def openai_chat_provider(
    client: object, model: str, *, is_async: bool | None = None, **create_kwargs: Any
) -> SummaryFunction | AsyncSummaryFunction | Any:
    """A provider calling ``client.chat.completions.create`` (OpenAI Chat Completions).

    Works with every OpenAI-compatible server the ``openai`` client can reach
    (set its ``base_url``). The prompt is sent as it is; ``create_kwargs`` are
    passed on (an output limit is ``max_completion_tokens=`` for OpenAI,
    ``max_tokens=`` for most compatible servers). The summary is the first
    choice's content; a refusal, a content filter or no content gives ``""``.
    """
    create = _method(client, "chat.completions.create")
    model = _check_model(model)

    def request(prompt: Prompt) -> dict[str, Any]:
        return {**transcript_body(prompt, model), **create_kwargs}

    return _sync_or_async(
        create,
        _detect_async(client, create, is_async),
        request,
        _read_chat,
        "openai_chat_provider",
    )


def transcript_body(prompt: Prompt, model: str) -> dict[str, Any]:
    """The Chat Completions request of the transcript prompt, as it is."""
    system, dialogue = _split_prompt(prompt)
    messages = [{"role": "system", "content": system}] if system else []
    return {"model": model, "messages": [*messages, *dialogue]}
