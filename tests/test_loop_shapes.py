"""Loop shapes beyond "append to the same list": a history made anew from JSON
every turn, and SDK objects appended. A call reads only what is new, and reports
what a compactor reading everything reports."""

from __future__ import annotations

import json
from typing import Any

import pytest

import bareagent_compact.dialects.server as server_module
import bareagent_compact.ledger.entries as entries_module
import bareagent_compact.plain as plain_module
from bareagent_compact import Compactor, estimate_tokens
from conftest import tool_history

NEVER = 10**9


def no_summary(prompt: Any) -> str:
    raise AssertionError("no summary expected below the threshold")


def turn_of(index: int) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": f"loop{index}", "name": "grep", "input": {"q": index}}
    result = {"type": "tool_result", "tool_use_id": f"loop{index}", "content": "r" * 300}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


class Block:
    """An SDK-like content block: read through ``model_dump``."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return dict(self.data)


@pytest.fixture
def read_by_ledger(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages the usage ledger reads (features) per call."""
    seen: list[int] = []
    real = entries_module.read_message

    def counting(message: Any) -> Any:
        seen.append(1)
        return real(message)

    monkeypatch.setattr(entries_module, "read_message", counting)
    return seen


def test_a_history_made_anew_each_turn_is_not_read_again_by_the_ledger(
    read_by_ledger: list[int],
) -> None:
    messages = tool_history(30)
    compactor = Compactor(no_summary, threshold=NEVER)
    reference = Compactor(no_summary, threshold=NEVER)
    same = json.loads(json.dumps(messages))
    for index in range(6):
        messages = json.loads(json.dumps(messages)) + turn_of(index)
        same += turn_of(index)
        read_by_ledger.clear()
        result = compactor(messages)
        compactor.record_usage(messages, estimate_tokens(messages) + 900)
        expected = reference(same)
        reference.record_usage(same, estimate_tokens(same) + 900)
        assert messages == same
        assert result == expected
        if index >= 2:  # the first reports settle the ledger
            # The two new messages, and the result micro-compaction truncated.
            assert len(read_by_ledger) <= 3 * 2


def test_a_history_made_anew_each_turn_is_scanned_for_server_blocks_only_past_the_old_part(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    starts: list[int] = []
    real = server_module.server_compaction_index

    def recording(messages: Any, start: int = 0) -> int:
        starts.append(start)
        return real(messages, start)

    monkeypatch.setattr(server_module, "server_compaction_index", recording)
    messages = tool_history(20)
    compactor = Compactor(no_summary, threshold=NEVER)
    compactor(messages)
    for index in range(3):
        before = len(messages)
        messages = json.loads(json.dumps(messages)) + turn_of(index)
        starts.clear()
        compactor(messages)
        assert starts and min(starts) >= before


def test_sdk_objects_appended_are_converted_without_reading_the_whole_history(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sizes: list[int] = []
    real = plain_module.holds_objects

    def recording(messages: Any) -> bool:
        sizes.append(len(messages))
        return real(messages)

    monkeypatch.setattr(plain_module, "holds_objects", recording)
    messages = tool_history(30)
    plain = json.loads(json.dumps(messages))
    compactor = Compactor(no_summary, threshold=NEVER)
    reference = Compactor(no_summary, threshold=NEVER)
    compactor(messages)
    reference(plain)
    for index in range(4):
        new = turn_of(index)
        plain += json.loads(json.dumps(new))
        new[0]["content"] = [Block(block) for block in new[0]["content"]]
        messages += new
        sizes.clear()
        result = compactor(messages)
        assert result == reference(plain)
        assert messages == plain
        assert sizes and max(sizes) <= 2  # only the new messages were looked at
