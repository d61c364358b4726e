"""What both server compaction adapters share: the marked summariser, the request
check, blocks and items as sent, and the system messages taken apart."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

from bareagent_compact.plain import dump_model, is_model
from bareagent_compact.protocols import (
    SERVER_COMPACTION_ATTRIBUTE,
    ServerCompactionRequest,
    ServerSummary,
)
from bareagent_compact.providers._common import (
    AsyncServerSummaryFunction,
    Prompt,
    ServerSummaryFunction,
    _sync_or_async,
)


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


ANTHROPIC_COMPACTION_BETA: Final = "compact-2026-09-04"
"""The beta the Messages API requires of a request with the ``compaction`` parameter."""


def _names(value: str) -> list[str]:
    return [name.strip() for name in value.split(",") if name.strip()]


def _listed(betas: object) -> list[Any]:
    """The caller's ``betas=`` as a list (none: empty)."""
    if betas is None:
        return []
    if isinstance(betas, str):
        return [betas]
    if isinstance(betas, Sequence):
        return list(betas)
    raise TypeError(f"betas must be a list of str, got {type(betas).__name__}")


def _with_beta(create_kwargs: Mapping[str, Any], beta: str) -> dict[str, Any]:
    """``create_kwargs`` with ``beta`` added to the caller's own betas (once).

    An ``anthropic-beta`` header in ``extra_headers`` replaces ``betas=`` in the
    SDK, so the beta joins that header when there is one, and ``betas=`` otherwise.
    """
    kwargs = dict(create_kwargs)
    headers = kwargs.get("extra_headers")
    names = headers if isinstance(headers, Mapping) else {}
    header = next((n for n in names if isinstance(n, str) and n.lower() == "anthropic-beta"), None)
    if header is None:
        listed = _listed(kwargs.get("betas"))
        kwargs["betas"] = listed if beta in listed else [*listed, beta]
        return kwargs
    value = names[header]
    if not isinstance(value, str):
        raise TypeError("the anthropic-beta header in extra_headers must be a str")
    given = _names(value)
    joined = ",".join(given if beta in given else [*given, beta])
    kwargs["extra_headers"] = {**names, header: joined}
    return kwargs


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
