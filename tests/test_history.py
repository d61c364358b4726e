"""The history cache: a call reads again only what changed since the last one,
and what it reports is what a call reading everything reports."""

from __future__ import annotations

import random
from typing import Any

import pytest

import bareagent_compact.history as history_module
import bareagent_compact.micro as micro_module
from bareagent_compact import Action, Compactor, estimate_tokens
from conftest import tool_history

NEVER = 10**9


def no_summary(prompt: Any) -> str:
    raise AssertionError("no summary expected below the threshold")


def round_of(turn: int, size: int = 400) -> list[dict[str, Any]]:
    call = {"type": "tool_use", "id": f"n{turn}", "name": "grep", "input": {"q": str(turn)}}
    result = {"type": "tool_result", "tool_use_id": f"n{turn}", "content": "r" * size}
    return [{"role": "assistant", "content": [call]}, {"role": "user", "content": [result]}]


@pytest.fixture
def weighed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The ``id`` of every message the cache weighs."""
    seen: list[int] = []
    real = history_module.messages_quarters

    def counting(messages: list[dict[str, Any]]) -> int:
        seen.extend(map(id, messages))
        return real(messages)

    monkeypatch.setattr(history_module, "messages_quarters", counting)
    return seen


def test_a_call_on_an_unchanged_history_weighs_nothing_again(weighed: list[int]) -> None:
    messages = tool_history(20)
    compactor = Compactor(no_summary, threshold=NEVER)
    compactor(messages)
    weighed.clear()
    result = compactor(messages)
    assert weighed == []
    assert result.action is Action.NONE
    assert result.tokens_before == estimate_tokens(messages)


def test_an_append_turn_weighs_only_the_new_messages_and_the_result_it_truncated(
    weighed: list[int],
) -> None:
    messages = tool_history(20)
    compactor = Compactor(no_summary, threshold=NEVER)
    compactor(messages)
    weighed.clear()
    messages += round_of(99)
    result = compactor(messages)
    assert result.action is Action.MICRO and result.truncated == 1
    truncated = [m for m in messages[:-2] if "[truncated" in str(m["content"])]
    assert len(weighed) == 4  # the two new messages, the truncated one before and after
    assert set(map(id, messages[-2:])) | {id(truncated[-1])} <= set(weighed)
    assert result.tokens_before == estimate_tokens(messages)


def test_in_place_edits_are_seen_by_the_count() -> None:
    rng = random.Random(7)
    messages = tool_history(12, output=lambda turn: "o" * (50 + 30 * turn))
    compactor = Compactor(no_summary, threshold=NEVER)
    for step in range(60):
        message = rng.choice(messages[1:])
        content = message["content"]
        if isinstance(content, str):
            message["content"] = content + " more" * rng.randint(1, 20)
        elif content and "text" in content[0]:
            content[0]["text"] += "!" * rng.randint(1, 50)
        elif content and content[0].get("type") == "tool_use":
            content[0]["input"].setdefault("extra", []).append("word " * rng.randint(1, 9))
        else:
            messages.append({"role": "user", "content": "ok " * rng.randint(1, 30)})
        result = compactor(messages)
        assert result.tokens_before == estimate_tokens(messages), step


def test_an_invalid_message_is_refused_on_every_call() -> None:
    messages = tool_history(3)
    compactor = Compactor(no_summary, threshold=NEVER)
    compactor(messages)
    messages.append({"role": 5, "content": "bad"})
    for _ in range(2):
        with pytest.raises(TypeError, match=r"messages\[\d+\]\['role'\] must be a str"):
            compactor(messages)


def test_forget_makes_a_change_of_type_between_equal_values_visible() -> None:
    call = {"type": "tool_use", "id": "c", "name": "sum", "input": {"values": [1] * 400}}
    messages = [
        {"role": "user", "content": "add these"},
        {"role": "assistant", "content": [call]},
    ]
    compactor = Compactor(no_summary, threshold=NEVER)
    before = compactor(messages).tokens_before
    call["input"]["values"] = [1.0] * 400  # equal by ==, heavier as JSON text
    assert compactor(messages).tokens_before == before  # the documented blind spot
    compactor.forget()
    after = compactor(messages).tokens_before
    assert after == estimate_tokens(messages) > before


def test_the_micro_scan_reads_only_past_what_it_knows(monkeypatch: pytest.MonkeyPatch) -> None:
    starts: list[int] = []
    real = micro_module._stale_slots

    def recording(messages: Any, end: int, start: int = 0) -> Any:
        starts.append(start)
        return real(messages, end, start)

    monkeypatch.setattr(micro_module, "_stale_slots", recording)
    messages = tool_history(30)
    compactor = Compactor(no_summary, threshold=NEVER)
    compactor(messages)
    assert starts == [0]
    messages += round_of(100)
    compactor(messages)
    assert starts[-1] > len(messages) // 2
    messages[3]["content"] = "edited"  # before what is known: read from the start again
    messages += round_of(101)
    compactor(messages)
    assert starts[-1] == 0


def test_a_tool_renamed_in_place_is_named_in_the_marker_of_its_result() -> None:
    messages = tool_history(6, name=lambda turn: "bash")
    compactor = Compactor(no_summary, threshold=NEVER)
    compactor(messages)
    last_call = next(  # the newest round's call: its result is still kept whole
        block
        for message in reversed(messages)
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    )
    last_call["name"] = "renamed_tool"
    for turn in range(4):
        messages += round_of(200 + turn)
        compactor(messages)
    markers = [
        block["content"]
        for message in messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result" and block["tool_use_id"] == last_call["id"]
    ]
    assert markers and markers[0].startswith("[truncated: renamed_tool result")
