"""Provider adapters over duck-typed clients: request shape, answer reading, sync and async.

The clients here are small stand-ins with the SDKs' method paths and response
shapes; tests/integration/test_providers_sdk.py runs the same adapters over the
real ``anthropic`` and ``openai`` clients.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable
from types import SimpleNamespace as NS
from typing import Any

import pytest

from bareagent_compact import Action, AsyncCompactor, Compactor
from bareagent_compact.compactor import summary_text
from bareagent_compact.providers import (
    SummaryText,
    anthropic_provider,
    bareagent_provider,
    openai_chat_provider,
    openai_responses_provider,
)

PROMPT = [
    {"role": "system", "content": "Summarise the conversation."},
    {"role": "user", "content": "[user]: fix the bug in app.py"},
]


class Recorder:
    """A ``create`` method that records its keyword arguments and answers from a script."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer
        self.calls: list[dict[str, Any]] = []

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.answer


class AsyncRecorder(Recorder):
    async def __call__(self, **kwargs: Any) -> Any:  # type: ignore[override]
        self.calls.append(kwargs)
        await asyncio.sleep(0)
        return self.answer


def anthropic_client(answer: Any, recorder: type[Recorder] = Recorder) -> Any:
    return NS(messages=NS(create=recorder(answer)))


def chat_client(answer: Any, recorder: type[Recorder] = Recorder) -> Any:
    return NS(chat=NS(completions=NS(create=recorder(answer))))


def responses_client(answer: Any, recorder: type[Recorder] = Recorder) -> Any:
    return NS(responses=NS(create=recorder(answer)))


def anthropic_message(*blocks: Any, stop_reason: str = "end_turn") -> Any:
    return NS(content=list(blocks), stop_reason=stop_reason)


def text_block(text: str) -> Any:
    return NS(type="text", text=text)


def chat_completion(
    content: Any, refusal: str | None = None, finish_reason: str = "stop"
) -> dict[str, Any]:
    message = {"role": "assistant", "content": content, "refusal": refusal}
    return {"choices": [{"index": 0, "message": message, "finish_reason": finish_reason}]}


def responses_answer(*items: Any, status: str = "completed") -> Any:
    return NS(output=list(items), status=status, error=None)


def output_message(*parts: Any) -> Any:
    return NS(type="message", role="assistant", content=list(parts))


# --------------------------------------------------------------------------- Anthropic


def test_anthropic_provider_sends_system_apart_and_joins_only_text_blocks() -> None:
    answer = anthropic_message(
        NS(type="thinking", thinking="let me think", signature="sig"),
        text_block("Goal: fix app.py. "),
        NS(type="tool_use", id="toolu_1", name="read_file", input={}),
        text_block("Next: run tests."),
    )
    client = anthropic_client(answer)
    summarize = anthropic_provider(client, "claude-test", max_tokens=1000, temperature=0)
    assert summarize(PROMPT) == "Goal: fix app.py. Next: run tests."
    assert client.messages.create.calls == [
        {
            "model": "claude-test",
            "max_tokens": 1000,
            "system": "Summarise the conversation.",
            "messages": [{"role": "user", "content": "[user]: fix the bug in app.py"}],
            "temperature": 0,
        }
    ]


def test_anthropic_refusal_and_empty_answers_are_unusable(caplog: pytest.LogCaptureFixture) -> None:
    refused = anthropic_provider(
        anthropic_client(anthropic_message(text_block("I can't"), stop_reason="refusal")), "m"
    )
    empty = anthropic_provider(anthropic_client(anthropic_message(text_block("  "))), "m")
    with caplog.at_level(logging.WARNING, logger="bareagent_compact.providers"):
        assert refused(PROMPT) == ""
        assert empty(PROMPT) == ""
    assert "the model refused" in caplog.text
    assert "no text in the answer" in caplog.text


def test_anthropic_summary_cut_at_max_tokens_is_kept_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = anthropic_message(text_block("Goal: fix app.py, then"), stop_reason="max_tokens")
    with caplog.at_level(logging.WARNING, logger="bareagent_compact.providers"):
        assert anthropic_provider(anthropic_client(answer), "m")(PROMPT) == "Goal: fix app.py, then"
    assert "cut at max_tokens" in caplog.text


def test_anthropic_provider_reads_plain_json_responses() -> None:
    answer = {"content": [{"type": "text", "text": "from JSON"}], "stop_reason": "end_turn"}
    assert anthropic_provider(anthropic_client(answer), "m")(PROMPT) == "from JSON"


def test_a_streaming_response_is_a_clear_type_error() -> None:
    summarize = anthropic_provider(anthropic_client(iter(())), "m")
    with pytest.raises(TypeError, match="streaming is not supported"):
        summarize(PROMPT)


# --------------------------------------------------------------------------- OpenAI Chat


def test_openai_chat_provider_sends_the_prompt_and_reads_the_first_choice() -> None:
    client = chat_client(chat_completion("Goal: fix app.py."))
    summarize = openai_chat_provider(client, "gpt-test", max_completion_tokens=500)
    assert summarize(PROMPT) == "Goal: fix app.py."
    assert client.chat.completions.create.calls == [
        {"model": "gpt-test", "messages": PROMPT, "max_completion_tokens": 500}
    ]


@pytest.mark.parametrize(
    "answer",
    [
        chat_completion(None, refusal="I can't help with that."),
        chat_completion("partial", finish_reason="content_filter"),
        chat_completion(None),
        chat_completion("   "),
        {"choices": []},
    ],
    ids=["refusal", "content_filter", "none", "whitespace", "no_choices"],
)
def test_openai_chat_unusable_answers_give_an_empty_summary(answer: Any) -> None:
    assert openai_chat_provider(chat_client(answer), "m")(PROMPT) == ""


def test_openai_chat_text_parts_from_compatible_servers_are_joined() -> None:
    answer = chat_completion([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}])
    assert openai_chat_provider(chat_client(answer), "m")(PROMPT) == "ab"


# --------------------------------------------------------------------------- OpenAI Responses


def test_openai_responses_provider_uses_instructions_and_joins_output_text() -> None:
    answer = responses_answer(
        NS(type="reasoning", id="rs_1", summary=[]),
        output_message(NS(type="output_text", text="Goal: ", annotations=[])),
        output_message(NS(type="output_text", text="fix app.py.", annotations=[])),
    )
    client = responses_client(answer)
    summarize = openai_responses_provider(client, "gpt-test", max_output_tokens=800, store=False)
    assert summarize(PROMPT) == "Goal: fix app.py."
    assert client.responses.create.calls == [
        {
            "model": "gpt-test",
            "instructions": "Summarise the conversation.",
            "input": [{"role": "user", "content": "[user]: fix the bug in app.py"}],
            "max_output_tokens": 800,
            "store": False,
        }
    ]


@pytest.mark.parametrize(
    "answer",
    [
        responses_answer(output_message(NS(type="refusal", refusal="I can't help with that."))),
        responses_answer(status="failed"),
        responses_answer(NS(type="reasoning", id="rs_1", summary=[])),
    ],
    ids=["refusal", "failed", "reasoning_only"],
)
def test_openai_responses_unusable_answers_give_an_empty_summary(answer: Any) -> None:
    assert openai_responses_provider(responses_client(answer), "m")(PROMPT) == ""


def test_openai_responses_incomplete_summary_is_kept_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    answer = responses_answer(
        output_message(NS(type="output_text", text="Goal: fix", annotations=[])),
        status="incomplete",
    )
    with caplog.at_level(logging.WARNING, logger="bareagent_compact.providers"):
        assert openai_responses_provider(responses_client(answer), "m")(PROMPT) == "Goal: fix"
    assert "incomplete" in caplog.text


# --------------------------------------------------------------------------- BareAgent


def test_bareagent_provider_calls_create_without_tools_and_returns_text() -> None:
    create = Recorder(NS(text="Goal: fix app.py."))
    summarize = bareagent_provider(NS(create=create), max_tokens=1500)
    assert summarize(PROMPT) == "Goal: fix app.py."
    assert create.calls == [{"messages": PROMPT, "tools": [], "max_tokens": 1500}]


def test_bareagent_provider_empty_text_is_unusable_and_missing_text_a_type_error() -> None:
    assert bareagent_provider(NS(create=Recorder(NS(text=""))))(PROMPT) == ""
    with pytest.raises(TypeError, match="str attribute text"):
        bareagent_provider(NS(create=Recorder(NS(content="x"))))(PROMPT)


def test_bareagent_provider_checks_create_when_called_not_when_wrapped() -> None:
    placeholder = NS()
    summarize = bareagent_provider(placeholder)  # a placeholder at construction is fine
    with pytest.raises(TypeError, match=r"callable create\(\.\.\.\) method, got SimpleNamespace"):
        summarize(PROMPT)
    placeholder.create = Recorder(NS(text="Goal: fix app.py."))  # the real one, set later
    assert summarize(PROMPT) == "Goal: fix app.py."
    with pytest.raises(TypeError, match="create"):
        bareagent_provider(None)(PROMPT)
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        bareagent_provider(placeholder, max_tokens=0)  # the arguments are still checked at once


def test_a_placeholder_bareagent_provider_is_a_logged_provider_failure_in_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    compactor = Compactor(provider=bareagent_provider(object()), threshold=100)
    messages = long_history()
    before = [dict(m) for m in messages]
    with caplog.at_level(logging.WARNING):
        result = compactor(messages)
    assert result.action is Action.FAILED
    assert result.reason == "provider raised"
    assert messages == before
    assert "summary provider failed" in caplog.text


# --------------------------------------------------------------- an SDK response as the answer

ANTHROPIC_DUMP = {  # what Message.model_dump() gives
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "Goal: fix app.py.", "citations": None},
    ],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 10, "output_tokens": 5},
}
CHAT_DUMP = {  # ChatCompletion.model_dump()
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 1,
    "model": "m",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "logprobs": None,
            "message": {"role": "assistant", "content": "Goal: fix app.py.", "refusal": None},
        }
    ],
    "usage": None,
}
RESPONSES_DUMP = {  # Response.model_dump(): "text" is the output format, not the answer
    "id": "resp_1",
    "object": "response",
    "created_at": 1,
    "model": "m",
    "status": "completed",
    "error": None,
    "text": {"format": {"type": "text"}},
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Goal: fix app.py.", "annotations": []}],
        },
    ],
}


def as_object(value: Any) -> Any:
    """A dict as an attribute-only object, like the SDKs' model objects."""
    if isinstance(value, dict):
        return NS(**{key: as_object(item) for key, item in value.items()})
    if isinstance(value, list):
        return [as_object(item) for item in value]
    return value


SDK_ANSWERS = {"anthropic": ANTHROPIC_DUMP, "chat": CHAT_DUMP, "responses": RESPONSES_DUMP}


@pytest.mark.parametrize("shape", ["dict", "object"])
@pytest.mark.parametrize("api", sorted(SDK_ANSWERS))
def test_a_provider_returning_the_sdk_response_is_read_as_its_text(api: str, shape: str) -> None:
    answer = SDK_ANSWERS[api] if shape == "dict" else as_object(SDK_ANSWERS[api])
    assert summary_text(answer) == "Goal: fix app.py."
    compactor = Compactor(provider=lambda prompt: answer, threshold=100)
    messages = long_history()
    result = compactor(messages)
    assert result.action is Action.FULL
    assert "Goal: fix app.py." in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "and now?"}


@pytest.mark.parametrize("api", sorted(SDK_ANSWERS))
def test_a_refused_sdk_response_is_an_unusable_summary(
    api: str, caplog: pytest.LogCaptureFixture
) -> None:
    refused = {
        "anthropic": {**ANTHROPIC_DUMP, "content": [], "stop_reason": "refusal"},
        "chat": chat_completion(None, refusal="I can't."),
        "responses": {**RESPONSES_DUMP, "status": "failed"},
    }[api]
    messages = long_history()
    before = [dict(m) for m in messages]
    with caplog.at_level(logging.WARNING):
        result = Compactor(provider=lambda prompt: refused, threshold=100)(messages)
    assert result.action is Action.FAILED
    assert result.reason == "unusable summary"
    assert messages == before


class ForeignStream:
    """An answer of a shape no adapter reads, from a module named like an SDK's."""

    __module__ = "anthropic.lib.streaming"


def test_an_unreadable_answer_warns_naming_the_adapter_to_use(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for answer, adapters in (
        ({"unexpected": 1}, ["anthropic_provider", "openai_chat_provider", "bareagent_provider"]),
        (42, ["openai_responses_provider"]),
    ):
        caplog.clear()
        with caplog.at_level(logging.WARNING):
            compactor = Compactor(provider=functools.partial(lambda a, prompt: a, answer))
            result = compactor(long_history(), force=True)
        assert result.reason == "unusable summary"
        for adapter in adapters:
            assert f"bareagent_compact.providers.{adapter}(...)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        Compactor(provider=lambda prompt: ForeignStream(), threshold=100)(long_history())
    assert "wrap the client with bareagent_compact.providers.anthropic_provider(...)" in caplog.text
    assert "openai_chat_provider" not in caplog.text


# --------------------------------------------------------------------------- sync and async


FACTORIES: dict[str, tuple[Callable[..., Any], Callable[..., Any], Any]] = {
    "anthropic": (
        lambda client, **kw: anthropic_provider(client, "m", **kw),
        anthropic_client,
        anthropic_message(text_block("S")),
    ),
    "chat": (
        lambda client, **kw: openai_chat_provider(client, "m", **kw),
        chat_client,
        chat_completion("S"),
    ),
    "responses": (
        lambda client, **kw: openai_responses_provider(client, "m", **kw),
        responses_client,
        responses_answer(output_message(NS(type="output_text", text="S"))),
    ),
    "bareagent": (
        bareagent_provider,
        lambda answer, recorder=Recorder: NS(create=recorder(answer)),
        NS(text="S"),
    ),
}


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_an_async_client_gives_an_async_provider(name: str) -> None:
    factory, make_client, answer = FACTORIES[name]
    sync = factory(make_client(answer))
    asynchronous = factory(make_client(answer, AsyncRecorder))
    assert not inspect.iscoroutinefunction(sync)
    assert inspect.iscoroutinefunction(asynchronous)
    assert sync(PROMPT) == "S"
    assert asyncio.run(asynchronous(PROMPT)) == "S"


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_async_create_hidden_by_a_plain_decorator_is_detected(name: str) -> None:
    # The SDKs wrap their async create methods in plain functions (functools.wraps).
    factory, make_client, answer = FACTORIES[name]
    client = make_client(answer, AsyncRecorder)
    target = client
    path = {"anthropic": "messages", "chat": "chat.completions", "responses": "responses"}
    for attr in path.get(name, "").split("."):
        target = getattr(target, attr) if attr else target
    inner = AsyncRecorder(answer)

    async def create(**kwargs: Any) -> Any:
        return await inner(**kwargs)

    @functools.wraps(create)
    def wrapper(**kwargs: Any) -> Any:
        return create(**kwargs)

    target.create = wrapper
    summarize = factory(client)
    assert inspect.iscoroutinefunction(summarize)
    assert asyncio.run(summarize(PROMPT)) == "S"


def hidden(recorder: Recorder) -> Callable[..., Any]:
    """A plain function returning what ``recorder`` returns: nothing says it is async."""

    def create(**kwargs: Any) -> Any:
        return recorder(**kwargs)

    return create


def test_client_class_named_async_gives_an_async_provider() -> None:
    class AsyncWrappedClient:
        def __init__(self) -> None:
            self.chat = NS(completions=NS(create=hidden(AsyncRecorder(chat_completion("S")))))

    summarize = openai_chat_provider(AsyncWrappedClient(), "m")
    assert inspect.iscoroutinefunction(summarize)
    assert asyncio.run(summarize(PROMPT)) == "S"


def test_is_async_overrides_the_detection() -> None:
    recorder = AsyncRecorder(chat_completion("S"))
    client = NS(chat=NS(completions=NS(create=hidden(recorder))))
    summarize = openai_chat_provider(client, "m", is_async=True)
    assert asyncio.run(summarize(PROMPT)) == "S"
    with pytest.raises(TypeError, match="is_async must be a bool"):
        openai_chat_provider(client, "m", is_async="yes")  # type: ignore[call-overload]


def test_a_sync_provider_whose_client_returns_an_awaitable_closes_it_and_says_why() -> None:
    recorder = AsyncRecorder(chat_completion("S"))
    client = NS(chat=NS(completions=NS(create=hidden(recorder))))
    summarize = openai_chat_provider(client, "m", is_async=False)
    # filterwarnings=error turns a "coroutine ... was never awaited" warning into a failure.
    with pytest.raises(TypeError, match="pass is_async=True"):
        summarize(PROMPT)
    assert recorder.calls == []  # the coroutine was closed before it ran


# --------------------------------------------------------------------------- bad input


def test_bad_clients_and_arguments_fail_at_construction() -> None:
    with pytest.raises(TypeError, match=r"messages\.create"):
        anthropic_provider(object(), "m")
    with pytest.raises(TypeError, match=r"chat\.completions\.create"):
        openai_chat_provider(NS(chat=None), "m")
    with pytest.raises(TypeError, match=r"responses\.create"):
        openai_responses_provider(NS(responses=NS(create="no")), "m")
    client = anthropic_client(anthropic_message(text_block("S")))
    with pytest.raises(TypeError, match="model must be a str"):
        anthropic_provider(client, None)  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="model must not be empty"):
        anthropic_provider(client, "")
    with pytest.raises(TypeError, match="max_tokens must be an int"):
        anthropic_provider(client, "m", max_tokens=True)
    with pytest.raises(ValueError, match="max_tokens must be >= 1"):
        bareagent_provider(NS(create=Recorder(NS(text="S"))), max_tokens=0)


def test_a_malformed_prompt_is_a_type_error() -> None:
    summarize = openai_chat_provider(chat_client(chat_completion("S")), "m")
    with pytest.raises(TypeError, match="list of messages"):
        summarize("not a prompt")
    with pytest.raises(TypeError, match="must be dicts"):
        summarize(["not a message"])  # type: ignore[list-item]


# --------------------------------------------------------------------------- with a compactor


def long_history() -> list[dict[str, Any]]:
    history: list[dict[str, Any]] = []
    for turn in range(6):
        history.append({"role": "user", "content": f"question {turn} " + "x" * 400})
        history.append({"role": "assistant", "content": f"answer {turn} " + "y" * 400})
    history.append({"role": "user", "content": "and now?"})
    return history


def test_a_compactor_with_an_adapter_summarises_through_the_client() -> None:
    client = anthropic_client(anthropic_message(text_block("Goal: answer six questions.")))
    compactor = Compactor(provider=anthropic_provider(client, "m"), threshold=100)
    messages = long_history()
    result = compactor(messages)
    assert result.action is Action.FULL
    assert "Goal: answer six questions." in messages[0]["content"]
    assert messages[-1] == {"role": "user", "content": "and now?"}
    (call,) = client.messages.create.calls
    assert "question 0" in call["messages"][0]["content"]


def test_a_refused_summary_leaves_the_history_as_it_was() -> None:
    refusal = anthropic_message(text_block("I can't"), stop_reason="refusal")
    summarize = anthropic_provider(anthropic_client(refusal), "m")
    compactor = Compactor(provider=summarize, threshold=100)
    messages = long_history()
    before = [dict(m) for m in messages]
    result = compactor(messages)
    assert result.action is Action.FAILED
    assert result.reason == "unusable summary"
    assert messages == before


def test_an_async_adapter_summarises_for_async_compactor() -> None:
    client = anthropic_client(anthropic_message(text_block("Goal: six answers.")), AsyncRecorder)
    compactor = AsyncCompactor(provider=anthropic_provider(client, "m"), threshold=100)
    messages = long_history()
    result = asyncio.run(compactor(messages))
    assert result.action is Action.FULL
    assert "Goal: six answers." in messages[0]["content"]
    assert len(client.messages.create.calls) == 1


def test_an_async_adapter_given_to_the_sync_compactor_is_refused_at_once() -> None:
    client = anthropic_client(anthropic_message(text_block("S")), AsyncRecorder)
    with pytest.raises(TypeError, match="AsyncCompactor"):
        Compactor(provider=anthropic_provider(client, "m"), threshold=100)


def test_the_adapters_answer_is_the_text_as_a_str_carrying_the_responses_usage() -> None:
    usage = {"input_tokens": 10, "cache_read_input_tokens": 4_000, "output_tokens": 25}
    answer = {"content": [{"type": "text", "text": "Goal: fix app.py."}],
              "stop_reason": "end_turn", "usage": usage}
    summary = anthropic_provider(anthropic_client(answer), "claude-test")(PROMPT)
    assert isinstance(summary, SummaryText) and isinstance(summary, str)
    assert summary == "Goal: fix app.py." and summary.usage is usage
    assert type(summary_text(summary)) is str  # the history gets a plain str
    no_usage = anthropic_provider(anthropic_client({**answer, "usage": None}), "claude-test")
    assert no_usage(PROMPT).usage is None
