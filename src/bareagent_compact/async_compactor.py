"""The :class:`AsyncCompactor`: the same compaction steps, awaited in an event loop."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable, MutableSequence
from typing import Any

from bareagent_compact.pipeline import (
    ArchiveRequest,
    CompactorBase,
    HookRequest,
    Outcome,
    Request,
    SaveRequest,
    is_async_callable,
)
from bareagent_compact.protocols import AsyncSummaryProvider, SummaryProvider
from bareagent_compact.result import CompactionResult
from bareagent_compact.summarize import SummaryRequest


class AsyncCompactor(CompactorBase[SummaryProvider | AsyncSummaryProvider]):
    """The asynchronous twin of :class:`Compactor`: ``await compactor(messages)``.

    Same constructor, options and behaviour. The provider, the transcript
    manager's ``save`` and the archive hook may each be ``async def`` (awaited)
    or plain functions, which run in a worker thread (``asyncio.to_thread``) so
    that a slow summary or a disk write never blocks the event loop. A plain
    function that returns an awaitable has it awaited.

    Cancelling the call while a snapshot or the summary is pending leaves the
    history exactly as it was before the call (micro-compaction is undone) and
    the cancellation propagates. Calls on one instance are serialised by an
    ``asyncio.Lock``.
    """

    def _setup(self) -> None:
        self._lock: asyncio.Lock | None = None

    def set_session_id(self, session_id: str) -> None:
        """Rebind the session id (call it on ``/new`` and ``/resume``)."""
        self._session_id = self._checked_session_id(session_id)

    async def __call__(
        self,
        messages: MutableSequence[Any],
        force: bool = False,
        *,
        instructions: str | None = None,
    ) -> CompactionResult:
        """Run one compaction step on ``messages`` in place (SPEC 11.2 steps 1-8).

        ``instructions`` is added to this call's summary request, after the
        constructor's (``/compact focus on the failing test``).
        """
        force = self._check_force(force)
        instructions = self._check_instructions(instructions)
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            steps = self._steps(messages, force, instructions)
            try:
                request = next(steps)
                while True:
                    request = steps.send(await self._run(request))
            except StopIteration as done:
                result: CompactionResult = done.value
                self.last_result = result
                return result
            finally:
                steps.close()

    async def _run(self, request: Request) -> Any:
        """Answer one request of the compaction steps, awaiting plug-ins."""
        if isinstance(request, ArchiveRequest):
            return await self._archive(request.records)
        if isinstance(request, HookRequest):
            # Hooks are quick: a plain one runs on the loop, an async one is awaited.
            outcome = _call(request.function, *request.args)
            if outcome.error is None and inspect.isawaitable(outcome.value):
                outcome = await _settle(outcome.value)
            return outcome
        if isinstance(request, SaveRequest):
            assert self.transcript_mgr is not None
            return await _outcome(self.transcript_mgr.save, request.messages, request.session_id)
        assert isinstance(request, SummaryRequest)
        return await _outcome(self.provider, request.prompt)

    async def _archive(self, records: list[dict[str, Any]]) -> list[Outcome]:
        """One outcome per record: an ``async def`` hook awaited record by record, a
        plain one run for all of them in one worker thread."""
        archive = self.archive
        assert archive is not None
        if is_async_callable(archive):
            return [await _outcome(archive, record) for record in records]

        def archive_all() -> list[Outcome]:
            return [_call(archive, record) for record in records]

        outcomes = await asyncio.to_thread(archive_all)
        return [await _settled(outcome) for outcome in outcomes]


def _call(function: Callable[..., Any], *args: Any) -> Outcome:
    try:
        return Outcome(function(*args))
    except Exception as exc:
        return Outcome(error=exc)


async def _settled(outcome: Outcome) -> Outcome:
    """``outcome``, or the outcome of awaiting the awaitable it holds."""
    if inspect.isawaitable(outcome.value):
        return await _settle(outcome.value)
    return outcome


async def _settle(awaitable: Any) -> Outcome:
    try:
        return Outcome(await awaitable)
    except Exception as exc:
        return Outcome(error=exc)


async def _outcome(function: Callable[..., Any], *args: Any) -> Outcome:
    """Call ``function``: awaited when it is ``async def``, else in a worker thread;
    an awaitable it returns is awaited. Exceptions become the outcome's error."""
    if is_async_callable(function):
        try:
            value = function(*args)
        except Exception as exc:
            return Outcome(error=exc)
    else:
        outcome = await asyncio.to_thread(_call, function, *args)
        if outcome.error is not None:
            return outcome
        value = outcome.value
    if inspect.isawaitable(value):
        return await _settle(value)
    return Outcome(value)
