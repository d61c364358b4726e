"""The OpenAI Agents SDK: a session that stays compacted and a model input filter.

``CompactingSession(session, compactor)`` wraps any Agents SDK session so that the
stored history is compacted after every write (between runs the next run reads it
compacted). ``compaction_input_filter(compactor)`` goes into
``RunConfig(call_model_input_filter=...)`` and compacts what each model call of a
run is sent. The runner hands the filter its own full, uncompacted list at every
call, so the filter remembers per conversation what it made of it (the compacted
list, and which raw prefix that list stands for) and continues from there: a part
summarised once is never summarised again. Both pieces on one compactor share that
memory, keyed by the session id.

Requires ``openai-agents`` (``pip install "bareagent-compact[openai-agents]"``).
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, Final

from agents.run_config import CallModelData, ModelInputData

logger = logging.getLogger(__name__)

__all__ = ["CompactingSession", "compaction_input_filter"]

_FORMS_KEPT: Final = 8
"""How many compacted lists of one conversation are still recognised at a list's start."""
_CONVERSATIONS_KEPT: Final = 256
"""How many conversations one compactor's memory holds here (least recently used out)."""

_current_session: ContextVar[tuple[Any, str] | None] = ContextVar(
    "bareagent_compact_session", default=None
)
"""The compactor and id of the CompactingSession the current run read its history from."""

SessionIdSource = str | Callable[[CallModelData[Any]], "str | None"] | None


def _fingerprint(item: Any) -> bytes:
    """A short digest of one input item's content (key order ignored)."""
    text = json.dumps(item, sort_keys=True, default=repr, separators=(",", ":"))
    return hashlib.blake2b(text.encode("utf-8"), digest_size=12).digest()


def _fingerprints(items: list[Any]) -> list[bytes]:
    """The digests of ``items``, in order."""
    return [_fingerprint(item) for item in items]


class _Conversation:
    """What one conversation's items became: the compacted list and what it stands for.

    ``log`` holds the digests of every raw item taken in, in order; ``compacted`` is
    the latest compacted list, standing for all of them. ``forms`` are earlier
    compacted lists (their digests and how much of the log each stood for): a list
    that starts with one (a store written then, the history a run read) continues
    from there.
    """

    def __init__(self) -> None:
        self.log: list[bytes] = []
        self.compacted: list[Any] = []
        self.forms: list[tuple[list[bytes], int]] = []
        self.sent: list[Any] | None = None
        self.usage_seen: tuple[int, int] = (0, 0)
        self.lock = asyncio.Lock()

    def continuation(self, digests: list[bytes]) -> int | None:
        """Where the items not yet taken in start, or ``None`` if the list is unknown."""
        size = len(self.log)
        if digests[:size] == self.log:
            return size
        for index, (form, stands_for) in enumerate(self.forms):
            if digests[: len(form)] != form:
                continue
            since = self.log[stands_for:]
            rest = digests[len(form) : len(form) + len(since)]
            if rest != since:
                continue
            self.forms.insert(0, self.forms.pop(index))
            return len(form) + len(since)
        return None

    def candidate(self, items: list[Any]) -> list[Any]:
        """The list to compact: what is known replaced by its compacted form."""
        digests = _fingerprints(items)
        start = self.continuation(digests)
        if start is None:
            self.log, self.compacted, self.forms = [], [], []
            start = 0
        self.log.extend(digests[start:])
        return [*self.compacted, *items[start:]]

    def remember(self, compacted: list[Any]) -> None:
        """``compacted`` now stands for the whole log."""
        self.compacted = compacted
        form = (_fingerprints(compacted), len(self.log))
        if not self.forms or self.forms[0] != form:
            self.forms.insert(0, form)
            del self.forms[_FORMS_KEPT:]


_memory: weakref.WeakKeyDictionary[Any, OrderedDict[str | None, _Conversation]] = (
    weakref.WeakKeyDictionary()
)


def _conversation(compactor: Any, session_id: str | None) -> _Conversation:
    """The memory of one conversation of ``compactor`` (made on first use)."""
    conversations = _memory.setdefault(compactor, OrderedDict())
    conversation = conversations.get(session_id)
    if conversation is None:
        conversation = conversations[session_id] = _Conversation()
        while len(conversations) > _CONVERSATIONS_KEPT:
            conversations.popitem(last=False)
    conversations.move_to_end(session_id)
    return conversation


def _forget(compactor: Any, session_id: str | None) -> None:
    """Drop what is remembered of one conversation (its session was cleared)."""
    conversations = _memory.get(compactor)
    if conversations is not None:
        conversations.pop(session_id, None)


async def _compacted(compactor: Any, items: list[Any], session_id: str | None) -> Any:
    """``compactor.compacted(items, session_id=...)``, awaited or run in a thread."""
    method = compactor.compacted
    if inspect.iscoroutinefunction(method):
        return await method(items, session_id=session_id)
    return await asyncio.to_thread(method, items, session_id=session_id)


async def _compact(compactor: Any, items: list[Any], session_id: str | None) -> list[Any]:
    """``items`` compacted, continuing from what this conversation already became.

    A compaction problem leaves the items as they came (a warning is logged).
    """
    conversation = _conversation(compactor, session_id)
    async with conversation.lock:
        candidate = conversation.candidate(items)
        try:
            compacted, _result = await _compacted(compactor, candidate, session_id)
        except Exception:
            logger.warning("compaction failed; the items are sent as they were", exc_info=True)
            compacted = candidate
        conversation.remember(list(compacted))
        return list(compacted)


def _record(compactor: Any, session_id: str | None, wrapper: Any) -> None:
    """Feed the run's last request usage to ``record_usage``, with the list the filter sent."""
    conversation = _conversation(compactor, session_id)
    usage = getattr(wrapper, "usage", None)
    entries = getattr(usage, "request_usage_entries", None)
    if conversation.sent is None or not entries:
        return
    seen = (id(usage), len(entries))
    if seen == conversation.usage_seen:
        return
    conversation.usage_seen = seen
    try:
        compactor.record_usage(conversation.sent, entries[-1], session_id=session_id)
    except (TypeError, ValueError):
        logger.warning("the run's usage could not be recorded", exc_info=True)


def compaction_input_filter(
    compactor: Any, *, session_id: SessionIdSource = None
) -> Callable[[CallModelData[Any]], Any]:
    """A ``call_model_input_filter`` that compacts every model call's input for good.

    ``session_id`` keys the conversation: a string, a function of the
    ``CallModelData``, or ``None`` for the id of the ``CompactingSession`` on the
    same compactor that the run uses (``None`` again without one: the compactor's
    own session).
    """
    if not callable(getattr(compactor, "compacted", None)):
        raise TypeError(
            f"compactor must be a Compactor or AsyncCompactor, got {type(compactor).__name__}"
        )
    if session_id is not None and not isinstance(session_id, str) and not callable(session_id):
        raise TypeError(f"session_id must be a str, a function or None, got {session_id!r}")

    async def compaction_filter(data: CallModelData[Any]) -> ModelInputData:
        if isinstance(session_id, str):
            key: str | None = session_id
        elif session_id is not None:
            key = session_id(data)
        else:
            current = _current_session.get()
            key = current[1] if current is not None and current[0] is compactor else None
        items = list(data.model_data.input)
        compacted = await _compact(compactor, items, key)
        _conversation(compactor, key).sent = compacted
        return ModelInputData(input=compacted, instructions=data.model_data.instructions)

    return compaction_filter


def _accepts_wrapper(method: Any) -> bool:
    """Whether a session method takes the run's context as ``wrapper=``."""
    try:
        return "wrapper" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False


async def _call(method: Any, *args: Any, wrapper: Any = None) -> Any:
    """Call a session method, passing the run's ``wrapper`` only if it takes one."""
    if wrapper is not None and _accepts_wrapper(method):
        return await method(*args, wrapper=wrapper)
    return await method(*args)


class CompactingSession:
    """An Agents SDK session whose stored history stays compacted.

    After every ``add_items`` the whole stored history is compacted on
    ``compactor`` under this session's id; when that changed anything the store is
    rewritten (cleared and written again; restored if the write fails). Every other
    method is the wrapped session's.
    """

    def __init__(self, session: Any, compactor: Any) -> None:
        for name in ("get_items", "add_items", "pop_item", "clear_session"):
            if not callable(getattr(session, name, None)):
                raise TypeError(
                    f"session must implement the Agents SDK Session protocol (no {name}())"
                )
        if not isinstance(getattr(session, "session_id", None), str):
            raise TypeError("session must have a str session_id")
        if not callable(getattr(compactor, "compacted", None)):
            raise TypeError(
                f"compactor must be a Compactor or AsyncCompactor, got {type(compactor).__name__}"
            )
        self.session = session
        self.compactor = compactor

    @property
    def session_id(self) -> str:
        return str(self.session.session_id)

    @property
    def session_settings(self) -> Any:
        return getattr(self.session, "session_settings", None)

    async def get_items(self, limit: int | None = None, *, wrapper: Any = None) -> list[Any]:
        _current_session.set((self.compactor, self.session_id))
        return list(await _call(self.session.get_items, limit, wrapper=wrapper))

    async def add_items(self, items: list[Any], *, wrapper: Any = None) -> None:
        _current_session.set((self.compactor, self.session_id))
        await _call(self.session.add_items, items, wrapper=wrapper)
        _record(self.compactor, self.session_id, wrapper)
        stored = list(await _call(self.session.get_items, None, wrapper=wrapper))
        compacted = await _compact(self.compactor, stored, self.session_id)
        if _fingerprints(compacted) != _fingerprints(stored):
            await self._rewrite(stored, compacted, wrapper)

    async def _rewrite(self, stored: list[Any], compacted: list[Any], wrapper: Any) -> None:
        """Replace the stored items with ``compacted``; put ``stored`` back on failure."""
        try:
            await _call(self.session.clear_session, wrapper=wrapper)
            await _call(self.session.add_items, compacted, wrapper=wrapper)
        except Exception:
            logger.warning("rewriting the compacted session failed; restoring it", exc_info=True)
            await _call(self.session.clear_session, wrapper=wrapper)
            await _call(self.session.add_items, stored, wrapper=wrapper)

    async def pop_item(self, *, wrapper: Any = None) -> Any:
        return await _call(self.session.pop_item, wrapper=wrapper)

    async def clear_session(self, *, wrapper: Any = None) -> None:
        await _call(self.session.clear_session, wrapper=wrapper)
        _forget(self.compactor, self.session_id)
