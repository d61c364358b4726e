"""The three dialects are one behaviour: compacting a history and converting it commute.

For a random Anthropic-form history ``H`` and its faithful conversion ``c(H)`` to
OpenAI Chat or Responses form, ``c(compact(H)) == compact(c(H))``: the same units
truncated with the same markers, the same pending turn and kept pairs, the same
estimate and the same transcript for the summariser.
"""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from bareagent_compact import (
    Action,
    Compactor,
    _micro_compact,
    _serialize,
    estimate_tokens,
    find_orphans,
    repair_tool_pairs,
)
from bareagent_compact.dialects import Kind, kind, turn_starts
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
