"""input_tokens_of: one request's full input size from any provider's usage."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from bareagent_compact import Compactor, SummaryCost, input_tokens_of
from bareagent_compact.usage import answer_cost, cost_of


def test_an_int_is_the_size_itself() -> None:
    assert input_tokens_of(12_345) == 12_345
    assert input_tokens_of(0) == 0


def test_anthropic_usage_adds_the_cached_parts() -> None:
    usage = {
        "input_tokens": 3,
        "cache_read_input_tokens": 20_000,
        "cache_creation_input_tokens": 1_500,
        "output_tokens": 80,
    }
    assert input_tokens_of(usage) == 21_503


def test_anthropic_cache_fields_that_are_none_or_missing_count_as_zero() -> None:
    assert input_tokens_of({"input_tokens": 900, "cache_read_input_tokens": None}) == 900
    assert input_tokens_of({"input_tokens": None, "cache_read_input_tokens": 700}) == 700


def test_openai_chat_prompt_tokens_already_include_cached_tokens() -> None:
    usage = {
        "prompt_tokens": 5_000,
        "completion_tokens": 40,
        "total_tokens": 5_040,
        "prompt_tokens_details": {"cached_tokens": 4_096},
    }
    assert input_tokens_of(usage) == 5_000


def test_openai_responses_input_tokens_already_include_cached_tokens() -> None:
    usage = {
        "input_tokens": 6_000,
        "input_tokens_details": {"cached_tokens": 5_000},
        "output_tokens": 12,
        "total_tokens": 6_012,
    }
    assert input_tokens_of(usage) == 6_000


def test_sdk_like_objects_are_read_by_attribute() -> None:
    anthropic = SimpleNamespace(
        input_tokens=10, cache_read_input_tokens=None, cache_creation_input_tokens=2_000
    )
    chat = SimpleNamespace(prompt_tokens=321, completion_tokens=9)
    assert input_tokens_of(anthropic) == 2_010
    assert input_tokens_of(chat) == 321


@pytest.mark.parametrize("usage", [None, True, 1.5, "100", b"100", [100], object()])
def test_what_is_not_a_usage_is_a_type_error(usage: object) -> None:
    with pytest.raises(TypeError):
        input_tokens_of(usage)


def test_a_dict_without_an_input_size_is_a_type_error_naming_the_fields() -> None:
    with pytest.raises(TypeError, match="input_tokens nor prompt_tokens"):
        input_tokens_of({"output_tokens": 5})


@pytest.mark.parametrize(
    "usage",
    [
        {"input_tokens": "10"},
        {"prompt_tokens": 1.0},
        {"input_tokens": 10, "cache_read_input_tokens": True},
    ],
)
def test_a_field_that_is_not_an_int_is_a_type_error(usage: object) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        input_tokens_of(usage)


@pytest.mark.parametrize(
    "usage",
    [-1, {"input_tokens": -5}, {"prompt_tokens": -1}, {"input_tokens": None}],
)
def test_a_negative_or_absent_size_is_a_value_error(usage: object) -> None:
    with pytest.raises(ValueError):
        input_tokens_of(usage)


@pytest.mark.parametrize(
    "usage",
    [
        10**400,
        {"input_tokens": 10**400},
        {"prompt_tokens": 10**400},
        {"input_tokens": 1, "cache_read_input_tokens": 10**400},
        2**53,
    ],
    ids=["int", "input_tokens", "prompt_tokens", "cache_read_input_tokens", "2**53"],
)
def test_a_size_too_large_for_any_request_is_a_value_error(usage: object) -> None:
    with pytest.raises(ValueError, match="at most"):
        input_tokens_of(usage)


@pytest.mark.parametrize("usage", [10**400, {"input_tokens": 10**400}], ids=["int", "field"])
def test_record_usage_with_an_absurd_size_is_a_value_error_not_an_overflow(usage: object) -> None:
    compactor = Compactor(provider=lambda messages: "summary", threshold=1000)
    with pytest.raises(ValueError, match="at most"):
        compactor.record_usage([{"role": "user", "content": "hi"}], usage)


@pytest.mark.parametrize("usage", [math.inf, math.nan, {"input_tokens": math.inf}])
def test_a_float_size_even_infinite_is_refused_without_an_overflow(usage: object) -> None:
    with pytest.raises(TypeError, match="must be an int"):
        input_tokens_of(usage)


def test_the_cost_of_an_anthropic_request_counts_its_cache_reads_and_writes_apart() -> None:
    usage = {"input_tokens": 12, "cache_read_input_tokens": 3_000,
             "cache_creation_input_tokens": 40, "output_tokens": 200}
    assert cost_of(usage) == SummaryCost(1, 3_052, 3_000, 40, 200)
    assert cost_of({"input_tokens": 12, "cache_read_input_tokens": None,
                    "output_tokens": 5}) == SummaryCost(1, 12, None, None, 5)


def test_the_cost_of_an_openai_request_reads_its_cached_tokens() -> None:
    chat = SimpleNamespace(prompt_tokens=2_048, completion_tokens=17,
                           prompt_tokens_details=SimpleNamespace(cached_tokens=1_024))
    assert cost_of(chat) == SummaryCost(1, 2_048, 1_024, None, 17)
    assert cost_of({"prompt_tokens": 9, "completion_tokens": 1}) == SummaryCost(1, 9, None, None, 1)
    responses = {"input_tokens": 7_000, "input_tokens_details": {"cached_tokens": 6_500},
                 "output_tokens": 300}
    assert cost_of(responses) == SummaryCost(1, 7_000, 6_500, None, 300)


@pytest.mark.parametrize(
    "answer", ["plain text", None, {"usage": None}, SimpleNamespace(text="t"), {"usage": "bad"}]
)
def test_an_answer_without_a_readable_usage_is_one_request_of_unknown_tokens(
    answer: object,
) -> None:
    assert answer_cost(answer) == SummaryCost(1)
