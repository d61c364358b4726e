"""Background compaction (``AsyncCompactor(background_at=...)``): the summary is made
in a task while the loop goes on, and a later call swaps it in."""

from __future__ import annotations

import asyncio
import copy
import logging
import math
import random
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from bareagent_compact import (
    SUMMARY_PREFIX,
    Action,
    AsyncCompactor,
    CompactionResult,
    Compactor,
    Reason,
    SummaryCost,
    dialects,
    estimate_tokens,
    find_orphans,
)
from bareagent_compact.providers import SummaryText
from conftest import MemoryTranscripts, tool_history, tool_round
from converters import to_chat, to_responses

T = TypeVar("T")

DIALECTS: dict[str, Callable[[list[dict[str, Any]]], list[dict[str, Any]]]] = {
    "anthropic": lambda history: history,
    "chat": to_chat,
    "responses": to_responses,
}


def run(main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run``, with a bound so that a wait that should not happen fails
    the test instead of hanging it."""
    return asyncio.run(asyncio.wait_for(main, 60))


async def settle(turns: int = 20) -> None:
    """Let the tasks of the loop run (no time passes: each is a bare yield)."""
    for _ in range(turns):
        await asyncio.sleep(0)


class GatedProvider:
    """An ``async def`` summariser that answers only once ``release`` is set."""

    def __init__(self, answer: str = "SUMMARY", error: BaseException | None = None) -> None:
        self.release = asyncio.Event()
        self.answer = answer
        self.error = error
        self.started = 0
        self.finished = 0
        self.cancelled = 0

    async def __call__(self, prompt: list[dict[str, Any]], /) -> str:
        self.started += 1
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        self.finished += 1
        if self.error is not None:
            raise self.error
        return self.answer


def history(rounds: int = 8, size: int = 400) -> list[dict[str, Any]]:
    return tool_history(rounds, output=lambda turn: f"line {turn} " * (size // 8))


def tokens(messages: list[dict[str, Any]]) -> int:
    return estimate_tokens(messages)


async def started(
    provider: GatedProvider, *, share: float = 0.5, **options: Any
) -> tuple[AsyncCompactor, list[dict[str, Any]]]:
    """A compactor whose first call started a summary in the background."""
    messages = history()
    threshold = math.ceil(tokens(messages) / (share + 0.1))
    compactor = AsyncCompactor(
        provider, threshold=threshold, background_at=share, keep_recent=100, **options
    )
    result = await compactor(messages)
    assert result.action is Action.NONE and result.reason is None
    assert compactor.background_pending
    await settle()
    return compactor, messages


def grow(messages: list[dict[str, Any]], turn: int, size: int = 40) -> list[dict[str, Any]]:
    """Append one tool round (as another task of the agent would); the new messages."""
    new = tool_round(f"late{turn}", "bash", f"late {turn} " * size)
    messages += new
    return new


def assert_swapped(
    messages: list[dict[str, Any]], snapshot: list[Any], appended: list[Any]
) -> None:
    """The summary replaced a prefix of the snapshot's dialogue; the rest of the
    snapshot and every appended message are still there, the same objects, in order."""
    assert any(
        isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_PREFIX)
        for m in messages
    )
    if appended:
        assert all(a is b for a, b in zip(messages[-len(appended) :], appended, strict=True))
    # Nothing lost: the snapshot's dialogue messages not present any more are the
    # summarised ones, a prefix of it (system messages are rebuilt as copies).
    present = {id(m) for m in messages}
    flags = [id(m) in present for m in snapshot if not dialects.is_system(m)]
    assert flags == sorted(flags) and not flags[0]
    assert find_orphans(messages) == []


# ------------------------------------------------------------------- options


@pytest.mark.parametrize("value", [0.8, 1, 0.01, None])
def test_background_at_takes_none_or_a_share_of_the_threshold(value: Any) -> None:
    compactor = AsyncCompactor(lambda prompt: "S", threshold=1000, background_at=value)
    assert compactor.background_at == (None if value is None else float(value))
    expected = None if value is None else math.floor(value * 1000)
    assert compactor.options.derived.background_tokens == expected


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (1.5, ValueError), (-0.2, ValueError), (float("nan"), ValueError),
     ("0.8", TypeError), (True, TypeError)],
)  # fmt: skip
def test_background_at_outside_0_to_1_is_refused(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="background_at"):
        AsyncCompactor(lambda prompt: "S", background_at=value)


def test_the_watermark_is_derived_again_when_the_threshold_changes() -> None:
    compactor = AsyncCompactor(lambda prompt: "S", threshold=1000, background_at=0.8)
    compactor.threshold = 2000
    assert compactor.options.derived.background_tokens == 1600
    with pytest.raises(ValueError, match="background_at"):
        compactor.background_at = 2.0
    assert compactor.background_at == 0.8


def test_the_sync_compactor_refuses_background_at_naming_async_compactor() -> None:
    with pytest.raises(TypeError, match="AsyncCompactor"):
        Compactor(lambda prompt: "S", background_at=0.8)
    compactor = Compactor(lambda prompt: "S")
    with pytest.raises(TypeError, match="AsyncCompactor"):
        compactor.background_at = 0.8
    assert compactor.background_at is None


# ----------------------------------------------------------------- the swap


def test_the_call_returns_before_the_summary_is_done_and_a_later_call_swaps_it_in() -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        snapshot = list(messages)
        assert provider.started == 1 and provider.finished == 0
        appended = grow(messages, 0)
        quiet = await compactor(messages)  # still running: the call does not wait
        assert quiet.action is Action.NONE and compactor.background_pending
        assert provider.finished == 0
        provider.release.set()
        await settle()
        result = await compactor(messages)
        assert result.action is Action.FULL and result.summary_calls == 1
        assert result.tokens_after < result.tokens_before
        assert not compactor.background_pending
        assert compactor.last_result is result
        assert_swapped(messages, snapshot, appended)

    run(main())


def test_a_call_over_the_threshold_waits_for_the_background_summary() -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        snapshot = list(messages)
        appended: list[Any] = []
        turn = 0
        while tokens(messages) <= compactor.threshold:
            appended += grow(messages, turn, size=200)
            turn += 1
        call = asyncio.create_task(compactor(messages))
        await settle()
        assert not call.done()  # waiting for the summary, not starting another
        assert provider.started == 1
        provider.release.set()
        result = await call
        assert result.action is Action.FULL and provider.started == 1
        assert_swapped(messages, snapshot, appended)

    run(main())


def test_force_waits_for_the_background_summary_and_swaps_it_in() -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        appended = grow(messages, 0)
        call = asyncio.create_task(compactor(messages, force=True))
        await settle()
        assert not call.done()
        provider.release.set()
        result = await call
        assert result.action is Action.FULL and provider.started == 1
        assert messages[-2:] == appended

    run(main())


def test_the_snapshot_is_saved_before_the_summary_as_the_history_was_at_the_start() -> None:
    async def main() -> None:
        transcripts = MemoryTranscripts()
        provider = GatedProvider()
        compactor, messages = await started(provider, transcript_mgr=transcripts)
        at_start = [dict(m) for m in messages]
        grow(messages, 0)
        provider.release.set()
        result = await compactor(messages, force=True)
        assert result.action is Action.FULL and result.snapshot_saved
        assert [m["content"] for m in transcripts.saved[0][0]] == [
            m["content"] for m in at_start
        ]

    run(main())


def test_the_snapshot_belongs_to_the_session_of_the_summarised_history() -> None:
    async def main() -> None:
        transcripts = MemoryTranscripts()
        provider = GatedProvider()
        messages = history()
        threshold = math.ceil(tokens(messages) / 0.6)
        compactor = AsyncCompactor(
            provider,
            transcripts,
            threshold,
            "alpha",
            background_at=0.5,
            keep_recent=100,
        )
        assert (await compactor(messages)).action is Action.NONE
        assert compactor.background_pending
        compactor.set_session_id("beta")  # a REPL's /new, before the task ran
        provider.release.set()
        await settle()
        assert transcripts.saved and transcripts.saved[0][1] == "alpha"

    run(main())


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_background_swap_keeps_appended_messages_and_tool_pairs_over_random_histories(
    dialect: str,
) -> None:
    swapped = [session(random.Random(f"{dialect}-{seed}"), DIALECTS[dialect]) for seed in range(12)]
    assert sum(swapped) >= 9


def random_anthropic(rng: random.Random, rounds: int) -> list[dict[str, Any]]:
    def after(turn: int) -> list[dict[str, Any]]:
        if rng.random() < 0.3:
            return [
                {"role": "assistant", "content": "noted " * rng.randint(5, 60)},
                {"role": "user", "content": "go on " * rng.randint(1, 20)},
            ]
        return []

    return tool_history(
        rounds,
        system=rng.choice([None, "You are an agent."]),
        output=lambda turn: "out " * rng.randint(20, 300),
        name=lambda turn: rng.choice(["bash", "read_file", "grep"]),
        after=after,
    )


def cuts_of(anthropic: list[dict[str, Any]], convert: Callable[..., Any]) -> list[int]:
    """Where each Anthropic message ends in the converted history (for feeding it
    message by message)."""
    return [len(convert(anthropic[:k])) for k in range(2, len(anthropic) + 1)]


def counts(full: list[dict[str, Any]], cuts: list[int], keep_recent: int) -> list[int]:
    """The compactor's count at each cut, with no full compaction."""
    dry = Compactor(lambda prompt: "S", threshold=10**9, keep_recent=keep_recent)
    live: list[Any] = []
    seen: list[int] = []
    for cut in cuts:
        live += full[len(live) : cut]
        seen.append(dry(live).tokens_before)
    return seen


def session(rng: random.Random, convert: Callable[..., Any]) -> bool:
    """One generated session; ``True`` if a background summary was swapped in."""
    anthropic = random_anthropic(rng, rng.randint(12, 24))
    full = convert(anthropic)
    assert find_orphans(full) == []
    cuts = cuts_of(anthropic, convert)
    keep_recent = rng.choice([2, 4, 100])
    peak = max(counts(copy.deepcopy(full), cuts, keep_recent))
    threshold = max(1, int(peak * 0.8))
    return run(drive(full, cuts, threshold, keep_recent, rng))


async def drive(
    full: list[dict[str, Any]], cuts: list[int], threshold: int, keep_recent: int,
    rng: random.Random,
) -> bool:  # fmt: skip
    provider = GatedProvider()
    compactor = AsyncCompactor(
        provider, threshold=threshold, background_at=0.5, keep_recent=keep_recent
    )
    messages: list[Any] = []
    fed = 0
    snapshot: list[Any] | None = None
    appended: list[Any] = []
    for cut in cuts:
        new = full[fed:cut]
        if tokens(messages + new) > threshold:
            break  # the next call would summarise now, or wait for the summary
        messages += new
        fed = cut
        if snapshot is not None:
            appended += new
        result = await compactor(messages)
        assert result.action in (Action.NONE, Action.MICRO), result
        if snapshot is None and compactor.background_pending:
            snapshot = list(messages)
        elif snapshot is not None and rng.random() < 0.3:
            break
    if snapshot is None:
        return False  # this history never crossed the watermark below the threshold
    provider.release.set()
    await settle()
    result = await compactor(messages)
    assert result.action is Action.FULL, result
    assert_swapped(messages, snapshot, appended)
    return True


# ----------------------------------------------------- nothing lost, logged


def test_cancelling_the_waiting_call_keeps_the_history_and_the_background_summary() -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        appended = grow(messages, 0)
        before = list(messages)
        call = asyncio.create_task(compactor(messages, force=True))
        await settle()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert messages == before and all(a is b for a, b in zip(messages, before, strict=True))
        assert compactor.background_pending and provider.cancelled == 0
        provider.release.set()
        await settle()
        result = await compactor(messages)
        assert result.action is Action.FULL
        assert messages[-2:] == appended

    run(main())


def test_aclose_cancels_the_background_summary_and_leaves_the_history(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        before = list(messages)
        with caplog.at_level(logging.INFO, logger="bareagent_compact"):
            assert await compactor.aclose() is True
        assert provider.cancelled == 1 and not compactor.background_pending
        assert all(a is b for a, b in zip(messages, before, strict=True))
        assert "cancelled by aclose()" in caplog.text
        assert await compactor.aclose() is False
        provider.release.set()
        result = await compactor(messages, force=True)  # compacts as usual afterwards
        assert result.action is Action.FULL

    run(main())


def test_leaving_async_with_closes_the_compactor() -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, _ = await started(provider)
        async with compactor:
            pass
        assert provider.cancelled == 1 and not compactor.background_pending

    run(main())


def test_a_provider_failing_in_the_background_gives_a_failed_result_and_the_history(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        provider = GatedProvider(error=RuntimeError("boom"))
        compactor, messages = await started(provider)
        appended = grow(messages, 0)
        before = list(messages)
        provider.release.set()
        await settle()
        with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
            result = await compactor(messages)
        assert result.action is Action.FAILED and result.reason is Reason.PROVIDER_RAISED
        assert messages == before and messages[-2:] == appended
        assert "summary provider failed" in caplog.text

    run(main())


class Crash(BaseException):
    """Escapes every ``except Exception`` of the library, as a bug would."""


def test_an_exception_escaping_the_task_is_logged_and_the_summary_lost(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        provider = GatedProvider(error=Crash("crash"))
        compactor, messages = await started(provider)
        before = list(messages)
        provider.release.set()
        await settle()
        with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
            result = await compactor(messages)
        assert result.action is Action.NONE and result.reason is Reason.BACKGROUND_LOST
        assert messages == before
        assert "background summary lost (it raised)" in caplog.text
        assert any(r.exc_info for r in caplog.records)

    run(main())


def test_a_history_rewritten_meanwhile_is_left_as_the_caller_made_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        messages[1] = {"role": "user", "content": "a rewritten request"}
        grow(messages, 0)
        mine = list(messages)
        provider.release.set()
        await settle()
        with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
            result = await compactor(messages)
        assert result.action is Action.FAILED and result.reason is Reason.HISTORY_CHANGED
        assert all(a is b for a, b in zip(messages, mine, strict=True))
        assert "changed other than by appending" in caplog.text
        assert not compactor.background_pending

    run(main())


def test_a_summarised_message_edited_in_place_between_calls_voids_the_swap() -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        messages[1]["content"] = "an edited request"
        grow(messages, 0)
        assert (await compactor(messages)).action is Action.NONE  # still running
        mine = list(messages)
        provider.release.set()
        await settle()
        result = await compactor(messages)
        assert result.action is Action.FAILED and result.reason is Reason.HISTORY_CHANGED
        assert messages[1]["content"] == "an edited request"
        assert all(a is b for a, b in zip(messages, mine, strict=True))

    run(main())


def test_a_summarised_message_edited_by_another_task_while_the_call_waits_voids_the_swap() -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        call = asyncio.create_task(compactor(messages, force=True))
        await settle()
        assert not call.done()  # waiting for the summary
        messages[3]["content"][0]["content"] = "rewritten output"
        provider.release.set()
        result = await call
        assert result.action is Action.FAILED and result.reason is Reason.HISTORY_CHANGED
        assert messages[3]["content"][0]["content"] == "rewritten output"

    run(main())


def test_a_system_message_edited_meanwhile_does_not_void_the_swap() -> None:
    async def main() -> None:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        messages[0]["content"] = "You are an agent. Updated."
        provider.release.set()
        await settle()
        result = await compactor(messages)
        assert result.action is Action.FULL
        assert messages[0]["content"] == "You are an agent. Updated."

    run(main())


def test_a_trailing_reminder_replaced_every_turn_keeps_the_background_summary() -> None:
    async def main() -> None:
        provider = GatedProvider()
        messages = history()
        messages.append({"role": "system", "content": "reminder 0"})
        threshold = math.ceil(tokens(messages) / 0.6)
        compactor = AsyncCompactor(
            provider, threshold=threshold, background_at=0.5, keep_recent=100
        )
        assert (await compactor(messages)).action is Action.NONE
        assert compactor.background_pending
        snapshot = list(messages)
        appended: list[Any] = []
        for turn in range(1, 3):  # the loop: drop the last reminder, append a new one
            assert messages.pop()["content"] == f"reminder {turn - 1}"
            appended += grow(messages, turn)
            reminder = {"role": "system", "content": f"reminder {turn}"}
            messages.append(reminder)
            if turn == 1:
                assert (await compactor(messages)).action is Action.NONE
        provider.release.set()
        await settle()
        before = list(messages)
        result = await compactor(messages)
        assert result.action is Action.FULL and result.reason is None
        assert messages[-1] == {"role": "system", "content": "reminder 2"}
        assert [m["content"] for m in messages].count("reminder 0") == 0
        assert_swapped(messages, snapshot[:-1], [*appended, reminder])
        assert compactor.undo(messages, result)
        assert all(a is b for a, b in zip(messages, before, strict=True))

    run(main())


def test_a_summary_cancelled_with_its_event_loop_is_reported_by_the_next_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = GatedProvider()
    compactor, messages = run(started(provider))  # asyncio.run cancels the task at its end
    before = list(messages)
    with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
        result = run(compactor(messages))
    assert result.reason is Reason.BACKGROUND_LOST
    assert messages == before and "background summary lost (cancelled)" in caplog.text


def test_a_call_from_another_event_loop_does_not_wait_for_the_summary() -> None:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        provider = GatedProvider()
        future = asyncio.run_coroutine_threadsafe(started(provider), loop)
        compactor, messages = future.result(timeout=60)
        compactor.provider = lambda prompt: "made here"
        result = run(compactor(messages, force=True))  # this thread's own loop
        assert result.action is Action.FULL  # the summary there is lost, one is made here
        assert not compactor.background_pending
        assert "made here" in messages[1]["content"]
        asyncio.run_coroutine_threadsafe(settle(), loop).result(timeout=60)
        assert provider.cancelled == 1
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=60)
        loop.close()


def test_a_before_compact_veto_starts_nothing_in_the_background() -> None:
    async def main() -> None:
        provider = GatedProvider()
        messages = history()
        compactor = AsyncCompactor(
            provider,
            threshold=tokens(messages) * 2,
            background_at=0.1,
            before_compact=lambda event: False,
        )
        result = await compactor(messages)
        assert result.reason is Reason.SKIPPED_BY_HOOK
        assert not compactor.background_pending and provider.started == 0

    run(main())



def test_over_the_threshold_after_a_swap_because_of_messages_appended_meanwhile_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def main() -> list[str]:
        provider = GatedProvider()
        compactor, messages = await started(provider)
        appended: list[Any] = []
        turn = 0
        while tokens(messages) <= 2 * compactor.threshold:
            appended += grow(messages, turn, size=200)
            turn += 1
        call = asyncio.create_task(compactor(messages))
        await settle()
        provider.release.set()
        with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
            result = await call
        assert result.action is Action.FULL and result.tokens_after > compactor.threshold
        return [r.getMessage() for r in caplog.records if "still over" in r.getMessage()]

    told = run(main())
    assert len(told) == 1
    assert "appended while the summary was made" in told[0]
    assert "kept messages alone" not in told[0]


def test_clearing_old_reasoning_waits_for_a_pending_background_summary() -> None:
    async def provider(prompt: Any) -> str:
        await asyncio.sleep(0)
        return "summary of the work"

    def turn(messages: list[dict[str, Any]], index: int) -> None:
        messages.append({"role": "user", "content": f"task {index} " + "word " * 60})
        messages.append(
            {"type": "reasoning", "id": f"rs_{index}",
             "summary": [{"type": "summary_text", "text": "thinking " * 20}]}
        )  # fmt: skip
        messages.append(
            {"type": "message", "role": "assistant",
             "content": [{"type": "output_text", "text": f"answer {index} " + "word " * 60}]}
        )  # fmt: skip

    async def run() -> list[CompactionResult]:
        compactor = AsyncCompactor(
            provider, threshold=1000, background_at=0.5, clear_thinking_after_turns=2
        )
        messages: list[dict[str, Any]] = []
        results = []
        for index in range(14):
            turn(messages, index)
            results.append(await compactor(messages))
            for _ in range(5):
                await asyncio.sleep(0)
        return results

    results = asyncio.run(run())
    assert any(r.action is Action.FULL for r in results)
    assert not [r for r in results if r.reason is Reason.HISTORY_CHANGED]
    assert any(r.thinking_cleared for r in results)


# ------------------------------------------------ what happened meanwhile

PAYMENTS = "src/app/payments.py"
ORDERS_URL = "https://api.example.com/v2/orders"
NO_TOTAL = "ValueError: the order has no total"
REQUEST_ID = "req_8f3a21c9"
IN_SUMMARY = "config/settings.toml"
IN_KEPT = "docs/kept.md"
USED_LINES = [f"Id: {REQUEST_ID}", f"Error: {NO_TOTAL}", f"URL: {ORDERS_URL}", f"File: {PAYMENTS}"]
"""The pinned lines of what the steps taken meanwhile used, newest use first."""


class ThreadGatedProvider:
    """A plain summariser (run in a worker thread) that answers once ``release`` is set."""

    def __init__(self, answer: str) -> None:
        self.release = threading.Event()
        self.answer = answer
        self.started = 0

    def __call__(self, prompt: list[dict[str, Any]], /) -> str:
        self.started += 1
        assert self.release.wait(60)
        return self.answer


def used_history() -> list[dict[str, Any]]:
    """A history whose summarised rounds hold a path, a URL, an error line and an
    id, plus one path the summary names and one the pending turn holds."""
    padding = " filler" * 60
    outputs = [
        f"opened {PAYMENTS}{padding}",
        f"GET {ORDERS_URL} answered{padding}",
        f"Traceback (most recent call last):\n{NO_TOTAL}{padding}",
        f"request id {REQUEST_ID} logged{padding}",
        f"read {IN_SUMMARY} and {IN_KEPT}{padding}",
        f"nothing of note{padding}",
        f"still nothing{padding}",
        f"pending result names {IN_KEPT}{padding}",
    ]
    return tool_history(len(outputs), output=lambda turn: outputs[turn])


def used_meanwhile(messages: list[dict[str, Any]], dialect: str) -> list[dict[str, Any]]:
    """Steps taken while the summary is made, using what the summarised part held."""
    new = tool_round("m1", "bash", f"edited {PAYMENTS}")
    new += tool_round("m2", "bash", f"posting to {ORDERS_URL}")
    new += tool_round("m3", "bash", f"ran the tests again\n{NO_TOTAL}")
    new += tool_round("m4", "bash", f"retried {REQUEST_ID}; also {IN_SUMMARY} and {IN_KEPT}")
    new = DIALECTS[dialect](new)
    messages += new
    return new


def pinned_lines(messages: list[dict[str, Any]]) -> list[str]:
    summary = next(
        m["content"] for m in messages
        if isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_PREFIX)
    )
    heading = "[Pinned facts: kept verbatim from the summarised history]"
    if heading not in summary:
        return []
    return summary[summary.index(heading) :].splitlines()[1:]


def swapped_after_meanwhile(
    kind: str, dialect: str = "anthropic", **options: Any
) -> tuple[CompactionResult, Any, list[Any]]:
    """A background summary (``kind``: an ``async def`` or a threaded summariser that
    keeps nothing but one path) swapped in after steps that used the summarised
    part's identifiers: the result, the provider and the history."""
    answer = f"A vague summary; it names {IN_SUMMARY}."

    async def main() -> tuple[CompactionResult, Any, list[Any]]:
        provider: Any = GatedProvider(answer) if kind == "async" else ThreadGatedProvider(answer)
        messages = DIALECTS[dialect](used_history())
        threshold = math.ceil(tokens(messages) / 0.6)
        compactor = AsyncCompactor(
            provider, threshold=threshold, background_at=0.5, keep_recent=100, **options
        )
        assert (await compactor(messages)).action is Action.NONE
        assert compactor.background_pending
        await settle()
        appended = used_meanwhile(messages, dialect)
        provider.release.set()
        result = await compactor(messages, force=True)
        assert messages[-len(appended) :] == appended
        return result, provider, messages

    return run(main())


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
@pytest.mark.parametrize("kind", ["async", "thread"])
def test_identifiers_used_meanwhile_are_pinned_after_a_background_swap(
    kind: str, dialect: str
) -> None:
    result, provider, messages = swapped_after_meanwhile(kind, dialect)
    assert result.action is Action.FULL
    lines = pinned_lines(messages)
    expected = USED_LINES
    assert [line for line in lines if line in expected] == expected  # newest use first
    assert result.pinned_identifiers == 4
    assert provider.started == 1 and result.summary_calls == 1  # no model call for the pins


@pytest.mark.parametrize("kind", ["async", "thread"])
def test_identifiers_the_summary_or_the_kept_part_holds_are_not_pinned_again(kind: str) -> None:
    _, _, messages = swapped_after_meanwhile(kind)
    block = "\n".join(pinned_lines(messages))
    assert block and IN_SUMMARY not in block and IN_KEPT not in block


def test_pins_of_what_happened_meanwhile_come_first_in_the_pinned_facts_block() -> None:
    result, provider, messages = swapped_after_meanwhile("async", pin_facts=True)
    lines = pinned_lines(messages)
    assert result.pinned_identifiers == 4 and provider.started == 1
    found = [line for line in lines if line.startswith(("File: ", "URL: ", "Error: ", "Id: "))]
    expected = USED_LINES
    assert found[:4] == expected  # before the facts pinned_facts finds on its own
    assert f"File: {IN_KEPT}" in found[4:]
    assert len(lines) == len(set(lines))  # each pinned once


def test_no_pin_budget_pins_nothing_of_what_happened_meanwhile() -> None:
    result, _, messages = swapped_after_meanwhile("async", pin_facts_tokens=0)
    assert result.action is Action.FULL and result.pinned_identifiers == 0
    assert pinned_lines(messages) == []


def test_a_swap_without_steps_meanwhile_pins_nothing() -> None:
    async def main() -> None:
        provider = GatedProvider("A vague summary.")
        compactor, messages = await started(provider)
        provider.release.set()
        result = await compactor(messages, force=True)
        assert result.action is Action.FULL and result.pinned_identifiers == 0
        assert pinned_lines(messages) == []

    run(main())


def test_a_summary_made_in_the_background_reports_what_its_request_used() -> None:
    class CostedProvider(GatedProvider):
        async def __call__(self, prompt: list[dict[str, Any]], /) -> str:
            text = await super().__call__(prompt)
            return SummaryText(text, {"prompt_tokens": 700, "completion_tokens": 9,
                                      "prompt_tokens_details": {"cached_tokens": 512}})

    async def main() -> None:
        provider = CostedProvider()
        compactor, messages = await started(provider)
        quiet = await compactor(messages)
        assert quiet.action is Action.NONE and quiet.cost is None
        provider.release.set()
        await settle()
        result = await compactor(messages)
        assert result.action is Action.FULL
        assert result.cost == SummaryCost(1, 700, 512, None, 9)

    run(main())


def test_a_background_summary_started_by_compacted_is_swapped_in_on_its_new_list() -> None:
    async def main() -> None:
        provider = GatedProvider()
        messages = history()
        threshold = math.ceil(tokens(messages) / 0.6)
        compactor = AsyncCompactor(
            provider, threshold=threshold, background_at=0.5, keep_recent=100
        )
        before = copy.deepcopy(messages)
        new, first = await compactor.compacted(messages, session_id="thread")
        assert first.action is Action.NONE and compactor.background_pending
        await settle()
        appended = tool_round("late", "bash", "late " * 40)
        new = [*new, *appended]
        provider.release.set()
        await settle()
        given = list(new)
        swapped, result = await compactor.compacted(new, session_id="thread")
        assert result.action is Action.FULL and result.summary_calls == 1
        assert new == given and all(a is b for a, b in zip(new, given, strict=True))
        assert messages == before
        assert_swapped(swapped, given, appended)
        assert not compactor.background_pending

    run(main())
