"""SPEC 11.2: Compactor.__call__, its steps in order, and the result object."""

from __future__ import annotations

import copy
import dataclasses
import logging
from collections.abc import Callable
from typing import Any

import pytest

import conftest
from bareagent_compact import (
    DEFAULT_ACKNOWLEDGEMENT,
    DEFAULT_SUMMARY_PROMPT,
    DEFAULT_THRESHOLD,
    SUMMARY_PREFIX,
    Action,
    CompactionResult,
    Compactor,
    Reason,
    _micro_compact,
    _serialize,
    estimate_tokens,
)
from bareagent_compact.tokens import value_quarters
from conftest import MemoryTranscripts, RecordingProvider, tool_round

History = Callable[..., list[dict[str, Any]]]


def test_defaults_are_the_spec_values() -> None:
    assert DEFAULT_THRESHOLD == 50000
    assert SUMMARY_PREFIX == "[Context Compressed]\n"
    assert DEFAULT_ACKNOWLEDGEMENT == "收到，我已理解之前的上下文，继续工作。"
    for topic in ("中文", "目标", "已完成", "约束", "路径", "上下文"):
        assert topic in DEFAULT_SUMMARY_PROMPT
    compactor = Compactor(lambda prompt: "s")
    assert compactor.threshold == 50000
    assert compactor.keep_recent == 3
    assert compactor.get_session_id() == "default"
    assert compactor.transcript_mgr is None
    assert compactor.keep_tool_pairs is True  # safe pairs by default; False is the literal spec


# Step 1: micro-compaction always runs.
def test_micro_compaction_runs_even_below_the_threshold(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=5)
    result = Compactor(provider)(messages)
    assert result.action is Action.MICRO
    assert result.truncated == 2
    assert messages[3]["content"][0]["content"].startswith("[truncated:")
    assert provider.prompts == []


def test_micro_compaction_uses_the_keep_recent_option(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=5)
    assert Compactor(provider, keep_recent=1)(messages).truncated == 4


# Step 2: the trigger is strictly greater than the threshold.
def test_threshold_is_strictly_greater_than(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=2)
    tokens = estimate_tokens(messages)
    assert Compactor(provider, threshold=tokens)(messages).action is Action.NONE
    assert provider.prompts == []
    assert Compactor(provider, threshold=tokens - 1)(messages).action is Action.FULL
    assert len(provider.prompts) == 1


def test_force_compacts_a_tiny_history(provider: RecordingProvider) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    result = Compactor(provider)(messages, force=True)
    assert result.action is Action.FULL
    assert messages == [
        {"role": "user", "content": SUMMARY_PREFIX + "SUMMARY"},
        {"role": "assistant", "content": DEFAULT_ACKNOWLEDGEMENT},
    ]


def test_the_threshold_decision_uses_the_token_counter_option(
    provider: RecordingProvider, make_history: History
) -> None:
    seen: list[int] = []

    def counter(messages: list[dict[str, Any]]) -> int:
        seen.append(len(messages))
        return 10**9 if len(messages) > 4 else 1

    messages = make_history(rounds=2)
    result = Compactor(provider, token_counter=counter)(messages)
    assert result.action is Action.FULL
    assert seen[0] == 6  # counted on the whole list, pending message included


# Step 3: the pending user message is kept out of the summary and put back last.
def test_pending_plain_user_message_is_kept_last(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=2, pending=False)
    pending = {"role": "user", "content": "下一步做什么？"}
    messages.append(pending)
    Compactor(provider)(messages, force=True)
    assert messages[-1] is pending
    assert "下一步做什么" not in provider.prompts[0][1]["content"]


def test_pending_tool_result_message_is_kept_last(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=2)
    pending = messages[-1]
    assert pending["content"][0]["type"] == "tool_result"
    pending["content"][0]["content"] = "PENDING-OUTPUT"
    Compactor(provider)(messages, force=True)
    assert messages[-1] is pending
    assert "PENDING-OUTPUT" not in provider.prompts[0][1]["content"]


def test_a_trailing_assistant_message_is_summarised(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=1, pending=False)
    Compactor(provider)(messages, force=True)
    assert messages[-1] == {"role": "assistant", "content": DEFAULT_ACKNOWLEDGEMENT}
    assert provider.prompts[0][1]["content"].endswith("[assistant]\ndone")


# Step 4: the summary source excludes system messages; nothing left means no-op.
def test_summary_source_excludes_system_messages(provider: RecordingProvider) -> None:
    messages = [
        {"role": "system", "content": "SYSTEM-ONE"},
        {"role": "user", "content": "task"},
        {"role": "system", "content": "SYSTEM-TWO"},
        {"role": "assistant", "content": "answer"},
    ]
    Compactor(provider)(messages, force=True)
    assert provider.prompts[0][1]["content"] == _serialize(
        [{"role": "user", "content": "task"}, {"role": "assistant", "content": "answer"}]
    )


def test_nothing_to_summarise_means_no_snapshot_no_call_no_change(
    provider: RecordingProvider, transcripts: MemoryTranscripts
) -> None:
    messages = [
        {"role": "system", "content": "s1"},
        {"role": "system", "content": "s2"},
        {"role": "user", "content": "only the pending message"},
    ]
    before = copy.deepcopy(messages)
    result = Compactor(provider, transcripts)(messages, force=True)
    assert messages == before
    assert provider.prompts == []
    assert transcripts.saved == []
    assert result.action is Action.NONE
    assert result.snapshot_saved is False
    assert result.reason == "nothing to summarise"


def test_empty_history_with_force_is_a_no_op(provider: RecordingProvider) -> None:
    messages: list[dict[str, Any]] = []
    assert Compactor(provider)(messages, force=True).action is Action.NONE
    assert messages == []


# Step 5: the snapshot is saved before the provider call, with the current session id.
def test_snapshot_is_saved_before_the_provider_call(
    events: list[str],
    provider: RecordingProvider,
    transcripts: MemoryTranscripts,
    make_history: History,
) -> None:
    messages = make_history(rounds=2)
    Compactor(provider, transcripts)(messages, force=True)
    assert events == ["save", "provider"]


def test_snapshot_holds_the_whole_current_list_with_the_pending_message(
    provider: RecordingProvider, transcripts: MemoryTranscripts, make_history: History
) -> None:
    messages = make_history(rounds=5)
    compactor = Compactor(provider, transcripts, session_id="s-1")
    expected = copy.deepcopy(messages)
    _micro_compact(expected)
    result = compactor(messages, force=True)
    assert transcripts.saved == [(expected, "s-1")]
    assert result.snapshot_saved is True


def test_snapshot_uses_the_rebound_session_id(
    provider: RecordingProvider, transcripts: MemoryTranscripts, make_history: History
) -> None:
    compactor = Compactor(provider, transcripts, session_id="first")
    compactor.set_session_id("second")
    assert compactor.get_session_id() == "second"
    compactor(make_history(rounds=1), force=True)
    assert transcripts.saved[0][1] == "second"


def test_no_snapshot_without_a_transcript_manager(
    provider: RecordingProvider, make_history: History
) -> None:
    result = Compactor(provider, None)(make_history(rounds=1), force=True)
    assert result.action is Action.FULL
    assert result.snapshot_saved is False


# Step 6: the provider gets exactly two messages.
def test_provider_gets_the_fixed_prompt_and_the_serialised_source(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=2, pending=False)
    source = [m for m in messages if m["role"] != "system"]
    expected_body = _serialize(copy.deepcopy(source))
    Compactor(provider)(messages, force=True)
    assert provider.prompts == [
        [
            {"role": "system", "content": DEFAULT_SUMMARY_PROMPT},
            {"role": "user", "content": expected_body},
        ]
    ]


def test_custom_prompt_and_acknowledgement_are_used(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=1, pending=False)
    Compactor(provider, system_prompt="Summarise in English.", acknowledgement="OK.")(
        messages, force=True
    )
    assert provider.prompts[0][0] == {"role": "system", "content": "Summarise in English."}
    assert messages[-1] == {"role": "assistant", "content": "OK."}


def test_provider_may_return_an_object_with_text(make_history: History) -> None:
    @dataclasses.dataclass
    class LLMResponse:
        text: str

    messages = make_history(rounds=1, pending=False)
    Compactor(RecordingProvider(LLMResponse("from .text")))(messages, force=True)
    assert messages[1]["content"] == SUMMARY_PREFIX + "from .text"


# Step 7: a raising provider leaves history as micro-compaction left it.
def test_raising_provider_leaves_history_as_micro_compaction_left_it(
    make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    messages = make_history(rounds=6)
    expected = copy.deepcopy(messages)
    _micro_compact(expected)
    provider = RecordingProvider(RuntimeError("model down"))
    with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
        result = Compactor(provider)(messages, force=True)
    assert messages == expected
    assert result.action is Action.FAILED
    assert result.reason == "provider raised"
    assert result.truncated == 3
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and warnings[0].exc_info is not None
    assert isinstance(warnings[0].exc_info[1], RuntimeError)


def test_keyboard_interrupt_in_the_provider_is_not_swallowed(make_history: History) -> None:
    messages = make_history(rounds=1)
    with pytest.raises(KeyboardInterrupt):
        Compactor(RecordingProvider(KeyboardInterrupt()))(messages, force=True)


def test_a_summarised_message_edited_in_place_during_the_summary_voids_the_rebuild(
    make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    messages = make_history(rounds=3)

    def provider(prompt: list[dict[str, Any]]) -> str:
        messages[1]["content"] = "an edited request"  # another thread, meanwhile
        return "S"

    mine = list(messages)
    with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
        result = Compactor(provider)(messages, force=True)
    assert result.action is Action.FAILED and result.reason is Reason.HISTORY_CHANGED
    assert messages[1]["content"] == "an edited request"
    assert all(a is b for a, b in zip(messages, mine, strict=True))
    assert "edited in place while the summary was made" in caplog.text


def test_a_summarised_tool_result_edited_in_place_by_the_hook_voids_the_rebuild(
    make_history: History,
) -> None:
    messages = make_history(rounds=3)
    edited = messages[3]["content"][0]

    def before_compact(event: Any) -> None:
        edited["content"] = "rewritten output"

    result = Compactor(lambda prompt: "S", before_compact=before_compact)(messages, force=True)
    assert result.reason is Reason.HISTORY_CHANGED
    assert messages[3]["content"][0] is edited and edited["content"] == "rewritten output"


def test_a_trailing_reminder_replaced_during_the_summary_keeps_the_summary(
    make_history: History,
) -> None:
    messages = make_history(rounds=3)
    messages.append({"role": "system", "content": "reminder 0"})
    fresh = {"role": "system", "content": "reminder 1"}

    def provider(prompt: list[dict[str, Any]]) -> str:
        messages.pop()  # the loop swaps its reminder meanwhile
        messages.append(fresh)
        return "S"

    compactor = Compactor(provider)
    result = compactor(messages, force=True)
    assert result.action is Action.FULL
    assert messages[-1] is fresh and "reminder 0" not in str(messages)
    assert messages[1]["content"] == SUMMARY_PREFIX + "S"
    assert compactor.undo(messages, result)
    assert messages[-1] is fresh and len(messages) == 3 * 2 + 3


class InterruptedText:
    """A provider's answer whose text raises ``KeyboardInterrupt`` when read."""

    @property
    def text(self) -> str:
        raise KeyboardInterrupt


def interrupting_counter(when: Callable[[list[Any]], bool]) -> Callable[[list[Any]], int]:
    """A token counter that raises ``KeyboardInterrupt`` on the lists ``when`` picks."""

    def count(messages: list[Any]) -> int:
        if when(messages):
            raise KeyboardInterrupt
        return estimate_tokens(messages)

    return count


def holds_summary(messages: list[Any]) -> bool:
    return any(str(m.get("content")).startswith(SUMMARY_PREFIX) for m in messages)


@pytest.mark.parametrize(
    "where",
    ["the provider", "reading the summary", "counting the summary", "counting the rebuild"],
)
def test_an_interrupt_anywhere_in_the_summary_leaves_the_history_exactly_as_it_was(
    make_history: History, where: str
) -> None:
    messages = make_history(rounds=6, size=2000)
    before = copy.deepcopy(messages)
    provider: Callable[[Any], Any] = lambda prompt: "S"  # noqa: E731
    counter = None
    if where == "the provider":
        provider = RecordingProvider(KeyboardInterrupt())
    elif where == "reading the summary":
        provider = lambda prompt: InterruptedText()  # noqa: E731
    elif where == "counting the summary":
        counter = interrupting_counter(lambda m: len(m) <= 2 and holds_summary(m))
    else:
        counter = interrupting_counter(lambda m: len(m) > 3 and holds_summary(m))
    compactor = Compactor(provider, token_counter=counter)
    with pytest.raises(KeyboardInterrupt):
        compactor(messages, force=True)
    assert messages == before  # micro-compaction's truncations were put back too
    result = Compactor(lambda prompt: "S")(messages, force=True)
    assert result.action is Action.FULL and result.truncated > 0


# Step 8: the rebuilt history.
def test_rebuild_keeps_every_system_message_as_a_deep_copy_in_order(
    provider: RecordingProvider,
) -> None:
    s1 = {"role": "system", "content": [{"type": "text", "text": "skills"}]}
    s2 = {"role": "system", "content": "nag reminder"}
    messages = [s1, {"role": "user", "content": "a"}, s2, {"role": "assistant", "content": "b"}]
    Compactor(provider)(messages, force=True)
    assert messages[:2] == [s1, s2]
    assert messages[0] is not s1
    assert messages[0]["content"] is not s1["content"]
    assert messages[0]["content"][0] is not s1["content"][0]


def test_default_rebuild_keeps_the_answered_call_instead_of_the_acknowledgement(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=3)
    call, pending = messages[-2], messages[-1]
    Compactor(provider, threshold=10)(messages)
    assert messages == [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "[Context Compressed]\nSUMMARY"},
        call,
        pending,
    ]
    assert messages[-2] is call and messages[-1] is pending


def test_default_rebuild_of_a_pending_plain_message_has_the_spec_shape(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = [*make_history(rounds=3), {"role": "assistant", "content": "done"}]
    messages.append({"role": "user", "content": "next"})
    Compactor(provider)(messages, force=True)
    assert [m["content"] for m in messages[1:]] == [
        "[Context Compressed]\nSUMMARY",
        "收到，我已理解之前的上下文，继续工作。",
        "next",
    ]


def test_rebuild_has_the_spec_shape(provider: RecordingProvider, make_history: History) -> None:
    messages = make_history(rounds=3)
    pending = messages[-1]
    tokens = estimate_tokens(messages)
    result = Compactor(provider, threshold=10, keep_tool_pairs=False)(messages)
    assert messages == [
        {"role": "system", "content": "You are an agent."},
        {"role": "user", "content": "[Context Compressed]\nSUMMARY"},
        {"role": "assistant", "content": "收到，我已理解之前的上下文，继续工作。"},
        pending,
    ]
    assert result == CompactionResult(
        Action.FULL, tokens, estimate_tokens(messages), 0, False, summary_calls=1, parts=1
    )


def test_rebuild_happens_in_place(provider: RecordingProvider, make_history: History) -> None:
    messages = make_history(rounds=2)
    alias = messages
    Compactor(provider)(messages, force=True)
    assert alias is messages
    assert alias[1]["content"].startswith("[Context Compressed]")


def test_summary_markers_survive_into_the_summary_source(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=5)
    Compactor(provider)(messages, force=True)
    assert provider.prompts[0][1]["content"].count("[truncated: ") == 2


# The result object.
def test_result_is_immutable_and_reports_tokens(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=5)
    result = Compactor(provider)(messages)
    assert result.tokens_before == result.tokens_after == estimate_tokens(messages)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.action = Action.FULL  # type: ignore[misc]
    assert result.compacted is False


def test_calling_as_a_plain_statement_still_compacts(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=2)
    compactor = Compactor(provider)
    compactor(messages, force=True)
    assert messages[1]["content"] == SUMMARY_PREFIX + "SUMMARY"


def test_repeated_compaction_summarises_the_previous_summary(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=2)
    compactor = Compactor(provider)
    compactor(messages, force=True)
    messages.append({"role": "assistant", "content": "more"})
    compactor(messages, force=True)
    assert "[Context Compressed]" in provider.prompts[1][1]["content"]
    assert len(messages) == 3


# Constructor checks.
@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"provider": "not callable"}, TypeError),
        ({"transcript_mgr": object()}, TypeError),
        ({"threshold": "50000"}, TypeError),
        ({"threshold": -1}, ValueError),
        ({"session_id": ""}, ValueError),
        ({"session_id": 3}, TypeError),
        ({"keep_recent": -1}, ValueError),
        ({"system_prompt": 5}, TypeError),
        ({"language": "fr"}, ValueError),
        ({"instructions": 3}, TypeError),
        ({"keep_tail_tokens": -1}, ValueError),
        ({"pin_facts_tokens": "2000"}, TypeError),
        ({"summary_input_tokens": 10}, ValueError),
        ({"before_compact": "hook"}, TypeError),
        ({"after_compact": 1}, TypeError),
        ({"acknowledgement": b"ok"}, TypeError),
        ({"token_counter": 5}, TypeError),
        ({"archive": "file.jsonl"}, TypeError),
    ],
)
def test_constructor_rejects_bad_arguments(kwargs: dict[str, Any], error: type[Exception]) -> None:
    arguments: dict[str, Any] = {"provider": lambda prompt: "s", **kwargs}
    with pytest.raises(error):
        Compactor(**arguments)


def test_set_session_id_rejects_an_empty_id() -> None:
    compactor = Compactor(lambda prompt: "s")
    with pytest.raises(ValueError):
        compactor.set_session_id("")
    assert compactor.get_session_id() == "default"


def test_call_rejects_a_non_list_before_doing_anything(provider: RecordingProvider) -> None:
    with pytest.raises(TypeError, match="list"):
        Compactor(provider)(({"role": "user", "content": "x"},), force=True)  # type: ignore[arg-type]


def test_pending_tool_pair_is_kept_after_the_round_trip(provider: RecordingProvider) -> None:
    messages = [{"role": "user", "content": "task"}, *tool_round("t1", "bash", "out")]
    Compactor(provider, keep_tool_pairs=True)(messages, force=True)
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]


# The size before micro-compaction.
def test_result_carries_the_size_before_micro_compaction(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=6)
    before = estimate_tokens(messages)
    def results() -> list[Any]:
        return [b["content"] for m in messages if m["role"] == "user" for b in m["content"]
                if isinstance(b, dict) and b.get("type") == "tool_result"]  # fmt: skip

    originals = results()
    result = Compactor(provider)(messages)
    assert result.action is Action.MICRO and result.truncated == 3
    markers = results()
    removed = sum(
        value_quarters(old) - value_quarters(new)
        for old, new in zip(originals, markers, strict=True)
    )
    assert result.tokens_before == estimate_tokens(messages) < before
    assert result.tokens_before_micro == result.tokens_before + removed // 4
    assert before - 1 <= result.tokens_before_micro <= before


def test_size_before_micro_compaction_is_tokens_before_when_nothing_was_truncated(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=2)
    result = Compactor(provider)(messages, force=True)
    assert result.action is Action.FULL and result.truncated == 0
    assert result.tokens_before_micro == result.tokens_before


def test_size_before_micro_compaction_of_a_full_compaction_counts_the_truncated_results(
    provider: RecordingProvider, make_history: History
) -> None:
    messages = make_history(rounds=6)
    before = estimate_tokens(messages)
    result = Compactor(provider)(messages, force=True)
    assert result.action is Action.FULL and result.truncated == 3
    # Within one token of the count before: the removed weight is rounded down.
    assert before - 1 <= result.tokens_before_micro <= before
    assert result.tokens_before_micro > result.tokens_before


def test_positional_construction_defaults_the_size_before_micro_compaction() -> None:
    result = CompactionResult(Action.NONE, 120, 120, 0, False, None, 0, 0)
    assert result.tokens_before_micro == 120
    micro = CompactionResult(Action.MICRO, 90, 90, 1, tokens_before_micro=150)
    assert micro.tokens_before_micro == 150
    assert result == CompactionResult(Action.NONE, 120, 120, tokens_before_micro=200)


# The log says what a failed compaction left.
def _failure_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_a_failed_summary_after_micro_compaction_does_not_claim_history_unchanged(
    make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    messages = make_history(rounds=6)
    provider = RecordingProvider(RuntimeError("model down"))
    with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
        result = Compactor(provider)(messages, force=True)
    assert result.truncated == 3
    warnings = _failure_warnings(caplog)
    assert any(w.endswith("history left as micro-compaction left it") for w in warnings)
    assert not any("left as it was" in w for w in warnings)


def test_a_failed_summary_without_micro_compaction_says_history_left_as_it_was(
    make_history: History, caplog: pytest.LogCaptureFixture
) -> None:
    messages = make_history(rounds=2)
    provider = RecordingProvider(RuntimeError("model down"))
    with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
        result = Compactor(provider)(messages, force=True)
    assert result.truncated == 0
    assert "summary provider failed; history left as it was" in _failure_warnings(caplog)


@pytest.mark.parametrize(
    ("rounds", "size", "left"), [(6, 10, "micro-compaction left it"), (2, 200, "it was")]
)
def test_a_refused_longer_summary_says_what_the_history_was_left_as(
    make_history: History, caplog: pytest.LogCaptureFixture, rounds: int, size: int, left: str
) -> None:
    messages = make_history(rounds=rounds, size=size)
    provider = RecordingProvider("a much longer summary " * 200)
    with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
        result = Compactor(provider, threshold=0)(messages)
    assert result.reason == "summary longer than its source"
    assert any(w.endswith("history left as " + left) for w in _failure_warnings(caplog))


def _tiny_source_history() -> list[dict[str, Any]]:
    """Only the first user request is left to summarise: the call and its (large)
    pending result are kept."""
    return [
        {"role": "system", "content": "You are a careful coding agent."},
        {"role": "user", "content": "Find why the workers time out."},
        *tool_round("t1", "search_logs", "worker timeout after 0.1234s\n" * 200),
    ]


def test_a_source_lighter_than_its_replacement_is_not_sent_to_the_provider(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = RecordingProvider("a short summary")
    compactor = Compactor(provider, threshold=500)
    messages = _tiny_source_history()
    before = copy.deepcopy(messages)
    with caplog.at_level(logging.DEBUG, logger="bareagent_compact"):
        results = [compactor(messages) for _ in range(3)]
    assert provider.prompts == []
    assert messages == before
    assert [r.action for r in results] == [Action.NONE] * 3
    assert {r.reason for r in results} == {Reason.NOTHING_TO_SUMMARISE}
    told = [r for r in caplog.records if "smaller than" in r.getMessage()]
    assert [r.levelno for r in told] == [logging.INFO, logging.DEBUG, logging.DEBUG]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert compactor._parts.trigger.failures == 0


def test_a_forced_call_still_summarises_a_tiny_source() -> None:
    provider = RecordingProvider("a short summary")
    messages = _tiny_source_history()
    result = Compactor(provider, threshold=500)(messages, force=True)
    assert len(provider.prompts) == 1
    assert result.action is Action.FULL


def test_a_full_compaction_is_logged_at_info_with_its_session_and_sizes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages = conftest.tool_history(6, output=lambda turn: "y" * 2_000)
    compactor = Compactor(RecordingProvider(), threshold=1_000, session_id="run-7")
    with caplog.at_level(logging.INFO, logger="bareagent_compact"):
        result = compactor(messages, force=True)
    assert result.action is Action.FULL
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos == [
        f"full compaction of session 'run-7': {result.tokens_before} -> "
        f"{result.tokens_after} tokens, {len(result.replaced)} messages summarised in "
        "1 request(s)"
    ]
