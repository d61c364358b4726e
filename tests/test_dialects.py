"""The three dialects are one behaviour: compacting a history and converting it commute.

For a random Anthropic-form history ``H`` and its faithful conversion ``c(H)`` to
OpenAI Chat or Responses form, ``c(compact(H)) == compact(c(H))``: the same units
truncated with the same markers, the same pending turn and kept pairs, the same
estimate and the same transcript for the summariser.
"""

from __future__ import annotations

import copy
import random
from typing import Any, Literal, NamedTuple

import pytest

from bareagent_compact import (
    Action,
    Compactor,
    _micro_compact,
    _serialize,
    dialects,
    estimate_tokens,
    find_orphans,
    repair_tool_pairs,
)
from bareagent_compact.dialects import (
    Kind,
    anthropic,
    kind,
    openai_chat,
    openai_responses,
    turn_starts,
)
from converters import (
    CONVERTERS,
    break_pairs,
    convert_record,
    random_history,
    to_chat,
    to_responses,
)

CASES = 400


def _run(
    history: list[dict[str, Any]], options: dict[str, Any], force: bool
) -> tuple[list[dict[str, Any]], Any, list[Any], list[Any]]:
    prompts: list[Any] = []
    archived: list[Any] = []

    def provider(prompt: list[dict[str, Any]]) -> str:
        prompts.append(prompt)
        return "SUMMARY of the work"

    compactor = Compactor(provider, archive=archived.append, **options)
    messages = copy.deepcopy(history)
    result = compactor(messages, force=force)
    return messages, result, prompts, archived


@pytest.mark.parametrize("dialect", sorted(CONVERTERS))
def test_compacting_and_converting_commute_over_random_histories(dialect: str) -> None:
    convert = CONVERTERS[dialect]
    rng = random.Random(f"commute-{dialect}")
    fired = 0
    for case in range(CASES):
        history = random_history(rng)
        options = {
            "keep_recent": rng.randint(0, 4),
            "keep_tool_pairs": rng.random() < 0.75,
            "threshold": rng.choice((0, 50, 200, 10_000)),
        }
        force = rng.random() < 0.3
        converted = convert(history)
        assert estimate_tokens(converted) == estimate_tokens(history), case
        assert _serialize(converted) == _serialize(history), case
        anthropic, a_result, a_prompts, a_archived = _run(history, options, force)
        openai, o_result, o_prompts, o_archived = _run(converted, options, force)
        assert openai == convert(anthropic), (case, options, force)
        assert o_result == a_result, (case, options, force)
        assert o_prompts == a_prompts, case
        assert o_archived == [convert_record(r, dialect) for r in a_archived], case
        fired += a_result.action is Action.FULL
    assert fired > CASES // 4  # the property was tested on real rebuilds, not only no-ops


@pytest.mark.parametrize("dialect", sorted(CONVERTERS))
def test_orphans_are_found_alike_in_every_dialect(dialect: str) -> None:
    convert = CONVERTERS[dialect]
    rng = random.Random(f"orphans-{dialect}")
    for case in range(CASES):
        history = random_history(rng)
        broken = break_pairs(history, rng)
        expected = sorted((o.kind, o.tool_use_id) for o in find_orphans(broken))
        converted = convert(broken)
        found = sorted((o.kind, o.tool_use_id) for o in find_orphans(converted))
        assert found == expected, case
        repaired = copy.deepcopy(converted)
        assert repair_tool_pairs(repaired) == len(found)
        assert find_orphans(repaired) == []
        assert repair_tool_pairs(repaired) == 0


def test_chat_tool_messages_are_micro_compacted_as_one_unit_per_run() -> None:
    history = [{"role": "user", "content": "go"}]
    for turn in range(5):
        history += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"a{turn}", "name": "bash", "input": {}},
                {"type": "tool_use", "id": f"b{turn}", "name": "grep", "input": {}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"a{turn}", "content": "x" * 100},
                {"type": "tool_result", "tool_use_id": f"b{turn}", "content": "y" * 50},
            ]},
        ]
    chat = to_chat(history)
    assert _micro_compact(chat) == 4  # two runs of two results, older than the newest three
    tools = [m for m in chat if m["role"] == "tool"]
    assert [m["content"] for m in tools[:4]] == [
        "[truncated: bash result, 100 chars]",
        "[truncated: grep result, 50 chars]",
    ] * 2
    assert all(not m["content"].startswith("[truncated") for m in tools[4:])


def test_chat_tool_call_arguments_are_counted() -> None:
    bare = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "", "arguments": ""}}]}]
    full = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "bash", "arguments": '{"a": 1}'}}]}]
    assert estimate_tokens(bare) == 0
    assert estimate_tokens(full) == estimate_tokens([{"role": "user", "content": 'bash{"a": 1}'}])


def test_responses_outputs_are_counted() -> None:
    output = "log line 42\n" * 2000
    items = [{"type": "function_call_output", "call_id": "c", "output": output}]
    assert estimate_tokens(items) == estimate_tokens([{"role": "user", "content": output}])
    assert estimate_tokens(items) > 5000


def test_a_trailing_run_of_chat_tool_messages_is_the_pending_turn() -> None:
    history = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "looking"},
        {"role": "user", "content": "and?"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "a", "name": "bash", "input": {}},
            {"type": "tool_use", "id": "b", "name": "bash", "input": {}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "fresh A"},
            {"type": "tool_result", "tool_use_id": "b", "content": "fresh B"},
        ]},
    ]
    chat = to_chat(history)
    call, first, second = chat[-3:]
    prompts: list[Any] = []
    Compactor(lambda p: prompts.append(p) or "S")(chat, force=True)
    assert chat[-3:] == [call, first, second]
    assert chat[-3] is call and chat[-1] is second
    assert "fresh" not in prompts[0][1]["content"]  # results reach the model before any summary
    assert find_orphans(chat) == []


def test_developer_messages_are_kept_like_system_messages() -> None:
    chat = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
        {"role": "user", "content": "next"},
    ]
    prompts: list[Any] = []
    Compactor(lambda p: prompts.append(p) or "S")(chat, force=True)
    assert chat[0] == {"role": "developer", "content": "Be brief."}
    assert "Be brief" not in prompts[0][1]["content"]


def test_responses_reasoning_and_opaque_items_stay_with_their_assistant_turn() -> None:
    items = [
        {"role": "user", "content": "find it"},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}]},
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "found"},
    ]
    assert [kind(m) for m in items] == [
        Kind.USER, Kind.ASSISTANT, Kind.ASSISTANT, Kind.ASSISTANT, Kind.RESULT,
    ]
    assert turn_starts(items) == [0, 1, 4]
    tail = items[1:]
    Compactor(lambda p: "S")(items, force=True)
    assert items == [{"role": "user", "content": "[Context Compressed]\nS"}, *tail]


def test_responses_history_round_trip_through_compaction_stays_valid() -> None:
    history = [{"role": "user", "content": "task"}]
    for turn in range(6):
        history += [
            {"role": "assistant", "content": [
                {"type": "text", "text": f"step {turn}"},
                {"type": "tool_use", "id": f"t{turn}", "name": "bash", "input": {"cmd": "ls"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"t{turn}", "content": "file " * 200},
            ]},
        ]
    items = to_responses(history)
    result = Compactor(lambda p: "S", threshold=100)(items)
    assert result.action is Action.FULL
    assert find_orphans(items) == []
    assert items[0]["content"].startswith("[Context Compressed]")
    assert [m.get("type") for m in items[1:]] == [
        "message",
        "function_call",
        "function_call_output",
    ]


# ------------------------------------------------------------ the dialect layer itself


def test_every_dialect_module_answers_the_same_operations() -> None:
    for module in (anthropic, openai_chat, openai_responses):
        for operation in ("calls", "results", "result_slots"):
            assert callable(getattr(module, operation)), (module.__name__, operation)


def test_typed_item_is_the_one_test_for_a_responses_item() -> None:
    assert dialects.typed_item({"type": "function_call", "call_id": "c"}) == "function_call"
    assert dialects.typed_item({"type": "", "role": "user"}) == ""
    assert dialects.typed_item({"type": "message", "role": "user"}) is None
    assert dialects.typed_item({"role": "user", "content": "x"}) is None
    assert dialects.typed_item({"type": 3, "role": "user"}) is None


def test_calls_and_results_are_read_alike_in_every_dialect() -> None:
    rng = random.Random("calls-and-results")
    for _ in range(50):
        history = random_history(rng)
        expected = (
            [c.call_id for m in history for c in dialects.calls(m)],
            [i for m in history for _, i in dialects.results(m)],
        )
        for convert in (to_chat, to_responses):
            converted = convert(history)
            assert (
                [c.call_id for m in converted for c in dialects.calls(m)],
                [i for m in converted for _, i in dialects.results(m)],
            ) == expected


class _Unpaired(NamedTuple):
    kind: Literal["tool_use", "tool_result"]
    tool_use_id: str | None


def test_an_anthropic_rewrite_keeps_results_first_and_turns_orphans_into_text() -> None:
    message: dict[str, Any] = {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "gone", "content": "old", "is_error": True},
        {"type": "tool_result", "tool_use_id": "ok", "content": "fine"},
    ]}
    moved = dialects.rewrite_unpaired(message, {0: _Unpaired("tool_result", "gone")})
    assert moved is False
    assert message["content"] == [
        {"type": "tool_result", "tool_use_id": "ok", "content": "fine"},
        {"type": "text", "text": "(result of tool call gone, error, whose call is not in the "
                                 "history) old"},
    ]


def test_a_chat_rewrite_drops_the_unanswered_call_and_appends_its_rendering() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    message: dict[str, Any] = {"role": "assistant", "content": "look", "tool_calls": [call]}
    assert dialects.rewrite_unpaired(message, {0: _Unpaired("tool_use", "c1")}) is False
    assert message == {
        "role": "assistant",
        "content": "look\n(tool call c1 without a result) [tool_use:ls] {}",
    }
    tool: dict[str, Any] = {"role": "tool", "tool_call_id": "c9", "content": "out"}
    assert dialects.rewrite_unpaired(tool, {0: _Unpaired("tool_result", "c9")}) is True
    assert tool == {
        "role": "user",
        "content": "(result of tool call c9, whose call is not in the history) out",
    }


def test_a_responses_rewrite_makes_a_user_message_or_an_assistant_item() -> None:
    output: dict[str, Any] = {"type": "function_call_output", "call_id": "c", "output": "o"}
    assert dialects.rewrite_unpaired(output, {0: _Unpaired("tool_result", "c")}) is True
    assert output == {
        "role": "user",
        "content": "(result of tool call c, whose call is not in the history) o",
    }
    call: dict[str, Any] = {
        "type": "function_call", "call_id": "d", "name": "ls", "arguments": '{"a": 1}'
    }
    assert dialects.rewrite_unpaired(call, {0: _Unpaired("tool_use", "d")}) is False
    assert call == {"type": "message", "role": "assistant", "content": [{
        "type": "output_text",
        "text": '(tool call d without a result) [tool_use:ls] {"a": 1}',
        "annotations": [],
    }]}


class _Gathered:
    def __init__(self) -> None:
        self.strings: list[str] = []
        self.json_values: list[Any] = []
        self.added: list[tuple[list[Any], int]] = []

    def add(self, values: Any, depth: int) -> None:
        self.added.append((list(values), depth))


def test_extra_parts_are_the_chat_calls_and_what_a_responses_item_carries() -> None:
    parts = _Gathered()
    dialects.add_extra_parts(parts, {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}},
    ]})
    dialects.add_extra_parts(parts, {"type": "reasoning", "summary": [{"text": "why"}]})
    dialects.add_extra_parts(parts, {"type": "function_call_output", "call_id": "c", "output": 7})
    dialects.add_extra_parts(parts, {"type": "web_search_call", "id": "w"})
    dialects.add_extra_parts(parts, {"type": "message", "role": "user", "content": "hi"})
    assert parts.strings == ["ls", "{}"]
    assert parts.added == [([{"text": "why"}], 1), ([7], 0)]
    assert parts.json_values == [{"type": "web_search_call", "id": "w"}]


def test_holds_objects_spots_anything_but_a_dict_where_objects_may_be() -> None:
    plain = [{"role": "user", "content": [{"type": "text", "text": "x"}]},
             {"role": "assistant", "content": None, "tool_calls": [{"id": "c"}]}]
    assert dialects.holds_objects(plain) is False
    assert dialects.holds_objects([*plain, object()]) is True
    assert dialects.holds_objects([{"role": "user", "content": [object()]}]) is True
    assert dialects.holds_objects([{"role": "assistant", "tool_calls": [object()]}]) is True


def test_a_dumped_chat_message_takes_the_request_shape() -> None:
    data = {
        "role": "assistant",
        "content": "x",
        "annotations": [],
        "parsed": {"a": 1},
        "audio": {"id": "au", "data": "..."},
        "tool_calls": [{"id": "c", "function": {"name": "f", "parsed_arguments": {}}}],
    }
    assert openai_chat.request_shape(data) == {
        "role": "assistant",
        "content": "x",
        "audio": {"id": "au"},
        "tool_calls": [{"id": "c", "function": {"name": "f"}}],
    }


@pytest.mark.parametrize(("role", "hint"), [
    ("tool-response", "smolagents"), ("tool-call", "smolagents"),
    ("human", "LangChain"), ("ai", "LangChain"), ("narrator", None),
])
def test_an_unknown_role_is_a_type_error_naming_it_before_any_change(
    role: str, hint: str | None
) -> None:
    messages: list[Any] = [
        {"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
        {"role": role, "content": "x" * 4000},
    ]
    before = copy.deepcopy(messages)
    for call in (
        lambda: Compactor(lambda p: "S", threshold=10)(messages, force=True),
        lambda: _micro_compact(messages, keep_recent=0),
        lambda: find_orphans(messages),
    ):
        with pytest.raises(TypeError, match=rf"messages\[2\]\['role'\] is {role!r}") as caught:
            call()
        assert "'assistant', 'developer', 'function', 'system', 'tool', 'user'" in str(caught.value)
        assert hint is None or hint in str(caught.value)
    assert messages == before


def test_every_role_a_built_in_dialect_speaks_is_accepted() -> None:
    messages: list[Any] = [
        {"role": "system", "content": "s"}, {"role": "developer", "content": "d"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "assistant", "content": None, "function_call": {"name": "g", "arguments": "{}"}},
        {"role": "function", "name": "g", "content": "r"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "t"}]},
        {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c2", "output": "r"},
        {"role": "user", "content": "next"},
    ]
    assert Compactor(lambda p: "S")(messages).action is Action.NONE
    find_orphans(messages)


def test_the_roles_of_a_registered_dialect_are_accepted() -> None:
    class Narrated(type(anthropic.DIALECT)):  # type: ignore[misc]
        name = "narrated"
        roles = frozenset({"narrator"})

    messages: list[Any] = [{"role": "user", "content": "a"}, {"role": "narrator", "content": "b"}]
    with pytest.raises(TypeError, match="narrator"):
        find_orphans(messages)
    dialect = Narrated()
    dialects.register(dialect)
    try:
        assert find_orphans(messages) == []
    finally:
        dialects.unregister(dialect)
    with pytest.raises(TypeError, match="narrator"):
        find_orphans(messages)
