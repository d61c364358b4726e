"""The :class:`Compactor`: both compaction layers, run in the order of SPEC 11.2."""

from __future__ import annotations

import inspect
import threading
from collections.abc import Generator, MutableSequence, Sequence
from typing import Any, TypeVar, cast

from bareagent_compact.engine import Engine, summary_text
from bareagent_compact.engine.facade import check_call
from bareagent_compact.engine.ports import Ports
from bareagent_compact.options import Options
from bareagent_compact.protocols import ArchiveRecord, SummaryProvider
from bareagent_compact.requests import (
    ArchiveRequest,
    HookRequest,
    Outcome,
    Request,
    SaveRequest,
    WaitRequest,
    close_awaitable,
    hand_over,
    is_async_callable,
    one_by_one,
)
from bareagent_compact.result import CompactionResult
from bareagent_compact.summarize import SummaryRequest

__all__ = ["Compactor", "summary_text"]

T = TypeVar("T")


class Compactor(Engine[SummaryProvider]):
    """Keeps an agent's history inside its context window; call it every turn.

    ``compactor(messages)`` first truncates old tool results (micro-compaction),
    then, when the estimate is strictly greater than ``threshold`` or ``force`` is
    true, replaces everything but the system messages, the pending turn and the
    tool calls it answers with a summary from ``provider``. The list is changed
    in place and a :class:`CompactionResult` is returned. A failed summary never
    breaks the loop: a warning is logged and the history stays as
    micro-compaction left it. Messages may be Anthropic, OpenAI Chat or OpenAI
    Responses dicts, or the SDKs' own objects (see ``docs/dialects.md``).

    Calls on one instance are serialised by a lock, so it may be shared by
    threads. For ``async def`` providers or hooks use :class:`AsyncCompactor`.
    """

    def _setup(self) -> None:
        self._lock = threading.RLock()

    def _check_plugins(self, provider: object, options: Options, ports: Ports) -> None:
        for name, value in (
            ("provider", provider),
            ("transcript_mgr.save", getattr(options.transcript_mgr, "save", None)),
            ("archive", ports.archive),
            ("before_compact", options.before_compact),
            ("after_compact", options.after_compact),
        ):
            if value is not None and is_async_callable(value):
                raise TypeError(
                    f"{name} is an async function: use AsyncCompactor, whose calls are awaited"
                )
        if options.background_at is not None:
            raise TypeError(
                "background_at needs AsyncCompactor: the background summary runs in an "
                "asyncio task"
            )

    def undo(
        self,
        messages: MutableSequence[Any],
        result: CompactionResult,
        *,
        session_id: str | None = None,
    ) -> bool:
        """Put back the history the full compaction of ``result`` replaced (see
        :meth:`Engine.undo`); what was appended since is kept after it."""
        with self._lock:
            return super().undo(messages, result, session_id=session_id)

    def record_usage(
        self, messages: Sequence[Any], usage: object, *, session_id: str | None = None
    ) -> None:
        """Anchor the count on the usage the API reported (see
        :meth:`Engine.record_usage`)."""
        with self._lock:
            super().record_usage(messages, usage, session_id=session_id)

    def set_session_id(self, session_id: str) -> None:
        """Rebind the session id (call it on ``/new`` and ``/resume``)."""
        checked = self._checked_session_id(session_id)
        with self._lock:
            self._parts.session_id = checked
            self._conversations.discard(checked)

    def __call__(
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
        with self._lock, self._in_session(checked):
            result = self._drive(self._steps(messages, force, instructions))
            self.last_result = result
            return result

    def compacted(
        self,
        messages: Sequence[Any],
        *,
        force: bool = False,
        session_id: str | None = None,
        instructions: str | None = None,
    ) -> tuple[list[Any], CompactionResult]:
        """One compaction step that leaves ``messages`` and every message in it as
        they are: ``(new_messages, result)``. The messages compaction did not change
        are the same objects in ``new_messages``; ``undo(new_messages, result)``
        works on it. ``session_id``: the conversation ``messages`` is (default:
        the compactor's own session); it keys the snapshot, the archive records
        and what the compactor remembers of that conversation between calls.
        """
        force, instructions = check_call(force, instructions)
        checked = self._session_arg(session_id)
        with self._lock, self._in_session(checked):
            new, result = self._drive(self._new_list_steps(messages, force, instructions))
            self.last_result = result
            return new, result

    def _drive(self, steps: Generator[Request, Any, T]) -> T:
        """Run ``steps`` to their end, answering each request with plain calls."""
        try:
            request = next(steps)
            while True:
                request = steps.send(self._run(request))
        except StopIteration as done:
            return cast(T, done.value)
        finally:
            steps.close()

    def _run(self, request: Request) -> Any:
        """Answer one request of the compaction steps with plain calls."""
        if isinstance(request, ArchiveRequest | WaitRequest):
            return self._archive(request)
        if isinstance(request, HookRequest):
            return _outcome(request.function, *request.args)
        if isinstance(request, SaveRequest):
            assert self.transcript_mgr is not None
            return _outcome(self.transcript_mgr.save, request.messages, request.session_id)
        assert isinstance(request, SummaryRequest)
        return _outcome(self.provider, request.prompt)

    def _archive(self, request: ArchiveRequest | WaitRequest) -> list[Outcome] | None:
        """Answer an archive request: the records handed to the writer of an archive
        that writes behind (not ``wait``), else archived (:meth:`_archive_now`); or
        wait for that writer."""
        if isinstance(request, WaitRequest):
            from concurrent.futures import wait  # noqa: PLC0415 (loaded by the store)

            wait(request.tickets)
            return None
        behind = None if request.wait else self._parts.ports.behind()
        if behind is None or not request.records:
            return self._archive_now(request.records)
        return hand_over(behind, request.records)

    def _archive_now(self, records: list[ArchiveRecord]) -> list[Outcome]:
        """One outcome per record: of one ``archive_many`` call for all of them when the
        archive takes a batch, else (or when that batch failed) of each ``archive``."""
        ports = self._parts.ports
        archive = ports.archive
        assert archive is not None
        batch = ports.batch()
        if batch is not None and records:
            outcome = _outcome(batch, list(records))
            if not one_by_one(outcome, len(records)):
                return [outcome] * len(records)
        return [_outcome(archive, record) for record in records]


def _outcome(function: Any, *args: Any) -> Outcome:
    """Call ``function``; an exception or an awaitable (closed unawaited) is a failure."""
    try:
        value = function(*args)
    except Exception as exc:
        return Outcome(error=exc)
    if inspect.isawaitable(value):
        close_awaitable(value)
        return Outcome(reason="returned an awaitable; use AsyncCompactor for async plug-ins")
    return Outcome(value)
