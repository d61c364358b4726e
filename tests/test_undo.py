"""Undo is calm: a result that cannot be undone says why and returns False; an
interrupt or a cancellation in ``after_compact`` leaves ``last_result`` to undo."""

from __future__ import annotations

import asyncio
import copy
import logging
from typing import Any

import pytest

from bareagent_compact import Action, AsyncCompactor, CompactionResult, Compactor
from conftest import RecordingProvider, tool_round


def history() -> list[dict[str, Any]]:
    """A history whose compaction also truncates old tool results in the same call."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "fix the bug"},
    ]
    for turn in range(8):
        messages += tool_round(f"c{turn}", "bash", f"line {turn} " * 300)
    messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next?"}]
    return messages


def test_undoing_the_same_result_twice_returns_false_with_a_logged_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages = history()
    before = copy.deepcopy(messages)
    compactor = Compactor(RecordingProvider("S"), threshold=500)
    result = compactor(messages)
    assert result.compacted and result.truncated > 0
    assert compactor.undo(messages, result) is True
    assert messages == before
    with caplog.at_level(logging.WARNING):
        assert compactor.undo(messages, result) is False
    assert messages == before
    assert "already undone" in caplog.text


def test_undo_on_another_list_returns_false_with_a_logged_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages = history()
    compactor = Compactor(RecordingProvider("S"), threshold=500)
    result = compactor(messages)
    other = history()
    unchanged = copy.deepcopy(other)
    with caplog.at_level(logging.WARNING):
        assert compactor.undo(other, result) is False
    assert other == unchanged
    assert "not the one that compaction made" in caplog.text
    assert compactor.undo(messages, result) is True  # the right list still can


def test_undo_of_an_async_result_twice_returns_false() -> None:
    messages = history()
    before = copy.deepcopy(messages)
    compactor = AsyncCompactor(RecordingProvider("S"), threshold=500)
    result = asyncio.run(compactor(messages))
    assert compactor.undo(messages, result) is True
    assert compactor.undo(messages, result) is False
    assert messages == before


def test_undo_arguments_of_the_wrong_type_are_still_type_errors() -> None:
    compactor = Compactor(RecordingProvider("S"))
    result = compactor(history(), force=True)
    with pytest.raises(TypeError, match="result must be a CompactionResult"):
        compactor.undo(history(), "result")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="messages must be a list"):
        compactor.undo("messages", result)  # type: ignore[arg-type]


def test_last_result_is_the_result_of_the_latest_call() -> None:
    compactor = Compactor(RecordingProvider("S"), threshold=500)
    assert compactor.last_result is None
    messages = history()
    full = compactor(messages)
    assert full.compacted and compactor.last_result is full
    quiet = compactor(messages)
    assert quiet.action is Action.NONE and compactor.last_result is quiet


class Interrupt:
    """An ``after_compact`` hook that sees ``last_result`` set, then is interrupted."""

    def __init__(self) -> None:
        self.compactor: Compactor | None = None
        self.seen: list[CompactionResult | None] = []

    def __call__(self, result: CompactionResult, summary: str | None) -> None:
        assert self.compactor is not None
        self.seen.append(self.compactor.last_result)
        raise KeyboardInterrupt


def test_an_interrupt_in_after_compact_leaves_last_result_to_undo() -> None:
    messages = history()
    before = copy.deepcopy(messages)
    hook = Interrupt()
    compactor = Compactor(RecordingProvider("S"), threshold=500, after_compact=hook)
    hook.compactor = compactor
    with pytest.raises(KeyboardInterrupt):
        compactor(messages)
    result = compactor.last_result
    assert result is not None and result.compacted
    assert hook.seen == [result]
    assert messages != before  # the compaction had happened
    assert compactor.undo(messages, result) is True
    assert messages == before


def test_a_cancellation_in_after_compact_leaves_last_result_to_undo() -> None:
    messages = history()
    before = copy.deepcopy(messages)

    async def main() -> AsyncCompactor:
        started = asyncio.Event()

        async def after(result: CompactionResult, summary: str | None) -> None:
            started.set()
            await asyncio.Event().wait()  # until cancelled

        compactor = AsyncCompactor(RecordingProvider("S"), threshold=500, after_compact=after)
        task = asyncio.create_task(compactor(messages))
        await asyncio.wait_for(started.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 10)
        return compactor

    compactor = asyncio.run(main())
    result = compactor.last_result
    assert result is not None and result.compacted
    assert compactor.undo(messages, result) is True
    assert messages == before
