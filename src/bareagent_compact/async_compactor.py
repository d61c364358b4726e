"""The :class:`AsyncCompactor`: the same compaction steps, awaited in an event loop."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Callable, MutableSequence
from contextvars import ContextVar
from typing import Any, Final

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

_CALLS: Final[ContextVar[frozenset[object]]] = ContextVar(
    "bareagent_compact_calls", default=frozenset()
)
"""The calls in progress around the running code (a hook, and the tasks it starts,
run inside the call that runs the hook)."""


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
    ``asyncio.Lock`` of the event loop they run in; a hook may call the
    compactor again (or wait for a task that does) without waiting for that
    lock. Successive event loops (``asyncio.run`` twice) may use one instance;
    a call from another event loop while one is running raises ``RuntimeError``
    at once.
    """

    def _setup(self) -> None:
        self._guard = threading.Lock()  # for the fields below; never held across an await
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock: asyncio.Lock | None = None
        self._running = 0  # calls of self._loop started and not finished
        self._holder: object | None = None  # the call holding the lock

    def _claim(self) -> asyncio.Lock:
        """The lock of the running event loop; a new one in a new loop, unless a
        call is still running in another (then ``RuntimeError``, not a deadlock)."""
        loop = asyncio.get_running_loop()
        with self._guard:
            if self._loop is not loop or self._lock is None:
                if self._running and self._loop is not None and not self._loop.is_closed():
                    raise RuntimeError(
                        "this AsyncCompactor is running a call in another event loop; use "
                        "one AsyncCompactor per event loop (threads may share a Compactor)"
                    )
                self._loop, self._lock, self._running = loop, asyncio.Lock(), 0
            self._running += 1
            return self._lock

    def _release(self, lock: asyncio.Lock) -> None:
        with self._guard:
            if lock is self._lock:
                self._running -= 1

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
        holder = self._holder
        if holder is not None and holder in _CALLS.get():
            # Called from inside its own call (a hook): the lock is already ours.
            return await self._compact(messages, force, instructions)
        lock = self._claim()
        try:
            async with lock:
                return await self._hold(messages, force, instructions)
        finally:
            self._release(lock)

    async def _hold(
        self, messages: MutableSequence[Any], force: bool, instructions: str | None
    ) -> CompactionResult:
        """Compact as the lock's holder, known as such to the code the call runs."""
        holder = self._holder = object()
        around = _CALLS.get()
        _CALLS.set(around | {holder})
        try:
            return await self._compact(messages, force, instructions)
        finally:
            _CALLS.set(around)
            self._holder = None

    async def _compact(
        self, messages: MutableSequence[Any], force: bool, instructions: str | None
    ) -> CompactionResult:
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
