"""The configuration as one value: checked, derived in one place, re-derived on change."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from bareagent_compact import AsyncCompactor, Compactor, estimate_tokens
from bareagent_compact.micro import CACHE_FRIENDLY, MicroOptions
from bareagent_compact.options import Options
from bareagent_compact.prompts import (
    CHINESE_INSTRUCTIONS_HEADING,
    DEFAULT_ACKNOWLEDGEMENT,
    DEFAULT_SUMMARY_PROMPT,
    ENGLISH_ACKNOWLEDGEMENT,
    ENGLISH_INSTRUCTIONS_HEADING,
    ENGLISH_ROLLING_LEAD_IN,
    ENGLISH_SUMMARY_PROMPT,
)
from conftest import RecordingProvider, tool_round


def chat(turns: int = 3, size: int = 40) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"question {i} " + "words " * size})
        messages.append({"role": "assistant", "content": f"answer {i} " + "words " * size})
    messages.append({"role": "user", "content": "next"})
    return messages


# a. The texts follow a custom prompt's language unless a language was chosen.
def test_a_custom_english_prompt_gets_english_heading_and_acknowledgement() -> None:
    provider = RecordingProvider()
    compactor = Compactor(provider, system_prompt="Summarise briefly.", instructions="Keep ids.")
    messages = chat()
    compactor(messages, force=True)
    system = provider.prompts[0][0]["content"]
    assert system == "Summarise briefly.\n\n" + ENGLISH_INSTRUCTIONS_HEADING + "Keep ids."
    assert compactor.acknowledgement == ENGLISH_ACKNOWLEDGEMENT
    assert ENGLISH_ACKNOWLEDGEMENT in [m["content"] for m in messages]


def test_an_explicit_language_wins_over_the_custom_prompt() -> None:
    provider = RecordingProvider()
    compactor = Compactor(provider, system_prompt="Summarise.", language="zh", instructions="x")
    compactor(chat(), force=True)
    assert CHINESE_INSTRUCTIONS_HEADING in provider.prompts[0][0]["content"]
    assert compactor.acknowledgement == DEFAULT_ACKNOWLEDGEMENT


def test_a_custom_chinese_prompt_keeps_the_chinese_texts() -> None:
    compactor = Compactor(RecordingProvider(), system_prompt="请总结。")
    assert compactor.acknowledgement == DEFAULT_ACKNOWLEDGEMENT
    assert compactor.options.derived.instructions_heading == CHINESE_INSTRUCTIONS_HEADING


def test_the_language_default_still_reads_zh() -> None:
    default = inspect.signature(Compactor).parameters["language"].default
    assert repr(default) == "'zh'"
    compactor = Compactor(RecordingProvider())
    assert compactor.language == "zh"
    assert compactor.system_prompt == DEFAULT_SUMMARY_PROMPT
    assert compactor.acknowledgement == DEFAULT_ACKNOWLEDGEMENT


# b. Derived values follow the options they come from.
def test_a_new_threshold_re_derives_the_cache_friendly_clear_at_least() -> None:
    compactor = Compactor(RecordingProvider(), threshold=10_000, micro="cache-friendly")
    compactor.threshold = 1000
    assert compactor.micro_options.clear_at_least == round(CACHE_FRIENDLY.clear_fraction * 1000)


def test_an_explicit_clear_at_least_stays_as_given() -> None:
    compactor = Compactor(
        RecordingProvider(), threshold=10_000, micro="cache-friendly", clear_at_least=123
    )
    compactor.threshold = 1000
    assert compactor.micro_options.clear_at_least == 123
    assert compactor.clear_at_least == 123


def test_a_new_preset_re_derives_keep_recent_and_the_micro_options() -> None:
    compactor = Compactor(RecordingProvider())
    compactor.micro = "cache-friendly"
    assert compactor.keep_recent == CACHE_FRIENDLY.keep_recent
    assert compactor.micro_options.min_chars == CACHE_FRIENDLY.min_chars
    compactor.micro = "spec"
    assert compactor.keep_recent == 3
    assert compactor.micro_options == MicroOptions()


def test_a_new_language_re_derives_the_default_texts() -> None:
    compactor = Compactor(RecordingProvider())
    compactor.language = "en"
    assert compactor.system_prompt == ENGLISH_SUMMARY_PROMPT
    assert compactor.acknowledgement == ENGLISH_ACKNOWLEDGEMENT


def test_a_new_system_prompt_is_used_and_its_language_followed() -> None:
    provider = RecordingProvider()
    compactor = Compactor(provider)
    compactor.system_prompt = "Summarise in English."
    compactor(chat(), force=True)
    assert provider.prompts[0][0]["content"] == "Summarise in English."
    assert compactor.acknowledgement == ENGLISH_ACKNOWLEDGEMENT


@pytest.mark.parametrize(
    ("name", "value", "error", "message"),
    [
        ("threshold", -1, ValueError, "threshold must be >= 0"),
        ("threshold", "1", TypeError, "threshold must be an int"),
        ("language", "fr", ValueError, "language must be one of"),
        ("system_prompt", 3, TypeError, "system_prompt must be a str"),
        ("micro", "fast", ValueError, "micro must be one of"),
        ("keep_recent", -1, ValueError, "keep_recent must be >= 0"),
        ("archive", 3, TypeError, "archive must be callable"),
        ("provider", None, TypeError, "provider must be callable"),
        ("summary_input_tokens", 10, ValueError, "summary_input_tokens must be >= 256"),
        ("exclude_tools", "bash", TypeError, "exclude_tools must be a collection"),
    ],
)
def test_assignment_is_checked_like_the_constructor(
    name: str, value: object, error: type[Exception], message: str
) -> None:
    arguments: dict[str, Any] = {"provider": RecordingProvider(), name: value}
    with pytest.raises(error, match=message):
        Compactor(**arguments)
    compactor = Compactor(RecordingProvider())
    before = compactor.options
    with pytest.raises(error, match=message):
        setattr(compactor, name, value)
    assert compactor.options is before  # a refused value changes nothing


def test_the_sync_compactor_refuses_an_async_provider_assigned_later() -> None:
    async def provider(prompt: list[dict[str, Any]]) -> str:
        return "summary"

    compactor = Compactor(RecordingProvider())
    with pytest.raises(TypeError, match="use AsyncCompactor"):
        compactor.provider = provider  # type: ignore[assignment]
    AsyncCompactor(RecordingProvider()).provider = provider


def test_a_new_transcript_manager_checks_the_session_id() -> None:
    class Strict:
        def save(self, messages: list[dict[str, Any]], session_id: str) -> None:
            return None

        def check_session_id(self, session_id: str) -> str:
            raise ValueError(f"bad session id {session_id!r}")

    compactor = Compactor(RecordingProvider(), session_id="a b")
    with pytest.raises(ValueError, match="bad session id"):
        compactor.transcript_mgr = Strict()
    assert compactor.transcript_mgr is None


def test_options_are_a_frozen_value_replace_re_derives() -> None:
    options = Options(threshold=10_000, micro="cache-friendly")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.threshold = 5  # type: ignore[misc]
    smaller = dataclasses.replace(options, threshold=1000)
    assert smaller.derived.micro_options.clear_at_least == 300
    assert options.derived.micro_options.clear_at_least == 3000


def test_an_exclude_tools_iterator_is_read_once() -> None:
    compactor = Compactor(RecordingProvider(), exclude_tools=iter(["memory"]))
    compactor.threshold = 10
    assert compactor.micro_options.exclude_tools == frozenset({"memory"})


# c. A caller's counter and the reported usage compose.
def test_a_caller_counter_counts_what_was_appended_since_the_report() -> None:
    compactor = Compactor(RecordingProvider(), threshold=10**9, token_counter=len)
    messages = chat()
    compactor.record_usage(messages, 50_000)
    assert compactor(messages).tokens_before == 50_000
    messages.append({"role": "assistant", "content": "more"})
    messages.append({"role": "user", "content": "again"})
    assert compactor(messages).tokens_before == 50_002


def test_a_caller_counter_counts_the_whole_history_once_the_anchor_is_gone() -> None:
    compactor = Compactor(RecordingProvider(), threshold=10**9, token_counter=len)
    messages = chat()
    compactor.record_usage(messages, 50_000)
    messages[1] = {"role": "user", "content": "edited"}  # no longer the reported request
    assert compactor(messages).tokens_before == len(messages)


def test_micro_compaction_drops_the_anchor_of_a_caller_counter() -> None:
    compactor = Compactor(RecordingProvider(), threshold=10**9, token_counter=len)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for i in range(5):
        messages += tool_round(f"t{i}", "bash", "x" * 500)
    compactor.record_usage(messages, 50_000)
    result = compactor(messages)
    assert result.truncated
    assert result.tokens_before == len(messages)


def test_record_usage_still_checks_the_usage_with_a_caller_counter() -> None:
    compactor = Compactor(RecordingProvider(), token_counter=len)
    with pytest.raises(TypeError):
        compactor.record_usage(chat(), "many")


def test_switching_to_a_caller_counter_leaves_the_ledger() -> None:
    compactor = Compactor(RecordingProvider(), threshold=10**9)
    messages = chat()
    compactor.record_usage(messages, 50_000)
    compactor.token_counter = len
    assert compactor(messages).tokens_before == len(messages)
    compactor.token_counter = None  # type: ignore[assignment]
    assert compactor.token_counter is estimate_tokens
    assert compactor(messages).tokens_before == estimate_tokens(messages)


# d. The lead-in survives a summary in parts.
def test_rolling_lead_in_is_kept_when_the_source_is_summarized_in_parts() -> None:
    provider = RecordingProvider()
    compactor = Compactor(provider, language="en", summary_input_tokens=512)
    messages = chat(turns=1, size=5)
    compactor(messages, force=True)
    messages += chat(turns=12, size=40)[1:]
    result = compactor(messages, force=True)
    assert result.parts > 1
    first_part = provider.prompts[1][1]["content"]
    assert first_part.startswith(ENGLISH_ROLLING_LEAD_IN + "[user]\n[Context Compressed]")


def test_no_lead_in_opens_the_parts_without_a_previous_summary() -> None:
    provider = RecordingProvider()
    result = Compactor(provider, language="en", summary_input_tokens=512)(
        chat(turns=12, size=40), force=True
    )
    assert result.parts > 1
    assert not provider.prompts[0][1]["content"].startswith(ENGLISH_ROLLING_LEAD_IN)


# A summary input budget the system prompt leaves no room in is refused.
@pytest.mark.parametrize(
    ("kwargs", "budget", "prompt"),
    [
        ({"summary_input_tokens": 300}, 300, 206),  # the default Chinese prompt
        ({"summary_input_tokens": 1_000, "system_prompt": "Summarise it carefully. " * 120},
         1_000, 750),
    ],
)
def test_a_budget_too_small_for_the_system_prompt_is_refused_naming_both(
    kwargs: dict[str, Any], budget: int, prompt: int
) -> None:
    with pytest.raises(ValueError, match=rf"summary_input_tokens={budget} .* of {prompt} tokens"):
        Compactor(RecordingProvider(), **kwargs)


def test_the_budget_is_checked_again_when_the_prompt_or_the_budget_changes() -> None:
    compactor = Compactor(RecordingProvider(), language="en", summary_input_tokens=400)
    before = compactor.options
    with pytest.raises(ValueError, match=r"summary_input_tokens=400 .* of 206 tokens"):
        compactor.language = "zh"
    with pytest.raises(ValueError, match=r"summary_input_tokens=400 .* of 750 tokens"):
        compactor.system_prompt = "Summarise it carefully. " * 120
    with pytest.raises(ValueError, match=r"summary_input_tokens=256 .* use summary_input_tokens "
                       r">= 358"):
        compactor.summary_input_tokens = 256
    assert compactor.options is before
    compactor.summary_input_tokens = 358  # the least the English prompt allows


def test_pin_facts_tokens_reads_back_the_budget_in_force_like_max_message_tokens() -> None:
    compactor = Compactor(lambda prompt: "s", threshold=1000, pin_facts=True)
    assert compactor.pin_facts_tokens == 100 == compactor.options.derived.pin_facts_tokens
    assert compactor.max_message_tokens == compactor.options.derived.max_message_tokens
    compactor.threshold = 50_000
    assert compactor.pin_facts_tokens == 2000
    compactor.pin_facts_tokens = 300
    compactor.threshold = 100_000
    assert compactor.pin_facts_tokens == 300 == compactor.options.pin_facts_tokens


@pytest.mark.parametrize(
    "flag", ["keep_tool_pairs", "require_snapshot", "rolling_summaries", "pin_facts",
             "prune_before_server_compaction"]
)  # fmt: skip
@pytest.mark.parametrize("value", ["no", "false", None, 1.0])
def test_on_off_options_refuse_what_is_not_a_bool(flag: str, value: object) -> None:
    if value is None and flag == "pin_facts":  # its default: the profile's (off without one)
        assert Compactor(RecordingProvider(), pin_facts=None).pin_facts is False
        return
    with pytest.raises(TypeError, match=f"{flag} must be a bool"):
        Compactor(RecordingProvider(), **{flag: value})
    compactor = Compactor(RecordingProvider())
    before = getattr(compactor, flag)
    with pytest.raises(TypeError, match=f"{flag} must be a bool"):
        setattr(compactor, flag, value)
    assert getattr(compactor, flag) is before
