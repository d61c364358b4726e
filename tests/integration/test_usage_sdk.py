"""input_tokens_of and record_usage with the SDKs' own usage objects (integration extra)."""

from __future__ import annotations

import pytest

from bareagent_compact import Compactor, OfflineSummarizer, input_tokens_of


def test_anthropic_usage_counts_cache_reads_and_writes() -> None:
    types = pytest.importorskip("anthropic.types")
    usage = types.Usage(
        input_tokens=3,
        output_tokens=120,
        cache_read_input_tokens=18_000,
        cache_creation_input_tokens=2_200,
    )
    assert input_tokens_of(usage) == 20_203


def test_anthropic_usage_without_cache_fields() -> None:
    types = pytest.importorskip("anthropic.types")
    usage = types.Usage(input_tokens=4_321, output_tokens=5)
    assert usage.cache_read_input_tokens is None  # optional fields the SDK leaves unset
    assert input_tokens_of(usage) == 4_321


def test_openai_chat_usage_is_its_prompt_tokens() -> None:
    types = pytest.importorskip("openai.types")
    usage = types.CompletionUsage(
        prompt_tokens=9_000,
        completion_tokens=50,
        total_tokens=9_050,
        prompt_tokens_details={"cached_tokens": 8_192},
    )
    assert input_tokens_of(usage) == 9_000


def test_openai_responses_usage_is_its_input_tokens() -> None:
    responses = pytest.importorskip("openai.types.responses")
    usage = responses.ResponseUsage(
        input_tokens=7_000,
        input_tokens_details={"cached_tokens": 6_000, "cache_write_tokens": 0},
        output_tokens=30,
        output_tokens_details={"reasoning_tokens": 0},
        total_tokens=7_030,
    )
    assert input_tokens_of(usage) == 7_000


def test_record_usage_takes_the_sdk_object_and_anchors_the_count() -> None:
    types = pytest.importorskip("anthropic.types")
    compactor = Compactor(OfflineSummarizer(), threshold=10**9)
    messages = [{"role": "user", "content": "Where is the timeout configured?"}]
    usage = types.Usage(input_tokens=2, output_tokens=9, cache_read_input_tokens=3_000)
    compactor.record_usage(messages, usage)
    assert compactor(messages).tokens_before == 3_002
