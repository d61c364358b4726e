"""compacted(): a new list, the caller's list and messages left untouched."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from bareagent_compact import (
    Action,
    AsyncCompactor,
    Compactor,
    JsonlTranscriptManager,
    estimate_tokens,
)
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
    assert new[0] is messages[0] and new[-1] is messages[-1]


def test_undo_works_on_the_returned_list() -> None:
    messages = history()
    before = copy.deepcopy(messages)
    compactor = Compactor(RecordingProvider("S"), threshold=500)
    new, result = compactor.compacted(messages)
    assert result.compacted and compactor.undo(new, result) is True
    assert new == before
    assert new[0] is messages[0] and new[-1] is messages[-1]


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

    class Block(pydantic.BaseModel):  # type: ignore[name-defined,misc]
        type: str
        text: str

    nested = {"role": "assistant", "content": [Block(type="text", text="block reply")]}
    messages: list[Any] = [*history(), nested, Text(role="user", content="object turn")]
    before = copy.deepcopy(messages)
    ids = [id(m) for m in messages]
    new, result = Compactor(RecordingProvider("S")).compacted(messages)
    _untouched(messages, before, ids)
    assert result.truncated > 0
    assert isinstance(nested["content"][0], Block)  # the caller's block not converted
    assert new[-1] is messages[-1] and new[-2] is nested


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
    assert result == expected and new == in_place and new[0] is messages[0]
    assert compactor.undo(new, result) is True and new == before


# Many conversations on one compactor.
def test_interleaved_conversations_keep_their_own_snapshots() -> None:
    store = MemoryTranscripts()
    compactor = Compactor(RecordingProvider("S"), store, threshold=500)
    compactor.compacted(history(), session_id="a")
    compactor(history(), session_id="b")
    compactor.compacted(history())
    assert [sid for _, sid in store.saved] == ["a", "b", "default"]


def test_usage_reported_for_one_conversation_does_not_anchor_another() -> None:
    provider = RecordingProvider("S")
    compactor = Compactor(provider, threshold=20_000)
    messages = history(rounds=2)
    same = copy.deepcopy(messages)
    compactor.compacted(messages, session_id="a")
    compactor.compacted(same, session_id="b")
    compactor.record_usage(messages, 50_000, session_id="a")
    _, b_result = compactor.compacted(same, session_id="b")
    assert b_result.action is not Action.FULL and provider.prompts == []
    _, a_result = compactor.compacted(messages, session_id="a")
    assert a_result.action is Action.FULL and len(provider.prompts) == 1


def test_a_failing_conversation_backs_off_alone() -> None:
    def provider(prompt: list[dict[str, Any]]) -> str:
        if "alpha" in str(prompt):
            raise RuntimeError("down")
        return "S"

    compactor = Compactor(provider, threshold=500)
    alpha = [*history(), {"role": "assistant", "content": "alpha"}]
    alpha.append({"role": "user", "content": "?"})
    _, first = compactor.compacted(alpha, session_id="a")
    assert first.action is not Action.FULL and first.reason is not None
    _, beta = compactor.compacted(history(), session_id="b")
    assert beta.action is Action.FULL  # not held back by a's failure
    assert compactor._conversations._held["a"].trigger.failures == 1
    assert compactor._parts.trigger.failures == 0  # nor the compactor's own session


def test_each_conversation_has_its_own_history_cache() -> None:
    compactor = Compactor(RecordingProvider("S"))
    compactor.compacted(history(rounds=2), session_id="a")
    view_a = compactor._conversations._held["a"].view
    copies_a = list(view_a.history.copies)
    compactor.compacted(history(rounds=5), session_id="b")
    compactor.compacted(history(rounds=4))
    assert compactor._conversations._held["a"].view is view_a
    assert view_a.history.copies == copies_a and len(copies_a) == 2 + 4 + 2
    assert len(compactor._parts.view.history.copies) == 2 + 8 + 2


def test_the_least_recently_used_conversation_is_evicted_first() -> None:
    provider = RecordingProvider("S")
    compactor = Compactor(provider, threshold=20_000)
    compactor._conversations.limit = 2
    messages = history(rounds=2)
    compactor.compacted(messages, session_id="a")
    compactor.record_usage(messages, 50_000, session_id="a")
    compactor.compacted(history(rounds=2), session_id="b")
    compactor.record_usage(messages, 50_000, session_id="b")
    compactor.compacted(messages, session_id="a")  # a used again: full, and most recent
    compactor.compacted(history(rounds=2), session_id="c")  # b out
    assert "b" not in compactor._conversations and "a" in compactor._conversations
    _, again = compactor.compacted(copy.deepcopy(messages), session_id="b")
    assert again.action is not Action.FULL  # its anchor went with it
    assert len(provider.prompts) == 1


def test_recall_reads_a_given_conversations_handles(tmp_path: Any) -> None:
    store = JsonlTranscriptManager(str(tmp_path))
    compactor = Compactor(RecordingProvider("S"), archive=store)
    new, result = compactor.compacted(history(), session_id="thread-1")
    assert result.truncated > 0
    marker = next(
        b["content"] for m in new if isinstance(m["content"], list) for b in m["content"]
        if b.get("type") == "tool_result" and "recall" in str(b["content"])
    )
    handle = marker.rsplit("recall ", 1)[1].rstrip("]")
    assert compactor.recall(handle, session_id="thread-1").startswith("line 0")
    with pytest.raises(LookupError):
        compactor.recall(handle)
    call = {"type": "tool_use", "id": "x", "name": "recall_truncated", "input": {"handle": handle}}
    assert "line 0" in compactor.handle_recall(call, session_id="thread-1")["content"]


def test_async_conversations_keep_their_own_state() -> None:
    store = MemoryTranscripts()
    compactor = AsyncCompactor(RecordingProvider("S"), store, threshold=500)

    async def main() -> None:
        await compactor.compacted(history(), session_id="a")
        await compactor(history(), session_id="b")

    asyncio.run(main())
    assert [sid for _, sid in store.saved] == ["a", "b"]
    assert compactor.get_session_id() == "default" and compactor._parts.trigger.calls == 0


def test_forget_and_undo_take_the_conversation_they_are_for() -> None:
    compactor = Compactor(RecordingProvider("S"), threshold=500)
    new, result = compactor.compacted(history(), session_id="a")
    view_a = compactor._conversations._held["a"].view
    assert not view_a.history.empty
    compactor.forget(session_id="a")
    assert view_a.history.empty
    assert compactor.undo(new, result, session_id="a") is True
    assert "a" in compactor._conversations and compactor.get_session_id() == "default"


def test_set_session_id_makes_a_remembered_conversation_the_own_one_afresh() -> None:
    compactor = Compactor(RecordingProvider("S"))
    compactor.compacted(history(), session_id="a")
    assert "a" in compactor._conversations
    compactor.set_session_id("a")
    assert "a" not in compactor._conversations and compactor.get_session_id() == "a"
    _, result = compactor.compacted(history(), session_id="a")  # the own session now
    assert result.truncated > 0 and "a" not in compactor._conversations


def test_evicting_a_conversation_cancels_its_background_summary() -> None:
    release = asyncio.Event()

    async def provider(prompt: list[dict[str, Any]]) -> str:
        await release.wait()
        return "S"

    async def main() -> None:
        messages = history()
        threshold = int(estimate_tokens(messages) / 0.6)
        compactor = AsyncCompactor(
            provider, threshold=threshold, background_at=0.5, keep_recent=100
        )
        compactor._conversations.limit = 1
        await compactor.compacted(messages, session_id="a")
        assert compactor.background_pending
        task = compactor._conversations.pending()[0].handle
        await compactor.compacted(history(rounds=1), session_id="b")  # a out
        await asyncio.sleep(0)
        assert isinstance(task, asyncio.Task) and task.cancelled()
        assert not compactor.background_pending

    asyncio.run(main())
