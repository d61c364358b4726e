"""An agent loop that appends a system reminder after the latest user message every turn.

Some agents (BareAgent among them) append a system-role reminder at the end of
the history before each request; an Anthropic loop moves the system-role
messages into the ``system=`` parameter when it sends. The user's request just
before the reminder is still the pending turn: a full compaction keeps it
verbatim, last among the non-system messages, and the next request is valid.
With thinking enabled the fake Anthropic API rejects, like the real one, a
request whose last message is an assistant message (the acknowledgement of a
summary would be read as a prefill).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from _common import (
    ANTHROPIC_TOOLS,
    CHAT_TOOLS,
    RESPONSES_TOOLS,
    SYSTEM_PROMPT,
    TASKS,
    run_tool,
)
from _fake_server import FakeServer, anthropic_client, openai_client

from bareagent_compact import Action, Compactor, dialects
from bareagent_compact.providers import (
    anthropic_provider,
    openai_chat_provider,
    openai_responses_provider,
)

TURNS = 32
THRESHOLDS = (3000, 5000)  # full compactions on tool results and on users' requests
MODEL = "fake-model"
THINKING = {"type": "enabled", "budget_tokens": 1024}


@dataclass
class Loop:
    """What one reminder loop saw."""

    full: int = 0
    failed: int = 0
    pending_requests: int = 0  # full compactions with a user's text request pending
    misplaced: list[str] = field(default_factory=list)


def _last_dialogue(messages: list[Any]) -> Any:
    return next(m for m in reversed(messages) if not dialects.is_system(m))


def _request(task: str) -> str:
    """A user's request with a pasted log, large enough to push a history over the threshold."""
    return f"{task}\nHere is what I saw:\n{run_tool('search_logs', {'query': task}, 2500)}"


def _reminder(role: str, turn: int) -> dict[str, Any]:
    text = f"<system-reminder>Turn {turn}: answer briefly, keep the todo list.</system-reminder>"
    return {"role": role, "content": text}


class Anthropic:
    role = "system"

    def __init__(self, server: FakeServer) -> None:
        self.client = anthropic_client(server)
        self.provider = anthropic_provider(self.client, MODEL, max_tokens=2048)

    def start(self) -> list[Any]:
        return [{"role": "user", "content": TASKS[0]}]

    def step(self, messages: list[Any], next_task: Callable[[], str]) -> None:
        systems = [m["content"] for m in messages if dialects.is_system(m)]
        response = self.client.messages.create(
            model=MODEL,
            max_tokens=2048,
            system="\n\n".join([SYSTEM_PROMPT, *systems]),
            tools=ANTHROPIC_TOOLS,
            messages=[m for m in messages if not dialects.is_system(m)],
            thinking=THINKING,
        )
        messages.append({"role": "assistant", "content": response.content})
        results = [
            {"type": "tool_result", "tool_use_id": b.id, "content": run_tool(b.name, b.input)}
            for b in response.content
            if b.type == "tool_use"
        ]
        messages.append({"role": "user", "content": results or next_task()})


class Chat:
    role = "system"

    def __init__(self, server: FakeServer) -> None:
        self.client = openai_client(server)
        self.provider = openai_chat_provider(self.client, MODEL)

    def start(self) -> list[Any]:
        return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": TASKS[0]}]

    def step(self, messages: list[Any], next_task: Callable[[], str]) -> None:
        completion = self.client.chat.completions.create(
            model=MODEL, messages=messages, tools=CHAT_TOOLS
        )
        message = completion.choices[0].message
        messages.append(message)
        for call in message.tool_calls or []:
            output = run_tool(call.function.name, json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        if not message.tool_calls:
            messages.append({"role": "user", "content": next_task()})


class Responses:
    role = "developer"

    def __init__(self, server: FakeServer) -> None:
        self.client = openai_client(server)
        self.provider = openai_responses_provider(self.client, MODEL)

    def start(self) -> list[Any]:
        return [
            {"role": "developer", "content": SYSTEM_PROMPT},
            {"role": "user", "content": TASKS[0]},
        ]

    def step(self, items: list[Any], next_task: Callable[[], str]) -> None:
        response = self.client.responses.create(model=MODEL, input=items, tools=RESPONSES_TOOLS)
        items += response.output
        calls = [item for item in response.output if item.type == "function_call"]
        for call in calls:
            output = run_tool(call.name, json.loads(call.arguments))
            result = {"type": "function_call_output", "call_id": call.call_id, "output": output}
            items.append(result)
        if not calls:
            items.append({"role": "user", "content": next_task()})


DIALECTS: dict[str, Callable[[FakeServer], Any]] = {
    "anthropic_thinking": Anthropic,
    "openai_chat": Chat,
    "openai_responses": Responses,
}


def run_reminder_loop(
    dialect: Any, turns: int, threshold: int, reminder_role: str | None = None
) -> Loop:
    """``turns`` requests; before each, a reminder is appended and the history compacted.
    ``reminder_role`` "user": the reminder is user text (as some agents send it), which
    must stay after the request, the two kept together."""
    compactor = Compactor(provider=dialect.provider, threshold=threshold)
    messages = dialect.start()
    tasks = iter(TASKS[1:] * (turns // len(TASKS) + 1))
    loop = Loop()
    for turn in range(turns):
        reminder = _reminder(reminder_role or dialect.role, turn)
        request = _last_dialogue(messages)  # the user's request or the tool results
        messages.append(reminder)  # after the latest user message
        result = compactor(messages)
        if result.action is Action.FULL:
            loop.full += 1
            tail = [m for m in messages if not dialects.is_system(m)][-2:]
            expected = [request, reminder] if reminder_role == "user" else [tail[0], request]
            if tail != expected or tail[-1] is not expected[-1]:
                loop.misplaced.append(f"turn {turn}: {tail!r:.120}")
            loop.pending_requests += dialects.kind(request) is dialects.Kind.USER
        loop.failed += result.action is Action.FAILED
        dialect.step(messages, lambda: _request(next(tasks)))
    return loop


@pytest.mark.parametrize("threshold", THRESHOLDS)
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_reminder_after_the_request_every_turn_keeps_the_request_pending(
    dialect: str, threshold: int
) -> None:
    server = FakeServer()
    loop = run_reminder_loop(DIALECTS[dialect](server), TURNS, threshold)
    print(
        f"{dialect} threshold {threshold}: turns={TURNS} full={loop.full} "
        f"with a user request pending={loop.pending_requests} rejected={server.stats.rejected}"
    )
    assert server.stats.rejections == []
    assert server.stats.agent_requests == TURNS
    assert loop.failed == 0
    assert loop.full >= 3  # several full compactions
    assert loop.pending_requests >= 1  # a user's text request among the pending turns
    assert loop.misplaced == []  # after each, the request is the last non-system message


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_reminder_sent_as_user_text_stays_after_the_request_it_follows(dialect: str) -> None:
    # The APIs merge consecutive user messages into one turn: the request (or the
    # tool results) and the reminder after it are pending together, never summarised.
    server = FakeServer()
    loop = run_reminder_loop(DIALECTS[dialect](server), TURNS, THRESHOLDS[1], "user")
    print(
        f"{dialect} user-text reminder: turns={TURNS} full={loop.full} "
        f"with a user request pending={loop.pending_requests} rejected={server.stats.rejected}"
    )
    assert server.stats.rejections == []
    assert loop.failed == 0 and loop.full >= 3 and loop.pending_requests >= 1
    assert loop.misplaced == []
