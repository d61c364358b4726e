"""What the compaction steps ask their driver to do, and what the driver answers.

The steps (:mod:`bareagent_compact.engine`) yield these requests; the sync
driver answers them with plain calls, the async one with ``await``.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.result import CompactionResult
from bareagent_compact.summarize import Summarized, SummaryRequest

if TYPE_CHECKING:
    from concurrent.futures import Future

__all__ = [
    "ArchiveRequest",
    "CollectRequest",
    "HookRequest",
    "Outcome",
    "Queued",
    "Request",
    "SaveRequest",
    "StartRequest",
    "Steps",
    "SummaryRequest",
    "WaitRequest",
    "hand_over",
    "close_awaitable",
    "is_async_callable",
    "one_by_one",
]

logger = logging.getLogger("bareagent_compact.compactor")


class ArchiveRequest(NamedTuple):
    """Give the records to the archive hook (all at once when it takes a batch, see
    :meth:`~bareagent_compact.engine.ports.Ports.batch`); answer with one
    :class:`Outcome` per record.

    With ``wait`` false and an archive that writes behind
    (:meth:`~bareagent_compact.engine.ports.Ports.behind`),
    hand them to its writer instead and answer at once: each outcome's value is
    then a :class:`Queued` (unless handing them over failed)."""

    records: list[ArchiveRecord]
    wait: bool = True


class WaitRequest(NamedTuple):
    """Wait until the write-behind writer is done with ``tickets`` (written or
    failed); answer ``None``."""

    tickets: list[Future[list[BaseException | None]]]


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
    ArchiveRequest
    | HookRequest
    | SaveRequest
    | SummaryRequest
    | StartRequest
    | CollectRequest
    | WaitRequest
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


class Queued(NamedTuple):
    """A record handed to a write-behind writer: entry ``position`` of ``ticket``'s
    result says what became of it."""

    ticket: Future[list[BaseException | None]]
    position: int

    def settled(self) -> Outcome | None:
        """``None`` while the writer has not written it; then an outcome that failed
        unless the record is durable."""
        ticket = self.ticket
        if not ticket.done():
            return None
        if ticket.cancelled():
            return Outcome(reason="cancelled before it was written")
        error = ticket.exception() or ticket.result()[self.position]
        if error is None:
            return Outcome()
        return Outcome(error=error if isinstance(error, Exception) else RuntimeError(error))


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


def hand_over(
    behind: Callable[..., Future[list[BaseException | None]]],
    records: list[ArchiveRecord],
    *,
    block: bool = True,
) -> list[Outcome] | None:
    """Hand ``records`` to a write-behind writer: one outcome per record, a
    :class:`Queued` as its value; ``None`` when the writer is full and ``block``
    is false. When handing them over raised (a record that cannot be encoded),
    they are handed over one by one, as :func:`one_by_one` says."""
    import queue  # noqa: PLC0415 (loaded already by the store that writes behind)

    try:
        ticket = behind(list(records), block=block)
    except queue.Full:
        if block:
            raise
        return None
    except Exception as exc:
        failed = Outcome(error=exc)
        if not one_by_one(failed, len(records)):
            return [failed] * len(records)
        return [_hand_over_one(behind, record) for record in records]
    return [Outcome(Queued(ticket, position)) for position in range(len(records))]


def _hand_over_one(
    behind: Callable[..., Future[list[BaseException | None]]], record: ArchiveRecord
) -> Outcome:
    try:
        return Outcome(Queued(behind([record]), 0))
    except Exception as exc:
        return Outcome(error=exc)


def one_by_one(batch: Outcome, count: int) -> bool:
    """Whether to give the ``count`` records of a failed ``archive_many`` call to
    ``archive`` one by one: when it held more than one, so that one record the
    archive refuses (content nested too deeply to encode, a row too large) does
    not keep the others whole on every call. Nothing counts as archived until
    ``archive`` takes it."""
    if not batch.failed or count < 2:
        return False
    logger.info(
        "archive_many failed%s; archiving its %d records one by one",
        batch.because(),
        count,
        exc_info=batch.error,
    )
    return True
