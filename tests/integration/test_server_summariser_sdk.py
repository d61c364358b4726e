"""Server compaction as the summariser, through the real SDK clients (sync and
async): the artefact is placed exactly as returned, focus instructions pass
through, undo puts the history back, an API error is a failed step with history
intact, and a compaction request too long for the model is retried over the
older half (or, when nothing fits, fails with history intact)."""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import logging
from types import SimpleNamespace as NS
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from _fake_server import FakeServer, anthropic_client, openai_client

from bareagent_compact import (
    Action,
    AsyncCompactor,
    CompactionResult,
    Compactor,
    Reason,
    ServerCompactionRequest,
    ServerSummary,
    SummaryCost,
    check_request,
    dialects,
    estimate_tokens,
)
from bareagent_compact.dialects import server_compaction_index
from bareagent_compact.plain import plain_view
from bareagent_compact.providers import anthropic_server_compaction, openai_responses_compaction

TOOLS_A = [{"name": "search_logs", "description": "search", "input_schema": {"type": "object"}}]
TOOLS_R = [{"type": "function", "name": "search_logs", "parameters": {"type": "object"}}]


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
    # The window first (the server reads from its compaction item on), then the
    # system message, then what followed the summarised items.
    assert items[0]["role"] == "user" and items[1] == server.compactions["cmp_1"]
    assert items[2:] == [responses_history()[0], responses_history()[-1]]


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


def summariser_for(dialect: str, server: FakeServer, *, asynchronous: bool = False) -> Any:
    """The dialect's server summariser over the real (sync or async) client, and the client."""
    if dialect == "anthropic":
        client = anthropic_client(server, asynchronous=asynchronous)
        return anthropic_server_compaction(client, "m", tools=TOOLS_A), client
    client = openai_client(server, asynchronous=asynchronous)
    return openai_responses_compaction(client, "m"), client


def compact(
    dialect: str, server: FakeServer, messages: list[Any], *, asynchronous: bool, **call: Any
) -> CompactionResult:
    """One compactor call with the dialect's server summariser: a ``Compactor`` over
    the sync client, or an ``AsyncCompactor`` over the async one."""
    if not asynchronous:
        summariser, _ = summariser_for(dialect, server)
        return Compactor(summariser, threshold=100)(messages, **call)

    async def go() -> CompactionResult:
        summariser, client = summariser_for(dialect, server, asynchronous=True)
        assert inspect.iscoroutinefunction(summariser)
        async with client:
            return await AsyncCompactor(summariser, threshold=100)(messages, **call)

    return asyncio.run(go())


def one_tool_turn(dialect: str) -> list[Any]:
    """A question and one tool call with its result: the kept tail is the call, so the
    compaction request holds one message and the API has nothing to summarise."""
    question: list[Any] = [{"role": "user", "content": "Why do the workers time out? " * 60}]
    if dialect == "anthropic":
        call = {"type": "tool_use", "id": "toolu_1", "name": "search_logs", "input": {}}
        result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "log " * 300}
        return [
            *question,
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ]
    return [
        {"role": "developer", "content": "You are terse."},
        *question,
        {"type": "function_call", "call_id": "call_1", "name": "search_logs", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "log " * 300},
    ]


ERRORS = {
    "compaction_unavailable": lambda dialect: (
        anthropic_history() if dialect == "anthropic" else responses_history()
    ),
    "compaction_nothing_to_summarize": one_tool_turn,
}


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("error", sorted(ERRORS))
@pytest.mark.parametrize("dialect", ["anthropic", "responses"])
def test_api_errors_are_a_failed_step_with_history_intact(
    dialect: str, error: str, asynchronous: bool, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer(keep_bodies=True)
    server.compaction_unavailable = error == "compaction_unavailable"
    messages = ERRORS[error](dialect)
    before = copy.deepcopy(messages)
    with caplog.at_level(logging.WARNING):
        result = compact(dialect, server, messages, asynchronous=asynchronous, force=True)
    assert result.action is Action.FAILED
    assert result.reason is Reason.SERVER_COMPACTION_FAILED
    assert result.summary_calls == 1 and server.on_demand == 0
    assert messages == before
    assert check_request(messages) == []
    assert "server compaction failed" in caplog.text
    assert error in caplog.text  # the API's own error, raised by the real client
    assert server.stats.bodies[-1][0] in ("/v1/messages", "/v1/responses/compact")


def long_history(dialect: str) -> list[Any]:
    """Eight question-and-answer turns of about 340 tokens each, then a question."""
    history: list[Any] = []
    if dialect == "responses":
        history.append({"role": "developer", "content": "You are terse."})
    for turn in range(8):
        history.append({"role": "user", "content": f"question {turn}: " + "why " * 150})
        history.append({"role": "assistant", "content": f"answer {turn}: " + "because " * 150})
    history.append({"role": "user", "content": "and now?"})
    return history


def agent_request(dialect: str, server: FakeServer, messages: list[Any]) -> None:
    """The next agent request over ``messages``; the fake server checks its rules."""
    if dialect == "anthropic":
        anthropic_client(server).beta.messages.create(
            model="m", max_tokens=64, messages=messages, tools=TOOLS_A,
            betas=["compact-2026-01-12"],
        )  # fmt: skip
    else:
        openai_client(server).responses.create(model="m", input=messages, tools=TOOLS_R)


def retried_source(dialect: str, server: FakeServer, source: list[Any]) -> list[Any]:
    """The messages of the second compaction request: the oldest part of ``source``,
    shorter than the first request's."""
    key = "messages" if dialect == "anthropic" else "input"
    first, second = (body[key] for _, body in server.stats.bodies)
    assert len(second) < len(first) and first == source[: len(first)]
    assert second == source[: len(second)]
    return list(second)


def placed_artefact(dialect: str, server: FakeServer, live: list[Any], sent: list[Any]) -> int:
    """Where the one artefact the server returned sits in ``live`` (the history
    without its system messages): first, or after the window's user messages."""
    (block,) = server.compactions.values()
    if dialect == "anthropic":
        assert live[0] == {"role": "assistant", "content": [block]}
        return 0
    users = [m for m in sent if m.get("role") == "user"]
    assert live[len(users)] == block
    assert [m["content"][0]["text"] for m in live[: len(users)]] == [m["content"] for m in users]
    return len(users)


@pytest.mark.parametrize("dialect", ["anthropic", "responses"])
def test_an_overflowing_server_compaction_is_retried_over_the_older_half(
    dialect: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The whole compaction request (~3800 tokens) is over the window, half of it is not.
    server = FakeServer(context_window=3000, keep_bodies=True)
    messages = long_history(dialect)
    with caplog.at_level(logging.WARNING):
        result = compact(dialect, server, messages, asynchronous=False, force=True)
    assert result.action is Action.FULL, result
    assert server.stats.overflows == 1 and server.on_demand == 1
    assert result.summary_calls == 2
    assert "too long for the model; retrying" in caplog.text
    assert check_request(messages, original=list(server.compactions.values())) == []
    original = long_history(dialect)
    systems = 1 if dialect == "responses" else 0
    sent = retried_source(dialect, server, original[systems:])
    # The artefact stands for exactly what was sent; the rest follows it as it was
    # (on Responses after the system message, which the window comes before).
    live = [m for m in messages if m not in original[:systems]]
    artefact = placed_artefact(dialect, server, live, sent)
    assert live[artefact + 1 :] == original[systems + len(sent) :]
    if systems:
        assert messages[artefact + 1] == original[0]
    server.context_window = None
    agent_request(dialect, server, messages)
    assert server.stats.rejections == []


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("dialect", ["anthropic", "responses"])
def test_a_server_compaction_that_never_fits_leaves_the_history_intact(
    dialect: str, asynchronous: bool, caplog: pytest.LogCaptureFixture
) -> None:
    server = FakeServer(context_window=10)
    messages = long_history(dialect)
    with caplog.at_level(logging.WARNING):
        result = compact(dialect, server, messages, asynchronous=asynchronous, force=True)
    assert result.action is Action.FAILED
    assert result.reason is Reason.CONTEXT_OVERFLOW
    assert result.summary_calls == server.stats.overflows >= 2
    assert server.on_demand == 0
    assert messages == long_history(dialect)
    assert check_request(messages) == []


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


@pytest.mark.parametrize("blocks", [False, True], ids=["text", "text-blocks"])
@pytest.mark.parametrize("dialect", ["anthropic", "responses"])
def test_every_server_compaction_is_sent_the_system_prompt(dialect: str, blocks: bool) -> None:
    # After the first compaction the system message lies before the artefact:
    # the server still reads it, and so must the next compaction request.
    server = FakeServer(keep_bodies=True)
    summariser, _ = summariser_for(dialect, server)
    compactor = Compactor(summariser, threshold=100)
    kind = "text" if dialect == "anthropic" else "input_text"
    system: Any = [{"type": kind, "text": "You are terse."}] if blocks else "You are terse."
    messages: list[Any] = [{"role": "system", "content": system}]
    for turn in range(3):
        messages += [
            {"role": "user", "content": f"Why do the workers time out, case {turn}? " * 40},
            {"role": "assistant", "content": f"Looking at the logs of case {turn}. " * 40},
            {"role": "user", "content": f"And now, case {turn}?"},
        ]
        assert compactor(messages).action is Action.FULL
        # Anthropic: first (it becomes system=); Responses: just after the window.
        at = server_compaction_index(messages) + 1 if dialect == "responses" else 0
        assert messages[at] == {"role": "system", "content": system}
        assert sum(dialects.is_system(m) for m in messages) == 1
        assert check_request(messages, original=list(server.compactions.values())) == []
    requests = [body for path, body in server.stats.bodies]
    assert len(requests) == 3 and server.on_demand == 3
    assert all(m.get("role") != "system" for b in requests for m in b.get("messages", []))
    if dialect == "anthropic":
        assert [body["system"] for body in requests] == ["You are terse."] * 3
    else:
        assert [body["instructions"] for body in requests] == ["You are terse."] * 3


def test_check_request_takes_the_blocks_as_the_sdk_returned_them() -> None:
    server = FakeServer()
    client = anthropic_client(server)
    response = client.beta.messages.create(
        model="fake-model",
        max_tokens=256,
        messages=anthropic_history()[:2],
        compaction={"type": "summarize"},
        betas=["compact-2026-01-12"],
    )
    blocks = [b for b in response.content if b.type == "compaction"]
    assert blocks and blocks[0].content
    messages: list[Any] = [
        {"role": "assistant", "content": response.content},
        {"role": "user", "content": "next"},
    ]
    assert check_request(messages, original=blocks) == []
    altered = blocks[0].model_copy(update={"content": "another summary"})
    assert check_request(messages, original=[altered]) == [
        "message 0: compaction artefact altered (not as the server returned it)"
    ]


def test_a_failed_sdk_compaction_block_leaves_the_whole_history_live() -> None:
    # A reply opening with content: null (the server's compaction failed) is a no-op
    # to the server: nothing before it is dead, nothing is pruned, all is counted.
    failed = anthropic.types.beta.BetaCompactionBlock.model_validate(
        {"type": "compaction", "content": None}
    )
    text = anthropic.types.beta.BetaTextBlock(type="text", text="Carrying on.")
    messages: list[Any] = [*anthropic_history(), {"role": "assistant", "content": [failed, text]}]
    messages.append({"role": "user", "content": "next"})
    compactor = Compactor(lambda *_: "s", threshold=10**6, prune_before_server_compaction=True)
    whole = estimate_tokens(plain_view(messages))
    result = compactor(messages)
    assert result.pruned == 0 and len(messages) == 5
    assert result.tokens_before == whole
    assert messages[3]["content"][0] == {"type": "compaction", "content": None}
    assert check_request(messages) == []


class HeaderRecordingServer(FakeServer):
    """The fake server, keeping the ``anthropic-beta`` header of every request."""

    def __init__(self) -> None:
        super().__init__(keep_bodies=True)
        self.betas: list[list[str]] = []

    def handle(self, request: Any) -> Any:
        header = request.headers.get("anthropic-beta", "")
        self.betas.append([b.strip() for b in header.split(",") if b.strip()])
        return super().handle(request)


@pytest.mark.parametrize(
    ("create_kwargs", "expected"),
    [
        ({}, ["compact-2026-09-04"]),
        ({"betas": ["context-1m-2025-08-07"]}, ["context-1m-2025-08-07", "compact-2026-09-04"]),
        ({"betas": ["compact-2026-09-04"]}, ["compact-2026-09-04"]),
        (
            {"extra_headers": {"anthropic-beta": "context-1m-2025-08-07"}},
            ["context-1m-2025-08-07", "compact-2026-09-04"],
        ),
    ],
    ids=["tools-only", "own-betas", "already-there", "own-header"],
)
def test_the_anthropic_compaction_request_carries_the_on_demand_beta(
    create_kwargs: dict[str, Any], expected: list[str]
) -> None:
    server = HeaderRecordingServer()
    summariser = anthropic_server_compaction(
        anthropic_client(server), "fake-model", tools=TOOLS_A, **create_kwargs
    )
    given = copy.deepcopy(create_kwargs)
    summary = summariser(ServerCompactionRequest(anthropic_history()[:2]))
    assert summary.messages[0]["content"][0]["type"] == "compaction"
    assert server.betas == [expected]
    assert create_kwargs == given  # the caller's own arguments are not changed


def test_a_responses_loop_keeps_no_live_message_before_the_window() -> None:
    # Thirty turns of a tool loop opened by a developer message, the Responses
    # API compacting for the compactor: after each compaction the history is
    # the dead part as it was, the window as returned, then the rest.
    from tests.integration.test_server_compaction_loop import (  # noqa: PLC0415
        responses_turn,
        results_for,
    )

    server = FakeServer()
    client = openai_client(server)
    adapter = openai_responses_compaction(client, "fake-model")
    windows: list[tuple[Any, ...]] = []

    def summarise(request: ServerCompactionRequest) -> ServerSummary:
        summary = adapter(request)
        windows.append(summary.messages)
        return summary

    summarise.server_compaction = True  # type: ignore[attr-defined]
    compactor = Compactor(summarise, threshold=1500)
    developer = {"role": "developer", "content": "You are terse."}
    messages: list[Any] = [dict(developer), {"role": "user", "content": "Why do workers stall?"}]
    for turn in range(1, 31):
        before = plain_view(messages)
        dead = before[: server_compaction_index(before) + 1]
        if compactor(messages).action is Action.FULL:
            window = windows[-1]
            start = next(i for i, m in enumerate(messages) if m is window[0])
            assert messages[:start] == dead, turn  # the dead part, nothing live
            assert tuple(messages[start : start + len(window)]) == window
            assert developer in messages[start + len(window) :]  # still read by the server
            assert check_request(messages, original=list(server.compactions.values())) == []
        response, reply = responses_turn(client, messages, 0)
        compactor.record_usage(messages, response.usage)
        messages += reply
        messages += results_for("responses", reply, turn)
    assert len(windows) >= 3
    assert server.stats.rejections == []


@pytest.mark.parametrize("api", ["anthropic", "responses"])
def test_a_server_compaction_carries_the_usage_the_api_reported(api: str) -> None:
    server = FakeServer(keep_bodies=True)
    if api == "anthropic":
        summariser = anthropic_server_compaction(anthropic_client(server), "fake-model")
        history = anthropic_history()
    else:
        summariser = openai_responses_compaction(openai_client(server), "fake-model")
        history = responses_history()
    result = Compactor(summariser, threshold=100)(history)
    assert result.action is Action.FULL
    _, body = server.stats.bodies[-1]
    tokens = len(json.dumps(body)) // 4  # what the fake API reports as the input
    cached = None if api == "anthropic" else 0
    assert result.cost == SummaryCost(1, tokens, cached, None, 40)
