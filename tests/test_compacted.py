"""compacted(): a new list, the caller's list and messages left untouched."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from bareagent_compact import Action, AsyncCompactor, Compactor
from conftest import MemoryTranscripts, RecordingProvider, tool_round


def history(rounds: int = 8) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "fix the bug"},
    ]
    for turn in range(rounds):
        messages += tool_round(f"c{turn}", "bash", f"line {turn} " * 300)
    messages += [{"role": "assistant", "content": "done"}, {"role": "user", "content": "next?"}]
    return messages


def _untouched(messages: list[Any], before: list[Any], ids: list[int]) -> None:
    assert messages == before
    assert [id(m) for m in messages] == ids


def test_micro_compaction_leaves_the_input_and_equals_the_in_place_call() -> None:
    messages = history()
    before, ids = copy.deepcopy(messages), [id(m) for m in messages]
    new, result = Compactor(RecordingProvider("S")).compacted(messages)
    _untouched(messages, before, ids)
    in_place = copy.deepcopy(before)
    expected = Compactor(RecordingProvider("S"))(in_place)
    assert result == expected and result.action is Action.MICRO and result.truncated > 0
    assert new == in_place
    kept = [n is o for n, o in zip(new, messages, strict=True)]
    changed = [n != o for n, o in zip(new, messages, strict=True)]
    assert kept == [not c for c in changed] and any(changed) and any(kept)


def test_full_compaction_leaves_the_input_and_keeps_unchanged_messages() -> None:
    messages = history()
    before, ids = copy.deepcopy(messages), [id(m) for m in messages]
    new, result = Compactor(RecordingProvider("S"), threshold=500).compacted(messages)
    _untouched(messages, before, ids)
    in_place = copy.deepcopy(before)
    expected = Compactor(RecordingProvider("S"), threshold=500)(in_place)
    assert result == expected and result.action is Action.FULL
    assert new == in_place
    assert new[-1] is messages[-1]


def test_undo_works_on_the_returned_list() -> None:
    messages = history()
    before = copy.deepcopy(messages)
    compactor = Compactor(RecordingProvider("S"), threshold=500)
    new, result = compactor.compacted(messages)
    assert result.compacted and compactor.undo(new, result) is True
    assert new == before
    assert new[-1] is messages[-1]


def test_a_second_call_on_the_returned_list_leaves_it_untouched() -> None:
    compactor = Compactor(RecordingProvider("S"))
    new, _ = compactor.compacted(history())
    new.append({"role": "assistant", "content": "more"})
    before, ids = copy.deepcopy(new), [id(m) for m in new]
    again, result = compactor.compacted(new)
    _untouched(new, before, ids)
    assert all(a is b for a, b in zip(again, new, strict=True)) and result.truncated == 0


def test_sdk_objects_in_the_input_are_left_and_returned_when_unchanged() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Text(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        role: str
        content: str

    messages: list[Any] = [*history(), Text(role="assistant", content="object reply")]
    before = copy.deepcopy(messages)
    new, result = Compactor(RecordingProvider("S")).compacted(messages)
    assert messages == before and result.truncated > 0
    assert new[-1] is messages[-1]


def test_session_id_keys_the_snapshot_of_that_call() -> None:
    store = MemoryTranscripts()
    compactor = Compactor(RecordingProvider("S"), store, threshold=500)
    compactor.compacted(history(), session_id="thread-1")
    assert [sid for _, sid in store.saved] == ["thread-1"]
    assert compactor.get_session_id() == "default"


def test_bad_arguments_are_the_errors_of_the_in_place_call() -> None:
    compactor = Compactor(RecordingProvider("S"))
    with pytest.raises(TypeError):
        compactor.compacted(history(), force="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compactor.compacted("not a list")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        compactor.compacted([1])
    with pytest.raises((TypeError, ValueError)):
        compactor.compacted(history(), session_id="")


def test_async_compacted_leaves_the_input_and_equals_the_in_place_call() -> None:
    messages = history()
    before, ids = copy.deepcopy(messages), [id(m) for m in messages]
    compactor = AsyncCompactor(RecordingProvider("S"), threshold=500)
    new, result = asyncio.run(compactor.compacted(messages))
    _untouched(messages, before, ids)
    in_place = copy.deepcopy(before)
    expected = Compactor(RecordingProvider("S"), threshold=500)(in_place)
    assert result == expected and new == in_place and new[-1] is messages[-1]
    assert compactor.undo(new, result) is True and new == before
