"""Tool call pairing: find_orphans and repair_tool_pairs."""

from __future__ import annotations

import copy
import random
from typing import Any

import pytest

from bareagent_compact import Orphan, find_orphans, repair_tool_pairs
from conftest import tool_round
from converters import CONVERTERS, break_pairs, random_history


def test_a_paired_history_has_no_orphans() -> None:
    messages = [
        {"role": "user", "content": "go"},
        *tool_round("a", "bash", "ok"),
        *tool_round("b", "ls", "x"),
    ]
    assert find_orphans(messages) == []


def test_a_result_without_its_call_is_an_orphan() -> None:
    messages = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "gone", "content": "x"}],
        }
    ]
    assert find_orphans(messages) == [Orphan("tool_result", 0, 0, "gone")]


def test_a_result_before_its_call_is_an_orphan() -> None:
    call, result = tool_round("a", "bash", "ok")
    messages = [result, call, {"role": "user", "content": "next"}]
    assert find_orphans(messages) == [
        Orphan("tool_result", 0, 0, "a"),
        Orphan("tool_use", 1, 0, "a"),
    ]


def test_a_call_without_a_result_is_an_orphan_unless_it_is_last() -> None:
    call, _ = tool_round("a", "bash", "ok")
    assert find_orphans([call]) == []  # its result is still to come
    messages = [call, {"role": "user", "content": "never ran"}]
    assert find_orphans(messages) == [Orphan("tool_use", 0, 0, "a")]


def test_repair_turns_orphans_into_text_and_keeps_their_content() -> None:
    call, _ = tool_round("a", "bash", "ok", {"command": "ls"})
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "gone", "content": "OUTPUT"}],
        },
        call,
        {"role": "user", "content": "next"},
    ]
    assert repair_tool_pairs(messages) == 2
    assert find_orphans(messages) == []
    first = messages[0]["content"][0]
    assert first["type"] == "text" and "OUTPUT" in first["text"] and "gone" in first["text"]
    second = messages[1]["content"][0]
    assert second["type"] == "text" and '[tool_use:bash] {"command": "ls"}' in second["text"]


def test_repair_is_deterministic_and_idempotent() -> None:
    messages = [
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x", "content": "1"}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "y", "name": "n", "input": {}}],
        },
        {"role": "user", "content": "end"},
    ]
    twin = copy.deepcopy(messages)
    repair_tool_pairs(messages)
    repair_tool_pairs(twin)
    assert messages == twin
    snapshot = copy.deepcopy(messages)
    assert repair_tool_pairs(messages) == 0
    assert messages == snapshot


def test_repair_leaves_a_paired_history_untouched() -> None:
    messages = [{"role": "user", "content": "go"}, *tool_round("a", "bash", "ok")]
    before = copy.deepcopy(messages)
    assert repair_tool_pairs(messages) == 0
    assert messages == before


def test_find_orphans_rejects_malformed_messages() -> None:
    with pytest.raises(TypeError, match=r"messages\[0\]"):
        find_orphans(["x"])  # type: ignore[list-item]


def test_repair_moves_converted_text_after_the_valid_results() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "ok", "name": "bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "gone", "content": "stale"},
                {"type": "tool_result", "tool_use_id": "ok", "content": "fresh"},
            ],
        },
    ]
    assert repair_tool_pairs(messages) == 1
    content = messages[1]["content"]
    assert content[0] == {"type": "tool_result", "tool_use_id": "ok", "content": "fresh"}
    assert content[1]["type"] == "text" and "stale" in content[1]["text"]
    assert find_orphans(messages) == []


def test_repair_keeps_images_and_the_error_flag_of_an_orphaned_result() -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
    }
    result = {
        "type": "tool_result",
        "tool_use_id": "gone",
        "is_error": True,
        "content": [{"type": "text", "text": "screenshot"}, image],
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": [result]}]
    repair_tool_pairs(messages)
    content = messages[0]["content"]
    assert "gone" in content[0]["text"] and "error" in content[0]["text"]
    assert content[1:] == [{"type": "text", "text": "screenshot"}, image]


def test_system_messages_between_a_call_and_its_result_do_not_break_the_pair() -> None:
    call, result = tool_round("a", "bash", "ok")
    messages = [call, {"role": "system", "content": "reminder"}, result]
    assert find_orphans(messages) == []


def test_a_result_that_arrives_a_message_late_is_an_orphan() -> None:
    call, result = tool_round("a", "bash", "ok")
    messages = [call, {"role": "user", "content": "interjection"}, result]
    assert [o.kind for o in find_orphans(messages)] == ["tool_use", "tool_result"]


_MISSING = object()
ODD_IDS: tuple[Any, ...] = (7, None, _MISSING, "", {"id": "x"}, 2.5, ["x"], True)
_ID_KEYS = {"tool_use": "id", "tool_result": "tool_use_id", "function_call": "call_id"}


def _id_holders(message: dict[str, Any]) -> list[tuple[dict[str, Any], str]]:
    """Every dict of ``message`` that holds a call id, with its key, in any dialect."""
    holders: list[tuple[dict[str, Any], str]] = []
    if message.get("type") in ("function_call", "function_call_output"):
        holders.append((message, "call_id"))
    if message.get("role") == "tool":
        holders.append((message, "tool_call_id"))
    holders += [(call, "id") for call in message.get("tool_calls") or ()]
    content = message.get("content")
    for block in content if isinstance(content, list) else ():
        if isinstance(block, dict) and block.get("type") in _ID_KEYS:
            holders.append((block, _ID_KEYS[block["type"]]))
    return holders


def _odd_ids(messages: list[dict[str, Any]], rng: random.Random) -> None:
    """Give some calls and results an id that is not a non-empty string, or none."""
    for message in messages:
        for holder, key in _id_holders(message):
            if rng.random() < 0.2:
                odd = rng.choice(ODD_IDS)
                if odd is _MISSING:
                    holder.pop(key, None)
                else:
                    holder[key] = copy.deepcopy(odd)


@pytest.mark.parametrize("dialect", ["anthropic", "chat", "responses"])
def test_find_orphans_and_repair_agree_over_histories_with_odd_call_ids(dialect: str) -> None:
    convert = CONVERTERS.get(dialect, lambda history: history)
    rng = random.Random(f"odd-ids-{dialect}")
    odd = 0
    for case in range(400):
        messages = convert(break_pairs(random_history(rng), rng))
        _odd_ids(messages, rng)
        orphans = find_orphans(messages)
        odd += any(o.tool_use_id is None or o.tool_use_id == "" for o in orphans)
        repaired = copy.deepcopy(messages)
        assert repair_tool_pairs(repaired) == len(orphans), case
        assert find_orphans(repaired) == [], case
        assert repair_tool_pairs(repaired) == 0, case
    assert odd > 50  # odd ids were really met


@pytest.mark.parametrize("odd", ODD_IDS, ids=repr)
def test_an_unanswered_tool_use_with_an_odd_id_is_repaired_into_text(odd: Any) -> None:
    block: dict[str, Any] = {"type": "tool_use", "name": "bash", "input": {"cmd": "ls"}}
    if odd is not _MISSING:
        block["id"] = odd
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [block]},
        {"role": "user", "content": "never ran"},
    ]
    assert len(find_orphans(messages)) == 1
    assert repair_tool_pairs(messages) == 1
    text = messages[1]["content"][0]
    assert text["type"] == "text" and '[tool_use:bash] {"cmd": "ls"}' in text["text"]
    assert find_orphans(messages) == []


def _parallel_calls(*ids: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": i, "name": "bash", "input": {}} for i in ids],
    }


def _results(*ids: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": i, "content": i} for i in ids],
    }


def test_results_split_over_consecutive_user_messages_are_paired() -> None:
    # The Messages API joins consecutive user messages into one turn, as Claude Code
    # logs one user record per parallel result.
    messages = [
        {"role": "user", "content": "go"},
        _parallel_calls("a", "b", "c"),
        _results("a"),
        _results("b"),
        _results("c"),
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": "done"},
    ]
    assert find_orphans(messages) == []
    before = copy.deepcopy(messages)
    assert repair_tool_pairs(messages) == 0
    assert messages == before


def test_a_result_after_text_in_the_joined_user_turn_is_an_orphan() -> None:
    # Joined, the turn reads [text, tool_result]: the result no longer opens it.
    messages = [
        _parallel_calls("a"),
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "first"},
                {"type": "tool_result", "tool_use_id": "a", "content": "1"},
            ],
        },
    ]
    assert [o.kind for o in find_orphans(messages)] == ["tool_use", "tool_result"]


def test_repair_puts_a_converted_result_after_the_results_that_follow_it() -> None:
    messages = [
        {"role": "user", "content": "go"},
        _parallel_calls("a", "b"),
        _results("gone"),
        _results("a"),
        _results("b"),
    ]
    assert repair_tool_pairs(messages) == 1
    assert messages[2:4] == [_results("a"), _results("b")]
    assert messages[4]["content"][0]["text"].startswith("(result of tool call gone")
    assert find_orphans(messages) == []


def test_repair_refuses_a_chat_call_whose_content_it_cannot_join_naming_its_index() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": 7,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {"role": "user", "content": "never ran"},
    ]
    before = copy.deepcopy(messages)
    with pytest.raises(TypeError, match=r"messages\[1\]\['content'\]"):
        repair_tool_pairs(messages)
    assert messages == before


def test_repair_of_a_call_block_inside_a_chat_tool_message_keeps_the_result() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c",
            "content": [
                {"type": "text", "text": "out"},
                {"type": "tool_use", "id": "z", "name": "n", "input": {}},
            ],
        },
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": "ok"},
    ]
    assert find_orphans(messages) == [Orphan("tool_use", 2, 1, "z")]
    assert repair_tool_pairs(messages) == 1
    assert messages[2]["role"] == "tool" and messages[2]["tool_call_id"] == "c"
    assert messages[2]["content"][1]["text"].startswith("(tool call z without a result)")
    assert find_orphans(messages) == []
