"""What every provider adapter shares: the function types, reading SDK objects
and dicts alike, argument checks, the prompt split, and the sync or async wrapper."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Final, TypeAlias, cast

from bareagent_compact.protocols import ServerCompactionRequest, ServerSummary
from bareagent_compact.validate import check_int, check_name

logger = logging.getLogger("bareagent_compact.providers")
"""The one logger of every provider module, under the name it has always had."""

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


class SummaryText(str):
    """The summary text an adapter returns: a ``str`` (equal to the text, usable
    wherever one is), with the ``usage`` the API reported for the request
    (``None`` when it reported none), which the compactor reads into
    :attr:`CompactionResult.cost <bareagent_compact.CompactionResult.cost>`."""

    usage: object

    def __new__(cls, text: str, usage: object = None) -> SummaryText:
        made = super().__new__(cls, text)
        made.usage = usage
        return made


def _with_usage(read: Callable[[object], str], response: object) -> SummaryText:
    """The text ``read`` finds in ``response`` (or the server summary a server
    summariser's reader makes of it), with the response's usage."""
    found: object = read(response)
    usage = _get(response, "usage")
    if isinstance(found, ServerSummary):
        return cast(SummaryText, replace(found, usage=usage))
    return SummaryText(cast(str, found), usage)


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
            return _with_usage(read, await create(**request(prompt)))

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
        return _with_usage(read, response)

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
