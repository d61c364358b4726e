"""A LangChain chat model as the compactor's summary provider."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Final

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from bareagent_compact.integrations.langchain.convert import SUMMARY_MARK, Dict
from bareagent_compact.providers import SummaryText


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
