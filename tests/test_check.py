"""check_request: the causes of a 400 visible offline, and no exception on malformed input."""

from __future__ import annotations

import copy
import os
import random
import re
from collections.abc import Callable
from typing import Any

import pytest

from bareagent_compact import check_request, find_orphans, repair_tool_pairs
from converters import CONVERTERS, break_pairs, random_history

# -- malformed input: only the documented TypeError, naming the index ------------------

_NAMED_INDEX = re.compile(r"messages\[\d+\]")


_ODD_NAMES = (
    "user",
    "assistant",
    "tool",
    "system",
    "function",
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "compaction",
)
"""Roles and types that are strings, but may not fit the rest of the message."""


def _odd_value(rng: random.Random) -> Any:
    """A value of a type no field of a message should hold (or of the wrong kind)."""
    return rng.choice(
        [
            7,
            -1,
            2.5,
            True,
            None,
            "",
            " ",
            b"bytes",
            {"x": 1},
            {"type": {"nested": 1}},
            {"type": "text"},
            {"type": "tool_result"},
            {"type": "tool_use"},
            {"type": "thinking"},
            {"type": "compaction"},
            {1, 2},
            frozenset({"a"}),
            [],
            [1, [2]],
            [None],
            [{"type": ["x"]}],
            ("tuple",),
            ["user"],
            {"role": "user"},
            *_ODD_NAMES,
        ]
    )


_KEYS = (
    "role",
    "content",
    "type",
    "tool_calls",
    "tool_call_id",
    "call_id",
    "id",
    "output",
    "summary",
    "name",
    "arguments",
)
_BLOCK_KEYS = ("type", "text", "id", "tool_use_id", "content", "input", "name", "thinking")


def _spoil(target: Any, keys: tuple[str, ...], rng: random.Random) -> None:
    """Give one key of the dict ``target`` an odd value, or remove it."""
    if not isinstance(target, dict):
        return
    key = rng.choice(keys)
    if rng.random() < 0.25:
        target.pop(key, None)
    else:
        target[key] = _odd_value(rng)


def _nested(message: Any, rng: random.Random) -> None:
    """Spoil a block of ``content`` or an entry of ``tool_calls``, or replace it."""
    if not isinstance(message, dict):
        return
    for key in ("content", "tool_calls"):
        items = message.get(key)
        if isinstance(items, list) and items and rng.random() < 0.6:
            position = rng.randrange(len(items))
            if rng.random() < 0.3:
                items[position] = _odd_value(rng)
            elif key == "tool_calls" and isinstance(items[position], dict):
                function = items[position].get("function")
                if isinstance(function, dict) and rng.random() < 0.5:
                    _spoil(function, ("name", "arguments"), rng)
                else:
                    _spoil(items[position], ("id", "type", "function"), rng)
            else:
                _spoil(items[position], _BLOCK_KEYS, rng)


def _malformed(messages: list[Any], rng: random.Random) -> list[Any]:
    """``messages`` with wrong types put in some fields of some messages."""
    for index in range(len(messages)):
        for _ in range(rng.choice((0, 0, 1, 1, 2, 3))):
            roll = rng.random()
            if roll < 0.01:
                messages[index] = _odd_value(rng)  # not a dict: the documented TypeError
            elif roll < 0.5:
                _nested(messages[index], rng)
            else:
                _spoil(messages[index], _KEYS, rng)
    return messages


def _histories(count: int, seed: str) -> list[tuple[str, list[Any]]]:
    rng = random.Random(seed)
    histories = []
    for case in range(count):
        dialect = ("anthropic", "chat", "responses")[case % 3]
        convert = CONVERTERS.get(dialect, lambda history: history)
        history = convert(break_pairs(random_history(rng), rng))
        histories.append((dialect, _malformed(history, rng)))
    return histories


def _refusal(check: Callable[[list[Any]], object], messages: list[Any]) -> bool:
    """False when ``check`` returns, True when it raises the documented TypeError
    naming an index; anything else raised fails the test."""
    try:
        check(messages)
    except TypeError as error:
        assert _NAMED_INDEX.search(str(error)), repr(error)
        return True
    except Exception as error:  # the point: nothing else may escape
        pytest.fail(f"{type(error).__name__}: {error}")
    return False


_CHECKS: dict[str, Callable[[list[Any]], object]] = {
    "check_request": check_request,
    "check_request anthropic": lambda messages: check_request(
        messages, "anthropic", thinking=True, bedrock=True
    ),
    "check_request openai_chat": lambda messages: check_request(messages, "openai_chat"),
    "check_request openai_responses": lambda messages: check_request(messages, "openai_responses"),
    "find_orphans": find_orphans,
    "repair_tool_pairs": lambda messages: repair_tool_pairs(copy.deepcopy(messages)),
}


# 2,000 histories per check keep the suite quick; set the variable to 10000 (or more)
# for the full sweep.
_CASES = int(os.environ.get("BAREAGENT_COMPACT_FUZZ_CASES", "2000"))


@pytest.mark.parametrize("name", sorted(_CHECKS))
def test_malformed_histories_raise_only_the_type_error_naming_an_index(name: str) -> None:
    check = _CHECKS[name]
    refused = 0
    for case, (dialect, messages) in enumerate(_histories(_CASES, f"malformed-{name}")):
        before = copy.deepcopy(messages)
        refused += _refusal(check, messages)
        if name != "repair_tool_pairs":
            assert messages == before, f"case {case} ({dialect}): the list was changed"
    assert 0 < refused < _CASES  # both kinds of input were met


# -- what the APIs refuse, seen offline ------------------------------------------------


def _call(*ids: str, thinking: bool = False) -> dict[str, Any]:
    blocks: list[dict[str, Any]] = [{"type": "thinking", "thinking": "t", "signature": "s"}]
    blocks = blocks if thinking else []
    blocks += [{"type": "tool_use", "id": i, "name": "bash", "input": {}} for i in ids]
    return {"role": "assistant", "content": blocks}


def _result(*ids: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": i, "content": "ok"} for i in ids],
    }


def test_results_split_over_consecutive_user_messages_are_not_reported() -> None:
    messages = [
        {"role": "user", "content": "go"},
        _call("a", "b", "c"),
        _result("a"),
        _result("b"),
        _result("c"),
        {"role": "user", "content": "<system-reminder> keep going"},
    ]
    assert check_request(messages) == []
    assert check_request(messages, "anthropic", thinking=False) == []


def test_an_assistant_turn_split_over_consecutive_messages_keeps_its_calls_paired() -> None:
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "signature": "s"}]},
        _call("a"),
        _result("a"),
    ]
    assert check_request(messages, thinking=True) == []


def test_text_before_the_tool_results_of_a_user_turn_is_reported() -> None:
    inline = [
        {"role": "user", "content": "go"},
        _call("a"),
        {"role": "user", "content": [{"type": "text", "text": "here:"}, *_result("a")["content"]]},
    ]
    assert "message 2: text before tool_result blocks (they must open the user turn)" in (
        check_request(inline)
    )
    split = [{"role": "user", "content": "go"}, _call("a"), {"role": "user", "content": "hm"}]
    split.append(_result("a"))
    assert "message 3: text before tool_result blocks (they must open the user turn)" in (
        check_request(split)
    )
    assert check_request(inline, "openai_chat") == [
        "message 1: tool call a unpaired",
        "message 2: tool result a unpaired",
    ]


def test_whitespace_only_text_is_reported_for_the_messages_api() -> None:
    blank_block = [{"role": "user", "content": [{"type": "text", "text": " \n"}]}]
    assert check_request(blank_block) == ["message 0: whitespace-only text block"]
    blank = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "\t"}]
    blank.append({"role": "user", "content": "next"})
    assert check_request(blank, "anthropic") == ["message 1: whitespace-only content"]
    assert check_request(blank, "openai_chat") == []  # Chat takes it


def test_content_of_the_wrong_type_is_reported_not_raised() -> None:
    messages: list[Any] = [
        {"role": "user", "content": 7},
        {"role": "assistant", "content": ["text", None]},
        {"role": "user", "content": {"type": "text", "text": "x"}},
    ]
    assert check_request(messages) == [
        "message 0: content that is neither a string nor a list (int)",
        "message 1: content block that is no object (str)",
        "message 2: content that is neither a string nor a list (dict)",
    ]


def test_an_assistant_message_last_with_thinking_on_is_reported() -> None:
    prefill = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "The answer"}]
    assert check_request(prefill) == []  # thinking off: a prefill
    assert check_request(prefill, thinking=True) == [
        "message 1: assistant message last with thinking on, not opening with a thinking block"
    ]
    assert check_request(prefill, "openai_chat", thinking=True) == []


def test_a_tool_loop_turn_that_lost_its_thinking_block_is_reported() -> None:
    earlier = [{"role": "user", "content": "go"}, _call("a"), _result("a")]
    earlier += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next"}]
    lost = [*earlier, _call("b"), _result("b")]
    assert check_request(lost) == []
    assert check_request(lost, thinking=True) == [
        "message 5: tool-loop assistant turn without its thinking block (refused with thinking on)"
    ]
    kept = [*earlier, _call("b", thinking=True), _result("b")]
    assert check_request(kept, thinking=True) == []  # earlier turns may have lost theirs
    new_turn = [*lost, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "q"}]
    assert check_request(new_turn, thinking=True) == []


def test_a_thinking_block_must_open_its_assistant_message() -> None:
    late = {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "first"},
            {"type": "thinking", "thinking": "t", "signature": "s"},
        ],
    }
    messages = [{"role": "user", "content": "go"}, late, {"role": "user", "content": "next"}]
    assert check_request(messages) == [
        "message 1: thinking block not first in its assistant message"
    ]


def test_a_first_message_from_the_assistant_is_reported_for_bedrock_only() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "assistant", "content": "Hello, how can I help?"},
        {"role": "user", "content": "go"},
    ]
    assert check_request(messages) == []  # Anthropic's own API takes it
    assert check_request(messages, bedrock=True) == [
        "message 1: the conversation opens with no user message (Bedrock)"
    ]


def test_check_request_refuses_a_message_without_a_role_naming_its_index() -> None:
    with pytest.raises(TypeError, match=r"messages\[1\]"):
        check_request([{"role": "user", "content": "go"}, {"content": "no role"}])
