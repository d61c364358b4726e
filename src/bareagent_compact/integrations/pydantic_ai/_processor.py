"""``compaction_processor``: the history processor, sync or async like its compactor.

Before each model request it feeds the usage of the response to the request
before (``ModelResponse.usage.input_tokens``, cache reads and writes included) to
``record_usage`` with the dicts sent then, converts the history, compacts the
copy (``compacted``: the input is never edited) and converts the result back. The
leading messages that are the very objects it returned last are handed over as the
very dicts the compactor returned for them, so that the compactor sees its own
output continued (a background summary is swapped in). The session id is the
run's ``conversation_id`` unless one is given.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.tools import RunContext

from bareagent_compact.async_compactor import AsyncCompactor
from bareagent_compact.compactor import Compactor
from bareagent_compact.integrations.pydantic_ai._back import back
from bareagent_compact.integrations.pydantic_ai._carry import adopted, continued
from bareagent_compact.integrations.pydantic_ai._to_dicts import Converted

logger = logging.getLogger(__name__)

MAX_SESSIONS: Final = 256
"""How many conversations the processor remembers what it sent last for."""

Messages = list[pm.ModelMessage]


@dataclass
class _Sent:
    """What the processor returned last in one conversation, and its dicts."""

    messages: Messages
    dicts: list[dict[str, Any]]
    converted: Converted
    """``messages`` as dicts, each the very dict of ``dicts`` it stands for."""


class _State:
    """What one processor remembers between requests, per conversation."""

    def __init__(self, session_id: str | None) -> None:
        self.session_id = session_id
        self.sent: OrderedDict[str | None, _Sent] = OrderedDict()

    def session(self, ctx: RunContext[Any]) -> str | None:
        return self.session_id if self.session_id is not None else ctx.conversation_id

    def usage(self, session: str | None, messages: Messages) -> tuple[list[Any], int] | None:
        """The dicts sent last and the input size its response reported, when the
        history goes on from what was sent."""
        sent = self.sent.get(session)
        if sent is None or len(messages) <= len(sent.messages):
            return None
        if any(a is not b for a, b in zip(sent.messages, messages, strict=False)):
            return None
        response = messages[len(sent.messages)]
        if not isinstance(response, pm.ModelResponse) or response.usage.input_tokens <= 0:
            return None
        return sent.dicts, response.usage.input_tokens

    def known(self, session: str | None) -> Converted | None:
        """The dicts of what was returned last in ``session``, if anything."""
        sent = self.sent.get(session)
        return None if sent is None else sent.converted

    def remember(
        self, session: str | None, converted: Converted, messages: Messages, dicts: list[Any]
    ) -> None:
        """Keep what was returned (``messages``, compacted as ``dicts`` from
        ``converted``) for the next call of ``session``."""
        try:
            made = converted if messages is converted.messages else continued(converted, messages)
            carried = adopted(made, dicts)
        except Exception:  # the next call then converts its history afresh
            logger.warning("the compacted history could not be read", exc_info=True)
            self.sent.pop(session, None)
            return
        self.sent[session] = _Sent(messages, dicts, carried)
        self.sent.move_to_end(session)
        while len(self.sent) > MAX_SESSIONS:
            self.sent.popitem(last=False)


def _stamp(ctx: RunContext[Any]) -> dict[str, Any]:
    return {"run_id": ctx.run_id, "conversation_id": ctx.conversation_id}


def _convert(known: Converted | None, messages: Messages) -> Converted | None:
    try:
        return continued(known, messages)
    except Exception:  # a part this module cannot read: the history is sent as it is
        logger.warning("history left uncompacted: its messages could not be read", exc_info=True)
        return None


def _back(converted: Converted, new: list[Any], ctx: RunContext[Any]) -> Messages:
    same = len(new) == len(converted.dicts)
    if same and all(a is b for a, b in zip(new, converted.dicts, strict=True)):
        return converted.messages
    try:
        return back(converted, new, stamp=_stamp(ctx))
    except Exception:  # never lose the history over a conversion fault
        logger.warning("compaction dropped: its result could not be read back", exc_info=True)
        return converted.messages


def _record(compactor: Any, state: _State, session: str | None, messages: Messages) -> None:
    found = state.usage(session, messages)
    if found is None:
        return
    try:
        compactor.record_usage(found[0], found[1], session_id=session)
    except (TypeError, ValueError):
        logger.warning("usage not recorded", exc_info=True)


def _sync(compactor: Compactor, state: _State) -> Callable[[RunContext[Any], Messages], Messages]:
    def compact_history(ctx: RunContext[Any], messages: Messages) -> Messages:
        session = state.session(ctx)
        _record(compactor, state, session, messages)
        converted = _convert(state.known(session), messages)
        if converted is None:
            return messages
        new, _ = compactor.compacted(converted.dicts, session_id=session)
        out = _back(converted, new, ctx)
        state.remember(session, converted, out, new)
        return out

    return compact_history


def _async(
    compactor: AsyncCompactor, state: _State
) -> Callable[[RunContext[Any], Messages], Awaitable[Messages]]:
    async def compact_history(ctx: RunContext[Any], messages: Messages) -> Messages:
        session = state.session(ctx)
        _record(compactor, state, session, messages)
        converted = _convert(state.known(session), messages)
        if converted is None:
            return messages
        new, _ = await compactor.compacted(converted.dicts, session_id=session)
        out = _back(converted, new, ctx)
        state.remember(session, converted, out, new)
        return out

    return compact_history


def compaction_processor(
    compactor: Compactor | AsyncCompactor, *, session_id: str | None = None
) -> Callable[[RunContext[Any], Messages], Messages | Awaitable[Messages]]:
    """A Pydantic AI history processor that compacts with ``compactor``.

    Use it as ``capabilities=[ProcessHistory(compaction_processor(compactor))]``.
    An ``AsyncCompactor`` gives an ``async`` processor, a ``Compactor`` a plain one
    (Pydantic AI runs it in a worker thread). ``session_id`` keys snapshots and
    what the compactor remembers; by default each run's ``conversation_id``.
    """
    if isinstance(compactor, AsyncCompactor):
        return _async(compactor, _State(session_id))
    if isinstance(compactor, Compactor):
        return _sync(compactor, _State(session_id))
    raise TypeError(
        f"compactor must be a Compactor or an AsyncCompactor, got {type(compactor).__name__}"
    )


def summary_provider(
    model: Any, **run_kwargs: Any
) -> Callable[[list[dict[str, Any]]], Awaitable[str]]:
    """An ``async`` summary provider that asks ``model`` (a Pydantic AI model or its
    name) through an agent of its own, for an ``AsyncCompactor``.

    A summary is asked for inside an agent run, where Pydantic AI refuses
    ``run_sync``; so the provider awaits ``Agent.run``. ``run_kwargs`` go to every
    run (``model_settings=``, ``usage_limits=`` ...).
    """
    agent: Agent[None, str] = Agent(model)

    async def summarize(prompt: list[dict[str, Any]]) -> str:
        system = "\n\n".join(m["content"] for m in prompt if m.get("role") == "system")
        user = "\n\n".join(str(m["content"]) for m in prompt if m.get("role") != "system")
        result = await agent.run(user, instructions=system or None, **run_kwargs)
        return str(result.output)

    return summarize

