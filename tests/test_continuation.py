"""Continuation summarisers: the summary asked on the history as the loop sent it.

The clients are small stand-ins with the SDKs' method paths and answer shapes;
tests/integration/test_continuation_sdk.py runs the same providers over the real
``anthropic`` and ``openai`` clients and the fake server.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from types import SimpleNamespace as NS
from typing import Any

import pytest

from bareagent_compact import Action, AsyncCompactor, Compactor, Reason, prompts
from bareagent_compact.continuation import instruction, sent_part
from bareagent_compact.prompts import SUMMARY_PREFIX
from bareagent_compact.protocols import ContinuationRequest, is_continuation_summariser
from bareagent_compact.providers import (
    anthropic_continuation_provider,
    openai_chat_continuation_provider,
    openai_responses_continuation_provider,
)
from bareagent_compact.tokens import estimate_tokens
from conftest import MemoryTranscripts, tool_history
from converters import to_chat, to_responses

TOOLS = [{"name": "bash", "description": "run", "input_schema": {"type": "object"}}]
SYSTEM = "You are an agent."


class Recorder:
    """A ``create`` method recording its keywords; answers from a list, the last repeated;
    an exception in the list is raised."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls: list[dict[str, Any]] = []

    def next(self, kwargs: dict[str, Any]) -> Any:
        self.calls.append(copy.deepcopy(kwargs))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def __call__(self, **kwargs: Any) -> Any:
        return self.next(kwargs)


class AsyncRecorder(Recorder):
    async def __call__(self, **kwargs: Any) -> Any:  # type: ignore[override]
        await asyncio.sleep(0)
        return self.next(kwargs)


class TooLong(Exception):
    """What the Anthropic SDK raises for a prompt over the model's window."""

    status_code = 400

    def __init__(self) -> None:
        super().__init__("prompt is too long: 213462 tokens > 200000 maximum")
        self.message = str(self)
        self.body = {"type": "error", "error": {"type": "invalid_request_error"}}


def anthropic_answer(text: str = "SUMMARY", *, tool: bool = False) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    if tool:
        content.append({"type": "tool_use", "id": "toolu_x", "name": "bash", "input": {}})
    usage = {"input_tokens": 10, "cache_read_input_tokens": 900, "output_tokens": 5}
    return {"content": content, "stop_reason": "tool_use" if tool else "end_turn", "usage": usage}


CHAT_ANSWER = {
    "choices": [{"message": {"content": "SUMMARY", "refusal": None}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1000, "completion_tokens": 5,
              "prompt_tokens_details": {"cached_tokens": 896}},
}
RESPONSES_ANSWER = {
    "status": "completed",
    "output": [{"type": "message", "content": [{"type": "output_text", "text": "SUMMARY"}]}],
    "usage": {"input_tokens": 1000, "output_tokens": 5,
              "input_tokens_details": {"cached_tokens": 896}},
}


def history() -> list[dict[str, Any]]:
    """An Anthropic history (no system message: the loop sends it as ``system=``)
    whose old results micro-compaction clears (keep_recent=1)."""
    return tool_history(8, system=None, output=lambda turn: f"result {turn} " * 60)


def compactor_for(provider: Any, messages: list[dict[str, Any]], **options: Any) -> Compactor:
    options.setdefault("threshold", 150)
    options.setdefault("keep_recent", 1)
    return Compactor(provider, language="en", **options)


def anthropic(recorder: Recorder, **kwargs: Any) -> Any:
    return anthropic_continuation_provider(
        NS(messages=NS(create=recorder)), "m", system=SYSTEM, tools=TOOLS, **kwargs
    )


# ------------------------------------------------------------- request shape


def test_anthropic_summary_request_is_the_history_as_received_then_one_instruction() -> None:
    recorder = Recorder(anthropic_answer())
    messages = history()
    received = copy.deepcopy(messages)
    result = compactor_for(anthropic(recorder, cache_control={"type": "ephemeral"}), messages)(
        messages
    )
    assert result.action is Action.FULL
    (body,) = recorder.calls
    assert body["system"] == SYSTEM and body["tools"] == TOOLS and body["model"] == "m"
    # The prefix is the list as the call received it, without the kept round (it
    # follows the summary): micro-compaction's clears of the same call are not in it.
    assert body["messages"][:-1] == received[:-2]
    last = body["messages"][-1]
    assert last["role"] == "user" and len(last["content"]) == 1
    assert last["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert "compact the conversation above" in last["content"][0]["text"]
    assert "tool_choice" not in body  # as the loop sends it: the cached messages kept


def test_micro_clears_of_the_same_call_still_apply_to_what_is_kept() -> None:
    messages = history()
    compactor = compactor_for(anthropic(Recorder(anthropic_answer())), messages)
    result = compactor(messages)
    assert result.action is Action.FULL and result.truncations
    assert messages[0]["content"].startswith(SUMMARY_PREFIX)


def test_the_cost_of_a_continuation_counts_its_cache_reads() -> None:
    messages = history()
    result = compactor_for(anthropic(Recorder(anthropic_answer())), messages)(messages)
    assert result.cost is not None
    assert result.cost.cache_read_tokens == 900 and result.cost.requests == 1


def test_a_fifth_breakpoint_is_not_added() -> None:
    recorder = Recorder(anthropic_answer())
    messages = history()
    for message in messages[1:9]:
        if isinstance(message["content"], list):
            message["content"][-1]["cache_control"] = {"type": "ephemeral"}
    provider = anthropic(recorder, cache_control={"type": "ephemeral"})
    compactor_for(provider, messages)(messages)
    assert "cache_control" not in recorder.calls[0]["messages"][-1]["content"][0]


def test_chat_request_keeps_the_system_message_and_tools_then_one_user_message() -> None:
    recorder = Recorder(CHAT_ANSWER)
    messages = to_chat(tool_history(8, output=lambda turn: f"result {turn} " * 60))
    received = copy.deepcopy(messages)
    provider = openai_chat_continuation_provider(
        NS(chat=NS(completions=NS(create=recorder))), "gpt", tools=TOOLS, prompt_cache_key="k"
    )
    result = compactor_for(provider, messages)(messages)
    assert result.action is Action.FULL
    (body,) = recorder.calls
    assert body["messages"][:-1] == received[:-2]
    assert body["messages"][-1]["role"] == "user"
    assert body["tools"] == TOOLS and body["prompt_cache_key"] == "k"
    assert result.cost is not None and result.cost.cache_read_tokens == 896


def test_responses_request_is_the_items_as_received_with_the_instructions() -> None:
    recorder = Recorder(RESPONSES_ANSWER)
    messages = to_responses(tool_history(8, system=None, output=lambda t: f"result {t} " * 60))
    received = copy.deepcopy(messages)
    provider = openai_responses_continuation_provider(
        NS(responses=NS(create=recorder)), "gpt", instructions=SYSTEM, tools=TOOLS
    )
    result = compactor_for(provider, messages)(messages)
    assert result.action is Action.FULL
    (body,) = recorder.calls
    assert body["input"][:-1] == received[:-2]
    assert body["input"][-1]["role"] == "user" and body["instructions"] == SYSTEM


def test_the_instruction_names_how_many_messages_are_kept() -> None:
    assert "The last 3 messages above are kept verbatim" in instruction("Summarise.", 3)
    assert "kept verbatim" not in instruction("Summarise.", 0)


def test_the_kept_messages_are_left_out_when_the_rest_answers_every_call() -> None:
    conversation = history()
    # the last round follows the summary: the request is the list the loop last sent
    assert sent_part(conversation, 2) == (conversation[:-2], 0)


def test_the_whole_conversation_is_sent_when_the_cut_leaves_a_call_unanswered() -> None:
    conversation = history()
    assert sent_part(conversation, 1) == (conversation, 1)  # the last call's result is kept
    assert sent_part(conversation, 0) == (conversation, 0)
    assert sent_part(conversation, len(conversation)) == (conversation, len(conversation))


def test_instruction_is_in_the_summary_prompts_language() -> None:
    assert "请压缩上面的对话" in instruction("请用中文总结下面的对话历史", 2)
    assert "2 条消息" in instruction("请用中文总结下面的对话历史", 2)
    assert instruction("Summarise the conversation below", 0).startswith("This is not a new")


def test_providers_are_marked_and_plain_callables_keep_the_transcript_prompt() -> None:
    seen: list[Any] = []
    messages = history()

    def plain(prompt: Any) -> str:
        seen.append(prompt)
        return "SUMMARY"

    assert is_continuation_summariser(anthropic(Recorder(anthropic_answer())))
    assert not is_continuation_summariser(plain)
    compactor_for(plain, messages)(messages)
    assert isinstance(seen[0], list) and seen[0][0]["role"] == "system"


# ------------------------------------------------------------- answers


def test_a_tool_call_answer_with_text_gives_that_text(caplog: pytest.LogCaptureFixture) -> None:
    messages = history()
    with caplog.at_level(logging.WARNING):
        result = compactor_for(anthropic(Recorder(anthropic_answer(tool=True))), messages)(
            messages
        )
    assert result.action is Action.FULL
    assert "answered with a tool call" in caplog.text
    assert "SUMMARY" in messages[0]["content"]


def test_a_tool_call_answer_without_text_leaves_the_history(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages = history()
    compactor = compactor_for(anthropic(Recorder(anthropic_answer("", tool=True))), messages)
    with caplog.at_level(logging.WARNING):
        result = compactor(messages)
    assert result.action is not Action.FULL and result.reason is Reason.UNUSABLE_SUMMARY
    assert len(messages) == len(history())
    assert "unusable summary" in caplog.text


# ------------------------------------------------------------- fallbacks


def test_a_history_over_the_input_budget_gets_the_transcript_request() -> None:
    recorder = Recorder(anthropic_answer())
    messages = tool_history(40, system=None, output=lambda turn: f"result {turn} " * 60)
    provider = anthropic(recorder, tool_choice={"type": "auto"})
    result = compactor_for(provider, messages, summary_input_tokens=1024, keep_recent=100)(
        messages
    )
    assert result.action is Action.FULL and result.parts > 1
    for body in recorder.calls:  # the transcript requests: no tools, no conversation
        assert "tools" not in body and "tool_choice" not in body
        assert body["system"] != SYSTEM and len(body["messages"]) == 1


def test_the_context_window_lets_a_long_history_be_continued() -> None:
    recorder = Recorder(anthropic_answer())
    messages = tool_history(40, system=None, output=lambda turn: f"result {turn} " * 60)
    compactor = compactor_for(
        anthropic(recorder), messages, summary_input_tokens=1024, keep_recent=100,
        context_window=200_000, threshold=400,
    )
    assert compactor(messages).action is Action.FULL
    assert len(recorder.calls) == 1 and recorder.calls[0]["system"] == SYSTEM


def long_history() -> list[dict[str, Any]]:
    """40 tool rounds: about 6,000 tokens, over a ``summary_input_tokens`` of 1,024."""
    return tool_history(40, system=None, output=lambda turn: f"result {turn} " * 60)


def is_continuation(body: dict[str, Any]) -> bool:
    return body["system"] == SYSTEM and len(body["messages"]) > 1


@pytest.mark.parametrize("counter", [None, estimate_tokens], ids=["ledger", "token_counter"])
def test_a_sent_part_the_model_accepted_gets_the_continuation_over_the_input_budget(
    counter: Any,
) -> None:
    recorder = Recorder(anthropic_answer())
    messages = long_history()
    compactor = compactor_for(
        anthropic(recorder), messages, summary_input_tokens=1024, token_counter=counter
    )
    compactor.record_usage(messages[:-2], 6500)  # the loop's last request, then one round
    received = copy.deepcopy(messages)
    assert compactor(messages).action is Action.FULL
    (body,) = recorder.calls
    assert is_continuation(body) and body["messages"][:-1] == received[:-2]


def test_a_sent_part_no_usage_report_covered_over_the_input_budget_gets_the_transcript() -> None:
    for recorded in (None, -4):  # never reported; a report for a shorter list
        recorder = Recorder(anthropic_answer())
        messages = long_history()
        compactor = compactor_for(anthropic(recorder), messages, summary_input_tokens=1024)
        if recorded is not None:
            compactor.record_usage(messages[:recorded], 6500)
        assert compactor(messages).action is Action.FULL
        assert recorder.calls and not any(map(is_continuation, recorder.calls))


def test_a_sent_part_within_the_budget_gets_the_continuation_when_the_kept_part_is_over() -> None:
    recorder = Recorder(anthropic_answer())
    # The kept round's result alone is over the budget; what comes before is well within.
    messages = tool_history(
        4, system=None, output=lambda turn: f"result {turn} " * (60 if turn < 3 else 3000)
    )
    received = copy.deepcopy(messages)
    compactor = compactor_for(
        anthropic(recorder), messages, summary_input_tokens=1024, keep_recent=100
    )
    assert compactor(messages).action is Action.FULL
    (body,) = recorder.calls
    assert is_continuation(body) and body["messages"][:-1] == received[:-2]


def test_an_overflowing_continuation_falls_back_to_the_transcript_request() -> None:
    recorder = Recorder(TooLong(), anthropic_answer())
    messages = history()
    result = compactor_for(anthropic(recorder), messages)(messages)
    assert result.action is Action.FULL
    first, second = recorder.calls
    assert first["system"] == SYSTEM and second["system"] != SYSTEM
    assert result.summary_calls == 2 and result.cost is not None and result.cost.requests == 2


# ------------------------------------------------------------- the rest of the step


def test_before_compact_instructions_reach_the_instruction_and_false_skips() -> None:
    recorder = Recorder(anthropic_answer())
    messages = history()
    compactor = compactor_for(anthropic(recorder), messages, before_compact=lambda e: "KEEP IDS")
    compactor(messages)
    assert "KEEP IDS" in recorder.calls[0]["messages"][-1]["content"][0]["text"]
    skipped = Recorder(anthropic_answer())
    messages = history()
    result = compactor_for(anthropic(skipped), messages, before_compact=lambda e: False)(messages)
    assert result.reason is Reason.SKIPPED_BY_HOOK and skipped.calls == []


def test_undo_puts_back_the_history_a_continuation_replaced() -> None:
    messages = history()
    compactor = compactor_for(anthropic(Recorder(anthropic_answer())), messages, keep_recent=100)
    before = copy.deepcopy(messages)
    result = compactor(messages)
    assert result.action is Action.FULL
    assert compactor.undo(messages, result) and messages == before


def test_the_snapshot_is_saved_before_the_continuation_is_sent() -> None:
    events: list[str] = []
    store = MemoryTranscripts(events=events)
    recorder = Recorder(anthropic_answer())
    messages = history()

    def create(**kwargs: Any) -> Any:
        events.append("summary")
        return recorder(**kwargs)

    provider = anthropic_continuation_provider(NS(messages=NS(create=create)), "m")
    compactor_for(provider, messages, transcript_mgr=store)(messages)
    assert events[:2] == ["save", "summary"]


def test_async_continuation_sends_the_history_as_received() -> None:
    recorder = AsyncRecorder(anthropic_answer())
    messages = history()
    received = copy.deepcopy(messages)
    provider = anthropic(recorder)
    compactor = AsyncCompactor(provider, threshold=150, keep_recent=1, language="en")
    result = asyncio.run(compactor(messages))
    assert result.action is Action.FULL
    assert recorder.calls[0]["messages"][:-1] == received[:-2]


def test_background_continuation_is_sent_the_history_of_the_call_that_started_it() -> None:
    recorder = AsyncRecorder(anthropic_answer())
    messages = history()
    received = copy.deepcopy(messages)

    async def main() -> Any:
        compactor = AsyncCompactor(
            anthropic(recorder), threshold=1000, background_at=0.1, keep_recent=1,
            language="en",
        )
        first = await compactor(messages)
        assert first.action is not Action.FULL and compactor.background_pending
        for _ in range(20):
            await asyncio.sleep(0)
        return await compactor(messages, force=True)

    result = asyncio.run(main())
    assert result.action is Action.FULL
    assert recorder.calls[0]["messages"][:-1] == received[:-2]


def test_a_continuation_request_is_refused_by_a_plain_adapter_shape() -> None:
    provider = anthropic(Recorder(anthropic_answer()))
    with pytest.raises(TypeError):
        provider("not a prompt")
    request = ContinuationRequest([{"role": "user", "content": "hi"}], "summarise", 0)
    assert provider(request) == "SUMMARY"


def test_an_oversize_cut_of_the_same_call_does_not_reach_the_summary_request() -> None:
    recorder = Recorder(anthropic_answer())
    messages = tool_history(6, system=None, output=lambda turn: f"result {turn} " * 60)
    messages[2]["content"][0]["content"] = "huge line\n" * 800  # over max_message_tokens
    received = copy.deepcopy(messages)
    compactor = compactor_for(
        anthropic(recorder), messages, keep_recent=100, max_message_tokens=500
    )
    result = compactor(messages)
    assert result.action is Action.FULL
    sent = recorder.calls[0]["messages"][:-1]
    assert sent == received[:-2]  # as received, without the kept round


def test_a_thinking_clear_of_the_same_call_does_not_reach_the_summary_request() -> None:
    recorder = Recorder(anthropic_answer())

    def thought(turn: int) -> list[dict[str, Any]]:
        return [
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": f"plan {turn}", "signature": f"s{turn}"},
                {"type": "text", "text": f"step {turn} done"},
            ]},
            {"role": "user", "content": f"go on {turn}"},
        ]  # fmt: skip

    messages = tool_history(6, system=None, output=lambda t: f"result {t} " * 60, after=thought)
    received = copy.deepcopy(messages)
    compactor = compactor_for(
        anthropic(recorder), messages, keep_recent=100, clear_thinking_after_turns=0
    )
    result = compactor(messages)
    assert result.action is Action.FULL and result.thinking_cleared
    # as received (its thinking blocks whole), without the kept last message
    assert recorder.calls[0]["messages"][:-1] == received[:-1]


@pytest.mark.parametrize(
    "prompt",
    [
        prompts.DEFAULT_SUMMARY_PROMPT,
        prompts.ENGLISH_SUMMARY_PROMPT,
        prompts.CHINESE_ROLLING_LEAD_IN + prompts.DEFAULT_SUMMARY_PROMPT,
        prompts.ENGLISH_ROLLING_LEAD_IN + prompts.ENGLISH_SUMMARY_PROMPT,
    ],
)
def test_the_instruction_speaks_of_the_conversation_above_it_only(prompt: str) -> None:
    text = instruction(prompt, 2)
    assert "below" not in text
    assert "下面" not in text
    assert ("above" in text) or ("上面" in text)


def test_the_historys_system_messages_in_text_blocks_become_the_anthropic_system() -> None:
    recorder = Recorder(anthropic_answer())
    provider = anthropic_continuation_provider(NS(messages=NS(create=recorder)), "m")
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": [{"type": "text", "text": "Use the repo."}]},
        {"role": "user", "content": "task"},
    ]
    assert provider(ContinuationRequest(history, "compact it", 0)) == "SUMMARY"
    (body,) = recorder.calls
    assert body["system"] == "Be brief.\n\nUse the repo."
    assert [m["role"] for m in body["messages"]] == ["user", "user"]
