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


def _framework_class(name: str, module: str, *, dumps: bool = True) -> type:
    """A class standing for a framework's message class: only its module path tells."""
    base: tuple[type, ...] = (FakeModel,) if dumps else (object,)
    return type(name, base, {"__module__": module})


LC_HINT = "convert_to_openai_messages"
FRAMEWORK_OBJECTS = [
    ("langchain_core.messages.ai", "AIMessage", True, "LangChain", LC_HINT),
    ("langchain_core.messages.tool", "ToolMessage", True, "LangChain", LC_HINT),
    ("pydantic_ai.messages", "ModelResponse", False, "Pydantic AI", "compaction_processor"),
    ("pydantic_ai.messages", "ModelRequest", False, "Pydantic AI", "compaction_processor"),
    ("smolagents.memory", "ActionStep", False, "smolagents", "to_messages"),
    ("smolagents.models", "ChatMessage", False, "smolagents", "to_messages"),
]


@pytest.mark.parametrize(("module", "name", "dumps", "framework", "hint"), FRAMEWORK_OBJECTS)
def test_a_framework_message_is_refused_naming_the_framework_before_any_change(
    module: str, name: str, dumps: bool, framework: str, hint: str
) -> None:
    cls = _framework_class(name, module, dumps=dumps)
    foreign = cls(role="assistant", content="hi") if dumps else cls()
    model = text_block("a")
    messages: list[Any] = [{"role": "assistant", "content": [model]}, foreign]
    before = list(messages)
    with pytest.raises(TypeError, match=rf"messages\[1\] is a {framework} {name}") as caught:
        Compactor(lambda p: "S")(messages, force=True)
    assert hint in str(caught.value)
    assert "anthropic or openai SDK objects" in str(caught.value)
    assert messages == before and messages[1] is foreign
    assert messages[0]["content"][0] is model and model.dumps == 0
    assert not dumps or foreign.dumps == 0


def test_a_subclass_of_a_framework_message_in_the_callers_module_is_refused() -> None:
    human = _framework_class("HumanMessage", "langchain_core.messages.human")
    mine = type("MyMessage", (human,), {"__module__": "my_app.messages"})
    messages: list[Any] = [{"role": "user", "content": "hi"}, mine(content="x", type="human")]
    for read in (estimate_tokens, find_orphans, plain_view):
        with pytest.raises(TypeError, match=r"messages\[1\] is a LangChain MyMessage"):
            read(messages)
    with pytest.raises(TypeError, match="LangChain"):
        plain_messages(messages)
    assert isinstance(messages[1], mine)


def test_a_framework_object_inside_a_message_is_refused_before_any_change() -> None:
    part = _framework_class("TextPart", "pydantic_ai.messages")(content="x")
    model = text_block("a")
    messages: list[Any] = [{"role": "assistant", "content": [model, part]}]
    with pytest.raises(TypeError, match=r"messages\[0\]\['content'\]\[1\] is a Pydantic AI"):
        Compactor(lambda p: "S")(messages, force=True)
    assert messages[0]["content"] == [model, part] and model.dumps == 0


def test_pydantic_itself_is_no_framework_message() -> None:
    # SDK objects are pydantic models: the pydantic base classes in their MRO tell nothing.
    sdk = type("TextBlock", (FakeModel,), {"__module__": "anthropic.types.text_block"})
    base = type("BaseModel", (FakeModel,), {"__module__": "pydantic.main"})
    block = type("TextBlock", (sdk, base), {"__module__": "anthropic.types.text_block"})
    messages: list[Any] = [{"role": "assistant", "content": [block(type="text", text="a")]}]
    assert plain_messages(messages) == 1
    assert messages[0]["content"] == [{"type": "text", "text": "a"}]


@pytest.mark.parametrize("item", [
    {"type": "human", "content": "hi"},
    {"type": "ai", "content": "hello", "tool_calls": []},
    {"type": "human", "data": {"content": "hi"}},
])
def test_a_langchain_message_dict_is_refused_naming_langchain(item: dict[str, Any]) -> None:
    messages: list[Any] = [{"role": "user", "content": "a"}, item]
    before = copy.deepcopy(messages)
    with pytest.raises(TypeError, match=r"messages\[1\] is a LangChain message dict"):
        Compactor(lambda p: "S")(messages, force=True)
    assert messages == before


def test_real_langchain_messages_are_refused_and_left_as_they_were() -> None:
    lc = pytest.importorskip("langchain_core.messages")
    messages: list[Any] = [
        lc.SystemMessage("be brief"),
        lc.HumanMessage("hi"),
        lc.AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}]),
        lc.ToolMessage("x" * 5000, tool_call_id="c1", status="error"),
    ]
    before = list(messages)
    with pytest.raises(TypeError, match=r"messages\[0\] is a LangChain SystemMessage"):
        Compactor(lambda p: "S", threshold=10)(messages, force=True)
    assert messages == before and all(a is b for a, b in zip(messages, before, strict=True))
    converted = lc.convert_to_openai_messages(messages)
    assert Compactor(lambda p: "S", threshold=10)(converted).tokens_before > 1000


def test_real_pydantic_ai_messages_are_refused_and_left_as_they_were() -> None:
    pai = pytest.importorskip("pydantic_ai.messages")
    messages: list[Any] = [
        pai.ModelRequest(parts=[pai.UserPromptPart("hi")]),
        pai.ModelResponse(parts=[pai.TextPart("hello")]),
    ]
    before = list(messages)
    with pytest.raises(TypeError, match=r"messages\[0\] is a Pydantic AI ModelRequest"):
        Compactor(lambda p: "S", threshold=10)(messages, force=True)
    assert all(a is b for a, b in zip(messages, before, strict=True))


def test_real_smolagents_messages_are_refused_and_their_dicts_name_the_role() -> None:
    memory = pytest.importorskip("smolagents.memory")
    models = pytest.importorskip("smolagents.models")
    step = memory.TaskStep(task="do it")
    messages: list[Any] = [{"role": "user", "content": "a"}, step]
    with pytest.raises(TypeError, match=r"messages\[1\] is a smolagents TaskStep"):
        Compactor(lambda p: "S")(messages, force=True)
    assert messages[1] is step
    observation = models.ChatMessage(
        role=models.MessageRole.TOOL_RESPONSE, content=[{"type": "text", "text": "obs"}]
    )
    dicts = [message.dict() for message in step.to_messages()] + [observation.dict()]
    with pytest.raises(TypeError, match=r"messages\[1\]\['role'\] is 'tool-response'.*user"):
        Compactor(lambda p: "S")(dicts, force=True)
