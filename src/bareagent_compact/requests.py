"""What the compaction steps ask their driver to do, and what the driver answers.

The steps (:mod:`bareagent_compact.pipeline`) yield these requests; the sync
driver answers them with plain calls, the async one with ``await``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias

from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.result import CompactionResult
from bareagent_compact.summarize import Summarized, SummaryRequest

__all__ = [
    "ArchiveRequest",
    "CollectRequest",
    "HookRequest",
    "Outcome",
    "Request",
    "SaveRequest",
    "StartRequest",
    "Steps",
    "SummaryRequest",
    "close_awaitable",
    "is_async_callable",
]


class ArchiveRequest(NamedTuple):
    """Give each record to the archive hook; answer with one :class:`Outcome` per record."""

    records: list[ArchiveRecord]


class HookRequest(NamedTuple):
    """Call a ``before_compact`` or ``after_compact`` hook with ``args``; answer with
    an :class:`Outcome` of what it returned."""

    function: Callable[..., Any]
    args: tuple[Any, ...]


class SaveRequest(NamedTuple):
    """Save a snapshot; answer with an :class:`Outcome` (its value is ignored)."""

    messages: list[Message]
    session_id: str


class StartRequest(NamedTuple):
    """Run ``steps`` (a snapshot and a summary) in the background, answering their
    requests as usual; answer at once with an :class:`Outcome` whose value is a
    handle the steps give back in a :class:`CollectRequest`."""

    steps: Generator[Request, Any, Summarized]


class CollectRequest(NamedTuple):
    """What became of the background steps started with ``handle``. Answer ``None``
    while they run and ``wait`` is false; otherwise wait for them and answer an
    :class:`Outcome`: their ``Summarized`` as the value, the exception they raised,
    or a ``reason`` they ended without an answer (cancelled, another event loop)."""

    handle: object
    wait: bool


Request: TypeAlias = (
    ArchiveRequest | HookRequest | SaveRequest | SummaryRequest | StartRequest | CollectRequest
)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a driver reports back: the value returned, or the exception raised
    (or, with ``reason``, why the call counts as failed)."""

    value: Any = None
    error: Exception | None = None
    reason: str | None = None

    @property
    def failed(self) -> bool:
        """True when the call raised or was refused."""
        return self.error is not None or self.reason is not None

    def because(self) -> str:
        """`` (reason)`` for a log line, or nothing."""
        return f" ({self.reason})" if self.reason else ""


Steps: TypeAlias = Generator[Request, Any, CompactionResult]


def is_async_callable(value: object) -> bool:
    """True for an ``async def`` function, method, partial or object with one as ``__call__``."""
    if inspect.iscoroutinefunction(value):
        return True
    call = getattr(type(value), "__call__", None)  # noqa: B004 (the class attribute, not callable())
    return call is not None and inspect.iscoroutinefunction(call)


def close_awaitable(value: object) -> None:
    """Close a coroutine nobody will await, so no "never awaited" warning is raised."""
    close = getattr(value, "close", None)
    if inspect.iscoroutine(value) and callable(close):
        close()
