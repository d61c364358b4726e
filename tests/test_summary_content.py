"""``summary_content``: the summary and acknowledgement written as ``str`` (the
default) or as text blocks of the history's dialect, and read back as the
library's own output in either shape."""

from __future__ import annotations

from typing import Any

import pytest

from bareagent_compact import Compactor, Options, check_request
from bareagent_compact.prompts import ENGLISH_ROLLING_LEAD_IN, SUMMARY_PREFIX

Message = dict[str, Any]


class Recording:
    def __init__(self) -> None:
        self.prompts: list[list[Message]] = []

    def __call__(self, prompt: list[Message]) -> str:
        self.prompts.append(prompt)
        return f"summary {len(self.prompts)}: edited src/app_{len(self.prompts)}.py"


def anthropic_round(n: int) -> list[Message]:
    return [
        {"role": "user", "content": [{"type": "text", "text": f"Fix bug {n} in src/mod_{n}.py."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Reading it."},
                {"type": "tool_use", "id": f"t{n}", "name": "read", "input": {"n": n}},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": f"t{n}", "content": "x" * 400}],
        },
        {"role": "assistant", "content": [{"type": "text", "text": f"Fixed bug {n}."}]},
    ]


def chat_round(n: int) -> list[Message]:
    return [
        {"role": "user", "content": [{"type": "text", "text": f"Fix bug {n} in src/mod_{n}.py."}]},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"c{n}",
                    "type": "function",
                    "function": {"name": "read", "arguments": "{}"},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{n}", "content": "x" * 400},
        {"role": "assistant", "content": [{"type": "text", "text": f"Fixed bug {n}."}]},
    ]


def responses_round(n: int) -> list[Message]:
    return [
        {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": f"Fix bug {n} in src/mod_{n}.py."}],
        },
        {"type": "function_call", "call_id": f"f{n}", "name": "read", "arguments": "{}"},
        {"type": "function_call_output", "call_id": f"f{n}", "output": "x" * 400},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": f"Fixed bug {n}.", "annotations": []}],
        },
    ]


ROUNDS = {
    "anthropic": (anthropic_round, "text", "text"),
    "openai_chat": (chat_round, "text", "text"),
    "openai_responses": (responses_round, "input_text", "output_text"),
}


def opening(messages: list[Message]) -> tuple[Message, Message]:
    return messages[0], messages[1]


def test_the_default_keeps_the_specification_s_str_content() -> None:
    messages = [*anthropic_round(0), {"role": "user", "content": "Go on."}]
    Compactor(Recording(), language="en")(messages, force=True)
    summary, ack = opening(messages)
    assert isinstance(summary["content"], str) and summary["content"].startswith(SUMMARY_PREFIX)
    assert isinstance(ack["content"], str)


@pytest.mark.parametrize("dialect", sorted(ROUNDS))
@pytest.mark.parametrize("setting", ["auto", "blocks"])
def test_the_summary_takes_the_block_shape_of_the_history(dialect: str, setting: str) -> None:
    make, user_type, assistant_type = ROUNDS[dialect]
    messages = [*make(0), *make(1), *make(2)[:1]]
    Compactor(Recording(), language="en", summary_content=setting)(messages, force=True)
    summary, ack = opening(messages)
    assert summary["role"] == "user" and ack["role"] == "assistant"
    [block] = summary["content"]
    assert block["type"] == user_type and block["text"].startswith(SUMMARY_PREFIX)
    [reply] = ack["content"]
    assert reply["type"] == assistant_type and reply["text"]
    assert check_request(messages, dialect) == []


def test_auto_writes_str_in_a_history_of_str_content() -> None:
    messages: list[Message] = [
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Go on."},
    ]
    Compactor(Recording(), language="en", summary_content="auto")(messages, force=True)
    assert isinstance(messages[0]["content"], str)
    assert isinstance(messages[1]["content"], str)


def test_blocks_writes_text_blocks_even_in_a_history_of_str_content() -> None:
    messages: list[Message] = [
        {"role": "user", "content": "Fix the bug."},
        {"role": "assistant", "content": "Done."},
        {"role": "user", "content": "Go on."},
    ]
    Compactor(Recording(), language="en", summary_content="blocks")(messages, force=True)
    assert messages[0]["content"][0]["type"] == "text"
    assert messages[1]["content"] == [{"type": "text", "text": messages[1]["content"][0]["text"]}]


@pytest.mark.parametrize("dialect", sorted(ROUNDS))
def test_rolling_compactions_read_a_block_summary_back_as_their_own(dialect: str) -> None:
    make = ROUNDS[dialect][0]
    provider = Recording()
    compactor = Compactor(provider, language="en", summary_content="auto")
    messages = [*make(0), *make(1)[:1]]
    compactor(messages, force=True)
    for n in (1, 2):
        messages += make(n)[1:] + make(n + 1)[:1]
        compactor(messages, force=True)
        transcript = provider.prompts[-1][1]["content"]
        assert transcript.startswith(ENGLISH_ROLLING_LEAD_IN), dialect
        assert transcript[len(ENGLISH_ROLLING_LEAD_IN) :].startswith("[user]\n[Context Compressed]")
        assert check_request(messages, dialect) == []
    assert len(provider.prompts) == 3


def test_a_source_of_only_block_summaries_is_not_summarised_again() -> None:
    compactor = Compactor(Recording(), language="en", summary_content="blocks", threshold=1)
    messages = [*anthropic_round(0), *anthropic_round(1)[:1]]
    compactor(messages, force=True)
    before = [dict(m) for m in messages]
    result = compactor(messages)
    assert result.action.value != "full"
    assert messages == before


def test_kept_user_turns_and_pinned_facts_read_back_from_a_block_summary() -> None:
    provider = Recording()
    compactor = Compactor(
        provider,
        language="en",
        summary_content="auto",
        keep_user_turns=True,
        pin_facts=True,
    )
    first = anthropic_round(0)
    first[2]["content"][0]["content"] = "Error: disk quota exceeded on /var/data"
    messages = [*first, *anthropic_round(1)[:1]]
    compactor(messages, force=True)
    messages += anthropic_round(1)[1:] + anthropic_round(2)[:1]
    compactor(messages, force=True)
    text = messages[0]["content"][0]["text"]
    assert text.count(SUMMARY_PREFIX) == 1  # the previous summary is no user turn
    assert "[message 1 of 2, 26 characters]\nFix bug 0 in src/mod_0.py." in text
    pinned = text.partition("[Pinned facts")[2]
    assert "disk quota exceeded" in pinned  # carried from the previous summary's pins
    assert check_request(messages, "anthropic") == []


def test_summary_content_is_checked() -> None:
    with pytest.raises(ValueError, match="summary_content"):
        Options(summary_content="list")
    with pytest.raises(TypeError, match="summary_content"):
        Compactor(Recording(), summary_content=None)  # type: ignore[arg-type]
    compactor = Compactor(Recording())
    compactor.summary_content = "auto"
    assert compactor.options.summary_content == "auto"
