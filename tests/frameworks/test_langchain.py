"""CompactionMiddleware: converters, fields kept, the summary marker, thread ids, usage,
and a 40-model-call create_agent session against LangChain's own summarisation."""

from __future__ import annotations

import asyncio
import datetime
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")

from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    ChatMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from bareagent_compact import (
    AsyncCompactor,
    Compactor,
    JsonlTranscriptManager,
    estimate_tokens,
)
from bareagent_compact.integrations.langchain import (
    CompactionMiddleware,
    langchain_chat_provider,
    langchain_chat_provider_async,
    to_dicts,
    to_messages,
)
from bareagent_compact.protocols import CONTINUATION_ATTRIBUTE, ContinuationRequest
from bareagent_compact.result import Action

sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
import _langchain_fake as session

THRESHOLD = 6000


def history() -> list[Any]:
    thinking = "let me read it"
    ai = AIMessage(
        content=[{"type": "thinking", "thinking": thinking, "signature": "sig-1"},
                 {"type": "text", "text": "Reading."},
                 {"type": "tool_use", "id": "c1", "name": "read_file", "input": {"path": "a"}}],
        tool_calls=[{"name": "read_file", "args": {"path": "a"}, "id": "c1", "type": "tool_call"}],
        id="ai-1", usage_metadata={"input_tokens": 10, "output_tokens": 2, "total_tokens": 12},
        response_metadata={"model_provider": "anthropic"}, additional_kwargs={"x": 1},
    )
    tool = ToolMessage(content="x" * 9000, tool_call_id="c1", id="t-1", status="error",
                       artifact={"rows": 3}, name="read_file")
    return [SystemMessage("be brief", id="s"), HumanMessage("read a", id="h"), ai, tool]


def test_converters_give_chat_dicts_with_thinking_kept_and_tool_use_as_tool_calls() -> None:
    dicts = to_dicts(history())
    assert [d["role"] for d in dicts] == ["system", "user", "assistant", "tool"]
    assert dicts[2]["content"][0]["signature"] == "sig-1"
    assert [b["type"] for b in dicts[2]["content"]] == ["thinking", "text"]
    assert dicts[2]["tool_calls"][0]["function"] == {"name": "read_file",
                                                     "arguments": '{"path": "a"}'}
    assert dicts[3] == {"role": "tool", "tool_call_id": "c1", "content": "x" * 9000}


def test_unchanged_dicts_map_back_to_the_original_objects() -> None:
    messages = history()
    dicts = to_dicts(messages)
    back = to_messages(list(dicts), dicts, messages)
    assert all(a is b for a, b in zip(back, messages, strict=True))


def test_an_edited_tool_result_keeps_every_other_field() -> None:
    messages = history()
    dicts = to_dicts(messages)
    new = [*dicts[:3], {**dicts[3], "content": "[truncated]"}]
    back = to_messages(new, dicts, messages)
    assert back[3] is not messages[3] and back[3].content == "[truncated]"
    kept = ("id", "status", "artifact", "name", "tool_call_id")
    assert all(getattr(back[3], k) == getattr(messages[3], k) for k in kept)


def test_a_compactor_refuses_langchain_messages_naming_the_middleware() -> None:
    compactor = Compactor(provider=lambda prompt: "s", transcript_mgr=None)
    with pytest.raises(TypeError, match="CompactionMiddleware"):
        compactor(history())


def test_a_full_compaction_writes_the_state_with_the_summary_marked() -> None:
    summariser = session.FakeSummariser()
    compactor = Compactor(provider=langchain_chat_provider(summariser), transcript_mgr=None,
                          threshold=2000, language="en")
    messages = [*history(), AIMessage("done", id="ai-2"), HumanMessage("next", id="h2")]
    update = CompactionMiddleware(compactor).before_model({"messages": messages}, None)
    assert update is not None and isinstance(update["messages"][0], RemoveMessage)
    summary = next(m for m in update["messages"][1:] if isinstance(m, HumanMessage))
    assert summary.additional_kwargs == {"lc_source": "summarization"}
    assert update["messages"][-1] is messages[-1]
    assert summariser.calls == 1


def test_micro_compaction_changes_the_request_only() -> None:
    compactor = Compactor(provider=lambda prompt: "s", transcript_mgr=None, threshold=50000)
    results = [ToolMessage(content=f"{i} " + "y" * 3000, tool_call_id=f"c{i}", id=f"t{i}")
               for i in range(6)]
    messages: list[Any] = [HumanMessage("go", id="h")]
    for i, result in enumerate(results):
        call = {"name": "read_file", "args": {}, "id": f"c{i}", "type": "tool_call"}
        messages += [AIMessage("", tool_calls=[call], id=f"a{i}"), result]
    middleware = CompactionMiddleware(compactor)
    assert middleware.before_model({"messages": messages}, None) is None
    seen: list[Any] = []

    class Request:
        runtime = None

        def __init__(self, messages: list[Any]) -> None:
            self.messages = messages

        def override(self, messages: list[Any]) -> Request:
            return Request(messages)

    middleware.wrap_model_call(Request(messages), lambda r: seen.append(r.messages) or [])
    sent = seen[0]
    assert sent[2] is not messages[2] and len(sent[2].content) < 3000
    assert sent[2].id == "t0" and sent[-1] is messages[-1]
    assert messages[2].content.startswith("0 yyy")


def test_each_thread_is_its_own_conversation_and_usage_is_recorded() -> None:
    recorded: list[Any] = []
    compactor = Compactor(provider=lambda prompt: "s", transcript_mgr=None)
    original = compactor.record_usage
    compactor.record_usage = lambda m, u, *, session_id=None: (  # type: ignore[method-assign]
        recorded.append((session_id, u)), original(m, u, session_id=session_id))
    calls: list[Any] = []
    real = compactor.compacted
    compactor.compacted = lambda m, **kw: (  # type: ignore[method-assign]
        calls.append(kw.get("session_id")) or real(m, **kw))
    for thread in ("a", "b"):
        session.run([CompactionMiddleware(compactor)], thread=thread)
    assert set(calls) == {"a", "b"}
    assert {s for s, _ in recorded} == {"a", "b"}
    assert all(isinstance(u, int) and u > 0 for _, u in recorded)


def test_an_async_compactor_runs_in_async_runs_and_is_refused_in_sync_ones() -> None:
    async def summarize(prompt: Any) -> str:
        return "summary"

    middleware = CompactionMiddleware(AsyncCompactor(provider=summarize, transcript_mgr=None))
    with pytest.raises(TypeError, match="async runs only"):
        middleware.before_model({"messages": history()}, None)
    assert asyncio.run(middleware.abefore_model({"messages": history()}, None)) is None


def test_the_session_has_no_refused_request_no_field_lost_and_fewer_summaries() -> None:
    ours = session.FakeSummariser()
    compactor = Compactor(provider=langchain_chat_provider(ours), threshold=THRESHOLD,
                          language="en", transcript_mgr=None)
    model, state = session.run([CompactionMiddleware(compactor)])
    assert model.calls == session.CALLS
    assert model.refused == []
    assert model.lost == []
    assert ours.calls >= 1  # full compactions happened
    assert any(m.additional_kwargs.get("lc_source") == "summarization" for m in state["messages"])
    theirs = session.FakeSummariser()
    builtin = SummarizationMiddleware(model=theirs, trigger=("tokens", THRESHOLD),
                                      keep=("messages", 20))
    their_model, _ = session.run([builtin])
    assert their_model.refused == []
    assert ours.calls <= theirs.calls
    assert model.peak <= their_model.peak


def test_the_example_runs_offline_and_wires_in_at_most_five_lines() -> None:
    import langchain_agent  # noqa: PLC0415  (examples/ is on the path only here)

    assert langchain_agent.main() == 0
    assert langchain_agent.wiring_lines() <= 5


@pytest.mark.parametrize("kind", ["Compactor", "AsyncCompactor"])
def test_the_session_through_ainvoke_is_compacted_with_either_compactor(kind: str) -> None:
    summariser = session.FakeSummariser()
    if kind == "AsyncCompactor":
        compactor: Any = AsyncCompactor(provider=langchain_chat_provider_async(summariser),
                                        threshold=THRESHOLD, language="en", transcript_mgr=None)
    else:
        compactor = Compactor(provider=langchain_chat_provider(summariser),
                              threshold=THRESHOLD, language="en", transcript_mgr=None)
    model, _ = asyncio.run(session.arun([CompactionMiddleware(compactor)]))
    assert model.calls == session.CALLS
    assert model.refused == [] and model.lost == []
    assert summariser.calls >= 1


def test_the_benchmark_prints_the_langchain_row_as_a_plain_script() -> None:
    script = Path(__file__).parents[2] / "benchmarks" / "frameworks" / "langchain_session.py"
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          check=True, encoding="utf-8")
    row = next(line for line in done.stdout.splitlines() if line.startswith("LangChain |"))
    lines, lost, refused = (cell.strip() for cell in row.split("|")[1:4])
    assert int(lines) <= 5 and lost == "0" and refused == "0"
    assert "langchain-core 1.8" in done.stdout


@pytest.mark.parametrize("options", [
    {"profile": "agent"}, {"micro": "cache-friendly"}, {"summary_content": "auto"},
    {"threshold": 0.5, "context_window": 12000}, {"keep_tail_tokens": 2000},
])
def test_the_session_stays_valid_under_the_main_options(options: dict[str, Any]) -> None:
    summariser = session.FakeSummariser()
    given = {"threshold": THRESHOLD, "language": "en", "transcript_mgr": None, **options}
    compactor = Compactor(provider=langchain_chat_provider(summariser), **given)
    model, _ = session.run([CompactionMiddleware(compactor)])
    assert model.calls == session.CALLS
    assert model.refused == [] and model.lost == []
    assert summariser.calls >= 1


def test_the_state_messages_are_left_untouched_by_a_full_compaction() -> None:
    compactor = Compactor(provider=lambda prompt: "summary", transcript_mgr=None,
                          threshold=2000, language="en")
    messages = [*history(), AIMessage("done", id="ai-2"), HumanMessage("next", id="h2")]
    before = [m.model_dump() for m in messages]
    update = CompactionMiddleware(compactor).before_model({"messages": messages}, None)
    assert update is not None
    assert [m.model_dump() for m in messages] == before


def test_a_langchain_chat_model_as_the_provider_names_its_wrapper() -> None:
    with pytest.raises(TypeError, match=r"a LangChain model; wrap it: langchain_chat_provider"):
        Compactor(GenericFakeChatModel(messages=iter([])))  # type: ignore[arg-type]


def test_tool_call_args_json_cannot_write_are_sent_as_text() -> None:
    call = {"name": "cal", "args": {"day": datetime.date(2024, 1, 1)}, "id": "z",
            "type": "tool_call"}
    dicts = to_dicts([AIMessage("", tool_calls=[call], id="a")])
    assert dicts[0]["tool_calls"][0]["function"]["arguments"] == '{"day": "2024-01-01"}'


def test_a_message_the_compactor_cannot_read_leaves_the_request_as_it_is(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages = [HumanMessage("task", id="h"), ChatMessage(role="critic", content="hmm", id="c")]
    middleware = CompactionMiddleware(Compactor(provider=lambda p: "s", transcript_mgr=None))
    with caplog.at_level(logging.WARNING):
        assert middleware.before_model({"messages": messages}, None) is None
        assert asyncio.run(middleware.abefore_model({"messages": messages}, None)) is None
    assert sum("could not be compacted" in r.message for r in caplog.records) == 2


@pytest.mark.parametrize("acknowledgement", [None, "Noted."])
def test_the_acknowledgement_is_a_new_message_not_an_old_one_with_its_fields(
    acknowledgement: str | None,
) -> None:
    messages: list[Any] = [HumanMessage("task", id="h0")]
    for t in range(6):
        call = {"name": "bash", "args": {}, "id": f"c{t}", "type": "tool_call"}
        messages += [AIMessage("", tool_calls=[call], id=f"a{t}"),
                     ToolMessage(f"out {t} " * 600, tool_call_id=f"c{t}", id=f"t{t}")]
    usage = {"input_tokens": 9000, "output_tokens": 5, "total_tokens": 9005}
    messages += [AIMessage("All six read.", id="final", usage_metadata=usage,
                           response_metadata={"model_name": "m"}),
                 HumanMessage("next question", id="q")]
    compactor = Compactor(provider=lambda p: "SUMMARY", transcript_mgr=None, threshold=600,
                          language="en", acknowledgement=acknowledgement)
    update = CompactionMiddleware(compactor).before_model({"messages": messages}, None)
    assert update is not None
    ack = next(m for m in update["messages"][1:] if isinstance(m, AIMessage))
    assert ack.id not in {m.id for m in messages}
    assert ack.usage_metadata is None and ack.response_metadata == {}
    assert update["messages"][-1] is messages[-1]


class _Request:
    """A model request as ``wrap_model_call`` reads it."""

    runtime = None

    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages

    def override(self, messages: list[Any]) -> _Request:
        return _Request(messages)


def _rounds(count: int, size: int, start: int = 0) -> list[Any]:
    messages: list[Any] = []
    for t in range(start, start + count):
        call = {"name": "bash", "args": {}, "id": f"c{t}", "type": "tool_call"}
        messages += [AIMessage("", tool_calls=[call], id=f"a{t}"),
                     ToolMessage(f"out {t} " * size, tool_call_id=f"c{t}", id=f"t{t}")]
    return messages


def _model_call(middleware: CompactionMiddleware, state: list[Any]) -> list[Any]:
    """The messages the model is sent for ``state`` (the request as ``before_model`` left
    it)."""
    seen: list[Any] = []
    middleware.wrap_model_call(_Request(state), lambda r: seen.append(r.messages) or [])
    return list(seen[0])


def test_a_background_summary_is_swapped_in_under_the_middleware() -> None:
    async def summarize(prompt: Any) -> str:
        return "SUMMARY"

    state: list[Any] = [SystemMessage("sys", id="s"), HumanMessage("task", id="h"),
                        *_rounds(8, 300)]
    threshold = int(estimate_tokens(to_dicts(state)) / 0.6)
    compactor = AsyncCompactor(provider=summarize, transcript_mgr=None, threshold=threshold,
                               background_at=0.5, keep_recent=100)
    middleware = CompactionMiddleware(compactor)

    async def run() -> Any:
        assert await middleware.abefore_model({"messages": state}, None) is None
        assert compactor.background_pending
        for _ in range(100):
            await asyncio.sleep(0)
        more = [*state, AIMessage("ok", id="x"), HumanMessage("more", id="y")]
        return await middleware.abefore_model({"messages": more}, None)

    update = asyncio.run(run())
    assert compactor.last_result.action is Action.FULL
    assert update is not None and isinstance(update["messages"][0], RemoveMessage)
    assert update["messages"][-1].id == "y"


def test_results_archived_once_are_not_archived_again_on_later_turns(tmp_path: Path) -> None:
    store = JsonlTranscriptManager(str(tmp_path))
    compactor = Compactor(provider=lambda p: "S", transcript_mgr=store, archive=store.archive)
    middleware = CompactionMiddleware(compactor)
    state: list[Any] = [HumanMessage("task", id="h"), *_rounds(8, 600)]

    def records() -> int:
        return sum(len(f.read_text().splitlines()) for f in tmp_path.rglob("*") if f.is_file())

    counts, truncated = [], []
    for turn in range(3):
        assert middleware.before_model({"messages": state}, None) is None
        sent = _model_call(middleware, state)
        counts.append(records())
        truncated.append(compactor.last_result.truncated)
        state = [*state, AIMessage("ok", id=f"x{turn}"),
                 HumanMessage(f"more {turn}", id=f"y{turn}")]
    assert counts[0] > 0 and counts == [counts[0]] * 3
    assert truncated[0] > 0 and truncated[1:] == [0, 0]
    assert len(sent[2].content) < 600 * 6 and len(state[2].content) == len("out 0 ") * 600


def test_a_continuation_summary_is_asked_on_the_messages_last_sent() -> None:
    asked: list[Any] = []

    def summarize(prompt: Any) -> str:
        asked.append(prompt)
        return "SUMMARY"

    setattr(summarize, CONTINUATION_ATTRIBUTE, True)
    compactor = Compactor(provider=summarize, transcript_mgr=None, threshold=4000,
                          language="en")
    middleware = CompactionMiddleware(compactor)
    state: list[Any] = [HumanMessage("task", id="h"), *_rounds(8, 400)]
    assert middleware.before_model({"messages": state}, None) is None
    assert compactor.last_result.truncated > 0
    sent = to_dicts(_model_call(middleware, state))
    state = [*state, *_rounds(1, 2500, start=9)]
    update = middleware.before_model({"messages": state}, None)
    assert update is not None and compactor.last_result.action is Action.FULL
    request = next(p for p in asked if isinstance(p, ContinuationRequest))
    assert request.messages[: len(sent)] == sent
