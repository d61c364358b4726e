"""Where a history is cut: the pending turn, the kept tool calls, the verbatim tail."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from bareagent_compact import Action, Compactor, _serialize, dialects, find_orphans
from bareagent_compact.split import pending_start, verbatim_tail_start
from bareagent_compact.summarize import segments
from conftest import RecordingProvider, tool_round
from converters import to_chat, to_responses

Convert = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]


def _anthropic(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return history


DIALECTS: dict[str, Convert] = {
    "anthropic": _anthropic,
    "chat": to_chat,
    "responses": to_responses,
}
REMINDERS = (
    [{"role": "system", "content": "<reminder> one"}],
    [{"role": "developer", "content": "<reminder> one"}],
    [
        {"role": "system", "content": "<reminder> one"},
        {"role": "developer", "content": "<reminder> two"},
    ],
)


def _dialogue(messages: list[Any]) -> list[Any]:
    return [m for m in messages if not dialects.is_system(m)]


def _task_history() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "first task"},
        *tool_round("a", "bash", "output of a " * 20),
        {"role": "assistant", "content": "first task done"},
        {"role": "user", "content": "second task"},
    ]


@pytest.mark.parametrize("reminders", REMINDERS, ids=["system", "developer", "two"])
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_user_message_followed_only_by_system_messages_is_the_pending_turn(
    dialect: str, reminders: list[dict[str, Any]]
) -> None:
    messages = DIALECTS[dialect]([*_task_history(), *copy.deepcopy(reminders)])
    request = _dialogue(messages)[-1]
    assert pending_start(messages) == messages.index(request)
    trailing = messages[messages.index(request) :]

    result = Compactor(RecordingProvider())(messages, force=True)

    assert result.action is Action.FULL
    assert _dialogue(messages)[-1] is request  # the request itself, verbatim, last
    assert messages[-len(trailing) :] == trailing  # its reminders stay after it
    assert all(a is b for a, b in zip(messages[-len(trailing) :], trailing, strict=True))
    assert dialects.kind(_dialogue(messages)[-2]) is dialects.Kind.ASSISTANT
    assert messages[0] == {"role": "system", "content": "You are an agent."}


@pytest.mark.parametrize("keep_tool_pairs", [True, False])
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_tool_results_followed_only_by_a_system_message_are_the_pending_turn(
    dialect: str, keep_tool_pairs: bool
) -> None:
    history = [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "look"},
        *tool_round("a", "bash", "old output " * 20),
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "b", "name": "bash", "input": {}},
                {"type": "tool_use", "id": "c", "name": "grep", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "b", "content": "fresh b"},
                {"type": "tool_result", "tool_use_id": "c", "content": "fresh c"},
            ],
        },
        {"role": "system", "content": "<reminder>"},
    ]
    messages = DIALECTS[dialect](history)
    start = pending_start(messages)
    pending = messages[start:]
    assert [dialects.kind(m) for m in pending[:-1]] in (
        [dialects.Kind.RESULTS],
        [dialects.Kind.RESULT, dialects.Kind.RESULT],
    )
    assert dialects.is_system(pending[-1])

    Compactor(RecordingProvider(), keep_tool_pairs=keep_tool_pairs)(messages, force=True)

    assert messages[-len(pending) :] == pending
    assert all(a is b for a, b in zip(messages[-len(pending) :], pending, strict=True))
    if keep_tool_pairs:
        assert find_orphans(messages) == []  # the calls "b" and "c" were kept with them
        assert "fresh b" not in str(messages[: -len(pending)])
    else:
        assert {o.tool_use_id for o in find_orphans(messages)} == {"b", "c"}


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_an_assistant_message_followed_by_system_messages_leaves_nothing_pending(
    dialect: str,
) -> None:
    messages = DIALECTS[dialect](
        [*_task_history(), {"role": "assistant", "content": "done"}, *REMINDERS[2]]
    )
    assert pending_start(messages) == len(messages)


def test_only_system_messages_after_a_pending_request_leave_nothing_else_to_summarise() -> None:
    messages: list[Any] = [
        {"role": "user", "content": "the only request"},
        {"role": "system", "content": "<reminder>"},
    ]
    before = copy.deepcopy(messages)
    result = Compactor(RecordingProvider())(messages, force=True)
    assert result.reason == "nothing to summarise"
    assert messages == before


def _one_long_turn(calls: int) -> list[dict[str, Any]]:
    """A Chat history whose last turn before the pending message is one run of
    ``calls`` tool messages."""
    tool_calls = [
        {"id": f"c{i}", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
        for i in range(calls)
    ]
    return [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": "earlier"},
        {"role": "user", "content": "next"},
        {"role": "assistant", "content": None, "tool_calls": tool_calls},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(calls)),
    ]


@pytest.mark.parametrize("calls", [50, 400])
def test_the_verbatim_tail_reads_each_message_a_bounded_number_of_times(
    calls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    head = _one_long_turn(calls)
    counted = {"continues": 0, "size": 0}
    continues = dialects.continues

    def counting(previous: Any, message: Any) -> bool:
        counted["continues"] += 1
        return continues(previous, message)

    def size(message: Any) -> int:
        counted["size"] += 1
        return 1

    monkeypatch.setattr(dialects, "continues", counting)
    # The whole run fits: the tail starts at the user message before it.
    assert verbatim_tail_start(head, len(head), 10**9, size) == 3
    assert counted["size"] <= len(head)
    assert counted["continues"] <= 2 * len(head)


USER_REMINDER = {"role": "user", "content": "<system-reminder>keep the todo list</system-reminder>"}


@pytest.mark.parametrize("results", [False, True], ids=["after-a-request", "after-results"])
@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_reminder_sent_as_user_text_is_pending_with_what_it_follows(
    dialect: str, results: bool
) -> None:
    history = _task_history()
    if results:
        history += tool_round("b", "bash", "fresh output " * 20)  # a call and its result
    messages = DIALECTS[dialect]([*history, dict(USER_REMINDER)])
    assert pending_start(messages) == len(messages) - 2
    pending = messages[-2:]
    assert dialects.kind(pending[0]) in (
        dialects.Kind.USER,
        dialects.Kind.RESULTS,
        dialects.Kind.RESULT,
    )

    Compactor(RecordingProvider())(messages, force=True)

    assert all(a is b for a, b in zip(messages[-len(pending) :], pending, strict=True))
    assert find_orphans(messages) == []
    assert messages[-1] == USER_REMINDER


def test_consecutive_user_messages_stay_one_segment_and_keep_their_labels() -> None:
    source = [
        {"role": "user", "content": "do it"},
        dict(USER_REMINDER),
        {"role": "assistant", "content": "done"},
    ]
    assert [len(s) for s in segments(source)] == [2, 1]
    assert _serialize(source).count("[user]") == 2
