"""SPEC 11.1: micro-compaction of old tool results."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bareagent_compact import _micro_compact, _serialize
from conftest import tool_history


def history(rounds: int, size: int = 50) -> list[dict[str, Any]]:
    return tool_history(
        rounds,
        system="sys",
        request="go",
        output=lambda i: f"{i}" * (size + i),
        name=lambda i: f"tool{i}",
    )


def results(messages: list[dict[str, Any]]) -> list[Any]:
    return [
        b["content"]
        for m in messages
        if isinstance(m["content"], list)
        for b in m["content"]
        if b["type"] == "tool_result"
    ]


def test_micro_compact_keeps_the_three_newest_tool_result_messages() -> None:
    messages = history(5)
    originals = results(messages)
    assert _micro_compact(messages) == 2
    assert results(messages)[2:] == originals[2:]
    assert results(messages)[:2] == [
        "[truncated: tool0 result, 50 chars]",
        "[truncated: tool1 result, 51 chars]",
    ]


def test_micro_compact_uses_the_tool_name_from_the_tool_use_map() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "a", "name": "bash", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x" * 1204}],
        },
    ]
    _micro_compact(messages, keep_recent=0)
    assert messages[1]["content"][0]["content"] == "[truncated: bash result, 1204 chars]"


def test_micro_compact_names_unknown_tools_unknown() -> None:
    messages = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "zz", "content": "abc"}],
        }
    ]
    _micro_compact(messages, keep_recent=0)
    assert messages[0]["content"][0]["content"] == "[truncated: unknown result, 3 chars]"


def test_micro_compact_truncates_every_result_in_an_old_message() -> None:
    message = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "a", "content": "aaaa"},
            {"type": "text", "text": "between"},
            {"type": "tool_result", "tool_use_id": "b", "content": "bb"},
        ],
    }
    messages = [message, *history(3)[1:]]
    assert _micro_compact(messages) == 2
    assert message["content"][0]["content"] == "[truncated: unknown result, 4 chars]"
    assert message["content"][1] == {"type": "text", "text": "between"}
    assert message["content"][2]["content"] == "[truncated: unknown result, 2 chars]"


def test_micro_compact_counts_list_results_by_their_serialised_text() -> None:
    content = [{"type": "text", "text": "line one"}, {"type": "text", "text": "第二行"}]
    messages = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "x", "content": content}],
        }
    ]
    rendered = _serialize([{"role": "user", "content": content}]).split("\n", 1)[1]
    _micro_compact(messages, keep_recent=0)
    assert rendered == "line one\n第二行"
    assert (
        messages[0]["content"][0]["content"]
        == f"[truncated: unknown result, {len(rendered)} chars]"
    )


def test_micro_compact_keeps_every_other_key_of_the_block() -> None:
    block = {
        "type": "tool_result",
        "tool_use_id": "x",
        "content": "boom",
        "is_error": True,
        "cache_control": {"type": "ephemeral"},
    }
    messages = [{"role": "user", "content": [block]}]
    _micro_compact(messages, keep_recent=0)
    assert block == {
        "type": "tool_result",
        "tool_use_id": "x",
        "content": "[truncated: unknown result, 4 chars]",
        "is_error": True,
        "cache_control": {"type": "ephemeral"},
    }


def test_micro_compact_skips_already_truncated_results() -> None:
    marker = "[truncated: bash result, 99 chars]"
    messages = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "x", "content": marker}],
        }
    ]
    assert _micro_compact(messages, keep_recent=0) == 0
    assert messages[0]["content"][0]["content"] == marker


def test_micro_compact_is_idempotent() -> None:
    messages = history(6)
    _micro_compact(messages)
    once = copy.deepcopy(messages)
    assert _micro_compact(messages) == 0
    assert messages == once


def test_micro_compact_never_touches_text_system_or_tool_use() -> None:
    messages = history(6)
    messages.insert(
        3, {"role": "assistant", "content": [{"type": "text", "text": "thinking aloud"}]}
    )
    messages.append({"role": "system", "content": "reminder"})
    before = copy.deepcopy(messages)
    _micro_compact(messages, keep_recent=0)
    for old, new in zip(before, messages, strict=True):
        if not isinstance(old["content"], list):
            assert new == old
            continue
        for old_block, new_block in zip(old["content"], new["content"], strict=True):
            if old_block["type"] == "tool_result":
                assert new_block["content"].startswith("[truncated:")
            else:
                assert new_block == old_block


def test_micro_compact_mutates_in_place_without_copying() -> None:
    messages = history(5)
    ids = [id(m) for m in messages]
    block = messages[3]["content"][0]
    _micro_compact(messages)
    assert [id(m) for m in messages] == ids
    assert messages[3]["content"][0] is block
    assert block["content"].startswith("[truncated:")


def test_micro_compact_keep_recent_zero_truncates_all() -> None:
    messages = history(4)
    assert _micro_compact(messages, keep_recent=0) == 4
    assert all(r.startswith("[truncated:") for r in results(messages))


def test_micro_compact_with_few_results_changes_nothing() -> None:
    messages = history(3)
    before = copy.deepcopy(messages)
    assert _micro_compact(messages) == 0
    assert messages == before


def test_micro_compact_counts_messages_not_blocks() -> None:
    # One message with three results counts as one tool_result message.
    big = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": str(i), "content": "r"} for i in range(3)
        ],
    }
    messages = [big, *history(2)[1:]]
    assert _micro_compact(messages) == 0


def test_micro_compact_rejects_a_negative_keep_recent() -> None:
    with pytest.raises(ValueError, match="keep_recent"):
        _micro_compact(history(2), keep_recent=-1)
    with pytest.raises(TypeError, match="keep_recent"):
        _micro_compact(history(2), keep_recent="3")  # type: ignore[arg-type]


def test_micro_compact_rejects_malformed_messages_before_mutating() -> None:
    messages: list[Any] = history(5)
    messages.append("not a message")
    before = copy.deepcopy(messages)
    with pytest.raises(TypeError, match=r"messages\[12\]"):
        _micro_compact(messages, keep_recent=0)
    assert messages == before


def test_micro_compact_keeps_a_result_object_shared_with_a_kept_message() -> None:
    messages = history(4)
    shared = messages[3]  # the oldest tool_result message, appended again as the newest
    messages.append(shared)
    _micro_compact(messages)
    assert messages[-1]["content"][0]["content"] == "0" * 50
