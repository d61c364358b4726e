"""Summary providers made from the clients people already have.

Each factory takes a client object and returns the callable a compactor wants:
it sends the two-message summary prompt with the client and returns the
summary text. No SDK is imported: the clients are used by duck typing
(``client.messages.create``, ``client.chat.completions.create``,
``client.responses.create``, BareAgent's ``provider.create``), and responses
are read by attribute or by key, so SDK model objects and plain JSON dicts
both work.

A synchronous client gives a plain function; an asynchronous one (its
``create`` is an ``async def``, or its class name starts with ``Async``) gives
an ``async def`` function for :class:`AsyncCompactor`. ``is_async=`` overrides
the detection for wrapped clients.

Unusable answers (a refusal, a content filter, a failed or empty response)
return ``""``, which the compactor counts as an unusable summary: the history
is kept and a warning says why. API errors propagate, so the compactor sees
them as a failed provider call (and may recognise an overflow).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias, cast, overload

from bareagent_compact.plain import dump_model, is_model
from bareagent_compact.protocols import (
    SERVER_COMPACTION_ATTRIBUTE,
    ServerCompactionRequest,
    ServerSummary,
)
from bareagent_compact.validate import check_int, check_name

__all__ = [
    "AsyncServerSummaryFunction",
    "AsyncSummaryFunction",
    "ServerSummaryFunction",
    "SummaryFunction",
    "anthropic_provider",
    "anthropic_server_compaction",
    "bareagent_provider",
    "openai_chat_provider",
    "openai_responses_compaction",
    "openai_responses_provider",
]

logger = logging.getLogger(__name__)

Prompt: TypeAlias = Sequence[Mapping[str, Any]]
"""The summary prompt: ``[{"role": "system", ...}, {"role": "user", ...}]``."""

SummaryFunction: TypeAlias = Callable[[Prompt], str]
"""What a factory returns for a synchronous client."""

AsyncSummaryFunction: TypeAlias = Callable[[Prompt], Awaitable[str]]
"""What a factory returns for an asynchronous client."""

ServerSummaryFunction: TypeAlias = Callable[[ServerCompactionRequest], ServerSummary]
"""What a server compaction factory returns for a synchronous client."""

AsyncServerSummaryFunction: TypeAlias = Callable[
    [ServerCompactionRequest], Awaitable[ServerSummary]
]
"""What a server compaction factory returns for an asynchronous client."""

DEFAULT_MAX_TOKENS: Final = 4096
"""Output budget of the summary request where the API needs one (Anthropic, BareAgent)."""


# --------------------------------------------------------------------------- helpers


def _get(obj: object, name: str) -> Any:
    """``obj.name`` or ``obj[name]``: SDK model objects and plain dicts alike."""
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


def _method(obj: object, path: str) -> Callable[..., Any]:
    """The bound method at ``path`` (``"chat.completions.create"``), or a clear TypeError."""
    target: object = obj
    for name in path.split("."):
        target = getattr(target, name, None)
        if target is None:
            break
    if not callable(target):
        raise TypeError(f"client must have a callable {path}(...) method, got {type(obj).__name__}")
    return target


def _detect_async(client: object, create: Callable[..., Any], is_async: bool | None) -> bool:
    """Whether ``create`` returns a coroutine.

    SDK decorators hide ``async def`` behind plain wrappers, so the unwrapped
    function is inspected too, and so is ``__call__`` of a callable object; the
    ``Async...`` class-name convention of the
    Anthropic and OpenAI SDKs decides for clients that hide it further.
    """
    if is_async is not None:
        if not isinstance(is_async, bool):
            raise TypeError(f"is_async must be a bool or None, got {type(is_async).__name__}")
        return is_async
    try:
        unwrapped = inspect.unwrap(create)
    except ValueError:  # a cycle of __wrapped__
        unwrapped = create
    candidates = (create, unwrapped, inspect.getattr_static(type(create), "__call__", None))
    if any(inspect.iscoroutinefunction(candidate) for candidate in candidates):
        return True
    return any(cls.__name__.startswith("Async") for cls in type(client).__mro__)


def _check_model(model: object) -> str:
    return check_name("model", model)


def _check_max_tokens(max_tokens: object) -> int:
    return check_int("max_tokens", max_tokens, 1)


def _split_prompt(prompt: object) -> tuple[str, list[dict[str, Any]]]:
    """The system text (system messages joined) and the other messages as role/content."""
    if isinstance(prompt, (str, bytes)) or not isinstance(prompt, Sequence):
        raise TypeError(f"prompt must be a list of messages, got {type(prompt).__name__}")
    system: list[str] = []
    dialogue: list[dict[str, Any]] = []
    for message in prompt:
        if not isinstance(message, Mapping):
            raise TypeError(f"prompt messages must be dicts, got {type(message).__name__}")
        role, content = message.get("role"), message.get("content")
        if role in ("system", "developer"):
            if not isinstance(content, str):
                raise TypeError("the system message of the prompt must have str content")
            system.append(content)
        else:
            dialogue.append({"role": role, "content": content})
    return "\n\n".join(system), dialogue


def _sync_or_async(
    create: Callable[..., Any],
    is_async: bool,
    request: Callable[[Prompt], dict[str, Any]],
    read: Callable[[object], str],
    label: str,
) -> SummaryFunction | AsyncSummaryFunction:
    """One provider function around ``create``: sync or ``async def``, same request and reading."""
    if is_async:

        async def summarize_async(prompt: Prompt, /) -> str:
            return read(await create(**request(prompt)))

        summarize_async.__qualname__ = summarize_async.__name__ = f"{label}_async"
        return summarize_async

    def summarize(prompt: Prompt, /) -> str:
        response = create(**request(prompt))
        if inspect.isawaitable(response):
            close = getattr(response, "close", None)
            if callable(close):
                close()  # no "coroutine was never awaited" warning
            raise TypeError(
                f"{label}: the client's create() returned an awaitable; pass is_async=True "
                "(and use AsyncCompactor) for an asynchronous client"
            )
        return read(response)

    summarize.__qualname__ = summarize.__name__ = label
    return summarize


def _unusable(label: str, why: str) -> str:
    logger.warning("%s: no usable summary (%s)", label, why)
    return ""


def _is_list(value: object) -> bool:
    """A sequence of items, not a string."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _texts(parts: Iterable[object], kind: str) -> list[str]:
    """The ``text`` of the parts of type ``kind`` that have a str one."""
    texts = [_get(part, "text") for part in parts if _get(part, "type") == kind]
    return [text for text in texts if isinstance(text, str)]


# --------------------------------------------------------------------------- Anthropic


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
        system, dialogue = _split_prompt(prompt)
        body: dict[str, Any] = {"model": model, "max_tokens": max_tokens, "messages": dialogue}
        if system:
            body["system"] = system
        return {**body, **create_kwargs}

    return _sync_or_async(
        create,
        _detect_async(client, create, is_async),
        request,
        _read_anthropic,
        "anthropic_provider",
    )


# --------------------------------------------------------------------------- OpenAI Chat


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
        system, dialogue = _split_prompt(prompt)
        messages = [{"role": "system", "content": system}] if system else []
        return {"model": model, "messages": [*messages, *dialogue], **create_kwargs}

    return _sync_or_async(
        create,
        _detect_async(client, create, is_async),
        request,
        _read_chat,
        "openai_chat_provider",
    )


# --------------------------------------------------------------------------- OpenAI Responses


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
        system, dialogue = _split_prompt(prompt)
        body: dict[str, Any] = {"model": model, "input": dialogue}
        if system:
            body["instructions"] = system
        return {**body, **create_kwargs}

    return _sync_or_async(
        create,
        _detect_async(client, create, is_async),
        request,
        _read_responses,
        "openai_responses_provider",
    )


# --------------------------------------------------------------------------- any answer

_READERS: Final = (
    ("choices", _read_chat),
    ("output", _read_responses),
    ("content", _read_anthropic),
)
"""The key that tells an SDK response's shape, and the adapter's reader for it."""

_ADAPTERS: Final = {
    "anthropic": ("anthropic_provider",),
    "openai": ("openai_chat_provider", "openai_responses_provider"),
}


def response_text(response: object) -> str | None:
    """The text of an SDK response a provider returned as it is: an Anthropic
    ``Message``, an OpenAI ``ChatCompletion`` or ``Response``, or their dicts
    (``model_dump()``), read as the adapters read them (``""`` for a refusal or
    no text, with a warning); ``None`` for any other shape."""
    for key, read in _READERS:
        if _is_list(_get(response, key)):
            return read(response)
    return None


def adapter_hint(response: object) -> str:
    """For a warning about an answer of no known shape: the adapter to use
    (guessed from the answer's module), or ``""`` when the shape is known."""
    if isinstance(response, str) or isinstance(getattr(response, "text", None), str):
        return ""
    if any(_is_list(_get(response, key)) for key, _ in _READERS):
        return ""
    package = type(response).__module__.partition(".")[0]
    names = _ADAPTERS.get(package, (*_ADAPTERS["anthropic"], *_ADAPTERS["openai"]))
    if package not in _ADAPTERS:
        names = (*names, "bareagent_provider")
    adapters = " or ".join(f"bareagent_compact.providers.{name}(...)" for name in names)
    return f"; return a str, or wrap the client with {adapters}"


# --------------------------------------------------------------------------- BareAgent


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


# --------------------------------------------------------------------------- server compaction


def _server_sync_or_async(
    call: Callable[..., Any],
    is_async: bool,
    request: Callable[[ServerCompactionRequest], dict[str, Any]],
    read: Callable[[object], ServerSummary],
    label: str,
) -> ServerSummaryFunction | AsyncServerSummaryFunction:
    """A server summariser around ``call``: sync or ``async def``, marked as one."""
    text_reader = cast(Callable[[object], str], read)
    summarize = _sync_or_async(
        call, is_async, cast(Callable[[Prompt], dict[str, Any]], request), text_reader, label
    )
    setattr(summarize, SERVER_COMPACTION_ATTRIBUTE, True)
    return cast("ServerSummaryFunction | AsyncServerSummaryFunction", summarize)


def _check_request(request: object) -> ServerCompactionRequest:
    if not isinstance(request, ServerCompactionRequest):
        raise TypeError(
            "a server summariser is called with a ServerCompactionRequest, got "
            f"{type(request).__name__}"
        )
    return request


def _as_sent(value: object) -> dict[str, Any]:
    """A block or item as the server sent it: an SDK object with exactly the fields
    the server sent (an item the SDK read loosely, such as a user message in an
    output window, is dumped without the serializer's warnings)."""
    if isinstance(value, dict):
        return value
    if not is_model(value):
        raise TypeError(f"expected a block or item, got {type(value).__name__}")
    dump = cast(Any, value).model_dump
    try:
        data = dump(mode="json", by_alias=True, exclude_unset=True, warnings=False)
    except TypeError:  # a model_dump without pydantic's keywords
        return dump_model(value)
    if not isinstance(data, dict):
        raise TypeError(f"{type(value).__name__}.model_dump() must return a dict")
    return data


_TEXT_BLOCKS: Final = frozenset({"text", "input_text"})


def _system_text(message: Mapping[str, Any]) -> str | None:
    """The text of a system (or developer) message: its string content, or its text
    blocks joined; ``None`` for any other message, or one holding something else."""
    if message.get("role") not in ("system", "developer"):
        return None
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(b, Mapping) and b.get("type") in _TEXT_BLOCKS and isinstance(b.get("text"), str)
        for b in content
    ):
        return "\n".join(b["text"] for b in content)
    return None


def _systems(messages: Sequence[Mapping[str, Any]]) -> tuple[list[str], list[Mapping[str, Any]]]:
    """The text of the system (and developer) messages, and the other messages."""
    texts: list[str] = []
    rest: list[Mapping[str, Any]] = []
    for message in messages:
        text = _system_text(message)
        if text is None:
            rest.append(message)
        else:
            texts.append(text)
    return texts, rest


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
    request to be the conversation's own. The answer's compaction block, exactly
    as sent, becomes one assistant message that the rebuild puts in place of the
    messages it summarises. An answer without one block with content raises
    ``ValueError`` (a failed step: ``Reason.SERVER_COMPACTION_FAILED``).
    """
    create = _method(client, "beta.messages.create")
    model = _check_model(model)
    max_tokens = _check_max_tokens(max_tokens)

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
