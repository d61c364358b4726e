"""AsyncCompactor: the same steps as Compactor, awaited; and the sync/async boundary."""

from __future__ import annotations

import asyncio
import copy
import random
import threading
import time
from typing import Any

import pytest

from bareagent_compact import Action, AsyncCompactor, Compactor
from conftest import MemoryTranscripts, RecordingProvider, tool_history, tool_round
from converters import random_history


def history(rounds: int = 4) -> list[dict[str, Any]]:
    return tool_history(rounds, output=lambda turn: f"output {turn} " * 40)


def test_async_compactor_gives_the_results_of_the_sync_one_over_random_histories() -> None:
    rng = random.Random("sync-async")

    async def run_async(messages: list[Any], options: dict[str, Any], force: bool) -> Any:
        return await AsyncCompactor(RecordingProvider("S"), **options)(messages, force=force)

    for _ in range(150):
        source = random_history(rng)
        options = {"keep_recent": rng.randint(0, 3), "threshold": rng.choice((0, 100, 5000))}
        force = rng.random() < 0.3
        sync_messages, async_messages = copy.deepcopy(source), copy.deepcopy(source)
        sync_result = Compactor(RecordingProvider("S"), **options)(sync_messages, force=force)
        async_result = asyncio.run(run_async(async_messages, options, force))
        assert async_result == sync_result
        assert async_messages == sync_messages


def test_async_provider_is_awaited_and_sync_one_runs_off_the_event_loop() -> None:
    threads: list[int] = []

    async def async_provider(prompt: list[dict[str, Any]]) -> str:
        threads.append(threading.get_ident())
        await asyncio.sleep(0)
        return "async summary"

    def sync_provider(prompt: list[dict[str, Any]]) -> str:
        threads.append(threading.get_ident())
        return "sync summary"

    async def main() -> tuple[list[Any], list[Any], int]:
        first, second = history(), history()
        await AsyncCompactor(async_provider)(first, force=True)
        await AsyncCompactor(sync_provider)(second, force=True)
        return first, second, threading.get_ident()

    first, second, loop_thread = asyncio.run(main())
    assert first[1]["content"].endswith("async summary")
    assert second[1]["content"].endswith("sync summary")
    assert threads[0] == loop_thread and threads[1] != loop_thread


def test_async_and_sync_transcript_managers_both_save() -> None:
    class AsyncStore:
        def __init__(self) -> None:
            self.saved: list[str] = []

        async def save(self, messages: list[Any], session_id: str) -> None:
            await asyncio.sleep(0)
            self.saved.append(session_id)

    async_store, sync_store = AsyncStore(), MemoryTranscripts()

    async def main() -> list[Any]:
        a = await AsyncCompactor(RecordingProvider(), async_store, session_id="a")(
            history(), force=True
        )
        b = await AsyncCompactor(RecordingProvider(), sync_store, session_id="b")(
            history(), force=True
        )
        return [a, b]

    results = asyncio.run(main())
    assert [r.snapshot_saved for r in results] == [True, True]
    assert async_store.saved == ["a"] and [s for _, s in sync_store.saved] == ["b"]


def test_async_archive_hook_is_awaited_before_results_are_truncated() -> None:
    archived: list[Any] = []

    async def archive(record: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        archived.append(record["tool_use_id"])

    messages = history(rounds=5)
    result = asyncio.run(AsyncCompactor(RecordingProvider(), archive=archive)(messages))
    assert result.truncated == 2 and archived == ["t0", "t1"]


def test_cancelling_during_the_summary_leaves_the_history_exactly_as_it_was() -> None:
    started = asyncio.Event()

    async def slow_provider(prompt: list[dict[str, Any]]) -> str:
        started.set()
        await asyncio.sleep(10)
        return "never"

    async def main() -> tuple[list[Any], list[Any]]:
        messages = history(rounds=6)
        before = copy.deepcopy(messages)
        task = asyncio.create_task(AsyncCompactor(slow_provider)(messages, force=True))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return messages, before

    messages, before = asyncio.run(main())
    assert messages == before  # micro-compaction's truncations were put back too


def test_messages_appended_by_another_task_during_the_summary_are_kept() -> None:
    async def main() -> list[Any]:
        messages = history(rounds=3)
        gate = asyncio.Event()

        async def provider(prompt: list[dict[str, Any]]) -> str:
            gate.set()
            await asyncio.sleep(0.01)
            return "S"

        async def appender() -> None:
            await gate.wait()
            messages.append({"role": "user", "content": "arrived meanwhile"})

        await asyncio.gather(AsyncCompactor(provider)(messages, force=True), appender())
        return messages

    messages = asyncio.run(main())
    assert messages[-1] == {"role": "user", "content": "arrived meanwhile"}
    assert messages[1]["content"] == "[Context Compressed]\nS"


def test_sync_compactor_refuses_async_plug_ins_naming_async_compactor() -> None:
    async def provider(prompt: list[dict[str, Any]]) -> str:
        return "s"

    class AsyncStore:
        async def save(self, messages: list[Any], session_id: str) -> None:
            return None

    async def archive(record: dict[str, Any]) -> None:
        return None

    with pytest.raises(TypeError, match="AsyncCompactor"):
        Compactor(provider)
    with pytest.raises(TypeError, match="AsyncCompactor"):
        Compactor(RecordingProvider(), AsyncStore())
    with pytest.raises(TypeError, match="AsyncCompactor"):
        Compactor(RecordingProvider(), archive=archive)


@pytest.mark.parametrize("hook", ["before_compact", "after_compact", "archive"])
def test_sync_compactor_refuses_async_hooks_at_construction_and_on_assignment(hook: str) -> None:
    async def async_hook(*args: Any) -> None:
        return None

    with pytest.raises(TypeError, match=f"{hook} is an async function: use AsyncCompactor"):
        Compactor(RecordingProvider(), **{hook: async_hook})
    compactor = Compactor(RecordingProvider())
    with pytest.raises(TypeError, match=f"{hook} is an async function: use AsyncCompactor"):
        setattr(compactor, hook, async_hook)
    assert getattr(compactor, hook) is None  # the refused value was not kept
    AsyncCompactor(RecordingProvider(), **{hook: async_hook})  # the async twin awaits it


def test_sync_compactor_fails_cleanly_on_an_awaitable_returned_at_call_time() -> None:
    async def later() -> str:
        return "summary"

    calls: list[Any] = []

    def provider(prompt: list[dict[str, Any]]) -> Any:
        coroutine = later()
        calls.append(coroutine)
        return coroutine

    messages = history()
    before_len = len(messages)
    result = Compactor(provider)(messages, force=True)
    assert result.action is Action.FAILED
    assert "awaitable" in (result.reason or "")
    assert len(messages) == before_len
    assert calls[0].cr_frame is None  # closed, so no "never awaited" warning


def test_sync_awaitable_snapshot_counts_as_a_failed_snapshot() -> None:
    class Store:
        saved = 0

        def save(self, messages: list[Any], session_id: str) -> Any:
            async def write() -> None:
                Store.saved += 1

            return write()

    provider = RecordingProvider()
    result = Compactor(provider, Store())(history(), force=True)
    assert result.action is Action.FAILED and result.reason == "snapshot failed"
    assert not result.snapshot_saved and Store.saved == 0 and provider.prompts == []


def test_sync_awaitable_archive_keeps_the_result_whole() -> None:
    def archive(record: dict[str, Any]) -> Any:
        async def write() -> None:
            return None

        return write()

    messages = history(rounds=5)
    result = Compactor(RecordingProvider(), archive=archive)(messages)
    assert result.truncated == 0
    assert not any(
        isinstance(b.get("content"), str) and b["content"].startswith("[truncated")
        for m in messages if isinstance(m["content"], list) for b in m["content"]
    )


def test_messages_appended_by_the_provider_are_kept_after_the_pending_turn() -> None:
    messages = history(rounds=3)
    pending = messages[-1]

    def provider(prompt: list[dict[str, Any]]) -> str:
        messages.append({"role": "user", "content": "typed while summarising"})
        return "S"

    Compactor(provider)(messages, force=True)
    assert messages[-2] is pending
    assert messages[-1] == {"role": "user", "content": "typed while summarising"}


def test_messages_appended_by_a_thread_during_a_slow_summary_are_kept() -> None:
    messages = history(rounds=3)
    started = threading.Event()

    def provider(prompt: list[dict[str, Any]]) -> str:
        started.set()
        time.sleep(0.05)
        return "S"

    def append() -> None:
        started.wait()
        for n in range(3):
            messages.append({"role": "user", "content": f"late {n}"})

    worker = threading.Thread(target=append)
    worker.start()
    Compactor(provider)(messages, force=True)
    worker.join()
    assert [m["content"] for m in messages[-3:]] == ["late 0", "late 1", "late 2"]


def test_a_system_message_edited_during_the_summary_is_rebuilt_as_it_is_now() -> None:
    messages = history(rounds=3)

    def provider(prompt: list[dict[str, Any]]) -> str:
        messages[0]["content"] = "You are an agent. Updated."
        return "S"

    Compactor(provider)(messages, force=True)
    assert messages[0]["content"] == "You are an agent. Updated."


def test_a_history_rewritten_during_the_summary_is_left_alone() -> None:
    messages = history(rounds=3)
    replacement = [{"role": "user", "content": "new session"}]

    def provider(prompt: list[dict[str, Any]]) -> str:
        messages[:] = replacement
        return "S"

    result = Compactor(provider)(messages, force=True)
    assert result.action is Action.FAILED
    assert result.reason == "history changed during summary"
    assert messages == replacement


def test_force_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match="force must be a bool, got str"):
        Compactor(RecordingProvider())(history(), force="false")  # type: ignore[arg-type]


def test_both_drivers_log_a_failed_archive_the_same_way(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def archive(record: dict[str, Any]) -> None:
        raise OSError("disk full")

    def run(compactor: Compactor | AsyncCompactor, messages: list[dict[str, Any]]) -> Any:
        if isinstance(compactor, AsyncCompactor):
            return asyncio.run(compactor(messages))
        return compactor(messages)

    lines = []
    for driver in (Compactor, AsyncCompactor):
        messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        for i in range(5):
            messages += tool_round(f"t{i}", "bash", "x" * 200)
        caplog.clear()
        result = run(driver(RecordingProvider(), threshold=10**9, archive=archive), messages)
        assert result.truncated == 0  # every result kept whole
        lines.append([r.getMessage() for r in caplog.records if "archive" in r.getMessage()])
    assert lines[0] == lines[1] == ["archive hook failed; tool result kept untruncated"] * 2


# --------------------------------------------------------------------------- event loops


def in_thread(function: Any, timeout: float = 20) -> Any:
    """``function()`` in a daemon thread; a deadlock fails the test instead of hanging it."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = function()
        except BaseException as exc:  # handed to the test
            outcome["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(timeout)
    assert not thread.is_alive(), "deadlocked"
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def test_an_async_compactor_serves_successive_event_loops() -> None:
    compactor = AsyncCompactor(RecordingProvider("S"), threshold=100)

    async def two_at_once() -> list[Any]:
        # The second call waits for the first on the compactor's lock.
        return list(await asyncio.gather(compactor(history()), compactor(history())))

    for _ in range(3):  # each asyncio.run is a new event loop
        results = in_thread(lambda: asyncio.run(two_at_once()))
        assert [r.action for r in results] == [Action.FULL, Action.FULL]


def test_a_hook_calling_back_into_the_async_compactor_does_not_deadlock() -> None:
    messages = history()
    inner: list[Any] = []
    called: list[bool] = []

    async def after(result: Any, summary: str | None) -> None:
        if called:
            return  # the calls below may compact again: call back only once
        called.append(True)
        compactor.record_usage(messages, 1234)
        inner.append(await compactor(messages))  # the same task, re-entrant
        inner.append(await asyncio.create_task(compactor(messages)))  # a task it waits for
        inner.extend(await asyncio.gather(compactor(messages, force=True)))

    def plain_before(event: Any) -> None:
        compactor.record_usage(messages, 4321)

    compactor = AsyncCompactor(
        RecordingProvider("S"), threshold=100, before_compact=plain_before, after_compact=after
    )

    async def main() -> Any:
        return await asyncio.wait_for(compactor(messages), 10)

    result = in_thread(lambda: asyncio.run(main()))
    assert result.action is Action.FULL
    assert len(inner) == 3


def test_a_hook_calling_back_into_the_sync_compactor_does_not_deadlock() -> None:
    messages = history()
    inner: list[Any] = []
    called: list[bool] = []

    def after(result: Any, summary: str | None) -> None:
        if called:
            return
        called.append(True)
        compactor.record_usage(messages, 1234)
        inner.append(compactor(messages, force=True))

    compactor = Compactor(RecordingProvider("S"), threshold=100, after_compact=after)
    result = in_thread(lambda: compactor(messages))
    assert result.action is Action.FULL and len(inner) == 1


def test_an_async_compactor_busy_in_another_event_loop_fails_at_once() -> None:
    entered, release = threading.Event(), threading.Event()

    def slow(prompt: list[dict[str, Any]]) -> str:
        entered.set()
        release.wait(20)
        return "S"

    compactor = AsyncCompactor(slow, threshold=100)
    first = threading.Thread(target=lambda: outcomes.append(asyncio.run(compactor(history()))))
    outcomes: list[Any] = []
    first.start()
    try:
        assert entered.wait(20)
        started = time.monotonic()
        with pytest.raises(RuntimeError, match="another event loop"):
            in_thread(lambda: asyncio.run(compactor(history())))
        assert time.monotonic() - started < 5  # at once, not after the first call
    finally:
        release.set()
        first.join(20)
    assert not first.is_alive()
    assert outcomes[0].action is Action.FULL
    # Once the other loop's call is over, this loop may use it.
    assert in_thread(lambda: asyncio.run(compactor(history()))).action is Action.FULL
