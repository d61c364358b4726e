"""The compactor's safety rules: nothing lost, no invalid request, no crash."""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable
from typing import Any

import pytest

from bareagent_compact import Action, Compactor, _micro_compact, estimate_tokens, find_orphans
from conftest import MemoryTranscripts, RecordingProvider, tool_round

History = Callable[..., list[dict[str, Any]]]


def micro_only(messages: list[dict[str, Any]], keep_recent: int = 3) -> list[dict[str, Any]]:
    expected = copy.deepcopy(messages)
    _micro_compact(expected, keep_recent)
    return expected


# Snapshot failure.
def test_failed_snapshot_cancels_the_summary(
    provider: RecordingProvider, make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    messages = make_history(rounds=5)
    expected = micro_only(messages)
    broken = MemoryTranscripts(error=OSError("disk full"))
    with caplog.at_level(logging.WARNING):
        result = Compactor(provider, broken)(messages, force=True)
    assert result.action is Action.FAILED
    assert result.reason == "snapshot failed"
    assert result.snapshot_saved is False
    assert provider.prompts == []
    assert messages == expected
    assert any("snapshot failed" in r.getMessage() for r in caplog.records)


def test_require_snapshot_false_summarises_anyway(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=2)
    broken = MemoryTranscripts(error=OSError("disk full"))
    result = Compactor(provider, broken, require_snapshot=False)(messages, force=True)
    assert result.action is Action.FULL
    assert result.snapshot_saved is False


# Unusable summaries.
@pytest.mark.parametrize("answer", [None, "", "   \n\t", 42, b"bytes", ["list"], object()])
def test_unusable_summary_leaves_history_intact(
    answer: Any, make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    messages = make_history(rounds=4)
    expected = micro_only(messages)
    with caplog.at_level(logging.WARNING):
        result = Compactor(RecordingProvider(answer))(messages, force=True)
    assert result.action is Action.FAILED
    assert result.reason == "unusable summary"
    assert messages == expected
    assert any("unusable summary" in r.getMessage() for r in caplog.records)


def test_object_with_a_non_string_text_is_unusable(make_history: History) -> None:
    class Response:
        text = None

    messages = make_history(rounds=1)
    assert Compactor(RecordingProvider(Response()))(messages, force=True).action is Action.FAILED


# Tool pairs.
def test_spec_rebuild_orphans_a_pending_tool_result_and_warns(
    provider: RecordingProvider, make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    messages = make_history(rounds=2)
    with caplog.at_level(logging.WARNING):
        Compactor(provider, keep_tool_pairs=False)(messages, force=True)
    assert [o.kind for o in find_orphans(messages)] == ["tool_result"]
    assert any("keep_tool_pairs=True" in r.getMessage() for r in caplog.records)


def test_keep_tool_pairs_keeps_the_matching_call_before_the_pending_result(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=3)
    call, pending = messages[-2], messages[-1]
    Compactor(provider, keep_tool_pairs=True)(messages, force=True)
    assert messages[-2] is call and messages[-1] is pending
    # The kept call follows the summary directly: no acknowledgement, roles alternate.
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user"]
    assert find_orphans(messages) == []
    assert '"toolu_2"' not in provider.prompts[0][1]["content"]
    assert "[tool_use:read_file]" in provider.prompts[0][1]["content"]


def test_keep_tool_pairs_keeps_results_split_over_several_messages(
    provider: RecordingProvider,
) -> None:
    call = {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "a", "name": "bash", "input": {}},
            {"type": "tool_use", "id": "b", "name": "bash", "input": {}},
        ],
    }
    first = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "a", "content": "1"}],
    }
    second = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "b", "content": "2"}],
    }
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
        call,
        first,
        second,
    ]
    unpaired_before = len(find_orphans(messages))  # "b" is answered one message late
    Compactor(provider, keep_tool_pairs=True)(messages, force=True)
    assert messages[-3:] == [call, first, second]
    assert len(find_orphans(messages)) == unpaired_before


def test_keep_tool_pairs_keeps_a_trailing_call_whose_results_are_pending(
    provider: RecordingProvider,
) -> None:
    call, _ = tool_round("z", "bash", "")
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "thinking"},
        call,
    ]
    Compactor(provider, keep_tool_pairs=True)(messages, force=True)
    assert messages[-1] is call
    assert find_orphans([*messages, _]) == []


def test_keep_tool_pairs_with_only_the_pair_left_is_a_no_op(provider: RecordingProvider) -> None:
    messages = [{"role": "system", "content": "s"}, *tool_round("a", "bash", "out")]
    before = copy.deepcopy(messages)
    result = Compactor(provider, keep_tool_pairs=True)(messages, force=True)
    assert result.reason == "nothing to summarise"
    assert messages == before


# Archive of truncated output.
def test_archive_receives_each_result_before_it_is_truncated(
    provider: RecordingProvider, make_history: History
) -> None:
    records: list[dict[str, Any]] = []
    messages = make_history(rounds=5, size=10)
    originals = [messages[3]["content"][0]["content"], messages[5]["content"][0]["content"]]
    compactor = Compactor(provider, archive=records.append, session_id="sess")
    assert compactor(messages).truncated == 2
    assert records == [
        {
            "tool_use_id": "toolu_0",
            "tool_name": "read_file",
            "content": originals[0],
            "session_id": "sess",
        },
        {
            "tool_use_id": "toolu_1",
            "tool_name": "bash",
            "content": originals[1],
            "session_id": "sess",
        },
    ]


def test_failing_archive_keeps_the_result_whole(
    provider: RecordingProvider, make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(record: dict[str, Any]) -> None:
        raise OSError("read-only")

    messages = make_history(rounds=5)
    before = copy.deepcopy(messages)
    with caplog.at_level(logging.WARNING):
        result = Compactor(provider, archive=broken)(messages)
    assert result.truncated == 0
    assert messages == before
    assert any("archive" in r.getMessage() for r in caplog.records)


# Input validation before any mutation.
@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ("a string", r"list"),
        (None, r"list"),
        ([{"role": "user", "content": "x"}, 7], r"messages\[1\] must be a dict"),
        ([{"content": "no role"}], r"messages\[0\]\['role'\] must be a str"),
        ([{"role": 3, "content": "x"}], r"messages\[0\]\['role'\]"),
    ],
)
def test_malformed_messages_raise_type_error_naming_the_index(bad: Any, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        Compactor(RecordingProvider())(bad, force=True)


def test_malformed_messages_leave_the_list_untouched(make_history: History) -> None:
    messages: list[Any] = make_history(rounds=6)
    messages.insert(2, {"role": None, "content": "x"})
    before = copy.deepcopy(messages)
    with pytest.raises(TypeError, match=r"messages\[2\]"):
        Compactor(RecordingProvider())(messages, force=True)
    assert messages == before


def test_unexpected_content_types_are_compacted_without_crashing(
    provider: RecordingProvider,
) -> None:
    class Thing:
        def __str__(self) -> str:
            return "a thing"

    messages: list[dict[str, Any]] = [
        {"role": "user", "content": 12},
        {"role": "assistant", "content": {"nested": {"dict": [1, 2]}}},
        {
            "role": "user",
            "content": [b"raw", Thing(), 3.5, None, {"type": "image", "source": {"data": "..."}}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {"b": b"\x00"}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t", "content": Thing()}],
        },
    ]
    result = Compactor(provider)(messages, force=True)
    assert result.action is Action.FULL
    body = provider.prompts[0][1]["content"]
    assert "a thing" in body and "[image]" in body and "12" in body


def test_deep_content_gives_a_clear_value_error_not_recursion_error(
    provider: RecordingProvider,
) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(10_000):
        node["k"] = {}
        node = node["k"]
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "x", "input": deep}],
        },
        {"role": "user", "content": "go"},
    ]
    # A clear ValueError where the JSON encoder gives up, never a RecursionError;
    # a Python whose encoder goes deeper simply compacts it.
    try:
        result = Compactor(provider)(messages, force=True)
    except ValueError as exc:
        assert "nested too deeply" in str(exc)
        assert len(messages) == 2
    else:
        assert result.action is Action.FULL


def test_cyclic_content_gives_a_clear_value_error(provider: RecordingProvider) -> None:
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    messages = [
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "x", "input": cyclic}],
        }
    ]
    with pytest.raises(ValueError, match="JSON"):
        Compactor(provider)(messages, force=True)


# Concurrency.
def test_calls_on_one_instance_are_serialised() -> None:
    inside = 0
    overlap = []
    gate = threading.Lock()

    def slow_provider(prompt: list[dict[str, Any]]) -> str:
        nonlocal inside
        with gate:
            inside += 1
            overlap.append(inside)
        threading.Event().wait(0.01)
        with gate:
            inside -= 1
        return "summary"

    compactor = Compactor(slow_provider)
    histories = [
        [{"role": "user", "content": f"task {i}"}, {"role": "assistant", "content": "ok"}]
        for i in range(8)
    ]
    threads = [
        threading.Thread(target=compactor, args=(h,), kwargs={"force": True}) for h in histories
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert max(overlap) == 1
    assert all(h[0]["content"] == "[Context Compressed]\nsummary" for h in histories)


# Summaries that would not help.
def test_a_response_whose_text_raises_counts_as_a_failed_summary(make_history: History) -> None:
    class Blocked:
        @property
        def text(self) -> str:
            raise ValueError("response was blocked")

    messages = make_history(rounds=2)
    expected = micro_only(messages)
    result = Compactor(RecordingProvider(Blocked()))(messages, force=True)
    assert result.action is Action.FAILED and result.reason == "provider raised"
    assert messages == expected


def test_a_summary_longer_than_what_it_replaces_is_refused_unless_forced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pending = {"role": "user", "content": "x" * 4000}
    task = "fix the parser, then the tests of the parser, " * 4
    messages = [{"role": "user", "content": task}, {"role": "assistant", "content": "ok"}]
    messages.append(pending)
    before = copy.deepcopy(messages)
    provider = RecordingProvider("a summary longer than the history " * 10)
    with caplog.at_level(logging.WARNING):
        result = Compactor(provider, threshold=100)(messages)
    assert result.action is Action.FAILED
    assert result.reason == "summary longer than its source"
    assert messages == before
    assert any("longer than what it would replace" in r.getMessage() for r in caplog.records)


def test_a_summary_longer_than_what_it_replaces_is_applied_and_warned_when_forced(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pending = {"role": "user", "content": "x" * 4000}
    messages = [{"role": "user", "content": "short task"}, {"role": "assistant", "content": "ok"}]
    messages.append(pending)
    provider = RecordingProvider("a summary longer than the history " * 5)
    with caplog.at_level(logging.WARNING):
        result = Compactor(provider, threshold=100)(messages, force=True)
    assert result.action is Action.FULL and result.tokens_after > result.tokens_before
    assert messages[-1] is pending
    assert any("did not shrink" in r.getMessage() for r in caplog.records)


def test_a_token_counter_failing_after_the_rebuild_does_not_raise(
    make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    calls = 0

    def counter(messages: list[dict[str, Any]]) -> int:
        nonlocal calls
        calls += 1
        if calls > 1:
            raise RuntimeError("token count service down")
        return 10**6

    messages = make_history(rounds=2)
    with caplog.at_level(logging.WARNING):
        result = Compactor(RecordingProvider(), token_counter=counter)(messages)
    assert result.action is Action.FULL
    assert result.tokens_after == estimate_tokens(messages)
    assert any("token_counter failed" in r.getMessage() for r in caplog.records)


def test_a_constant_token_counter_costs_one_summary_not_one_per_turn(make_history: History) -> None:
    provider = RecordingProvider()
    compactor = Compactor(provider, token_counter=lambda messages: 60_000)
    messages = make_history(rounds=2)
    for _ in range(3):
        compactor(messages)
    assert len(provider.prompts) == 1


def test_forced_compaction_applies_even_a_longer_summary(provider: RecordingProvider) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]
    assert Compactor(RecordingProvider("long " * 50))(messages, force=True).action is Action.FULL


def test_still_over_the_threshold_after_compaction_is_warned(
    provider: RecordingProvider, caplog: pytest.LogCaptureFixture
) -> None:
    messages = [
        {"role": "user", "content": "a " * 500},
        {"role": "assistant", "content": "b " * 500},
    ]
    messages.append({"role": "user", "content": "c" * 2000})
    with caplog.at_level(logging.WARNING):
        result = Compactor(provider, threshold=100)(messages)
    assert result.action is Action.FULL and result.tokens_after > 100
    assert any("still over the threshold" in r.getMessage() for r in caplog.records)


def test_a_previous_summary_alone_is_not_summarised_again(
    make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    provider = RecordingProvider()
    compactor = Compactor(provider, threshold=100)
    messages = [
        {"role": "user", "content": "a " * 500},
        {"role": "assistant", "content": "b " * 500},
    ]
    messages.append({"role": "user", "content": "c" * 2000})
    assert compactor(messages).action is Action.FULL
    with caplog.at_level(logging.WARNING):
        result = compactor(messages)
    assert result.reason == "nothing new to summarise"
    assert len(provider.prompts) == 1
    assert compactor(messages, force=True).action is Action.FULL  # /compact still works


def test_tool_ids_reused_across_turns_pair_with_the_nearest_call(
    provider: RecordingProvider,
) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for turn in range(6):
        messages += tool_round("call_0", "bash", f"output {turn} " * 50)
    call, pending = messages[-2], messages[-1]
    result = Compactor(provider, keep_tool_pairs=True)(messages, force=True)
    assert result.action is Action.FULL
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[-2] is call and messages[-1] is pending


def test_summarising_trailing_tool_calls_is_warned(
    provider: RecordingProvider, caplog: pytest.LogCaptureFixture
) -> None:
    call, _ = tool_round("z", "bash", "")
    messages = [{"role": "user", "content": "go"}, call]
    with caplog.at_level(logging.WARNING):
        Compactor(provider, keep_tool_pairs=False)(messages, force=True)
    assert any("1 unpaired tool call" in r.getMessage() for r in caplog.records)


def test_keep_tool_pairs_keeps_trailing_calls_behind_a_system_reminder(
    provider: RecordingProvider,
) -> None:
    call, result = tool_round("t1", "bash", "")
    reminder = {"role": "system", "content": "<reminder>"}
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "ok"},
        call,
        reminder,
    ]
    Compactor(provider, keep_tool_pairs=True)(messages, force=True)
    assert call in messages
    assert find_orphans([*messages, result]) == []


def test_summarising_trailing_calls_behind_a_system_reminder_is_warned(
    provider: RecordingProvider, caplog: pytest.LogCaptureFixture
) -> None:
    call, _ = tool_round("t1", "bash", "")
    messages = [
        {"role": "user", "content": "go"},
        call,
        {"role": "system", "content": "<reminder>"},
    ]
    with caplog.at_level(logging.WARNING):
        Compactor(provider, keep_tool_pairs=False)(messages, force=True)
    assert any("1 unpaired tool call" in r.getMessage() for r in caplog.records)


def test_non_string_tool_ids_never_break_a_compaction(provider: RecordingProvider) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": {"id": "x"}, "name": "n", "input": {}}],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": {"id": "x"}, "content": "r"}],
        },
    ]
    for keep in (False, True):
        history = copy.deepcopy(messages)
        assert Compactor(provider, keep_tool_pairs=keep)(history, force=True).action is Action.FULL


def test_non_string_dict_keys_are_compacted_without_crashing(provider: RecordingProvider) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": [{"type": "text", "text": "s", "meta": {(1, 2): "v"}}]},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t", "name": "x", "input": {(1, 2): "v"}}],
        },
        {"role": "user", "content": "go"},
    ]
    assert Compactor(provider)(messages, force=True).action is Action.FULL
    assert messages[0]["content"][0]["meta"] == {"(1, 2)": "v"}


def test_any_mutable_sequence_is_taken_and_anything_else_is_a_type_error() -> None:
    from collections import UserList  # noqa: PLC0415

    history = [{"role": "user", "content": "x" * 400}, {"role": "assistant", "content": "ok"}]
    messages = UserList(copy.deepcopy(history))
    result = Compactor(RecordingProvider())(messages, force=True)
    assert result.action is Action.FULL and isinstance(messages, UserList)
    for bad in (tuple(history), {"role": "user", "content": "x"}, "text", None):
        with pytest.raises(TypeError, match="messages must be a list"):
            Compactor(RecordingProvider())(bad, force=True)  # type: ignore[arg-type]
