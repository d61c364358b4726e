"""30-turn agent loops through the real SDK clients, every request checked by the fake API.

Each loop is the example loop of its dialect (examples/*_loop.py): the SDK's
response objects are appended to the history the way each SDK's documentation
shows, ``compactor(messages)`` runs every turn with a low threshold so that
full compactions happen, and the fake server rejects (HTTP 400) any request that
breaks the API's rules. The figures are printed (run with ``-s`` to see them).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

import anthropic_loop
import async_anthropic_loop
import openai_chat_loop
import openai_responses_loop
from _common import Report, run_tool
from _fake_server import FakeServer, anthropic_client, openai_client

from bareagent_compact import Compactor, is_context_overflow
from bareagent_compact.providers import openai_chat_provider

TURNS = 30
THRESHOLD = 3000  # estimated tokens: a few big tool results go over it
THRESHOLDS = (3000, 5000)  # a full compaction nearly every other turn; a few, with micro between
MODEL = "fake-model"


def run_async_anthropic(server: FakeServer, turns: int, threshold: int) -> Report:
    async def go() -> Report:
        async with anthropic_client(server, asynchronous=True) as client:
            return await async_anthropic_loop.run(client, MODEL, turns, threshold, log=_quiet)

    return asyncio.run(go())


def _quiet(_line: str) -> None:
    return None


LOOPS: dict[str, Callable[[FakeServer, int, int], Report]] = {
    "anthropic": lambda server, turns, threshold: anthropic_loop.run(
        anthropic_client(server), MODEL, turns, threshold, log=_quiet
    ),
    "openai_chat": lambda server, turns, threshold: openai_chat_loop.run(
        openai_client(server), MODEL, turns, threshold, log=_quiet
    ),
    "openai_responses": lambda server, turns, threshold: openai_responses_loop.run(
        openai_client(server), MODEL, turns, threshold, log=_quiet
    ),
    "async_anthropic": run_async_anthropic,
}


def dialect_params() -> list[Any]:
    """The dialects' loops, by name."""
    return sorted(LOOPS)


def figures(dialect: str, report: Report, server: FakeServer) -> str:
    return (
        f"{dialect}: {report.line(server.stats.rejected)} "
        f"summary_requests={server.stats.summary_requests} overflows={server.stats.overflows}"
    )


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("dialect", dialect_params())
def test_a_30_turn_loop_compacts_and_every_request_is_accepted(
    dialect: str, threshold: int
) -> None:
    server = FakeServer()
    report = LOOPS[dialect](server, TURNS, threshold)
    print(f"threshold {threshold}:", figures(dialect, report, server))
    assert server.stats.rejections == []
    assert report.turns == server.stats.agent_requests == TURNS
    assert report.failed == 0, report.reasons
    assert report.full >= 3  # the threshold is low: several full compactions
    assert server.stats.summary_requests == report.full


THINKING = {"type": "enabled", "budget_tokens": 1024}


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_an_anthropic_loop_with_thinking_keeps_each_kept_turn_starting_with_its_thinking(
    asynchronous: bool, threshold: int
) -> None:
    # The fake API signs its thinking blocks and rejects one sent back changed, and
    # one missing from the turn that pending tool results answer.
    server = FakeServer()
    if asynchronous:

        async def go() -> Report:
            async with anthropic_client(server, asynchronous=True) as client:
                return await async_anthropic_loop.run(
                    client, MODEL, TURNS, threshold, log=_quiet, thinking=THINKING
                )

        report = asyncio.run(go())
    else:
        report = anthropic_loop.run(
            anthropic_client(server), MODEL, TURNS, threshold, log=_quiet, thinking=THINKING
        )
    print(f"threshold {threshold}:", figures("anthropic+thinking", report, server))
    assert server.stats.rejections == []
    assert len(server.thinking_signatures) == TURNS
    assert report.turns == TURNS
    assert report.full >= 3
    assert report.failed == 0, report.reasons


@pytest.mark.parametrize("dialect", dialect_params())
def test_the_api_overflow_error_is_recognised_and_one_forced_compaction_recovers(
    dialect: str,
) -> None:
    # The threshold is out of reach, so only the API's own overflow error makes the
    # loop compact: is_context_overflow recognises it, force=True, one retry.
    server = FakeServer(context_window=3500)
    report = LOOPS[dialect](server, 20, 10**9)
    print(figures(dialect, report, server))
    assert server.stats.rejections == []
    assert report.overflow_retries >= 1
    assert report.overflow_retries == server.stats.overflows
    assert report.full == report.overflow_retries  # each forced compaction succeeded
    assert report.turns == server.stats.agent_requests == 20


def test_an_overflow_error_raised_by_the_real_client_is_recognised() -> None:

    server = FakeServer(context_window=10)
    client = anthropic_client(server)
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "x" * 200}]
        )
    assert is_context_overflow(caught.value)
    assert "prompt is too long" in str(caught.value)


def test_history_objects_from_the_sdk_become_plain_request_dicts() -> None:
    # After a turn, the compactor has turned the appended SDK objects into dicts.
    server = FakeServer(keep_bodies=True)
    LOOPS["openai_chat"](server, 3, THRESHOLD)
    _, last = server.stats.bodies[-1]
    assistant = [m for m in last["messages"] if m["role"] == "assistant"]
    assert assistant and all(isinstance(m, dict) for m in assistant)
    assert all("annotations" not in m and "parsed" not in m for m in assistant)


STRICT_CHAT_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "strict": True,
            "parameters": {
                "type": "object",
                "properties": {argument: {"type": "string"}},
                "required": [argument],
                "additionalProperties": False,
            },
        },
    }
    for name, argument in (("search_logs", "query"), ("read_file", "path"))
]


def test_messages_from_chat_completions_parse_become_valid_request_dicts() -> None:
    server = FakeServer()
    client = openai_client(server)
    compactor = Compactor(provider=openai_chat_provider(client, MODEL), threshold=THRESHOLD)
    messages: list[Any] = [{"role": "user", "content": "Why do the workers time out?"}]
    for _ in range(8):
        compactor(messages)
        completion = client.chat.completions.parse(
            model=MODEL, messages=messages, tools=STRICT_CHAT_TOOLS
        )
        message = completion.choices[0].message  # a ParsedChatCompletionMessage
        messages.append(message)
        for call in message.tool_calls or []:
            output = run_tool(call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        if not message.tool_calls:
            messages.append({"role": "user", "content": "And the scheduler?"})
    assert server.stats.rejections == []
