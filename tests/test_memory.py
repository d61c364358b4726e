"""What survives a compaction: focus instructions, rolling summaries, pinned facts, a
verbatim tail, language presets, hooks and undo."""

from __future__ import annotations

import asyncio
import copy
import logging
import re
from typing import Any

import pytest

from bareagent_compact import (
    Action,
    AsyncCompactor,
    CompactionEvent,
    Compactor,
    OfflineSummarizer,
    Reason,
    estimate_tokens,
    find_orphans,
)
from bareagent_compact.facts import PINNED_HEADING, extract
from bareagent_compact.prompts import (
    CHINESE_FRAMING,
    DEFAULT_ACKNOWLEDGEMENT,
    DEFAULT_SUMMARY_PROMPT,
    EARLIER_ACKNOWLEDGEMENTS,
    ENGLISH_ACKNOWLEDGEMENT,
    ENGLISH_FRAMING,
    ENGLISH_ROLLING_LEAD_IN,
    ENGLISH_SUMMARY_PROMPT,
    SUMMARY_PREFIX,
)
from bareagent_compact.rebuild import is_own_output
from conftest import RecordingProvider, tool_history, tool_round
from converters import to_chat, to_responses


def history(rounds: int = 4) -> list[dict[str, Any]]:
    return tool_history(
        rounds,
        request="Fix the failing test in tests/test_config.py please.",
        output=lambda turn: f"output {turn}\n" * 30,
        after=lambda turn: [
            {"role": "assistant", "content": f"step {turn} done"},
            {"role": "user", "content": f"go on {turn}"},
        ],
    )


# Focus instructions.
def test_per_call_instructions_follow_the_constructor_ones_in_the_summary_prompt() -> None:
    provider = RecordingProvider()
    compactor = Compactor(provider, instructions="Keep every file path.")
    compactor(history(), force=True, instructions="Focus on the failing test.")
    system = provider.prompts[0][0]["content"]
    assert system.startswith(DEFAULT_SUMMARY_PROMPT)
    assert system.index("Keep every file path.") < system.index("Focus on the failing test.")
    compactor(history(), force=True)
    assert "Focus on the failing test." not in provider.prompts[1][0]["content"]


def test_without_instructions_the_prompt_is_the_spec_prompt() -> None:
    provider = RecordingProvider()
    Compactor(provider)(history(), force=True)
    assert provider.prompts[0][0]["content"] == DEFAULT_SUMMARY_PROMPT


def test_instructions_must_be_a_string() -> None:
    with pytest.raises(TypeError, match="instructions must be a str"):
        Compactor(RecordingProvider())(history(), instructions=3)  # type: ignore[arg-type]


# Rolling summaries.
def test_a_previous_summary_opening_the_source_is_announced_by_a_lead_in() -> None:
    provider = RecordingProvider()
    compactor = Compactor(provider, language="en")
    messages = history()
    compactor(messages, force=True)
    messages += history()[2:]
    compactor(messages, force=True)
    first, second = (p[1]["content"] for p in provider.prompts)
    assert not first.startswith(ENGLISH_ROLLING_LEAD_IN)
    assert second.startswith(ENGLISH_ROLLING_LEAD_IN)
    assert second[len(ENGLISH_ROLLING_LEAD_IN):].startswith("[user]\n[Context Compressed]")


def test_rolling_summaries_can_be_switched_off() -> None:
    provider = RecordingProvider()
    compactor = Compactor(provider, rolling_summaries=False)
    messages = history()
    compactor(messages, force=True)
    messages += history()[2:]
    compactor(messages, force=True)
    assert provider.prompts[1][1]["content"].startswith("[user]\n[Context Compressed]")


# Pinned facts.
def test_pinned_facts_keep_paths_urls_errors_and_the_last_request() -> None:
    messages: list[dict[str, Any]] = [
        {
            "role": "user",
            "content": "Deploy from https://example.com/repo.git and check src/app/main.py",
        },
    ]
    trace = "Traceback (most recent call last):\nValueError: bad port\n"
    messages += tool_round("a", "bash", trace)
    messages += [
        {"role": "assistant", "content": "Looking at /etc/app/config.toml next."},
        {"role": "user", "content": "Also keep the retry logic in lib/retry.py"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "next"},
    ]
    compactor = Compactor(RecordingProvider("A vague summary."), pin_facts=True)
    compactor(messages, force=True)
    summary = messages[0]["content"]
    assert PINNED_HEADING in summary
    for fact in ("https://example.com/repo.git", "src/app/main.py", "/etc/app/config.toml",
                 "lib/retry.py", "ValueError: bad port",
                 "Last user request (user turn 2): Also keep the retry logic in lib/retry.py"):
        assert fact in summary, fact


def test_pinned_facts_skip_what_the_summary_has_and_stay_within_their_budget() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for n in range(300):
        messages.append({"role": "assistant", "content": f"see pkg/module_{n}/file_{n}.py"})
        messages.append({"role": "user", "content": "ok"})
    messages.append({"role": "user", "content": "done?"})
    compactor = Compactor(
        RecordingProvider("Touched pkg/module_299/file_299.py."), pin_facts=True,
        pin_facts_tokens=200,
    )
    compactor(messages, force=True)
    summary = messages[0]["content"]
    block = summary[summary.index(PINNED_HEADING):]
    assert "pkg/module_299/file_299.py" not in block  # already in the summary
    assert "pkg/module_298/file_298.py" in block  # newest first
    assert "pkg/module_0/file_0.py" not in block
    assert estimate_tokens([{"role": "user", "content": block}]) <= 210


def test_without_pin_facts_the_summary_is_the_providers_text() -> None:
    messages = history()
    Compactor(RecordingProvider("S"))(messages, force=True)
    assert messages[1]["content"] == "[Context Compressed]\nS"


def test_facts_extraction_reads_every_dialect_alike() -> None:
    messages = history()
    assert extract(to_chat(messages)) == extract(messages) == extract(to_responses(messages))


# Verbatim tail.
def test_a_verbatim_tail_keeps_the_newest_dialogue_and_starts_at_a_user_turn() -> None:
    messages = history(rounds=6)
    provider = RecordingProvider()
    compactor = Compactor(provider, keep_tail_tokens=300)
    original = list(messages)
    compactor(messages, force=True)
    kept = messages[3:]  # after system, summary, acknowledgement
    assert messages[2]["content"] == DEFAULT_ACKNOWLEDGEMENT
    assert kept and kept[0]["role"] == "user" and isinstance(kept[0]["content"], str)
    assert all(any(m is o for o in original) for m in kept)  # verbatim, the same objects
    assert find_orphans(messages) == []
    transcript = provider.prompts[0][1]["content"]
    assert kept[0]["content"] not in transcript  # the summary covers only what came before


def test_a_verbatim_tail_never_separates_a_call_from_its_results() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for turn in range(8):
        messages += tool_round(f"t{turn}", "bash", "x" * 200)
    for budget in (10, 60, 120, 400, 900):
        trial = copy.deepcopy(messages)
        Compactor(RecordingProvider(), keep_tail_tokens=budget)(trial, force=True)
        assert find_orphans(trial) == [], budget


# Language presets.
def test_language_en_uses_the_english_prompt_and_acknowledgement() -> None:
    provider = RecordingProvider()
    messages = history()
    messages.append({"role": "assistant", "content": "ok"})
    messages.append({"role": "user", "content": "next"})
    Compactor(provider, language="en")(messages, force=True)
    assert provider.prompts[0][0]["content"] == ENGLISH_SUMMARY_PROMPT
    assert messages[2] == {"role": "assistant", "content": ENGLISH_ACKNOWLEDGEMENT}
    for section in ("goal", "work done", "constraints", "file paths", "next steps"):
        assert section in ENGLISH_SUMMARY_PROMPT


def test_explicit_texts_win_over_the_language_preset() -> None:
    provider = RecordingProvider()
    Compactor(provider, language="en", system_prompt="mine")(history(), force=True)
    assert provider.prompts[0][0]["content"] == "mine"


# Hooks.
def test_before_compact_sees_the_event_and_may_skip() -> None:
    events: list[CompactionEvent] = []

    def before(event: CompactionEvent) -> bool:
        events.append(event)
        return False

    provider = RecordingProvider()
    messages = history()
    compactor = Compactor(provider, before_compact=before, session_id="s1")
    before_list = copy.deepcopy(messages)
    Compactor(RecordingProvider(), threshold=10**9)(before_list)  # micro-compaction only
    result = compactor(messages, force=True)
    assert result.reason == Reason.SKIPPED_BY_HOOK and provider.prompts == []
    assert messages == before_list
    assert events[0].trigger == "manual" and events[0].session_id == "s1"
    assert events[0].source_messages > 0 and events[0].source_tokens > 0


def test_before_compact_may_add_instructions_and_after_compact_sees_the_summary() -> None:
    seen: list[tuple[Any, Any]] = []
    provider = RecordingProvider("S")
    compactor = Compactor(
        provider,
        before_compact=lambda event: "Mention the config file.",
        after_compact=lambda result, summary: seen.append((result.action, summary)),
    )
    compactor(history(), force=True)
    assert provider.prompts[0][0]["content"].endswith("Mention the config file.")
    assert seen == [(Action.FULL, "S")]


def test_hooks_that_raise_are_logged_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    def broken(*args: Any) -> None:
        raise RuntimeError("hook bug")

    messages = history()
    with caplog.at_level(logging.WARNING):
        result = Compactor(RecordingProvider(), before_compact=broken, after_compact=broken)(
            messages, force=True
        )
    assert result.action is Action.FULL
    assert sum("hook failed" in r.getMessage() for r in caplog.records) == 2


def test_async_hooks_are_awaited_by_the_async_compactor() -> None:
    seen: list[str] = []

    async def before(event: CompactionEvent) -> str:
        seen.append(event.trigger)
        return "async focus"

    async def after(result: Any, summary: str | None) -> None:
        seen.append(summary or "")

    provider = RecordingProvider("S")
    compactor = AsyncCompactor(provider, before_compact=before, after_compact=after)
    asyncio.run(compactor(history(), force=True))
    assert seen == ["manual", "S"]
    assert provider.prompts[0][0]["content"].endswith("async focus")


# Undo.
def test_undo_restores_the_history_and_keeps_what_was_appended_since() -> None:
    messages = history()
    original = list(messages)
    compactor = Compactor(RecordingProvider())
    result = compactor(messages, force=True)
    assert result.replaced == tuple(original)
    assert all(a is b for a, b in zip(result.replaced, original, strict=True))
    later = {"role": "assistant", "content": "after the summary"}
    messages.append(later)
    assert compactor.undo(messages, result) is True
    assert messages[:-1] == original and all(
        a is b for a, b in zip(messages, original, strict=False)
    )
    assert messages[-1] is later


def test_undo_refuses_a_history_changed_by_a_later_compaction(
    caplog: pytest.LogCaptureFixture,
) -> None:
    messages = history()
    compactor = Compactor(RecordingProvider())
    first = compactor(messages, force=True)
    messages += history()[2:]
    compactor(messages, force=True)
    unchanged = list(messages)
    with caplog.at_level(logging.WARNING):
        assert compactor.undo(messages, first) is False
    assert messages == unchanged
    assert "cannot be undone" in caplog.text
    assert compactor.undo(messages, compactor(messages)) is False  # nothing was replaced
    assert messages == unchanged


def test_offline_summarizer_with_pinned_facts_keeps_more_of_the_source() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Migrate docs/guide.md and fetch https://example.org/spec"},
    ]
    for n in range(40):
        messages += tool_round(f"t{n}", "bash", f"wrote build/out_{n}.o\nerror: undefined x{n}\n")
    messages.append({"role": "user", "content": "status?"})
    facts = extract(messages[:-1])
    wanted = [*facts.paths, *facts.urls, *facts.errors]
    kept = {}
    for pin in (False, True):
        trial = copy.deepcopy(messages)
        Compactor(OfflineSummarizer(), pin_facts=pin, keep_recent=1000)(trial, force=True)
        text = "\n".join(str(m.get("content")) for m in trial)
        kept[pin] = sum(fact in text for fact in wanted) / len(wanted)
    assert kept[True] > kept[False]


@pytest.mark.parametrize("micro", ["spec", "cache-friendly"])
def test_undo_also_restores_the_results_the_same_call_truncated(micro: str) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for turn in range(12):
        messages += tool_round(f"c{turn}", "bash", f"line {turn} " * 1000)
    messages += [{"role": "assistant", "content": "done"}]
    messages += [{"role": "user", "content": "now " * 5000}]
    before = copy.deepcopy(messages)
    compactor = Compactor(RecordingProvider("summary"), threshold=3000, micro=micro)
    result = compactor(messages)
    assert result.compacted and result.truncated > 0
    assert compactor.undo(messages, result) is True
    assert messages == before


def test_a_rebuild_that_would_grow_the_history_is_refused() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "please fix the failing test in src/app/main.py now; " * 3}
    ]
    for step in range(6):
        messages += [
            {"role": "assistant", "content": f"step {step}"},
            {"role": "user", "content": "continue " * 300},
        ]
    before = copy.deepcopy(messages)
    compactor = Compactor(
        RecordingProvider("Goal: fix failing test in main.py. " * 4),
        threshold=2000,
        keep_tail_tokens=100_000,
        language="en",
    )
    result = compactor(messages)
    assert result.action is Action.FAILED and result.reason == Reason.INFLATED_SUMMARY
    assert messages == before


_LABELS = r"(?:Error|File|URL|Last user request)"
_DOUBLED_LABEL = re.compile(rf"^{_LABELS}: {_LABELS}:", re.IGNORECASE)


def pinned_lines(messages: list[dict[str, Any]]) -> list[str]:
    summary = next(
        m["content"] for m in messages
        if isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_PREFIX)
    )
    return summary[summary.index(PINNED_HEADING):].splitlines()[1:]


def test_five_rolling_compactions_pin_each_fact_once_without_growing_prefixes() -> None:
    compactor = Compactor(RecordingProvider("A vague summary."), pin_facts=True)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    sizes = []
    for turn in range(5):
        messages.append({"role": "user", "content": f"Please fix the TypeError in src/m{turn}.py"})
        messages += tool_round(
            f"t{turn}", "bash", f"Error: disk full on /var/d{turn}\nValueError: bad port {turn}"
        )
        messages.append({"role": "assistant", "content": f"See https://example.com/{turn}"})
        messages.append({"role": "user", "content": "go on"})
        compactor(messages, force=True)
        lines = pinned_lines(messages)
        sizes.append(estimate_tokens([{"role": "user", "content": "\n".join(lines)}]))
        assert [line for line in lines if _DOUBLED_LABEL.match(line)] == []
        normalised = [" ".join(line.split()).casefold() for line in lines]
        assert len(normalised) == len(set(normalised)), lines
        assert not any(line.startswith("Error:") and "Please fix" in line for line in lines)
    for turn in (0, 4):  # the oldest still pinned, as it was first written
        assert sum(f"Error: disk full on /var/d{turn}" in line for line in lines) == 1
    assert max(sizes) <= 2000


def test_the_last_user_request_is_pinned_as_the_request_not_as_an_error() -> None:
    facts = extract([
        {"role": "user", "content": "Please fix the TypeError in app.py"},
        {"role": "assistant", "content": "On it."},
    ])
    assert facts.request == "Please fix the TypeError in app.py"
    assert facts.errors == []


@pytest.mark.parametrize(("threshold", "budget"), [(50_000, 2000), (8_000, 800), (0, 0)])
def test_the_default_pinned_budget_is_a_tenth_of_the_threshold_at_most_2000(
    threshold: int, budget: int
) -> None:
    compactor = Compactor(RecordingProvider(), pin_facts=True, threshold=threshold)
    assert compactor.options.derived.pin_facts_tokens == budget
    chosen = Compactor(RecordingProvider(), pin_facts=True, threshold=threshold,
                       pin_facts_tokens=2000)
    assert chosen.options.derived.pin_facts_tokens == 2000


def test_with_a_small_threshold_the_pinned_block_stays_within_a_tenth_of_it() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for n in range(300):
        messages.append({"role": "assistant", "content": f"see pkg/module_{n}/file_{n}.py"})
        messages.append({"role": "user", "content": "ok"})
    compactor = Compactor(RecordingProvider("Vague."), pin_facts=True, threshold=3000)
    compactor(messages, force=True)
    assert estimate_tokens([{"role": "user", "content": "\n".join(pinned_lines(messages))}]) <= 300


# Continuation framing.
def test_both_summary_prompts_keep_done_apart_from_in_flight_and_name_the_next_step() -> None:
    for topic in ("中文", "目标", "已完成", "约束", "路径", "上下文"):  # the spec's topics
        assert topic in DEFAULT_SUMMARY_PROMPT
    for section in ("【已完成】", "不必重做", "【进行中】", "做到哪一步", "【下一步】"):
        assert section in DEFAULT_SUMMARY_PROMPT
    for section in ("Done:", "not to be redone", "In flight:", "how far it got", "Next step:"):
        assert section in ENGLISH_SUMMARY_PROMPT


def test_the_english_acknowledgement_says_the_summary_is_history_to_continue_from() -> None:
    messages = history()
    Compactor(RecordingProvider("S"), language="en")(messages, force=True)
    assert messages[1]["content"] == SUMMARY_PREFIX + "S"
    assert messages[2]["content"] == ENGLISH_ACKNOWLEDGEMENT
    for words in ("history", "not a new request", "next step", "without redoing"):
        assert words in ENGLISH_ACKNOWLEDGEMENT


@pytest.mark.parametrize(
    ("summary", "framing"),
    [
        ("The user wants the test fixed.", ENGLISH_FRAMING),
        ("用户要修复失败的测试。", CHINESE_FRAMING),
    ],
)
def test_with_pins_the_summary_message_closes_with_the_framing_in_its_language(
    summary: str, framing: str
) -> None:
    compactor = Compactor(RecordingProvider(summary), pin_facts=True)
    messages = history()
    for _ in range(3):
        compactor(messages, force=True)
        content = messages[1]["content"]
        assert content.startswith(SUMMARY_PREFIX + summary)
        assert content.endswith("\n" + framing) and content.count(framing) == 1
        messages += history()[2:]
    assert extract([messages[1]]).errors == []  # the framing is no fact


def test_an_acknowledgement_an_earlier_version_wrote_is_still_the_librarys_own_output() -> None:
    for earlier in EARLIER_ACKNOWLEDGEMENTS:
        assert earlier != ENGLISH_ACKNOWLEDGEMENT
        assert is_own_output({"role": "assistant", "content": earlier}, ENGLISH_ACKNOWLEDGEMENT)
    other = {"role": "assistant", "content": "Understood."}
    assert not is_own_output(other, ENGLISH_ACKNOWLEDGEMENT)
