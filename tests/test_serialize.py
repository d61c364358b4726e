"""The `_serialize` transcript format."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import _serialize

DATA = Path(__file__).parent / "data"

SPEC_EXAMPLE: list[dict[str, Any]] = [
    {"role": "user", "content": "请读取配置"},
    {
        "role": "assistant",
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "read_file",
                "input": {"file_path": "config.toml"},
            }
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "1: [provider]\n2: ..."}
        ],
    },
]


def test_serialize_reproduces_the_spec_example_verbatim() -> None:
    expected = (DATA / "serialize_example.txt").read_text(encoding="utf-8")
    assert _serialize(SPEC_EXAMPLE) == expected


def test_serialize_keeps_plain_text_and_joins_blocks_with_newlines() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        }
    ]
    assert _serialize(messages) == "[assistant]\na\nb"


def test_serialize_renders_tool_use_input_as_unescaped_json() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [
                {
                    "type": "tool_use",
                    "id": "1",
                    "name": "write",
                    "input": {"路径": "文件.md", "n": 2},
                }
            ],
        }
    ]
    assert _serialize(messages) == '[assistant]\n[tool_use:write] {"路径": "文件.md", "n": 2}'


def test_serialize_names_results_through_the_tool_use_map() -> None:
    messages = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "missing", "content": "x"}],
        },
    ]
    assert _serialize(messages) == "[user]\n[tool_result:unknown] x"


def test_serialize_renders_list_results_block_by_block() -> None:
    content = [{"type": "text", "text": "one"}, {"type": "image", "source": {}}]
    messages = [
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "x", "content": content}],
        }
    ]
    assert _serialize(messages) == "[user]\n[tool_result:unknown] one\n[image]"


def test_serialize_separates_messages_with_a_blank_line_and_strips_the_end() -> None:
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u\n\n"}]
    assert _serialize(messages) == "[system]\ns\n\n[user]\nu"


def test_serialize_of_nothing_is_empty() -> None:
    assert _serialize([]) == ""


def test_serialize_renders_odd_content_types_without_crashing() -> None:
    messages = [
        {"role": "user", "content": 42},
        {"role": "user", "content": None},
        {"role": "user", "content": {"k": "v"}},
    ]
    assert _serialize(messages) == '[user]\n42\n\n[user]\n\n\n[user]\n{"k": "v"}'


def test_serialize_rejects_non_dict_messages_with_type_error() -> None:
    with pytest.raises(TypeError, match=r"messages\[0\]"):
        _serialize(["hello"])  # type: ignore[list-item]


def test_serialize_renders_a_string_tool_input_as_json() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "1", "name": "bash", "input": "ls -la"}],
        }
    ]
    assert _serialize(messages) == '[assistant]\n[tool_use:bash] "ls -la"'


def test_serialize_renders_a_dict_without_a_type_as_json_data() -> None:
    messages = [{"role": "user", "content": [{"text": "hi", "x": 1}]}]
    assert _serialize(messages) == '[user]\n{"text": "hi", "x": 1}'


def test_serialize_writes_non_string_dict_keys_as_text() -> None:
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "1", "name": "x", "input": {(1, 2): "v"}}],
        }
    ]
    assert _serialize(messages) == '[assistant]\n[tool_use:x] {"(1, 2)": "v"}'
