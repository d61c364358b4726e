"""The fake API's request checks: valid requests pass, each broken rule is rejected.

The loops in test_sdk_loops.py count on these checks to catch a history that
compaction broke, so each rule is shown to fire here.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

anthropic = pytest.importorskip("anthropic")
openai = pytest.importorskip("openai")

from _fake_server import (
    ResponsesMemory,
    check_anthropic,
    check_chat,
    check_responses,
)


def anthropic_body(messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"model": "m", "max_tokens": 100, "messages": messages}


ANTHROPIC_OK = [
    {"role": "user", "content": "find the bug"},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Looking.", "citations": None},
            {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.py"}},
        ],
    },
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x"}]},
]


def test_a_valid_anthropic_history_passes() -> None:
    assert check_anthropic(anthropic_body(ANTHROPIC_OK)) == []


def test_anthropic_requests_without_max_tokens_are_rejected() -> None:
    body = anthropic_body(ANTHROPIC_OK)
    del body["max_tokens"]
    assert check_anthropic(body) == ["max_tokens: Field required"]


def test_anthropic_orphan_results_and_unanswered_calls_are_rejected() -> None:
    orphan = [ANTHROPIC_OK[0], {"role": "assistant", "content": "ok"}, ANTHROPIC_OK[2]]
    assert "unexpected tool_use_id" in check_anthropic(anthropic_body(orphan))[0]
    unanswered = [*ANTHROPIC_OK[:2], {"role": "user", "content": "go on"}]
    assert "without tool_result blocks" in check_anthropic(anthropic_body(unanswered))[0]


def test_anthropic_history_starting_with_the_assistant_is_rejected() -> None:
    errors = check_anthropic(
        anthropic_body([{"role": "assistant", "content": "hi"}, ANTHROPIC_OK[0]])
    )
    assert errors == ["messages: the first message must use the user role"]


def test_anthropic_response_only_fields_are_rejected() -> None:
    broken = copy.deepcopy(ANTHROPIC_OK)
    broken[1]["content"][1]["parsed"] = None
    assert any("parsed: unknown field" in e for e in check_anthropic(anthropic_body(broken)))


def thinking_history(first_block: dict[str, Any]) -> dict[str, Any]:
    assistant = copy.deepcopy(ANTHROPIC_OK[1])
    assistant["content"].insert(0, first_block)
    body = anthropic_body([ANTHROPIC_OK[0], assistant, ANTHROPIC_OK[2]])
    body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    return body


def test_anthropic_thinking_must_open_the_answered_turn_and_stay_unchanged() -> None:
    signatures = {"sig_1": "the user wants the bug"}
    block = {"type": "thinking", "thinking": "the user wants the bug", "signature": "sig_1"}
    assert check_anthropic(thinking_history(block), signatures) == []
    changed = {**block, "thinking": "something else"}
    assert check_anthropic(thinking_history(changed), signatures) == [
        "messages.1.content: Invalid `signature` in `thinking` block"
    ]
    text_first = thinking_history({"type": "text", "text": "Summary so far."})
    errors = check_anthropic(text_first, signatures)
    assert "Expected `thinking` or `redacted_thinking`, but found `text`" in errors[0]


def test_anthropic_thinking_refuses_a_last_assistant_message_without_thinking() -> None:
    summary = {"role": "user", "content": "[Context Compressed]\nThe work so far."}
    acknowledgement = {"role": "assistant", "content": "Understood."}
    body = anthropic_body([summary, acknowledgement])
    assert check_anthropic(body) == []  # a prefill, accepted without thinking
    body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
    errors = check_anthropic(body)
    assert len(errors) == 1
    assert errors[0].startswith("messages.1.content.0.type: Expected `thinking`")
    body["messages"].append({"role": "user", "content": "next task"})
    assert check_anthropic(body) == []


CHAT_OK: list[dict[str, Any]] = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "find the bug"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": "{}"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "one"},
    {"role": "tool", "tool_call_id": "c2", "content": "two"},
    {"role": "assistant", "content": "done"},
]


def test_a_valid_chat_history_passes() -> None:
    assert check_chat({"messages": CHAT_OK}) == []


@pytest.mark.parametrize("field", ["parsed", "annotations"])
def test_chat_response_only_fields_are_rejected(field: str) -> None:
    broken = copy.deepcopy(CHAT_OK)
    broken[2][field] = None if field == "parsed" else []
    assert check_chat({"messages": broken}) == [f"messages[2].{field}: unknown field"]


def test_chat_orphan_tool_messages_and_unanswered_calls_are_rejected() -> None:
    orphan = [CHAT_OK[1], CHAT_OK[4]]
    assert "must be a response to a preceding message" in check_chat({"messages": orphan})[0]
    unanswered = [*CHAT_OK[:4], {"role": "user", "content": "and?"}]
    assert "Missing: ['c2']" in check_chat({"messages": unanswered})[0]


def test_chat_first_non_system_message_must_be_a_user_message() -> None:
    errors = check_chat({"messages": [CHAT_OK[0], *CHAT_OK[2:]]})
    assert errors[0] == "messages: the first non-system message must be a user message"


RESPONSES_OK: list[dict[str, Any]] = [
    {"role": "developer", "content": "be brief"},
    {"role": "user", "content": "find the bug"},
    {"id": "rs_1", "type": "reasoning", "summary": []},
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "f",
        "arguments": "{}",
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "one"},
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "done", "annotations": []}],
    },
]


def memory() -> ResponsesMemory:
    return ResponsesMemory(reasoning_follower={"rs_1": "fc_1"}, call_reasoning={"fc_1": "rs_1"})


def test_a_valid_responses_input_passes() -> None:
    assert check_responses({"input": RESPONSES_OK}, memory()) == []


def test_responses_reasoning_and_its_function_call_stay_together() -> None:
    without_reasoning = [item for item in RESPONSES_OK if item.get("type") != "reasoning"]
    errors = check_responses({"input": without_reasoning}, memory())
    assert errors == [
        "Item 'fc_1' of type 'function_call' was provided without its required 'reasoning' "
        "item: 'rs_1'."
    ]
    reasoning_alone = [*RESPONSES_OK[:3], {"role": "user", "content": "and?"}]
    errors = check_responses({"input": reasoning_alone}, memory())
    assert "without its required following item" in errors[0]


def test_responses_orphan_outputs_and_unanswered_calls_are_rejected() -> None:
    orphan = [RESPONSES_OK[1], RESPONSES_OK[4]]
    errors = check_responses({"input": orphan}, ResponsesMemory())
    assert errors == ["No tool call found for function call output with call_id call_1."]
    unanswered = [*RESPONSES_OK[1:4], {"role": "user", "content": "and?"}]
    errors = check_responses({"input": unanswered}, memory())
    assert errors == ["No tool output found for function call call_1."]


def test_responses_output_text_without_annotations_is_rejected() -> None:
    broken = copy.deepcopy(RESPONSES_OK)
    del broken[5]["content"][0]["annotations"]
    errors = check_responses({"input": broken}, memory())
    assert any("annotations: required field missing" in e for e in errors)


def test_anthropic_thinking_is_required_when_user_text_follows_the_results() -> None:
    # The API merges the results and a reminder after them: the tool loop goes on.
    block = {"type": "text", "text": "Summary so far."}
    body = thinking_history(block)
    body["messages"].append({"role": "user", "content": "<system-reminder>go on</system-reminder>"})
    errors = check_anthropic(body, {})
    assert len(errors) == 1 and "found `text`" in errors[0]
    body["messages"][1]["content"] = body["messages"][1]["content"][:1]  # no tool call left
    body["messages"][2] = {"role": "user", "content": "a new request"}
    assert check_anthropic(body, {}) == []
