"""The Pydantic AI integration: converters that keep every field, and the processor
driving a real Agent run whose FunctionModel checks Anthropic's request rules."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import importlib.util
import inspect
import subprocess
import sys
import warnings
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, RunContext
from pydantic_ai import messages as pm
from pydantic_ai._utils import takes_run_context
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.usage import RequestUsage

from bareagent_compact import (
    Action,
    AsyncCompactor,
    Compactor,
    JsonlTranscriptManager,
    estimate_tokens,
)
from bareagent_compact.integrations.pydantic_ai import (
    MARK,
    _processor,
    compaction_processor,
    from_dicts,
    is_summary,
    restore,
    summary_provider,
    to_dicts,
)

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True, scope="module")
def _close_the_event_loop_run_sync_leaves() -> Iterator[None]:
    """``Agent.run_sync`` leaves an event loop set as the thread's current one; close
    it, so that a later test replacing it does not leave it unclosed."""
    yield
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            loop = asyncio.get_event_loop()
        except RuntimeError:
            return
    if not loop.is_running():
        loop.close()
        asyncio.set_event_loop(None)
T0 = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


def _session_module() -> Any:
    path = ROOT / "benchmarks" / "frameworks" / "pydantic_ai_session.py"
    spec = importlib.util.spec_from_file_location("pydantic_ai_session", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def history() -> list[pm.ModelMessage]:
    """Every part kind the converters name, with every field they must keep set."""
    usage = RequestUsage(input_tokens=1200, output_tokens=40, cache_read_tokens=1000)
    return [
        pm.ModelRequest([pm.SystemPromptPart("Be careful.", timestamp=T0),
                         pm.UserPromptPart("Read a.py", timestamp=T0)],
                        timestamp=T0, instructions="Be brief.", run_id="r1", conversation_id="c1"),
        pm.ModelResponse(
            [pm.ThinkingPart("I should read it.", id="th_1", signature="sig-1",
                             provider_name="anthropic"),
             pm.TextPart("Reading."),
             pm.ToolCallPart("read_file", {"path": "a.py"}, tool_call_id="toolu_1"),
             pm.ToolCallPart("grep", '{"q": "x"}', tool_call_id="toolu_2")],
            usage=usage, model_name="claude-x", timestamp=T0, provider_name="anthropic",
            provider_details={"stop_reason": "tool_use"}, provider_response_id="msg_1",
            finish_reason="tool_call", run_id="r1", conversation_id="c1"),
        pm.ModelRequest([pm.ToolReturnPart("read_file", "x" * 500, tool_call_id="toolu_1",
                                           timestamp=T0, metadata={"bytes": 500}),
                         pm.ToolReturnPart("grep", "bad pattern", tool_call_id="toolu_2",
                                           timestamp=T0, outcome="retried")],
                        timestamp=T0, run_id="r1", conversation_id="c1"),
        pm.ModelResponse([pm.TextPart("a.py is fine.")], model_name="claude-x", timestamp=T0,
                         provider_response_id="msg_2"),
        pm.ModelRequest([pm.UserPromptPart(["Look at", "this too"], timestamp=T0)],
                        timestamp=T0),
    ]


def test_dicts_returned_as_they_were_give_back_the_very_same_messages() -> None:
    messages = history()
    converted = to_dicts(messages)
    back = restore(converted, list(converted.dicts))
    assert len(back) == len(messages)
    assert all(a is b for a, b in zip(back, messages, strict=True))


def test_the_dicts_are_anthropic_messages_with_system_prompts_apart() -> None:
    dicts = to_dicts(history()).dicts
    roles = [d["role"] for d in dicts]
    assert roles == ["system", "user", "assistant", "user", "assistant", "user"]
    assert dicts[1]["content"] == "Read a.py"
    assert dicts[2]["content"][0] == {"type": "thinking", "thinking": "I should read it.",
                                      "signature": "sig-1"}
    assert dicts[2]["content"][3]["input"] == {"q": "x"}
    results = dicts[3]["content"]
    assert [b["tool_use_id"] for b in results] == ["toolu_1", "toolu_2"]
    assert results[1]["is_error"] is True


def _edited(messages: list[pm.ModelMessage], at: int, edit: Any) -> list[pm.ModelMessage]:
    """``messages`` converted, the dict at ``at`` replaced by an edited copy, restored."""
    converted = to_dicts(messages)
    new = list(converted.dicts)
    new[at] = copy.deepcopy(new[at])
    edit(new[at])
    return restore(converted, new)


def _fields(obj: Any, *skip: str) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj) if f.name not in skip}


def test_a_truncated_tool_result_keeps_every_field_but_its_content() -> None:
    messages = history()

    def truncate(d: dict[str, Any]) -> None:
        d["content"][0]["content"] = "[truncated: read_file result, 500 chars]"

    back = _edited(messages, 3, truncate)
    assert back[1] is messages[1] and back[3] is messages[3]
    request = back[2]
    assert request is not messages[2]
    assert _fields(request, "parts") == _fields(messages[2], "parts")
    result, retried = request.parts
    assert result.content == "[truncated: read_file result, 500 chars]"
    assert _fields(result, "content") == _fields(messages[2].parts[0], "content")
    assert retried is messages[2].parts[1]


def test_cleared_thinking_keeps_the_response_and_its_other_parts() -> None:
    messages = history()
    back = _edited(messages, 2, lambda d: d["content"].pop(0))
    response = back[1]
    assert isinstance(response, pm.ModelResponse)
    assert _fields(response, "parts") == _fields(messages[1], "parts")
    assert response.usage is messages[1].usage
    assert all(a is b for a, b in zip(response.parts, messages[1].parts[1:], strict=True))


def test_a_kept_thinking_part_keeps_its_provider_signature_and_id() -> None:
    messages = history()
    back = _edited(messages, 2, lambda d: d["content"].pop(1))  # the text block goes
    thinking = back[1].parts[0]
    assert thinking is messages[1].parts[0]
    assert (thinking.provider_name, thinking.signature, thinking.id) == (
        "anthropic", "sig-1", "th_1")


def test_one_item_of_a_user_prompt_sequence_is_edited_alone() -> None:
    messages = history()

    def cut(d: dict[str, Any]) -> None:
        d["content"][1]["text"] = "this [... cut ...]"

    back = _edited(messages, 5, cut)
    part = back[4].parts[0]
    assert part.content == ["Look at", "this [... cut ...]"]
    assert part.timestamp == T0 and back[4].timestamp == T0


@pytest.mark.filterwarnings("ignore:`RetryPromptPart` is deprecated")
def test_a_retry_prompt_part_is_an_error_result_of_its_call() -> None:
    retry = pm.RetryPromptPart("bad pattern", tool_name="grep", tool_call_id="toolu_2")
    messages = history()
    messages[2] = pm.ModelRequest([messages[2].parts[0], retry])
    converted = to_dicts(messages)
    assert converted.dicts[3]["content"][1] == {
        "type": "tool_result", "tool_use_id": "toolu_2", "content": "bad pattern", "is_error": True}
    new = list(converted.dicts)
    new[3] = copy.deepcopy(new[3])
    new[3]["content"][1]["content"] = "[truncated]"
    edited = restore(converted, new)[2].parts[1]
    assert isinstance(edited, pm.RetryPromptPart) and edited.content == "[truncated]"
    assert (edited.tool_name, edited.timestamp) == ("grep", retry.timestamp)


def test_the_summary_is_a_marked_request_and_the_acknowledgement_a_marked_response() -> None:
    messages = history()
    converted = to_dicts(messages)
    new = [converted.dicts[0], {"role": "user", "content": "[Context Compressed]\nS"},
           {"role": "assistant", "content": "Understood."}, converted.dicts[5]]
    back = restore(converted, new, stamp={"conversation_id": "c1"})
    assert [type(m).__name__ for m in back] == ["ModelRequest"] * 2 + ["ModelResponse",
                                                                       "ModelRequest"]
    first = back[0]
    assert first.parts == [messages[0].parts[0]] and first.instructions == "Be brief."
    summary, ack = back[1], back[2]
    assert is_summary(summary) and summary.conversation_id == "c1"
    assert summary.parts[0].content == "[Context Compressed]\nS"
    assert isinstance(summary.parts[0], pm.UserPromptPart)
    assert ack.metadata == {MARK: "acknowledgement"} and ack.parts[0].content == "Understood."
    assert back[3] is messages[4]


def test_an_edited_pending_turn_after_a_summary_keeps_its_own_fields() -> None:
    messages = history()
    later = datetime(2026, 1, 3, tzinfo=timezone.utc)
    messages[4] = pm.ModelRequest([pm.UserPromptPart("Now b.py " * 50, timestamp=later)],
                                  timestamp=later, run_id="r2")
    converted = to_dicts(messages)
    new = [converted.dicts[0], {"role": "user", "content": "[Context Compressed]\nS"},
           {"role": "assistant", "content": "Understood."},
           {"role": "user", "content": "Now b.py [... cut ...]"}]
    back = restore(converted, new)
    pending = back[-1]
    assert pending.parts[0].content == "Now b.py [... cut ...]"
    assert (pending.timestamp, pending.run_id, pending.parts[0].timestamp) == (later, "r2", later)


def test_a_part_of_another_kind_is_kept_with_its_message_even_when_that_is_edited() -> None:
    other = pm.CompactionPart("server summary", id="cmp_1", provider_name="anthropic")
    messages = history()
    messages[1] = dataclasses.replace(messages[1], parts=[*messages[1].parts, other])
    converted = to_dicts(messages)
    assert converted.dicts[2]["content"][-1] == {"type": "text", "text": "server summary"}
    assert restore(converted, list(converted.dicts))[1] is messages[1]
    back = _edited(messages, 2, lambda d: d["content"].pop(0))  # thinking cleared
    assert back[1].parts[-1] is other


def test_a_history_that_cannot_be_read_back_is_sent_as_it_was(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(_processor, "back", broken)
    seen: list[list[pm.ModelMessage]] = []

    def model(messages: list[pm.ModelMessage], info: Any) -> pm.ModelResponse:
        seen.append(messages)
        return pm.ModelResponse([pm.TextPart("ok")])

    compactor = Compactor(provider=lambda prompt: "S", threshold=1000)
    processor = compaction_processor(compactor)
    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(processor)])
    history_ = [pm.ModelRequest([pm.UserPromptPart("x " * 3000)]),
                pm.ModelResponse([pm.TextPart("y")])]
    assert agent.run_sync("go", message_history=history_).output == "ok"
    assert seen[0][0] is history_[0] and seen[0][1] is history_[1]
    assert "could not be read back" in caplog.text


def test_dicts_the_library_wrote_become_messages_naming_their_tools() -> None:
    made = from_dicts([
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "t", "signature": "s"},
            {"type": "tool_use", "id": "c9", "name": "read_file", "input": {"p": 1}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c9",
                                      "content": "ok", "is_error": True}]},
    ])
    thinking, call = made[0].parts
    assert thinking.provider_name == "anthropic" and thinking.signature == "s"
    assert call.tool_call_id == "c9" and call.args == {"p": 1}
    result = made[1].parts[0]
    assert (result.tool_name, result.content, result.outcome) == ("read_file", "ok", "failed")


def test_the_session_is_never_refused_and_loses_no_field() -> None:
    row = _session_module().run_session()
    assert row["model_calls"] == 40
    assert row["refused"] == 0, row["refusals"]
    assert row["fields_lost"] == 0
    assert row["summary_calls"] >= 2 and row["summaries_in_history"] >= 1
    assert row["messages_edited"] > 0 and row["messages_kept_whole"] > row["messages_edited"]
    assert row["user_lines"] <= 5
    if row["summary_calls_builtin"] is not None:  # Pydantic AI Harness importable
        assert row["summary_calls"] <= row["summary_calls_builtin"]
    assert row["peak_request_tokens"] <= row["threshold"]


def test_the_rules_refuse_thinking_that_lost_its_provider() -> None:
    session = _session_module()
    rules = session.Rules()
    call = pm.ToolCallPart("read_file", {}, tool_call_id="t1")
    turn = [pm.ModelRequest([pm.UserPromptPart("go")]),
            pm.ModelResponse([pm.ThinkingPart("x", signature="s"), call]),
            pm.ModelRequest([pm.ToolReturnPart("read_file", "ok", tool_call_id="t1")])]
    assert rules.check(turn) is not None
    turn[1] = pm.ModelResponse([pm.ThinkingPart("x", signature="s", provider_name="anthropic"),
                                call])
    rules.signatures["s"] = "x"
    assert rules.check(turn) is None
    assert rules.check([*turn[:2], pm.ModelRequest([pm.UserPromptPart("no result")])])


def test_usage_is_recorded_with_the_dicts_sent(monkeypatch: pytest.MonkeyPatch) -> None:
    compactor = Compactor(provider=lambda prompt: "S", threshold=50_000)
    recorded: list[tuple[list[Any], object, str | None]] = []
    monkeypatch.setattr(compactor, "record_usage", lambda messages, usage, session_id=None:
                        recorded.append((messages, usage, session_id)))
    calls = iter(range(10))

    def model(messages: list[pm.ModelMessage], info: Any) -> pm.ModelResponse:
        if next(calls) == 0:
            return pm.ModelResponse([pm.ToolCallPart("echo", {"x": "1"}, tool_call_id="e1")],
                                    usage=RequestUsage(input_tokens=321, output_tokens=5))
        return pm.ModelResponse([pm.TextPart("done")],
                                usage=RequestUsage(input_tokens=400, output_tokens=5))

    processor = compaction_processor(compactor)
    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(processor)])

    @agent.tool_plain
    def echo(x: str) -> str:
        return x

    agent.run_sync("hi", conversation_id="conv-3")
    assert [(usage, session) for _, usage, session in recorded] == [(321, "conv-3")]
    assert recorded[0][0] == [{"role": "user", "content": "hi"}]


def _big_agent(processor: Any) -> Agent[None, str]:
    calls = iter(range(100))

    def model(messages: list[pm.ModelMessage], info: Any) -> pm.ModelResponse:
        k = next(calls)
        if k < 6:
            return pm.ModelResponse([pm.ToolCallPart("dump", {"n": str(k)}, tool_call_id=f"d{k}")])
        return pm.ModelResponse([pm.TextPart("done")])

    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(processor)])

    @agent.tool_plain
    def dump(n: str) -> str:
        return f"line {n}\n" * 400

    return agent


@pytest.mark.parametrize(("given", "expected"), [(None, "conv-7"), ("fixed", "fixed")])
def test_snapshots_are_saved_under_the_conversation_id_or_the_one_given(
    tmp_path: Path, given: str | None, expected: str
) -> None:
    store = JsonlTranscriptManager(tmp_path)
    compactor = Compactor(provider=lambda prompt: "S", threshold=1500, transcript_mgr=store,
                          session_id="default")
    agent = _big_agent(compaction_processor(compactor, session_id=given))
    agent.run_sync("hi", conversation_id="conv-7")
    assert store.list_sessions() == [expected]


def test_an_async_compactor_gives_an_async_processor_that_runs_in_an_agent() -> None:
    compactor = AsyncCompactor(provider=lambda prompt: "S", threshold=50_000)
    processor = compaction_processor(compactor)
    assert inspect.iscoroutinefunction(processor)
    agent = Agent(FunctionModel(lambda m, i: pm.ModelResponse([pm.TextPart("ok")])),
                  capabilities=[ProcessHistory(processor)])
    assert agent.run_sync("hi").output == "ok"


def test_the_summary_provider_asks_its_model_with_the_prompt_as_sent() -> None:
    seen: list[Any] = []

    def model(messages: list[pm.ModelMessage], info: Any) -> pm.ModelResponse:
        seen.append((info.instructions, messages[-1].parts[-1].content))
        return pm.ModelResponse([pm.TextPart("the summary")])

    provider = summary_provider(FunctionModel(model))
    prompt = [{"role": "system", "content": "Summarise."}, {"role": "user", "content": "T"}]
    loop = asyncio.new_event_loop()  # not made the current loop: run_sync keeps its own
    try:
        assert loop.run_until_complete(provider(prompt)) == "the summary"
    finally:
        loop.close()
    assert seen == [("Summarise.", "T")]


def test_a_processor_takes_only_a_compactor() -> None:
    with pytest.raises(TypeError, match="Compactor or an AsyncCompactor"):
        compaction_processor(lambda prompt: "S")  # type: ignore[arg-type]


def test_a_plain_compactor_refuses_pydantic_ai_messages_naming_the_processor() -> None:
    with pytest.raises(TypeError, match="compaction_processor") as caught:
        Compactor(provider=lambda prompt: "S")(history())
    assert "bareagent_compact.integrations.pydantic_ai" in str(caught.value)


def test_the_processor_takes_a_run_context() -> None:
    processor = compaction_processor(Compactor(provider=lambda prompt: "S"))
    assert takes_run_context(processor)
    assert inspect.signature(processor).parameters["ctx"].annotation in (
        "RunContext[Any]", RunContext[Any])


def test_the_example_runs_offline() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "pydantic_ai_agent.py")],
                          capture_output=True, text=True, check=True, timeout=300,
                          env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert "refused 0" in done.stdout
    assert "full compactions" in done.stdout


def _tool_history(turns: int) -> list[pm.ModelMessage]:
    messages: list[pm.ModelMessage] = [
        pm.ModelRequest(parts=[pm.SystemPromptPart("sys"), pm.UserPromptPart("task")])]
    for t in range(turns):
        messages += [
            pm.ModelResponse([pm.ToolCallPart("bash", {"c": t}, tool_call_id=f"c{t}")]),
            pm.ModelRequest([pm.ToolReturnPart("bash", f"out {t} " * 300, tool_call_id=f"c{t}")]),
        ]
    return messages


def test_a_background_summary_is_swapped_in_under_the_processor() -> None:
    async def provider(prompt: list[dict[str, Any]]) -> str:
        await asyncio.sleep(0.01)
        return "SUMMARY"

    messages = _tool_history(8)
    threshold = int(estimate_tokens(to_dicts(messages).dicts) / 0.6)
    compactor = AsyncCompactor(provider, threshold=threshold, background_at=0.5,
                               keep_recent=100)
    given: list[list[Any]] = []
    returned: list[list[Any]] = []
    original = compactor.compacted

    async def spy(dicts: list[Any], **kwargs: Any) -> Any:
        given.append(list(dicts))
        new, result = await original(dicts, **kwargs)
        returned.append(list(new))
        return new, result

    compactor.compacted = spy  # type: ignore[method-assign]
    processor = compaction_processor(compactor)
    ctx: Any = SimpleNamespace(conversation_id="conv", run_id="run")
    actions = []

    async def session() -> list[pm.ModelMessage]:
        history_ = messages
        for i in range(3):
            out = await processor(ctx, history_)
            assert compactor.last_result is not None
            actions.append(compactor.last_result.action)
            await asyncio.sleep(0.05)
            history_ = [*out, pm.ModelResponse([pm.TextPart("ok")]),
                        pm.ModelRequest([pm.UserPromptPart(f"more {i}")])]
        return out

    loop = asyncio.new_event_loop()  # not made the current loop: run_sync keeps its own
    try:
        out = loop.run_until_complete(session())
    finally:
        loop.close()
    assert actions == [Action.NONE, Action.FULL, Action.NONE]
    assert sum(is_summary(m) for m in out) == 1
    for before, after in zip(returned, given[1:], strict=False):
        assert all(a is b for a, b in zip(before, after, strict=False))


def test_the_compactor_gets_its_own_dicts_back_unless_the_history_is_another() -> None:
    compactor = Compactor(provider=lambda prompt: "S", threshold=50_000)
    given: list[list[Any]] = []
    original = compactor.compacted

    def spy(dicts: list[Any], **kwargs: Any) -> Any:
        given.append(list(dicts))
        return original(dicts, **kwargs)

    compactor.compacted = spy  # type: ignore[method-assign]
    processor = compaction_processor(compactor)
    ctx: Any = SimpleNamespace(conversation_id="conv", run_id="run")
    first = processor(ctx, history())
    assert isinstance(first, list)
    processor(ctx, [*first, pm.ModelResponse([pm.TextPart("ok")])])
    processor(ctx, history())
    assert all(a is b for a, b in zip(given[0], given[1], strict=False))
    assert len(given[1]) == len(given[0]) + 1
    assert given[2] == given[0] and all(a is not b for a, b in zip(given[2], given[0],
                                                                      strict=True))
