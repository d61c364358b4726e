"""``context_window=`` with ``threshold`` as a share of it: the absolute count in
force, its checks, and what follows it when either is assigned later."""

from __future__ import annotations

import asyncio

import pytest

from bareagent_compact import AsyncCompactor, Compactor, Options


def summarise(prompt: object) -> str:
    return "summary"


async def summarise_async(prompt: object) -> str:
    return "summary"


def test_a_fractional_threshold_is_that_share_of_the_context_window() -> None:
    compactor = Compactor(summarise, threshold=0.8, context_window=200_000)
    assert compactor.threshold == 160_000
    assert compactor.context_window == 200_000
    assert compactor.options.threshold == 0.8
    assert compactor.options.derived.threshold == 160_000


def test_derived_defaults_follow_the_absolute_threshold_of_a_share() -> None:
    compactor = Compactor(summarise, threshold=0.5, context_window=100_000)
    assert compactor.max_message_tokens == 25_000  # max(4000, 50_000 // 2)
    assert compactor.pin_facts_tokens == 2000
    assert compactor.user_turns_tokens == 5000


def test_a_fractional_threshold_without_a_context_window_names_it() -> None:
    with pytest.raises(ValueError, match="context_window"):
        Compactor(summarise, threshold=0.8)
    with pytest.raises(ValueError, match="context_window"):
        Options(threshold=0.8)


@pytest.mark.parametrize("share", [0.0, -0.5, 1.5, float("nan"), float("inf")])
def test_a_share_outside_zero_to_one_is_a_value_error(share: float) -> None:
    with pytest.raises(ValueError, match="threshold"):
        Compactor(summarise, threshold=share, context_window=100_000)


def test_a_share_too_small_for_one_token_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="threshold"):
        Compactor(summarise, threshold=0.001, context_window=100)


def test_context_window_must_be_a_positive_int() -> None:
    with pytest.raises(TypeError, match="context_window"):
        Compactor(summarise, context_window=1e5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="context_window"):
        Compactor(summarise, context_window=0)


def test_an_absolute_threshold_stays_absolute_and_must_fit_the_window() -> None:
    compactor = Compactor(summarise, threshold=30_000, context_window=200_000)
    assert compactor.threshold == 30_000
    compactor.context_window = 100_000
    assert compactor.threshold == 30_000
    with pytest.raises(ValueError, match="context_window"):
        Compactor(summarise, threshold=300_000, context_window=200_000)


def test_assigning_the_context_window_re_derives_a_share() -> None:
    compactor = Compactor(summarise, threshold=0.8, context_window=100_000)
    compactor.context_window = 200_000
    assert compactor.threshold == 160_000
    assert compactor.max_message_tokens == 80_000


def test_reading_back_a_share_s_threshold_keeps_the_share() -> None:
    compactor = Compactor(summarise, threshold=0.8, context_window=100_000)
    compactor.threshold = compactor.threshold
    assert compactor.options.threshold == 0.8
    compactor.context_window = 50_000
    assert compactor.threshold == 40_000


def test_assigning_a_threshold_as_a_share_or_a_count() -> None:
    compactor = Compactor(summarise, context_window=100_000)
    compactor.threshold = 0.25
    assert compactor.threshold == 25_000
    compactor.threshold = 10_000
    assert compactor.threshold == 10_000 and compactor.options.threshold == 10_000
    compactor.context_window = None
    with pytest.raises(ValueError, match="context_window"):
        compactor.threshold = 0.5
    assert compactor.threshold == 10_000


def test_a_share_fires_a_full_compaction_above_its_absolute_count() -> None:
    history = [
        {"role": "user", "content": "x" * 4000},
        {"role": "assistant", "content": "y" * 4000},
        {"role": "user", "content": "next"},
    ]
    below = Compactor(summarise, threshold=1.0, context_window=100_000)
    assert below(list(history)).action.value == "none"
    above = Compactor(summarise, threshold=0.001, context_window=100_000)
    messages = list(history)
    assert above(messages).action.value == "full"


def test_the_async_compactor_and_options_take_a_share() -> None:
    compactor = AsyncCompactor(
        summarise_async, options=Options(threshold=0.9, context_window=10_000)
    )
    assert compactor.threshold == 9000
    history = [{"role": "user", "content": "z" * 100}]
    assert asyncio.run(compactor(history)).action.value == "none"
