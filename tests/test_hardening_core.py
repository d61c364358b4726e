"""Hardening of the compaction core: aliased messages, linear tail search, deep names,
malformed token counters, bad arguments up front, and system messages left alone."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from bareagent_compact import (
    Action,
    Compactor,
    JsonlTranscriptManager,
    _micro_compact,
    _serialize,
    estimate_tokens,
    find_orphans,
    repair_tool_pairs,
)
from bareagent_compact.split import paired_tail_start
from conftest import RecordingProvider, tool_history, tool_round


def test_repair_keeps_an_orphans_content_when_one_message_appears_twice() -> None:
    orphan = {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "gone", "content": "precious output"},
            {"type": "text", "text": "and a note"},
        ],
    }
    messages: list[Any] = [{"role": "user", "content": "go"}, orphan, orphan]
    assert repair_tool_pairs(messages) == 2
    assert find_orphans(messages) == []
    for message in messages[1:]:
        texts = [b.get("text", "") for b in message["content"]]
        assert any("precious output" in t for t in texts)
        assert "and a note" in texts


class CountingList(list[Any]):
    """A list that counts the messages read from it by index."""

    reads = 0

    def __getitem__(self, index: Any) -> Any:
        self.reads += 1
        return super().__getitem__(index)


def test_the_kept_tail_search_is_linear_when_results_arrive_late() -> None:
    def reads(turns: int) -> int:
        head = CountingList(
            tool_history(
                turns,
                system=None,
                request="go",
                output=lambda turn: "x",
                tool_id=lambda turn: f"late{turn}",
                after=lambda turn: [
                    {"role": "user", "content": f"note {turn}"},
                    {"role": "assistant", "content": "waiting"},
                ],
            )
        )
        # Each round's result arrives after a note and a reply: move it there.
        for turn in range(turns):
            base = 1 + 4 * turn
            head[base + 1 : base + 4] = [head[base + 2], head[base + 3], head[base + 1]]
        pending = list.pop(head)
        head.reads = 0
        paired_tail_start(head, [pending])
        return head.reads

    small, large = reads(300), reads(2400)
    assert large <= small * 8 * 1.2  # 8x the history: linear reads, not quadratic (64x)


def test_a_deeply_nested_tool_name_is_a_value_error_not_a_recursion_error() -> None:
    name: Any = "bash"
    for _ in range(10_000):
        name = [name]
    messages: list[Any] = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": name}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": "x"}]},
    ]
    with pytest.raises(ValueError, match="nested"):
        _micro_compact(copy.copy(messages), keep_recent=0)
    with pytest.raises(ValueError, match="nested"):
        _serialize(messages)
    with pytest.raises(ValueError, match="nested"):
        deep_use = {"type": "tool_use", "id": "b", "name": name}
        deep_call = {"role": "assistant", "content": [deep_use]}
        nxt = {"role": "user", "content": "next"}
        repair_tool_pairs([messages[0], messages[2], deep_call, nxt])


@pytest.mark.parametrize("bad", [None, "12", float("nan"), 3.5, complex(1, 1), True, -1])
def test_a_malformed_token_count_falls_back_to_the_estimate_with_a_warning(
    bad: Any, caplog: pytest.LogCaptureFixture
) -> None:
    messages = [{"role": "user", "content": "task"}]
    for turn in range(5):
        messages += tool_round(f"t{turn}", "bash", "out " * 30)
    expected = copy.deepcopy(messages)
    _micro_compact(expected)
    with caplog.at_level(logging.WARNING):
        result = Compactor(RecordingProvider(), token_counter=lambda m: bad)(messages)
    assert result.tokens_before == estimate_tokens(expected)
    assert messages == expected
    assert any("token_counter" in r.getMessage() for r in caplog.records)


def test_a_raising_token_counter_falls_back_to_the_estimate() -> None:
    def broken(messages: Any) -> int:
        raise RuntimeError("tokenizer missing")

    messages = [{"role": "user", "content": "hi"}]
    result = Compactor(RecordingProvider(), token_counter=broken)(messages)
    assert result.tokens_before == estimate_tokens(messages)


def test_a_session_id_the_archive_refuses_fails_at_construction(tmp_path: Any) -> None:
    store = JsonlTranscriptManager(tmp_path)
    with pytest.raises(ValueError):
        Compactor(RecordingProvider(), archive=store.archive, session_id="../\x00escape")
    compactor = Compactor(RecordingProvider(), archive=store.archive)
    with pytest.raises(ValueError):
        compactor.set_session_id("../\x00escape")


@pytest.mark.parametrize("force", ["false", 1, None])
def test_force_is_type_checked_before_anything_changes(force: Any) -> None:
    messages = [{"role": "user", "content": "task"}]
    for turn in range(5):
        messages += tool_round(f"t{turn}", "bash", "out")
    before = copy.deepcopy(messages)
    with pytest.raises(TypeError, match="force must be a bool"):
        Compactor(RecordingProvider())(messages, force=force)
    assert messages == before


def test_micro_compaction_never_touches_a_tool_result_inside_a_system_message() -> None:
    odd_system = {
        "role": "system",
        "content": [{"type": "tool_result", "tool_use_id": "s", "content": "system data"}],
    }
    messages: list[Any] = [odd_system, {"role": "user", "content": "go"}]
    for turn in range(5):
        messages += tool_round(f"t{turn}", "bash", "out")
    _micro_compact(messages, keep_recent=0)
    assert odd_system["content"][0]["content"] == "system data"
    assert Compactor(RecordingProvider())(messages, force=True).action is Action.FULL
    assert messages[0] == odd_system
