"""No compaction thrash: when what must be kept is itself over the threshold, the
summariser is not called again every turn for almost nothing."""

from __future__ import annotations

import asyncio
import logging
import math
from typing import Any

import pytest

from bareagent_compact import Action, AsyncCompactor, Compactor, Reason, estimate_tokens
from bareagent_compact.trigger import STILL_OVER_GROWTH
from conftest import RecordingProvider

THRESHOLD = 1000


def _dialogue(turns: int, words: int = 20) -> list[dict[str, Any]]:
    """Alternating user and assistant turns of ``words`` words each."""
    return [
        {"role": "user" if n % 2 == 0 else "assistant", "content": f"turn {n}: " + "word " * words}
        for n in range(turns)
    ]


def _over_threshold_tail(
    kept: str = "system",
) -> tuple[Compactor, RecordingProvider, list[dict[str, Any]]]:
    """A compactor and a history just compacted once and still over the threshold,
    because what must be kept is that large: a system message (``"system"``), or a
    verbatim tail of twice the threshold (``"tail"``)."""
    provider = RecordingProvider()
    if kept == "system":
        compactor = Compactor(provider, threshold=THRESHOLD)
        system = "Rule: never touch the database. " * 250  # about 2x the threshold
    else:
        compactor = Compactor(provider, threshold=THRESHOLD, keep_tail_tokens=2 * THRESHOLD)
        system = "You are an agent."
    messages = [{"role": "system", "content": system}, *_dialogue(150)]
    first = compactor(messages)
    assert first.action is Action.FULL and first.tokens_after > THRESHOLD
    return compactor, provider, messages


def _small_turn(n: int, words: int = 4) -> list[dict[str, Any]]:
    return [
        {"role": "assistant", "content": f"step {n}: " + "look " * words},
        {"role": "user", "content": f"ok, step {n}: " + "go " * words},
    ]


@pytest.mark.parametrize(("kept", "words"), [("system", 4), ("tail", 20)])
def test_a_kept_part_over_the_threshold_does_not_call_the_summariser_every_turn(
    kept: str, words: int
) -> None:
    compactor, provider, messages = _over_threshold_tail(kept)
    results, growth = [], 0
    for n in range(30):
        turn = _small_turn(n, words)
        growth += estimate_tokens(turn)
        messages += turn
        results.append(compactor(messages))
    calls = len(provider.prompts) - 1
    assert calls <= 1 + math.ceil(growth / (STILL_OVER_GROWTH * THRESHOLD))
    assert calls < 30 // 2
    waiting = [r for r in results if r.reason is Reason.STILL_OVER_THRESHOLD]
    assert waiting and all(r.action in (Action.NONE, Action.MICRO) for r in waiting)
    assert all(r.action is not Action.FAILED for r in results)


def test_force_fires_while_waiting_for_growth() -> None:
    compactor, provider, messages = _over_threshold_tail()
    messages += _small_turn(0)
    assert compactor(messages).reason is Reason.STILL_OVER_THRESHOLD
    assert compactor(messages, force=True).action is Action.FULL
    assert len(provider.prompts) == 2


def test_growth_by_a_tenth_of_the_threshold_fires_again() -> None:
    compactor, provider, messages = _over_threshold_tail()
    messages += _small_turn(0)
    assert compactor(messages).reason is Reason.STILL_OVER_THRESHOLD
    step = math.ceil(STILL_OVER_GROWTH * THRESHOLD)
    while True:  # grow turn by turn until a tenth of the threshold has left the kept tail
        messages += _dialogue(2, words=step)
        if compactor(messages).action is Action.FULL:
            break
        assert len(messages) < 200
    assert len(provider.prompts) == 2


def test_the_wait_is_logged_once_and_then_at_debug_level(
    caplog: pytest.LogCaptureFixture,
) -> None:
    compactor, _, messages = _over_threshold_tail()
    with caplog.at_level(logging.DEBUG, logger="bareagent_compact"):
        for n in range(3):
            messages += _small_turn(n)
            assert compactor(messages).reason is Reason.STILL_OVER_THRESHOLD
    waits = [r for r in caplog.records if "waits" in r.getMessage()]
    assert [r.levelno >= logging.INFO for r in waits].count(True) == 1
    assert len(waits) == 3


def test_a_compaction_under_the_threshold_ends_the_wait() -> None:
    compactor, provider, messages = _over_threshold_tail("tail")
    compactor.keep_tail_tokens = 0
    messages += _small_turn(0)
    assert compactor(messages, force=True).tokens_after <= THRESHOLD
    messages += _dialogue(14, words=60)  # over the threshold again, all of it new
    assert compactor(messages).action is Action.FULL
    assert len(provider.prompts) == 3


def test_async_compactor_waits_too() -> None:
    provider = RecordingProvider()
    compactor = AsyncCompactor(provider, threshold=THRESHOLD)
    system = "Rule: never touch the database. " * 250  # about 2x the threshold
    messages = [{"role": "system", "content": system}, *_dialogue(150)]

    async def run() -> list[Any]:
        results = [await compactor(messages)]
        for n in range(5):
            messages.extend(_small_turn(n))
            results.append(await compactor(messages))
        return results

    results = asyncio.run(run())
    assert results[0].action is Action.FULL
    assert all(r.reason is Reason.STILL_OVER_THRESHOLD for r in results[1:])
    assert len(provider.prompts) == 1
