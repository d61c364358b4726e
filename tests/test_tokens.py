"""SPEC 11.5: the character-weight token estimate."""

from __future__ import annotations

import json
import math

import pytest

from bareagent_compact import estimate_tokens


def one(content: object) -> list[dict[str, object]]:
    return [{"role": "user", "content": content}]


def test_estimate_matches_spec_example() -> None:
    assert estimate_tokens(one("你好abc123")) == math.ceil(2 * 1.5 + 6 * 0.25) == 5


@pytest.mark.parametrize(
    ("text", "quarters"),
    [
        ("中" * 4, 4 * 6),  # CJK 1.5
        ("あア" * 2, 4 * 6),  # Hiragana, Katakana
        ("한국" * 2, 4 * 6),  # Hangul syllables
        ("\u3000" * 4, 4 * 6),  # ideographic space is CJK, not whitespace
        ("\U00020000\U0002a6df\U0002f800\U0002fa1f", 4 * 6),  # astral CJK ranges
        ("aZ09", 4),  # ASCII letters and digits 0.25
        (" \t\n\x0b", 4),  # whitespace 0.25
        ("\xa0\x85\u2003\u205f", 4),  # non-ASCII whitespace 0.25
        ("é!-😀", 4 * 2),  # anything else 0.5 (Latin-1 letter, punctuation, emoji)
        ("\u4dc0\ud7b0", 2 * 2),  # just outside the CJK ranges
    ],
)
def test_estimate_weighs_each_character_class(text: str, quarters: int) -> None:
    assert estimate_tokens(one(text)) == math.ceil(quarters / 4)


def test_estimate_rounds_the_grand_total_up_once() -> None:
    # Two messages of 0.5 each: 1 token in total, not 1 + 1.
    assert (
        estimate_tokens([{"role": "user", "content": "!"}, {"role": "user", "content": "?"}]) == 1
    )
    assert estimate_tokens(one("a")) == 1
    assert estimate_tokens(one("abcd")) == 1
    assert estimate_tokens(one("abcde")) == 2


def test_estimate_of_empty_and_none_content_is_zero() -> None:
    assert estimate_tokens([]) == 0
    assert estimate_tokens(one(None)) == 0
    assert estimate_tokens(one("")) == 0
    assert estimate_tokens([{"role": "assistant"}]) == 0


def test_estimate_counts_only_content_not_role() -> None:
    assert estimate_tokens([{"role": "assistant" * 100, "content": "abcd"}]) == 1


def test_estimate_sums_list_items() -> None:
    blocks = [{"type": "text", "text": "中中"}, {"type": "text", "text": "中中"}]
    assert estimate_tokens(one(blocks)) == estimate_tokens(one("中中中中")) == 6


def test_estimate_tool_use_counts_name_and_input_as_json() -> None:
    tool_input = {"file_path": "配置.toml"}
    block = {
        "type": "tool_use",
        "id": "ignored-id-xxxxxxxx",
        "name": "read_file",
        "input": tool_input,
    }
    text = "read_file" + json.dumps(tool_input, ensure_ascii=False)
    expected = estimate_tokens(one(text))
    assert estimate_tokens(one([block])) == expected


def test_estimate_other_blocks_count_text_and_recurse_into_content() -> None:
    block = {
        "type": "tool_result",
        "tool_use_id": "toolu_ignored_0000",
        "content": [{"type": "text", "text": "中中"}, {"type": "text", "text": "ab"}],
    }
    assert estimate_tokens(one([block])) == math.ceil((2 * 6 + 2) / 4)
    assert (
        estimate_tokens(one([{"type": "text", "text": "abcd", "cache_control": "xxxxxxxx"}])) == 1
    )


def test_estimate_non_string_values_are_estimated_as_json_text() -> None:
    assert estimate_tokens(one(12345)) == math.ceil(5 / 4)
    assert estimate_tokens(one(12.5)) == math.ceil((1 + 1 + 2 + 1) / 4)  # "12.5"
    assert estimate_tokens(one(True)) == 1  # "true"


def test_estimate_dicts_without_a_type_are_data_estimated_as_json() -> None:
    data = {"k": "中"}
    as_json = estimate_tokens(one(json.dumps(data, ensure_ascii=False)))
    assert estimate_tokens(one([{"type": "tool_result", "content": data}])) == as_json
    assert estimate_tokens(one(data)) == as_json


def test_estimate_handles_bytes_and_objects_without_crashing() -> None:
    class Thing:
        def __str__(self) -> str:
            return "thing"

    assert estimate_tokens(one(b"abc")) > 0
    assert estimate_tokens(one([Thing()])) > 0


def test_estimate_rejects_a_non_list_with_type_error() -> None:
    with pytest.raises(TypeError, match="list"):
        estimate_tokens({"role": "user", "content": "x"})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"messages\[1\]"):
        estimate_tokens([{"role": "user", "content": "x"}, "oops"])  # type: ignore[list-item]


def test_estimate_refuses_pathologically_deep_content_with_value_error() -> None:
    content: list[object] = []
    node = content
    for _ in range(10_000):
        child: list[object] = []
        node.append(child)
        node = child
    with pytest.raises(ValueError, match="nested"):
        estimate_tokens(one(content))


def test_estimate_refuses_cyclic_content_with_value_error() -> None:
    content: list[object] = ["a"]
    content.append(content)
    with pytest.raises(ValueError):
        estimate_tokens(one(content))


def test_estimate_is_monotone_when_a_message_is_appended() -> None:
    messages = one("hello 世界")
    before = estimate_tokens(messages)
    messages.append({"role": "assistant", "content": "more text"})
    assert estimate_tokens(messages) >= before
