"""Agent loops through the real SDK clients with a continuation summariser.

Each loop sends its requests the way the SDK's documentation shows (the
response objects appended to the history), compacts before every request with
a low threshold, and uses the continuation provider of its API, given the
loop's own system prompt, tools and cache settings. The fake server refuses any
request that breaks the API's rules, and compares every request with the
previous one (its prompt cache, an exact prefix): the summary requests must
carry the previous loop request whole as their prefix.
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from _common import ANTHROPIC_TOOLS, CHAT_TOOLS, RESPONSES_TOOLS, SYSTEM_PROMPT, TASKS, run_tool
from _fake_server import FakeServer, anthropic_client, openai_client

from bareagent_compact import Action, AsyncCompactor, CompactionResult, Compactor
from bareagent_compact.check import check_request
from bareagent_compact.providers import (
    anthropic_continuation_provider,
    openai_chat_continuation_provider,
    openai_responses_continuation_provider,
)

MODEL = "fake-model"
TURNS = 24
THRESHOLD = 4000
MARK = {"type": "ephemeral"}


def _marked(messages: list[Any]) -> list[Any]:
    """The request's messages: the list with a cache breakpoint on its last block
    (a copy: the list itself keeps no marker), as Anthropic's caching guide shows."""
    sent = list(messages)
    last = dict(sent[-1])
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    blocks[-1] = {**blocks[-1], "cache_control": MARK}
    last["content"] = blocks
    sent[-1] = last
    return sent


def _task(turn: int) -> dict[str, Any]:
    """A user task as a text block: the form the request's breakpoint marks."""
    return {"role": "user", "content": [{"type": "text", "text": TASKS[turn % len(TASKS)]}]}


def anthropic_loop(server: FakeServer, turns: int) -> list[CompactionResult]:
    client = anthropic_client(server)
    provider = anthropic_continuation_provider(
        client, MODEL, system=SYSTEM_PROMPT, tools=ANTHROPIC_TOOLS, cache_control=MARK
    )
    compactor = Compactor(provider, threshold=THRESHOLD, language="en")
    messages: list[Any] = [_task(0)]
    results = []
    for turn in range(turns):
        results.append(compactor(messages))
        response = client.messages.create(
            model=MODEL, max_tokens=1024, system=SYSTEM_PROMPT, tools=ANTHROPIC_TOOLS,
            messages=_marked(messages),
        )
        messages.append({"role": "assistant", "content": response.content})
        calls = [block for block in response.content if block.type == "tool_use"]
        if calls:
            messages.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": b.id, "content": run_tool(b.name, b.input)}
                for b in calls
            ]})  # fmt: skip
        else:
            messages.append(_task(turn + 1))
    return results


def chat_loop(server: FakeServer, turns: int) -> list[CompactionResult]:
    client = openai_client(server)
    provider = openai_chat_continuation_provider(
        client, MODEL, tools=CHAT_TOOLS, prompt_cache_key="session-1"
    )
    compactor = Compactor(provider, threshold=THRESHOLD, language="en")
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": TASKS[0]},
    ]
    results = []
    for turn in range(turns):
        results.append(compactor(messages))
        completion = client.chat.completions.create(
            model=MODEL, messages=messages, tools=CHAT_TOOLS, prompt_cache_key="session-1"
        )
        message = completion.choices[0].message
        messages.append(message)
        for call in message.tool_calls or []:
            output = run_tool(call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        if not message.tool_calls:
            messages.append({"role": "user", "content": TASKS[(turn + 1) % len(TASKS)]})
    return results


def responses_loop(server: FakeServer, turns: int) -> list[CompactionResult]:
    client = openai_client(server)
    provider = openai_responses_continuation_provider(
        client, MODEL, instructions=SYSTEM_PROMPT, tools=RESPONSES_TOOLS
    )
    compactor = Compactor(provider, threshold=THRESHOLD, language="en")
    items: list[Any] = [{"role": "user", "content": TASKS[0]}]
    results = []
    for turn in range(turns):
        results.append(compactor(items))
        response = client.responses.create(
            model=MODEL, input=items, instructions=SYSTEM_PROMPT, tools=RESPONSES_TOOLS
        )
        calls = [item for item in response.output if item.type == "function_call"]
        items += response.output
        for call in calls:
            output = run_tool(call.name, json.loads(call.arguments))
            items.append({"type": "function_call_output", "call_id": call.call_id,
                          "output": output})
        if not calls:
            items.append({"role": "user", "content": TASKS[(turn + 1) % len(TASKS)]})
    return results


LOOPS: dict[str, tuple[str, str, Callable[[FakeServer, int], list[CompactionResult]]]] = {
    "anthropic": ("/v1/messages", "messages", anthropic_loop),
    "openai_chat": ("/v1/chat/completions", "messages", chat_loop),
    "openai_responses": ("/v1/responses", "input", responses_loop),
}


def _unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


@pytest.mark.parametrize("dialect", sorted(LOOPS))
def test_a_loop_with_the_continuation_summariser_reads_the_prefix_from_the_cache(
    dialect: str,
) -> None:
    path, key, loop = LOOPS[dialect]
    server = FakeServer(keep_bodies=True)
    results = loop(server, TURNS)
    full = [r for r in results if r.action is Action.FULL]
    assert server.stats.rejections == []
    assert len(full) >= 2 and server.stats.summary_requests == len(full)
    for _, body in server.stats.bodies:
        assert check_request(body[key], dialect) == []
    bodies = [body for p, body in server.stats.bodies if p == path]
    reads = server.stats.prefix_reads
    summaries = [i for i, read in enumerate(reads) if read.summary]
    assert len(summaries) == len(full)
    for i in summaries:
        read, previous, summary = reads[i], bodies[i - 1], bodies[i]
        # The whole previous loop request is the summary request's prefix, byte
        # for byte (the breakpoint marker aside, which the loop moves each turn).
        assert read.matched == read.previous == len(previous[key]) > 0
        prefix = summary[key][: len(previous[key])]
        if dialect == "anthropic":
            assert _unmarked(prefix) == _unmarked(previous[key])
            assert summary["system"] == previous["system"]
        else:
            assert json.dumps(prefix) == json.dumps(previous[key])
        assert summary.get("tools") == previous.get("tools")
        assert len(summary[key]) > len(previous[key])
    for result in full:
        assert result.cost is not None and result.cost.cache_read_tokens
        assert result.cost.cache_read_tokens > 0.5 * (result.cost.input_tokens or 0)


def test_an_async_anthropic_loop_with_a_background_continuation_is_accepted() -> None:
    server = FakeServer(keep_bodies=True)

    async def go() -> list[CompactionResult]:
        async with anthropic_client(server, asynchronous=True) as client:
            provider = anthropic_continuation_provider(
                client, MODEL, system=SYSTEM_PROMPT, tools=ANTHROPIC_TOOLS, cache_control=MARK
            )
            compactor = AsyncCompactor(
                provider, threshold=THRESHOLD, background_at=0.7, language="en"
            )
            messages: list[Any] = [_task(0)]
            results = []
            for turn in range(TURNS):
                results.append(await compactor(messages))
                response = await client.messages.create(
                    model=MODEL, max_tokens=1024, system=SYSTEM_PROMPT,
                    tools=ANTHROPIC_TOOLS, messages=_marked(copy.copy(messages)),
                )
                messages.append({"role": "assistant", "content": response.content})
                calls = [b for b in response.content if b.type == "tool_use"]
                if calls:
                    messages.append({"role": "user", "content": [
                        {"type": "tool_result", "tool_use_id": b.id,
                         "content": run_tool(b.name, b.input)}
                        for b in calls
                    ]})  # fmt: skip
                else:
                    messages.append(_task(turn + 1))
                await asyncio.sleep(0)
            return results

    results = asyncio.run(go())
    assert server.stats.rejections == []
    assert any(r.action is Action.FULL for r in results)
    path = LOOPS["anthropic"][0]
    bodies = [body for p, body in server.stats.bodies if p == path]
    pairs = [(r, b) for r, b in zip(server.stats.prefix_reads, bodies, strict=True) if r.summary]
    # The history of the call that started it, without the messages kept after the
    # summary: all of it a prefix the loop sent before (here, of the last request).
    assert pairs
    for read, body in pairs:
        assert read.matched == min(read.previous, len(body["messages"]) - 1) > 0
