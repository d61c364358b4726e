"""The fake API's prompt-cache model (``benchmarks/_cache_model.py``) is exact on
hand-made cases: a prefix hit, a miss after one byte changes, expiry on the clock,
the 20-block lookback, ``tool_choice``, and OpenAI's 1,024-token floor.

Counting is one token per character, so every figure can be worked out by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from _cache_model import (
    PER_MESSAGE,
    REPLY_PRIMING,
    TOOL_PREAMBLE,
    AnthropicCache,
    OpenAICache,
    Refused,
    SimClock,
    Tokens,
    render_chat,
)

MARK = {"type": "ephemeral"}
SYSTEM = "s" * 1500  # one breakpoint-worthy system prompt (1,500 tokens)


def chars(text: str) -> list[int]:
    return [ord(c) for c in text]


def anthropic() -> tuple[AnthropicCache, SimClock]:
    clock = SimClock()
    return AnthropicCache(Tokens(chars), clock), clock


def text(body: str, marked: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": body}
    if marked:
        block["cache_control"] = MARK
    return block


def request(*turns: str, mark_last: bool = True, **extra: Any) -> dict[str, Any]:
    """System (not marked) and alternating user/assistant text turns, the last one marked."""
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant",
         "content": [text(t, mark_last and i == len(turns) - 1)]}
        for i, t in enumerate(turns)
    ]  # fmt: skip
    return {"system": SYSTEM, "messages": messages, **extra}


def size(*turns: str) -> int:
    """The prefix up to the end of the turns: system, each text block (+1) and message (+4)."""
    return len(SYSTEM) + sum(len(t) + 1 + PER_MESSAGE for t in turns)


def test_a_request_extending_the_last_one_reads_its_prefix_and_writes_the_rest() -> None:
    cache, _clock = anthropic()
    first = cache(request("a" * 100))
    assert first["cache_read_input_tokens"] == 0
    assert first["cache_creation_input_tokens"] == size("a" * 100)
    assert first["input_tokens"] == REPLY_PRIMING
    second = cache(request("a" * 100, "b" * 50, "c" * 20))
    assert second["cache_read_input_tokens"] == size("a" * 100)
    assert second["cache_creation_input_tokens"] == size("a" * 100, "b" * 50, "c" * 20) - size(
        "a" * 100
    )


def test_one_changed_byte_before_the_breakpoint_is_a_miss() -> None:
    cache, _clock = anthropic()
    cache(request("a" * 100, "b" * 50))
    changed = cache(request("a" * 99 + "x", "b" * 50, "c" * 20))
    assert changed["cache_read_input_tokens"] == 0
    assert changed["cache_creation_input_tokens"] == size("a" * 100, "b" * 50, "c" * 20)


def test_moving_the_breakpoint_does_not_change_the_prefix() -> None:
    cache, _clock = anthropic()
    cache(request("a" * 100, "b" * 50))
    unmarked_then_marked = request("a" * 100, "b" * 50, "c" * 20)
    assert cache(unmarked_then_marked)["cache_read_input_tokens"] == size("a" * 100, "b" * 50)


def test_an_entry_expires_after_five_minutes_unless_read_again() -> None:
    cache, clock = anthropic()
    cache(request("a" * 100))
    clock.advance(299)
    assert cache(request("a" * 100))["cache_read_input_tokens"] == size("a" * 100)
    clock.advance(299)  # 598 s after the write, 299 after the read that refreshed it
    assert cache(request("a" * 100))["cache_read_input_tokens"] == size("a" * 100)
    clock.advance(300)
    expired = cache(request("a" * 100))
    assert expired["cache_read_input_tokens"] == 0
    assert expired["cache_creation_input_tokens"] == size("a" * 100)


def test_an_hour_long_breakpoint_outlives_five_minutes_and_is_billed_as_such() -> None:
    cache, clock = anthropic()
    body = request("a" * 100)
    body["messages"][0]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    first = cache(body)
    assert first["cache_creation"]["ephemeral_1h_input_tokens"] == size("a" * 100)
    clock.advance(3000)
    assert cache(body)["cache_read_input_tokens"] == size("a" * 100)


def test_a_prefix_under_the_minimum_is_not_cached() -> None:
    cache, _clock = anthropic()
    small = {"messages": [{"role": "user", "content": [text("a" * 500, True)]}]}
    cache(small)
    again = cache(small)
    assert again["cache_read_input_tokens"] == again["cache_creation_input_tokens"] == 0
    assert again["input_tokens"] == 500 + 1 + PER_MESSAGE + REPLY_PRIMING


def test_the_lookback_finds_an_entry_at_most_twenty_blocks_back() -> None:
    cache, _clock = anthropic()
    cache(request("a" * 100))
    near = request("a" * 100, *(f"t{i}" for i in range(20)))
    assert cache(near)["cache_read_input_tokens"] == size("a" * 100)
    cache2, _ = anthropic()
    cache2(request("a" * 100))
    far = request("a" * 100, *(f"t{i}" for i in range(21)))
    assert cache2(far)["cache_read_input_tokens"] == 0


def test_a_changed_tool_choice_invalidates_the_messages_not_the_system() -> None:
    cache, _clock = anthropic()
    tools = [{"name": "bash", "description": "d", "input_schema": {"type": "object"}}]
    body = request("a" * 100, tools=tools)
    body["system"] = [text(SYSTEM, True)]
    cache(body)
    tools_and_system = len(json.dumps(tools[0])) + len(SYSTEM) + TOOL_PREAMBLE
    usage = cache({**body, "tool_choice": {"type": "none"}})
    assert usage["cache_read_input_tokens"] == tools_and_system
    assert usage["cache_creation_input_tokens"] == 100 + 1 + PER_MESSAGE
    auto = cache({**body, "tool_choice": {"type": "auto"}})  # auto is the absent default
    assert auto["cache_read_input_tokens"] == tools_and_system + 100 + 1 + PER_MESSAGE


def test_more_than_four_breakpoints_are_refused() -> None:
    cache, _clock = anthropic()
    body = request(*("x" * 10 for _ in range(5)))
    for message in body["messages"]:
        message["content"][0]["cache_control"] = MARK
    with pytest.raises(Refused):
        cache(body)


def chat(content: str) -> list[int]:
    return render_chat(Tokens(chars), {"messages": [{"role": "user", "content": content}]})


def test_openai_caches_nothing_under_1024_tokens() -> None:
    clock = SimClock()
    cache = OpenAICache(Tokens(chars), clock)
    prompt = chat("a" * 1000)
    assert cache(prompt) == 0
    assert cache(prompt) == 0


def test_openai_reads_the_longest_prefix_in_128_token_steps_until_it_expires() -> None:
    clock = SimClock()
    cache = OpenAICache(Tokens(chars), clock)
    prompt = chat("a" * 1300)  # 1,301 tokens with the role marker
    assert cache(prompt) == 0
    assert cache(prompt) == 1280
    longer = chat("a" * 1300 + "b" * 400)
    assert cache(longer) == 1280
    changed = chat("a" * 1100 + "c" + "a" * 199)
    assert cache(changed) == 1024
    clock.advance(301)
    assert cache(prompt) == 0
