"""Server compaction as the summariser, through the real SDK clients: the
artefact is placed exactly as returned, focus instructions pass through, undo
puts the history back, and an API error is a failed step with history intact."""

from __future__ import annotations

import copy
import logging
from types import SimpleNamespace as NS
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from _fake_server import FakeServer, anthropic_client, openai_client

from bareagent_compact import (
    Action,
    Compactor,
    Reason,
    ServerCompactionRequest,
    ServerSummary,
    check_request,
)
from bareagent_compact.providers import anthropic_server_compaction, openai_responses_compaction

TOOLS_A = [{"name": "search_logs", "description": "search", "input_schema": {"type": "object"}}]


def anthropic_history() -> list[Any]:
    return [
        {"role": "user", "content": "Why do the workers time out? " * 60},
        {"role": "assistant", "content": "Looking at the logs. " * 60},
        {"role": "user", "content": "And now?"},
    ]


def responses_history() -> list[Any]:
    return [
        {"role": "developer", "content": "You are terse."},
        {"role": "user", "content": "Why do the workers time out? " * 60},
        {"role": "assistant", "content": "Looking at the logs. " * 60},
        {"role": "user", "content": "And now?"},
    ]


def test_anthropic_block_replaces_exactly_what_it_summarises() -> None:
    server = FakeServer(keep_bodies=True)
    summariser = anthropic_server_compaction(
        anthropic_client(server), "fake-model", tools=TOOLS_A, system="Be terse."
    )
    messages = anthropic_history()
    result = Compactor(summariser, threshold=100)(messages, instructions="keep worker ids")
    assert result.action is Action.FULL
    block = server.compactions["csig_1"]
    assert messages == [{"role": "assistant", "content": [block]}, anthropic_history()[-1]]
    path, body = server.stats.bodies[-1]
    assert path == "/v1/messages"
    assert body["compaction"] == {"type": "summarize", "instructions": "keep worker ids"}
    assert body["system"] == "Be terse." and body["tools"] == TOOLS_A
    assert body["messages"] == anthropic_history()[:2]
    assert check_request(messages, original=[block]) == []


def test_responses_window_is_placed_unchanged_and_instructions_carry_the_focus() -> None:
    server = FakeServer(keep_bodies=True)
    summariser = openai_responses_compaction(openai_client(server), "fake-model")
    items = responses_history()
    result = Compactor(summariser, threshold=100)(items, instructions="keep worker ids")
    assert result.action is Action.FULL, result
    path, body = server.stats.bodies[-1]
    assert path == "/v1/responses/compact"
    assert body["instructions"] == "You are terse.\n\nkeep worker ids"
    assert body["input"] == responses_history()[1:3]
    assert items[0] == responses_history()[0]  # the system message stays first
    assert items[-2] == server.compactions["cmp_1"]
    assert items[1]["role"] == "user" and items[-1] == responses_history()[-1]


def test_undo_puts_back_the_history_a_server_summary_replaced() -> None:
    server = FakeServer()
    compactor = Compactor(
        anthropic_server_compaction(anthropic_client(server), "fake-model", tools=TOOLS_A),
        threshold=100,
    )
    messages = anthropic_history()
    result = compactor(messages)
    assert result.action is Action.FULL
    assert compactor.undo(messages, result)
    assert messages == anthropic_history()


@pytest.mark.parametrize("dialect", ["anthropic", "responses"])
def test_api_errors_are_a_failed_step_with_history_intact(
    dialect: str, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer()
    if dialect == "anthropic":
        summariser = anthropic_server_compaction(anthropic_client(server), "m", tools=TOOLS_A)
        messages = anthropic_history()
    else:
        summariser = openai_responses_compaction(openai_client(server), "m")
        messages = responses_history()
    server.compaction_unavailable = True
    before = copy.deepcopy(messages)
    with caplog.at_level(logging.WARNING):
        result = Compactor(summariser, threshold=100)(messages)
    assert result.action is Action.FAILED
    assert result.reason is Reason.SERVER_COMPACTION_FAILED
    assert messages == before
    assert "server compaction failed" in caplog.text


def test_the_fake_server_says_when_there_is_nothing_to_summarize() -> None:
    server = FakeServer()
    summariser = anthropic_server_compaction(anthropic_client(server), "m", tools=TOOLS_A)
    messages = [{"role": "user", "content": "x " * 400}, {"role": "assistant", "content": "y"}]
    messages.append({"role": "user", "content": "next"})
    with pytest.raises(anthropic.BadRequestError, match="compaction_nothing_to_summarize"):
        summariser(ServerCompactionRequest(messages[:1]))


def test_an_answer_without_a_block_is_a_failed_step() -> None:
    def create(**request: Any) -> Any:
        return {"content": [{"type": "text", "text": "no"}], "stop_reason": "end_turn"}

    client = NS(beta=NS(messages=NS(create=create)))
    summariser = anthropic_server_compaction(client, "m")
    messages = anthropic_history()
    result = Compactor(summariser, threshold=100)(messages)
    assert result.reason is Reason.SERVER_COMPACTION_FAILED
    assert messages == anthropic_history()


def test_a_server_summary_value_from_any_callable_is_placed() -> None:
    block = {"type": "compaction", "content": "summary", "signature": "s"}

    def summarise(request: Any) -> ServerSummary:
        return ServerSummary(({"role": "assistant", "content": [block]},), "summary")

    summarise.server_compaction = True  # type: ignore[attr-defined]
    seen: list[Any] = []
    messages = anthropic_history()
    compactor = Compactor(
        summarise, threshold=100, after_compact=lambda result, text: seen.append(text)
    )
    assert compactor(messages).action is Action.FULL
    assert messages[0]["content"][0] is block and seen == ["summary"]
