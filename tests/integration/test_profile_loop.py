"""An Anthropic loop with ``profile="agent"`` at threshold 3,000: every model
request holds the user's current task word for word, and none is refused.

The real ``anthropic`` SDK talks to the fake API over a mocked ``httpx``
transport; extended thinking is on, so the fake API checks the thinking blocks
of the current tool loop too. The fake summariser writes one fixed line that
holds none of the task: what keeps it is the profile (the user's turns kept,
pins). Each request is also checked before it is sent (``check_request``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")

from _common import ANTHROPIC_TOOLS, SYSTEM_PROMPT, TASKS, run_tool
from _fake_server import FakeServer, anthropic_client

from bareagent_compact import Action, Compactor, check_request, dialects
from bareagent_compact.providers import anthropic_provider

MODEL = "fake-model"
THRESHOLD = 3000
REQUESTS = 80
THINKING = {"type": "enabled", "budget_tokens": 1024}
RULES = (
    "Do not restart the production workers.",
    "Report the log lines you rely on, with their timestamps.",
    "The budget for new instances is at most $500 this month.",
)


def task(number: int) -> str:
    """The user's request of one task: a question and two standing rules, on lines of their own."""
    base = TASKS[number % len(TASKS)]
    rules = [RULES[number % len(RULES)], RULES[(number + 1) % len(RULES)]]
    return "\n".join([f"Task {number}: {base}", *rules])


@dataclass
class Loop:
    """What one loop sent and saw."""

    requests: int = 0
    without_task: int = 0
    problems: list[str] = field(default_factory=list)
    full: int = 0
    failed: int = 0


def _texts(value: Any) -> Iterator[str]:
    """Every string in a request's messages (texts, tool results, the summary)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _texts(item)


def run_loop(**options: Any) -> tuple[Loop, FakeServer]:
    server = FakeServer(keep_bodies=True)
    client = anthropic_client(server)
    provider = anthropic_provider(client, MODEL, max_tokens=2048)
    compactor = Compactor(provider, threshold=THRESHOLD, **options)
    tasks = iter(range(1, REQUESTS + 1))
    current = task(0)
    messages: list[Any] = [{"role": "user", "content": current}]
    loop = Loop()
    while loop.requests < REQUESTS:
        result = compactor(messages)
        loop.full += result.action is Action.FULL
        loop.failed += result.action is Action.FAILED
        dialogue = [m for m in messages if not dialects.is_system(m)]
        problems = check_request(dialogue, "anthropic", thinking=True)
        loop.problems += [f"request {loop.requests}: {p}" for p in problems]
        before = len(server.stats.bodies)
        response = client.messages.create(
            model=MODEL,
            max_tokens=2048,
            system=SYSTEM_PROMPT,
            tools=ANTHROPIC_TOOLS,
            messages=dialogue,
            thinking=THINKING,
        )
        sent = server.stats.bodies[before][1]
        loop.requests += 1
        loop.without_task += not any(current in text for text in _texts(sent["messages"]))
        compactor.record_usage(messages, response.usage)
        messages.append({"role": "assistant", "content": response.content})
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": run_tool(b.name, b.input)}
            for b in response.content
            if b.type == "tool_use"
        ]
        if results:
            messages.append({"role": "user", "content": results})
        else:
            current = task(next(tasks))
            messages.append({"role": "user", "content": current})
    return loop, server


def test_the_agent_profile_sends_the_current_task_verbatim_in_every_request() -> None:
    loop, server = run_loop(profile="agent")
    default, default_server = run_loop()
    print(
        f"threshold {THRESHOLD}, {REQUESTS} requests: profile: without the task "
        f"{loop.without_task}, full {loop.full}, refused {server.stats.rejected}; "
        f"default: without the task {default.without_task}, full {default.full}, "
        f"refused {default_server.stats.rejected}"
    )
    assert server.stats.rejections == []
    assert loop.problems == []
    assert loop.failed == 0
    assert loop.full >= 10  # compacted again and again
    assert loop.without_task == 0
    assert default.without_task > 0  # the summary alone loses the task
