"""Typed callers using the SDKs' own request types: checked by ``mypy --strict`` in CI
(``.ci/run``), never run. Each call below must type-check as written."""

from __future__ import annotations

from anthropic.types import MessageParam
from openai.types.chat import ChatCompletionMessageParam
from openai.types.responses import ResponseInputItemParam

from bareagent_compact import (
    AsyncCompactor,
    CompactionResult,
    Compactor,
    _serialize,
    estimate_tokens,
    find_orphans,
    repair_tool_pairs,
)


def summarize(prompt: list[dict[str, object]]) -> str:
    return "summary"


def anthropic_loop(messages: list[MessageParam]) -> CompactionResult:
    estimate_tokens(messages)
    _serialize(messages)
    find_orphans(messages)
    repair_tool_pairs(messages)
    return Compactor(summarize)(messages)


def chat_loop(messages: list[ChatCompletionMessageParam]) -> CompactionResult:
    estimate_tokens(messages)
    return Compactor(summarize)(messages, force=True)


def responses_loop(items: list[ResponseInputItemParam]) -> CompactionResult:
    find_orphans(items)
    return Compactor(summarize)(items)


async def async_loop(messages: list[MessageParam]) -> CompactionResult:
    return await AsyncCompactor(summarize)(messages)


async def async_summarize(prompt: list[dict[str, object]]) -> str:
    return "summary"


async def async_provider_loop(messages: list[MessageParam]) -> CompactionResult:
    return await AsyncCompactor(async_summarize)(messages)
