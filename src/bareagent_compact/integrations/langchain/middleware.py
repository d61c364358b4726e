"""CompactionMiddleware: the compactor before every model call of a ``create_agent`` agent."""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Final

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from bareagent_compact.async_compactor import AsyncCompactor
from bareagent_compact.compactor import Compactor
from bareagent_compact.integrations.langchain.convert import Dict, to_dicts, to_messages
from bareagent_compact.result import Action

logger = logging.getLogger(__name__)

_PENDING_LIMIT: Final = 1024
"""Threads whose compacted request is held between ``before_model`` and the model call."""


_Prepared = tuple[list[BaseMessage], list[BaseMessage], list[Dict]]
"""The state's messages, the messages they stand for as last sent, and their dicts."""


def thread_of(runtime: Any) -> str | None:
    """The run's ``thread_id`` (its execution info, else ``configurable.thread_id`` of the
    run's config), or ``None``: the compactor's own session."""
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is None:
        try:
            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:  # outside a run
            thread = None
    return None if thread is None else str(thread)


class _Sent:
    """What ``before_model`` made of one thread's messages, for its model call."""

    __slots__ = ("dicts", "messages", "originals")

    def __init__(self, originals: list[BaseMessage], messages: list[BaseMessage],
                 dicts: list[Dict]) -> None:
        self.originals, self.messages, self.dicts = originals, messages, dicts


class _Last:
    """One thread's last call, message by message: the state's message object (``keys``,
    with its content then), the dict the compactor gave back for it and the message sent.
    The next call reuses both for the messages still the same objects, so the compactor
    reads its own last output (its edits kept, a background summary's copy recognised)
    plus what was appended."""

    __slots__ = ("contents", "dicts", "keys", "sent")

    def __init__(self, keys: list[BaseMessage], dicts: list[Dict],
                 sent: list[BaseMessage]) -> None:
        self.keys, self.dicts, self.sent = keys, dicts, sent
        self.contents = [m.content for m in keys]

    def reusable(self, current: list[BaseMessage]) -> int:
        """How many leading messages of ``current`` are the objects last seen (their
        content not replaced since)."""
        count = 0
        for now, then, content in zip(current, self.keys, self.contents, strict=False):
            if now is not then or now.content is not content:
                break
            count += 1
        return count


def _bounded(cache: OrderedDict[str | None, Any], thread: str | None, value: Any) -> None:
    """``value`` for ``thread``, the least recently used threads over the limit dropped."""
    cache[thread] = value
    cache.move_to_end(thread)
    while len(cache) > _PENDING_LIMIT:
        cache.popitem(last=False)


class CompactionMiddleware(AgentMiddleware):
    """Compacts the agent's history before every model call.

    ``compactor``: a :class:`~bareagent_compact.Compactor` (``before_model``; ``ainvoke``
    runs it in a worker thread) or an :class:`~bareagent_compact.AsyncCompactor`
    (``abefore_model`` only: ``invoke`` raises ``TypeError``). Each ``thread_id`` is its own
    conversation (``session_id``). The usage the model reports is fed to ``record_usage``
    with the messages as sent.
    """

    def __init__(self, compactor: Compactor | AsyncCompactor) -> None:
        if not isinstance(compactor, (Compactor, AsyncCompactor)):
            raise TypeError(
                f"compactor must be a Compactor or AsyncCompactor, got {type(compactor).__name__}"
            )
        super().__init__()
        self.compactor = compactor
        self._sent: OrderedDict[str | None, _Sent] = OrderedDict()
        self._last: OrderedDict[str | None, _Last] = OrderedDict()

    def _prepare(self, thread: str | None, state: Any) -> _Prepared:
        """The state's messages, the messages they stand for as last sent, and their dicts:
        the last call's for the leading messages it saw, new ones for the rest."""
        originals = list(state["messages"])
        last = self._last.get(thread)
        reused = last.reusable(originals) if last is not None else 0
        bases = [*(last.sent[:reused] if last else []), *originals[reused:]]
        dicts = [*(last.dicts[:reused] if last else []), *to_dicts(originals[reused:])]
        return originals, bases, dicts

    def _conclude(self, thread: str | None, prepared: _Prepared,
                  new: list[Dict], action: Action) -> dict[str, Any] | None:
        originals, bases, dicts = prepared
        unchanged = len(new) == len(dicts) and all(a is b for a, b in zip(new, dicts, strict=True))
        ack = self.compactor.acknowledgement
        messages = bases if unchanged else to_messages(new, dicts, bases, acknowledgement=ack)
        full = action is Action.FULL
        _bounded(self._sent, thread, _Sent(messages if full else originals, messages, new))
        if full or len(new) == len(originals):
            _bounded(self._last, thread, _Last(messages if full else originals, new, messages))
        else:
            self._last.pop(thread, None)
        if full:
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]}
        return None

    def _left_as_is(self, thread: str | None) -> None:
        """A compaction problem inside the loop: logged, the request sent as it is."""
        self._sent.pop(thread, None)
        self._last.pop(thread, None)
        logger.warning("the messages of thread %r could not be compacted; sent as they are",
                       thread, exc_info=True)

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if isinstance(self.compactor, AsyncCompactor):
            raise TypeError(
                "CompactionMiddleware with an AsyncCompactor runs in async runs only "
                "(agent.ainvoke / astream); use a Compactor for invoke / stream"
            )
        thread = thread_of(runtime)
        try:
            prepared = self._prepare(thread, state)
            dicts = prepared[2]
            new, result = self.compactor.compacted(dicts, session_id=thread)
            return self._conclude(thread, prepared, new, result.action)
        except (TypeError, ValueError):
            self._left_as_is(thread)
            return None

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        compactor = self.compactor
        thread = thread_of(runtime)
        try:
            prepared = self._prepare(thread, state)
            dicts = prepared[2]
            if isinstance(compactor, AsyncCompactor):
                new, result = await compactor.compacted(dicts, session_id=thread)
            else:
                new, result = await asyncio.to_thread(compactor.compacted, dicts, session_id=thread)
            return self._conclude(thread, prepared, new, result.action)
        except (TypeError, ValueError):
            self._left_as_is(thread)
            return None

    def _request(self, request: ModelRequest) -> tuple[ModelRequest, list[Dict] | None]:
        """The request with the compacted messages when it still holds the messages
        ``before_model`` saw, and the dicts to record the usage against."""
        thread = thread_of(request.runtime)
        sent = self._sent.pop(thread, None)
        if sent is None:
            return request, None
        current = request.messages
        if len(current) == len(sent.originals) and all(
            a is b for a, b in zip(current, sent.originals, strict=True)
        ):
            return request.override(messages=list(sent.messages)), sent.dicts  # type: ignore[arg-type]
        logger.debug("the request's messages changed after before_model; sent as they are")
        return request, None

    def _record(self, request: ModelRequest, dicts: list[Dict] | None, response: Any) -> None:
        result = getattr(response, "result", [response])
        reply = next((m for m in reversed(result) if isinstance(m, AIMessage)), None)
        usage = getattr(reply, "usage_metadata", None)
        if dicts is None or not usage or not usage.get("input_tokens"):
            return
        try:
            self.compactor.record_usage(dicts, usage["input_tokens"],
                                        session_id=thread_of(request.runtime))
        except (TypeError, ValueError):
            logger.warning("the model's usage could not be recorded", exc_info=True)

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], Any]) -> Any:
        request, dicts = self._request(request)
        response = handler(request)
        self._record(request, dicts, response)
        return response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[Any]]
    ) -> Any:
        request, dicts = self._request(request)
        response = await handler(request)
        self._record(request, dicts, response)
        return response
