"""LangChain v1: :class:`CompactionMiddleware`, an ``AgentMiddleware`` for ``create_agent``.

The agent's messages are read as OpenAI Chat dicts (an AI message's
``tool_calls``, one ``tool`` message per ``ToolMessage``; content blocks such
as Anthropic ``thinking`` with their signature kept as they are), compacted
with ``compacted()``, and mapped back: a message the compactor did not change
is the original object, every field kept. A full compaction rewrites the graph
state (``RemoveMessage(REMOVE_ALL_MESSAGES)`` and the new list, as LangChain's
``SummarizationMiddleware`` does); micro-compaction changes the model request
only (as its context-editing middleware does). Needs ``.[langchain]``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Final

from langchain.agents.middleware import AgentMiddleware, ModelRequest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.config import get_config
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from bareagent_compact.async_compactor import AsyncCompactor
from bareagent_compact.compactor import Compactor
from bareagent_compact.prompts import SUMMARY_PREFIX
from bareagent_compact.providers import SummaryText
from bareagent_compact.result import Action

__all__ = [
    "CompactionMiddleware",
    "langchain_chat_provider",
    "langchain_chat_provider_async",
    "to_dicts",
    "to_messages",
]

logger = logging.getLogger(__name__)

Dict = dict[str, Any]
SUMMARY_MARK: Final = {"lc_source": "summarization"}
"""What LangChain's own summary message carries in ``additional_kwargs``."""
_PENDING_LIMIT: Final = 1024
"""Threads whose compacted request is held between ``before_model`` and the model call."""


# -- LangChain messages to dicts -------------------------------------------------------------


def _call_dict(call: Any) -> Dict:
    arguments = json.dumps(call.get("args", {}), ensure_ascii=False)
    return {"id": call.get("id"), "type": "function",
            "function": {"name": call.get("name"), "arguments": arguments}}


def to_dict(message: BaseMessage) -> Dict:
    """One LangChain message as an OpenAI Chat message dict (content blocks shared, not
    copied: the compactor never changes what it is given)."""
    content = message.content
    if isinstance(message, AIMessage):
        out: Dict = {"role": "assistant", "content": content}
        if message.tool_calls:
            ids = {call.get("id") for call in message.tool_calls}
            if isinstance(content, list):  # Anthropic's tool_use blocks stand for tool_calls
                out["content"] = [b for b in content if not _is_use(b, ids)]
            out["tool_calls"] = [_call_dict(call) for call in message.tool_calls]
        return out
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content}
    if isinstance(message, FunctionMessage):
        return {"role": "function", "name": message.name, "content": content}
    if isinstance(message, ChatMessage):
        return {"role": message.role, "content": content}
    raise TypeError(f"a {type(message).__name__} is no message the compactor can read")


def to_dicts(messages: Sequence[BaseMessage]) -> list[Dict]:
    """LangChain messages as OpenAI Chat dicts, one each, in order."""
    return [to_dict(message) for message in messages]


def _is_use(block: object, ids: set[Any]) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id") in ids


# -- dicts back to LangChain messages --------------------------------------------------------


def _calls_of(out: Dict) -> list[Dict]:
    calls = []
    for call in out.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            args = json.loads(function.get("arguments") or "{}")
        except ValueError:
            args = {}
        calls.append({"name": function.get("name"), "args": args, "id": call.get("id"),
                      "type": "tool_call"})
    return calls


def from_dict(out: Dict) -> BaseMessage:
    """A new LangChain message for a dict the compactor wrote (the summary is marked the
    way LangChain marks its own)."""
    role, content = out.get("role"), out.get("content")
    content = "" if content is None else content
    fresh = str(uuid.uuid4())
    if role == "user":
        summary = _text(content).startswith(SUMMARY_PREFIX)
        return HumanMessage(content=content, id=fresh,
                            additional_kwargs=dict(SUMMARY_MARK) if summary else {})
    if role == "assistant":
        return AIMessage(content=content, tool_calls=_calls_of(out), id=fresh)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=out.get("tool_call_id") or "", id=fresh)
    if role in ("system", "developer"):
        return SystemMessage(content=content, id=fresh)
    return ChatMessage(role=str(role), content=content, id=fresh)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return str(content[0].get("text", ""))
    return ""


def _edited(origin: BaseMessage, out: Dict) -> BaseMessage:
    """``origin`` with the content (and tool calls) the compactor gave it, every other field
    kept; a message of another role if the compactor changed the role."""
    if to_dict(origin).get("role") != out.get("role"):
        return from_dict(out)
    update: Dict = {"content": "" if out.get("content") is None else out.get("content")}
    if isinstance(origin, AIMessage) and origin.tool_calls:
        kept = {call.get("id") for call in out.get("tool_calls") or []}
        update["tool_calls"] = [c for c in origin.tool_calls if c.get("id") in kept]
        if isinstance(origin.content, list):  # the tool_use blocks put back after the rest
            uses = [b for b in origin.content if _is_use(b, kept)]
            body = update["content"]
            body = [{"type": "text", "text": body}] if isinstance(body, str) and body else body
            update["content"] = [*(body or []), *uses]
    return origin.model_copy(update=update)


def _origins(new: Sequence[Dict], old: Sequence[Dict]) -> list[int | None]:
    """For each dict of ``new``, the index in ``old`` of the message it stands for: the same
    object; else the same tool call id; else the same place between two unchanged ones."""
    where = {id(d): i for i, d in enumerate(old)}
    found: list[int | None] = [where.get(id(d)) for d in new]
    by_call = {_key(d): i for i, d in enumerate(old) if _key(d) is not None}
    for j, d in enumerate(new):
        if found[j] is None and _key(d) is not None:
            found[j] = by_call.get(_key(d))
    for j, d in enumerate(new):
        if found[j] is not None or _text(d.get("content")).startswith(SUMMARY_PREFIX):
            continue
        after = next((k for k in range(j + 1, len(new)) if found[k] is not None), None)
        anchor = found[after] if after is not None else None
        guess = anchor - (after - j) if anchor is not None and after is not None else (
            len(old) - (len(new) - j)
        )
        if 0 <= guess < len(old) and old[guess].get("role") == d.get("role"):
            found[j] = guess if guess not in found else None
    return found


def _key(d: Dict) -> tuple[str, str] | None:
    if d.get("role") == "tool" and d.get("tool_call_id"):
        return ("tool", str(d["tool_call_id"]))
    calls = d.get("tool_calls")
    if calls:
        return ("calls", ",".join(str(c.get("id")) for c in calls))
    return None


def to_messages(
    new: Sequence[Dict], old: Sequence[Dict], originals: Sequence[BaseMessage]
) -> list[BaseMessage]:
    """``new`` (what ``compacted`` returned for ``old``, the dicts of ``originals``) as
    LangChain messages: the original object for a dict left as it was, the original with its
    new content for an edited one, a new message for one the compactor wrote."""
    messages: list[BaseMessage] = []
    for out, index in zip(new, _origins(new, old), strict=True):
        if index is None:
            messages.append(from_dict(out))
        elif out is old[index]:
            messages.append(originals[index])
        else:
            messages.append(_edited(originals[index], out))
    return messages


# -- the summariser --------------------------------------------------------------------------


def _prompt(prompt: list[Dict]) -> list[BaseMessage]:
    return [SystemMessage(content=m["content"]) if m.get("role") == "system"
            else HumanMessage(content=m["content"]) for m in prompt]


def _answer(reply: BaseMessage) -> SummaryText:
    usage = getattr(reply, "usage_metadata", None) or None
    if usage is not None:
        details = usage.get("input_token_details") or {}
        usage = {"input_tokens": usage.get("input_tokens", 0),
                 "output_tokens": usage.get("output_tokens"),
                 "input_tokens_details": {"cached_tokens": details.get("cache_read")}}
    return SummaryText(reply.text, usage)


_CONFIG: Final = {"metadata": dict(SUMMARY_MARK), "tags": ["nostream"]}


def langchain_chat_provider(model: BaseChatModel) -> Callable[[list[Dict]], SummaryText]:
    """A summary provider calling a LangChain chat model (``model.invoke``), for
    ``Compactor(provider=...)``; the call is tagged as LangChain tags its own summary calls."""
    if not isinstance(model, BaseChatModel):
        raise TypeError(f"model must be a LangChain BaseChatModel, got {type(model).__name__}")

    def summarize(prompt: list[Dict], /) -> SummaryText:
        return _answer(model.invoke(_prompt(prompt), config=_CONFIG))  # type: ignore[arg-type]

    return summarize


def langchain_chat_provider_async(
    model: BaseChatModel,
) -> Callable[[list[Dict]], Awaitable[SummaryText]]:
    """:func:`langchain_chat_provider` for ``AsyncCompactor`` (``await model.ainvoke``)."""
    if not isinstance(model, BaseChatModel):
        raise TypeError(f"model must be a LangChain BaseChatModel, got {type(model).__name__}")

    async def summarize(prompt: list[Dict], /) -> SummaryText:
        reply = await model.ainvoke(_prompt(prompt), config=_CONFIG)  # type: ignore[arg-type]
        return _answer(reply)

    return summarize



# -- the middleware --------------------------------------------------------------------------


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

    def _prepare(self, state: Any) -> tuple[list[BaseMessage], list[Dict]]:
        originals = list(state["messages"])
        return originals, to_dicts(originals)

    def _conclude(self, thread: str | None, originals: list[BaseMessage], dicts: list[Dict],
                  new: list[Dict], action: Action) -> dict[str, Any] | None:
        unchanged = len(new) == len(dicts) and all(a is b for a, b in zip(new, dicts, strict=True))
        messages = originals if unchanged else to_messages(new, dicts, originals)
        self._sent[thread] = _Sent(originals, messages, new)
        self._sent.move_to_end(thread)
        while len(self._sent) > _PENDING_LIMIT:
            self._sent.popitem(last=False)
        if action is Action.FULL:
            self._sent[thread].originals = messages
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *messages]}
        return None

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if isinstance(self.compactor, AsyncCompactor):
            raise TypeError(
                "CompactionMiddleware with an AsyncCompactor runs in async runs only "
                "(agent.ainvoke / astream); use a Compactor for invoke / stream"
            )
        thread = thread_of(runtime)
        originals, dicts = self._prepare(state)
        new, result = self.compactor.compacted(dicts, session_id=thread)
        return self._conclude(thread, originals, dicts, new, result.action)

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        compactor = self.compactor
        thread = thread_of(runtime)
        originals, dicts = self._prepare(state)
        if isinstance(compactor, AsyncCompactor):
            new, result = await compactor.compacted(dicts, session_id=thread)
        else:
            new, result = await asyncio.to_thread(compactor.compacted, dicts, session_id=thread)
        return self._conclude(thread, originals, dicts, new, result.action)

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

