"""Standing instructions: found in the user's turns, pinned verbatim with their turn,
de-duplicated, replaced by a later turn on the same subject, and carried across
rolling compactions in every message dialect."""

from __future__ import annotations

from typing import Any

import pytest

from bareagent_compact import Compactor, estimate_tokens
from bareagent_compact.instructions import instructions_in, merge, same_subject
from conftest import RecordingProvider, tool_round
from test_facts import SHAPES, pinned

RULES = [
    "Never push to the main branch.",
    "The budget cap is $500.",
    "Do not touch files under vendor/.",
    "You must write a test for every fix.",
    "不要修改测试文件。",
    "每个函数最多50行。",
    "Only use the standard library.",
    "禁止使用 sudo 命令。",
    "Always answer in English.",
    "Allowed hosts: api.example.com and cdn.example.com only.",
]
"""One rule or constraint planted in each user turn."""


def planted_round(turn: int) -> list[dict[str, Any]]:
    """A user turn holding ``RULES[turn]`` among ordinary words, and the work after it."""
    text = f"Next, look at module {turn}. {RULES[turn]} Thanks, carry on with step {turn}."
    return [
        {"role": "user", "content": text},
        *tool_round(f"p{turn}", "bash", f"step {turn} output\n" * 20),
        {"role": "assistant", "content": f"Step {turn} is done."},
    ]


def five_rounds(shape: str, pin: bool) -> list[list[str]]:
    """The rules missing from the history after each of 5 rolling compactions, two
    rules planted a round, with a summariser that keeps nothing."""
    convert = SHAPES[shape]
    compactor = Compactor(RecordingProvider("Work is going on."), pin_facts=pin)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    missing = []
    for n in range(5):
        messages += convert([*planted_round(2 * n), *planted_round(2 * n + 1)])
        messages += convert([{"role": "user", "content": "ok, go on"}])
        compactor(messages, force=True)
        text = "\n".join(str(m.get("content")) for m in messages)
        missing.append([rule for rule in RULES[: 2 * n + 2] if rule not in text])
    return missing


@pytest.mark.parametrize("shape", SHAPES)
def test_planted_rules_stay_word_for_word_over_five_rolling_compactions(shape: str) -> None:
    assert five_rounds(shape, pin=True) == [[]] * 5


def test_without_pins_a_summariser_that_keeps_nothing_loses_the_rules() -> None:
    assert five_rounds("anthropic", pin=False)[-1] == RULES


def test_each_instruction_is_pinned_once_with_the_user_turn_it_came_from() -> None:
    compactor = Compactor(RecordingProvider("S"), pin_facts=True)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Never push to main."}]
    messages += tool_round("a", "bash", "ok")
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "go"}]
    compactor(messages, force=True)
    messages += [
        {"role": "assistant", "content": "going"},
        {"role": "user", "content": "Never push to main. At most 3 retries."},
        *tool_round("b", "bash", "ok"),
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "thanks"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ]
    compactor(messages, force=True)
    lines = pinned(messages)
    assert [line for line in lines if line.startswith("Instruction")] == [
        "Instruction (user turn 1): Never push to main.",
        "Instruction (user turn 3): At most 3 retries.",
    ]
    assert estimate_tokens([{"role": "user", "content": "\n".join(lines)}]) <= 2000


@pytest.mark.parametrize("shape", SHAPES)
def test_a_later_turn_on_the_same_subject_replaces_the_rule(shape: str) -> None:
    compactor = Compactor(RecordingProvider("S"), pin_facts=True)
    convert = SHAPES[shape]
    messages = convert([
        {"role": "user", "content": "The budget cap is $500. 预算上限是500元。"},
        *tool_round("a", "bash", "ok"),
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": "go"},
    ])
    compactor(messages, force=True)
    messages += convert([
        {"role": "assistant", "content": "going"},
        {"role": "user", "content": "Change of plan: the budget is now $800. 预算现在是800元。"},
        *tool_round("b", "bash", "ok"),
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ])
    compactor(messages, force=True)
    text = "\n".join(pinned(messages))
    assert "the budget is now $800." in text and "预算现在是800元。" in text
    assert "$500" not in text and "500元" not in text


def test_rules_are_found_in_english_and_chinese_but_not_in_questions_or_code() -> None:
    text = (
        "Please look at the logs. Do not delete any branch! Can you only use pip?\n"
        "- at most 2 parallel jobs\n"
        "```\nnever = True  # code, not a rule\n```\n"
        "请先看日志。必须保留所有注释。只能修改 src 目录；始终使用 UTF-8。"
    )
    assert [found.text for found in instructions_in(text, 4)] == [
        "Do not delete any branch!",
        "at most 2 parallel jobs",
        "必须保留所有注释。",
        "只能修改 src 目录；",
        "始终使用 UTF-8。",
    ]


@pytest.mark.parametrize(
    ("older", "newer", "replaced"),
    [
        ("The budget cap is $500.", "The budget is now $800.", True),
        ("The budget cap is $500.", "Change of plan: the budget is now $800.", True),
        ("Max 5 retries.", "At most 3 retries per call.", True),
        ("最多重试3次。", "重试最多5次。", True),
        ("Files must be at most 300 lines.", "Functions must be at most 50 lines.", False),
        ("The budget cap is $500.", "Spend at most $50 on ads.", False),
        ("Always use tabs.", "Always use spaces.", False),
    ],
)
def test_the_subject_key_decides_what_a_later_rule_replaces(
    older: str, newer: str, replaced: bool
) -> None:
    standing = instructions_in(older, 1)
    merge(standing, instructions_in(newer, 2))
    assert [found.text for found in standing] == ([newer] if replaced else [older, newer])
    assert same_subject(older, newer) is replaced
