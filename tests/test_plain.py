"""SDK model objects in a history become the plain request dicts, in place and once."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bareagent_compact import Compactor, _serialize, estimate_tokens, find_orphans
from bareagent_compact.plain import plain_messages, plain_view


class FakeModel:
    """Stands for a pydantic SDK object: only ``model_dump`` is used."""

    def __init__(self, **fields: Any) -> None:
        self.fields = fields
        self.dumps = 0

    def model_dump(
        self, *, mode: str = "python", by_alias: bool = False, exclude_none: bool = False
    ) -> dict[str, Any]:
        self.dumps += 1
        data = copy.deepcopy(self.fields)
        if exclude_none:
            data = {k: v for k, v in data.items() if v is not None}
        return data

    def __repr__(self) -> str:
        return f"FakeModel({self.fields!r})"


def text_block(text: str) -> FakeModel:
    return FakeModel(type="text", text=text, citations=None)


def tool_use_block(call_id: str, name: str, tool_input: dict[str, Any]) -> FakeModel:
    return FakeModel(type="tool_use", id=call_id, name=name, input=tool_input, caller=None)


def anthropic_history() -> list[Any]:
    messages: list[Any] = [{"role": "user", "content": "fix the build"}]
    for turn in range(5):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    text_block(f"step {turn}"),
                    tool_use_block(f"toolu_{turn}", "bash", {"cmd": "make", "flag": None}),
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"toolu_{turn}", "content": "x" * 300}
                ],
            }
        )
    return messages


def test_anthropic_response_blocks_become_request_dicts_in_place() -> None:
    messages = anthropic_history()
    outer = messages[1]
    assert plain_messages(messages) == 10
    assert messages[1] is outer  # the message dict itself stays; its blocks are replaced
    assert outer["content"] == [
        {"type": "text", "text": "step 0"},
        {
            "type": "tool_use",
            "id": "toolu_0",
            "name": "bash",
            "input": {"cmd": "make", "flag": None},
        },
    ]
    assert plain_messages(messages) == 0  # once


def test_chat_completion_message_loses_its_response_only_fields() -> None:
    message = FakeModel(
        role="assistant",
        content=None,
        refusal=None,
        annotations=[],
        audio={"id": "audio_1", "data": "...", "expires_at": 1, "transcript": "hi"},
        function_call=None,
        parsed=None,
        tool_calls=[
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    )
    messages: list[Any] = [{"role": "user", "content": "hi"}, message]
    plain_messages(messages)
    assert messages[1] == {
        "role": "assistant",
        "audio": {"id": "audio_1"},
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ],
    }


def test_responses_output_items_become_input_items() -> None:
    items: list[Any] = [
        {"role": "user", "content": "go"},
        FakeModel(type="reasoning", id="rs", summary=[], content=None, encrypted_content=None),
        FakeModel(
            type="function_call", id="fc", call_id="c1", name="f", arguments="{}", status=None
        ),
    ]
    plain_messages(items)
    assert items[1:] == [
        {"type": "reasoning", "id": "rs", "summary": []},
        {"type": "function_call", "id": "fc", "call_id": "c1", "name": "f", "arguments": "{}"},
    ]


def test_a_value_that_is_neither_dict_nor_model_is_a_type_error_before_any_change() -> None:
    model = text_block("a")
    messages: list[Any] = [{"role": "assistant", "content": [model]}, "not a message"]
    with pytest.raises(TypeError, match=r"messages\[1\] must be a dict, got str"):
        Compactor(lambda p: "S")(messages)
    assert messages[0]["content"][0] is model
    assert model.dumps == 0


def test_compactor_pairs_truncates_and_serialises_sdk_objects() -> None:
    messages = anthropic_history()
    prompts: list[Any] = []
    snapshots: list[Any] = []

    class Store:
        def save(self, history: list[Any], session_id: str) -> None:
            snapshots.append(copy.deepcopy(history))

    compactor = Compactor(lambda p: prompts.append(p) or "S", Store(), threshold=10)
    result = compactor(messages)
    assert result.compacted
    assert find_orphans(messages) == []
    transcript = prompts[0][1]["content"]
    assert "[tool_use:bash] {\"cmd\": \"make\", \"flag\": null}" in transcript
    assert "[truncated: bash result, 300 chars]" in transcript
    assert "FakeModel" not in transcript and "FakeModel" not in repr(snapshots)
    assert all(isinstance(b, dict) for m in messages if isinstance(m["content"], list)
               for b in m["content"])


def test_read_only_functions_see_sdk_objects_without_changing_the_list() -> None:
    messages = anthropic_history()
    plain = copy.deepcopy(messages)
    plain_messages(plain)
    assert estimate_tokens(messages) == estimate_tokens(plain)
    assert _serialize(messages) == _serialize(plain)
    assert find_orphans(messages) == find_orphans(plain) == []
    assert isinstance(messages[1]["content"][0], FakeModel)
    assert plain_view(plain) is plain


def test_an_sdk_message_appended_to_a_settled_chat_history_is_converted() -> None:
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for turn in range(4):
        call = {"id": f"c{turn}", "type": "function",
                "function": {"name": "bash", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{turn}", "content": "out " * 50})
    compactor = Compactor(lambda p: "S")
    compactor(messages)
    messages.append(FakeModel(role="assistant", content=None, refusal=None, tool_calls=[
        {"id": "c4", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]))
    messages.append({"role": "tool", "tool_call_id": "c4", "content": "fresh"})
    result = compactor(messages)
    assert result.truncated == 1
    assert messages[-2] == {"role": "assistant", "tool_calls": [
        {"id": "c4", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}
    assert find_orphans(messages) == []


def test_parsed_arguments_of_a_parsed_completion_are_not_kept() -> None:
    parsed = FakeModel(role="assistant", content=None, parsed=None, tool_calls=[
        {"id": "c1", "type": "function",
         "function": {"name": "f", "arguments": "{}", "parsed_arguments": {}}}])
    alone = FakeModel(id="c2", type="function",
                      function={"name": "f", "arguments": "{}", "parsed_arguments": {}})
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        parsed,
        {"role": "assistant", "content": None, "tool_calls": [alone]},
    ]
    plain_messages(messages)
    assert "parsed_arguments" not in messages[1]["tool_calls"][0]["function"]
    assert "parsed_arguments" not in messages[2]["tool_calls"][0]["function"]
