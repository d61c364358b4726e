"""The :class:`AsyncCompactor`: the same compaction steps, awaited in an event loop."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import Awaitable, Callable, Generator, MutableSequence, Sequence
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Final, TypeVar, cast

from bareagent_compact.engine import Engine
from bareagent_compact.engine.facade import check_call
from bareagent_compact.protocols import ArchiveRecord, AsyncSummaryProvider, SummaryProvider
from bareagent_compact.requests import (
    ArchiveRequest,
    CollectRequest,
    HookRequest,
    Outcome,
    Request,
    SaveRequest,
    StartRequest,
    WaitRequest,
    hand_over,
    is_async_callable,
    one_by_one,
)
from bareagent_compact.result import CompactionResult
from bareagent_compact.summarize import Summarized, SummaryRequest

logger = logging.getLogger("bareagent_compact.compactor")

T = TypeVar("T")

_CALLS: Final[ContextVar[frozenset[object]]] = ContextVar(
    "bareagent_compact_calls", default=frozenset()
)
"""The calls in progress around the running code (a hook, and the tasks it starts,
run inside the call that runs the hook)."""


class AsyncCompactor(Engine[SummaryProvider | AsyncSummaryProvider]):
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

    With ``background_at`` (a share of the threshold), a call that finds the
    history past that share, and not over the threshold, starts the summary in
    an ``asyncio`` task and returns at once; a later call swaps it in when it
    is done (that call's result is the ``FULL`` one), waiting for it only when
    the history is over the threshold or the call is forced. ``await
    compactor.aclose()`` (or ``async with``) cancels a summary still running.
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
        self._parts.session_id = checked = self._checked_session_id(session_id)
        self._conversations.discard(checked)

    async def __call__(
        self,
        messages: MutableSequence[Any],
        force: bool = False,
        *,
        instructions: str | None = None,
        session_id: str | None = None,
    ) -> CompactionResult:
        """Run one compaction step on ``messages`` in place (SPEC 11.2 steps 1-8).

        ``instructions`` is added to this call's summary request, after the
        constructor's (``/compact focus on the failing test``). ``session_id``:
        the conversation ``messages`` is (default: the compactor's own session).
        """
        force, instructions = check_call(force, instructions)
        checked = self._session_arg(session_id)
        holder = self._holder
        if holder is not None and holder in _CALLS.get():
            # Called from inside its own call (a hook): the lock is already ours.
            with self._in_session(checked):
                return await self._compact(messages, force, instructions)
        lock = self._claim()
        try:
            async with lock:
                with self._in_session(checked):
                    return await self._hold(messages, force, instructions)
        finally:
            self._release(lock)

    async def compacted(
        self,
        messages: Sequence[Any],
        *,
        force: bool = False,
        session_id: str | None = None,
        instructions: str | None = None,
    ) -> tuple[list[Any], CompactionResult]:
        """One compaction step that leaves ``messages`` and every message in it as
        they are: ``(new_messages, result)`` (see :meth:`Compactor.compacted`)."""
        force, instructions = check_call(force, instructions)
        checked = self._session_arg(session_id)

        async def run() -> tuple[list[Any], CompactionResult]:
            with self._in_session(checked):
                new, result = await self._drive(
                    self._new_list_steps(messages, force, instructions)
                )
            self.last_result = result
            return new, result

        holder = self._holder
        if holder is not None and holder in _CALLS.get():
            return await run()
        lock = self._claim()
        try:
            async with lock:
                return await self._held(run)
        finally:
            self._release(lock)

    async def _hold(
        self, messages: MutableSequence[Any], force: bool, instructions: str | None
    ) -> CompactionResult:
        """Compact as the lock's holder, known as such to the code the call runs."""
        return await self._held(lambda: self._compact(messages, force, instructions))

    async def _held(self, call: Callable[[], Awaitable[T]]) -> T:
        """Await ``call()`` as the lock's holder, known as such to the code it runs."""
        holder = self._holder = object()
        around = _CALLS.get()
        _CALLS.set(around | {holder})
        try:
            return await call()
        finally:
            _CALLS.set(around)
            self._holder = None

    async def _compact(
        self, messages: MutableSequence[Any], force: bool, instructions: str | None
    ) -> CompactionResult:
        result = await self._drive(self._steps(messages, force, instructions))
        self.last_result = result
        return result

    async def _drive(self, steps: Generator[Request, Any, T]) -> T:
        """Run ``steps`` to their end, answering each request."""
        try:
            request = next(steps)
            while True:
                request = steps.send(await self._run(request))
        except StopIteration as done:
            return cast(T, done.value)
        finally:
            steps.close()

    async def aclose(self) -> bool:
        """Cancel the summary running in the background, or drop one done and not
        yet swapped in; ``True`` if there was one. The history is left as it is
        (nothing was summarised); the next call compacts as usual. The summaries
        of the other conversations (``session_id=``) are cancelled too."""
        handles = [self._drop_background("cancelled by aclose()")]
        handles += self._conversations.drop_pending()
        tasks = [task for task in handles if isinstance(task, asyncio.Task)]
        for task in tasks:
            if not task.done():
                _cancel(task)
                if task.get_loop() is asyncio.get_running_loop():
                    await asyncio.wait((task,))
        return bool(tasks)

    async def __aenter__(self) -> AsyncCompactor:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _spawn(self, steps: Generator[Request, Any, Summarized]) -> asyncio.Task[Summarized]:
        """Run the background steps in a task of the running event loop."""
        task = asyncio.get_running_loop().create_task(self._background(steps))
        task.add_done_callback(_retrieve)
        return task

    async def _background(self, steps: Generator[Request, Any, Summarized]) -> Summarized:
        _CALLS.set(frozenset())  # the task's own context: not inside the call that started it
        return await self._drive(steps)

    async def _run(self, request: Request) -> Any:
        """Answer one request of the compaction steps, awaiting plug-ins."""
        if isinstance(request, ArchiveRequest | WaitRequest):
            return await self._archive(request)
        if isinstance(request, HookRequest):
            # Hooks are quick: a plain one runs on the loop, an async one is awaited.
            outcome = _call(request.function, *request.args)
            if outcome.error is None and inspect.isawaitable(outcome.value):
                outcome = await _settle(outcome.value)
            return outcome
        if isinstance(request, SaveRequest):
            assert self.transcript_mgr is not None
            return await _outcome(self.transcript_mgr.save, request.messages, request.session_id)
        if isinstance(request, StartRequest):
            return Outcome(self._spawn(request.steps))
        if isinstance(request, CollectRequest):
            return await _collect(cast("asyncio.Task[Summarized]", request.handle), request.wait)
        assert isinstance(request, SummaryRequest)
        return await _outcome(self.provider, request.prompt)

    async def _archive(self, request: ArchiveRequest | WaitRequest) -> list[Outcome] | None:
        """Answer an archive request: the records handed to the writer of an archive
        that writes behind (not ``wait``; in a worker thread only when its queue is
        full), else archived (:meth:`_archive_now`); or wait for that writer (in a
        worker thread)."""
        if isinstance(request, WaitRequest):
            from concurrent.futures import wait  # noqa: PLC0415 (loaded by the store)

            await asyncio.to_thread(wait, request.tickets)
            return None
        records = request.records
        behind = None if request.wait else self._parts.ports.behind()
        if behind is None or not records:
            return await self._archive_now(records)
        queued = hand_over(behind, records, block=False)
        if queued is None:
            queued = await asyncio.to_thread(hand_over, behind, records)
        assert queued is not None
        return queued

    async def _archive_now(self, records: list[ArchiveRecord]) -> list[Outcome]:
        """One outcome per record: of one ``archive_many`` call for all of them when the
        archive takes a batch (awaited, or run in a worker thread); else (or when
        that batch failed) an ``async def`` hook awaited record by record, a plain
        one run for all of them in one worker thread."""
        ports = self._parts.ports
        archive = ports.archive
        assert archive is not None
        batch = ports.batch()
        if batch is not None and records:
            outcome = await _outcome(batch, list(records))
            if not one_by_one(outcome, len(records)):
                return [outcome] * len(records)
        if is_async_callable(archive):
            return [await _outcome(archive, record) for record in records]

        def archive_all() -> list[Outcome]:
            return [_call(archive, record) for record in records]

        outcomes = await asyncio.to_thread(archive_all)
        return [await _settled(outcome) for outcome in outcomes]


def _retrieve(task: asyncio.Task[Summarized]) -> None:
    """Mark a task's exception as seen (it is reported by the call that collects it)."""
    if not task.cancelled():
        task.exception()


def _cancel(task: asyncio.Task[Any]) -> None:
    """Cancel ``task``, also one of another event loop (thread-safely); a task
    of a closed loop is left alone."""
    loop = task.get_loop()
    if loop is asyncio.get_running_loop():
        task.cancel()
    elif not loop.is_closed():
        with contextlib.suppress(RuntimeError):  # closed meanwhile
            loop.call_soon_threadsafe(task.cancel)


async def _collect(task: asyncio.Task[Summarized], wait: bool) -> Outcome | None:
    """What became of a background summary: ``None`` while it runs and ``wait`` is
    false. A task of another event loop is never awaited: cancelled and lost."""
    if not task.done():
        if task.get_loop() is not asyncio.get_running_loop():
            _cancel(task)
            return Outcome(reason="it was started in another event loop")
        if not wait:
            return None
        await asyncio.wait((task,))  # cancelling this call leaves the task running
    if task.cancelled():
        return Outcome(reason="cancelled")
    error = task.exception()
    if error is not None:
        return Outcome(error=error if isinstance(error, Exception) else RuntimeError(error))
    return Outcome(task.result())


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
