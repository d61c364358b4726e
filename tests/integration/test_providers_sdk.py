"""The provider adapters through the real ``anthropic`` and ``openai`` clients, sync and async."""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from _fake_server import (
    BASE_URL,
    SUMMARY_TEXT,
    FakeServer,
    anthropic_client,
    http_library,
    openai_client,
)

from bareagent_compact import Action, Compactor
from bareagent_compact.providers import (
    anthropic_provider,
    openai_chat_provider,
    openai_responses_provider,
)

PROMPT = [
    {"role": "system", "content": "Summarise the conversation."},
    {"role": "user", "content": "[user]: fix the bug in app.py"},
]

ADAPTERS: dict[str, tuple[Callable[..., Any], Callable[..., Any], str]] = {
    "anthropic": (anthropic_provider, anthropic_client, "/v1/messages"),
    "openai_chat": (openai_chat_provider, openai_client, "/v1/chat/completions"),
    "openai_responses": (openai_responses_provider, openai_client, "/v1/responses"),
}


def summarise(provider: Any) -> str:
    result = provider(PROMPT)
    if inspect.isawaitable(result):
        return asyncio.run(result)  # type: ignore[arg-type]
    return str(result)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_the_adapter_gets_the_summary_through_the_real_client(
    name: str, asynchronous: bool
) -> None:
    factory, make_client, path = ADAPTERS[name]
    server = FakeServer(keep_bodies=True)
    provider = factory(make_client(server, asynchronous=asynchronous), "fake-model")
    assert inspect.iscoroutinefunction(provider) is asynchronous
    assert summarise(provider) == SUMMARY_TEXT
    ((seen_path, body),) = server.stats.bodies
    assert seen_path == path
    assert server.stats.rejections == []
    if name == "anthropic":
        assert body["system"] == PROMPT[0]["content"]
        assert body["messages"] == [PROMPT[1]]
        assert body["max_tokens"] == 4096
    elif name == "openai_chat":
        assert body["messages"] == PROMPT
    else:
        assert body["instructions"] == PROMPT[0]["content"]
        assert body["input"] == [PROMPT[1]]


REFUSALS = {
    "/v1/messages": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "fake-model",
        "content": [],
        "stop_reason": "refusal",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 0},
    },
    "/v1/chat/completions": {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "fake-model",
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": None, "refusal": "I can't help."},
            }
        ],
    },
    "/v1/responses": {
        "id": "resp_1",
        "object": "response",
        "created_at": 1,
        "model": "fake-model",
        "status": "completed",
        "output": [
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "refusal", "refusal": "I can't help."}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
    },
}


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_a_refusal_from_the_real_client_is_an_unusable_summary(name: str) -> None:

    factory, _, path = ADAPTERS[name]

    http = http_library("anthropic" if name == "anthropic" else "openai")

    def handler(request: Any) -> Any:
        return http.Response(200, json=REFUSALS[request.url.path])

    transport = http.MockTransport(handler)
    if name == "anthropic":
        client: Any = anthropic.Anthropic(
            api_key="x", base_url=BASE_URL, http_client=http.Client(transport=transport)
        )
    else:
        client = openai.OpenAI(
            api_key="x", base_url=BASE_URL + "/v1", http_client=http.Client(transport=transport)
        )
    assert path in REFUSALS
    assert factory(client, "fake-model")(PROMPT) == ""


def test_create_kwargs_reach_the_request_body() -> None:
    server = FakeServer(keep_bodies=True)
    provider = openai_responses_provider(
        openai_client(server), "fake-model", max_output_tokens=700, store=False
    )
    assert provider(PROMPT) == SUMMARY_TEXT
    ((_, body),) = server.stats.bodies
    assert body["max_output_tokens"] == 700
    assert body["store"] is False
    assert json.dumps(body)  # the body the client sent is plain JSON


def long_history(turns: int = 20) -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for turn in range(turns):
        history.append({"role": "user", "content": f"question {turn}: " + "why " * 500})
        history.append({"role": "assistant", "content": f"answer {turn}: " + "because " * 250})
    history.append({"role": "user", "content": "and now?"})
    return history


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_a_summary_too_long_for_the_summariser_is_retried_in_smaller_parts(name: str) -> None:
    # The fake API's window is far below the one-call summary prompt: the real client
    # raises the API's overflow error, the compactor recognises it and halves its budget.
    factory, make_client, _ = ADAPTERS[name]
    server = FakeServer(context_window=6000)
    compactor = Compactor(provider=factory(make_client(server), "fake-model"), threshold=1000)
    messages = long_history()
    result = compactor(messages, force=True)
    assert result.action is Action.FULL
    assert server.stats.overflows >= 1
    assert result.parts > 1
    assert result.summary_calls == server.stats.overflows + server.stats.summary_requests
    assert server.stats.rejections == []
    assert messages[-1] == {"role": "user", "content": "and now?"}
