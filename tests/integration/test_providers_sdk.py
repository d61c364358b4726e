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

from bareagent_compact import Action, AsyncCompactor, Compactor, SummaryCost
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


def raw_create(name: str, client: Any) -> Callable[[list[dict[str, Any]]], Any]:
    """A provider that calls the client itself and returns the SDK's response as it is."""
    system, user = PROMPT[0]["content"], PROMPT[1]

    def send(prompt: list[dict[str, Any]]) -> Any:
        if name == "anthropic":
            return client.messages.create(
                model="fake-model", max_tokens=1024, system=system, messages=[user]
            )
        if name == "openai_chat":
            return client.chat.completions.create(model="fake-model", messages=PROMPT)
        return client.responses.create(model="fake-model", instructions=system, input=[user])

    return send


SDK_TYPES = {
    "anthropic": "Message",
    "openai_chat": "ChatCompletion",
    "openai_responses": "Response",
}


@pytest.mark.parametrize("dump", [False, True], ids=["object", "model_dump"])
@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_a_provider_returning_the_real_sdk_response_is_read_as_its_text(
    name: str, dump: bool
) -> None:
    _, make_client, _ = ADAPTERS[name]
    server = FakeServer()
    send = raw_create(name, make_client(server))
    answers: list[Any] = []

    def provider(prompt: list[dict[str, Any]]) -> Any:
        response = send(prompt)
        answers.append(response)
        return response.model_dump() if dump else response

    messages = long_history()
    result = Compactor(provider=provider, threshold=1000)(messages)
    assert result.action is Action.FULL
    assert type(answers[0]).__name__ == SDK_TYPES[name]
    assert SUMMARY_TEXT in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "and now?"}
    assert server.stats.rejections == []


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_an_async_provider_returning_the_real_sdk_response_is_read_as_its_text(
    name: str,
) -> None:
    _, make_client, _ = ADAPTERS[name]
    send = raw_create(name, make_client(FakeServer(), asynchronous=True))

    async def provider(prompt: list[dict[str, Any]]) -> Any:
        return await send(prompt)

    messages = long_history()
    result = asyncio.run(AsyncCompactor(provider=provider, threshold=1000)(messages))
    assert result.action is Action.FULL
    assert SUMMARY_TEXT in messages[0]["content"]


def _answer(path: str) -> dict[str, Any]:
    """A summary answer of each API, its usage with cache reads (and an Anthropic write)."""
    text = "the summary"
    if path == "/v1/messages":
        return {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "fake-model",
            "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 120, "cache_read_input_tokens": 9_000,
                      "cache_creation_input_tokens": 300, "output_tokens": 80},
        }  # fmt: skip
    if path == "/v1/chat/completions":
        return {
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake-model",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 9_420, "completion_tokens": 80, "total_tokens": 9_500,
                      "prompt_tokens_details": {"cached_tokens": 9_000}},
        }  # fmt: skip
    return {
        "id": "resp_1", "object": "response", "created_at": 1, "model": "fake-model",
        "status": "completed", "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
        "output": [{"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
                    "content": [{"type": "output_text", "text": text, "annotations": []}]}],
        "usage": {"input_tokens": 9_420, "input_tokens_details": {"cached_tokens": 9_000},
                  "output_tokens": 80, "output_tokens_details": {"reasoning_tokens": 0},
                  "total_tokens": 9_500},
    }  # fmt: skip


def _mocked_client(name: str, asynchronous: bool) -> Any:
    http = http_library("anthropic" if name == "anthropic" else "openai")

    def handler(request: Any) -> Any:
        return http.Response(200, json=_answer(request.url.path))

    transport = http.MockTransport(handler)
    client_class: Any = http.AsyncClient if asynchronous else http.Client
    if name == "anthropic":
        sdk: Any = anthropic.AsyncAnthropic if asynchronous else anthropic.Anthropic
        return sdk(api_key="x", base_url=BASE_URL, http_client=client_class(transport=transport))
    sdk = openai.AsyncOpenAI if asynchronous else openai.OpenAI
    http_client = client_class(transport=transport)
    return sdk(api_key="x", base_url=BASE_URL + "/v1", http_client=http_client)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_a_full_compaction_carries_the_usage_the_real_clients_response_reported(
    name: str, asynchronous: bool
) -> None:
    factory, _, _ = ADAPTERS[name]
    provider = factory(_mocked_client(name, asynchronous), "fake-model")
    messages = long_history(4)
    if asynchronous:
        compactor = AsyncCompactor(provider=provider, threshold=1000)
        result = asyncio.run(compactor(messages, force=True))
    else:
        result = Compactor(provider=provider, threshold=1000)(messages, force=True)
    assert result.action is Action.FULL
    write = 300 if name == "anthropic" else None  # OpenAI reports no cache writes
    assert result.cost == SummaryCost(1, 9_420, 9_000, write, 80)


OUTPUT_TOKENS = {"anthropic": 20, "openai_chat": 5, "openai_responses": 5}
"""The output tokens the fake API reports for every answer."""


@pytest.mark.parametrize("name", sorted(ADAPTERS))
def test_the_cost_sums_every_part_of_a_summary_and_the_overflow_retry(name: str) -> None:
    factory, make_client, _ = ADAPTERS[name]
    server = FakeServer(context_window=6000)
    compactor = Compactor(provider=factory(make_client(server), "fake-model"), threshold=1000)
    result = compactor(long_history(), force=True)
    assert result.action is Action.FULL
    assert server.stats.overflows >= 1 and result.parts > 1
    cost = result.cost
    assert cost is not None
    assert cost.requests == result.summary_calls  # the refused requests counted too
    # Only the answered requests report usage: every part's answer, summed.
    assert cost.output_tokens == OUTPUT_TOKENS[name] * server.stats.summary_requests
    assert cost.input_tokens is not None and cost.input_tokens > 0
