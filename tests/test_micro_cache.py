"""Cache-friendly micro-compaction: micro_min_chars, exclude_tools, clear_at_least, the
``micro="cache-friendly"`` preset, and ``CompactionResult.prefix_changed``."""

from __future__ import annotations

import asyncio
import copy
import json
import random
import time
from datetime import timedelta
from typing import Any

import pytest

from bareagent_compact import (
    DEFAULT_KEEP_RECENT,
    Action,
    AsyncCompactor,
    Compactor,
    _micro_compact,
    estimate_tokens,
)
from bareagent_compact.micro import CACHE_FRIENDLY, TRUNCATED_PREFIX, MicroOptions
from conftest import RecordingProvider, tool_history, tool_round
from converters import to_chat, to_responses

Messages = list[dict[str, Any]]
BIG = 1_000_000


def start() -> Messages:
    return [{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}]


def history(sizes: list[int], names: list[str] | None = None) -> Messages:
    return tool_history(
        len(sizes),
        system="sys",
        request="go",
        output=lambda index: f"{index % 10}" * sizes[index],
        name=lambda index: names[index] if names else "bash",
    )


def result_contents(messages: Messages) -> list[Any]:
    """Every tool result's content in order, in any of the three dialects."""
    out: list[Any] = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            out += [b["content"] for b in content if b.get("type") == "tool_result"]
        if message.get("role") == "tool":
            out.append(content)
        if message.get("type") == "function_call_output":
            out.append(message["output"])
    return out


def is_marker(content: Any) -> bool:
    return isinstance(content, str) and content.startswith(TRUNCATED_PREFIX)


def never_called(prompt: Messages) -> str:
    raise AssertionError("the provider was called")


# ---------------------------------------------------------------- the default path


def test_default_options_are_the_specification_s_micro_compaction() -> None:
    compactor = Compactor(never_called, threshold=BIG)
    assert compactor.keep_recent == DEFAULT_KEEP_RECENT == 3
    assert compactor.micro == "spec"
    assert compactor.micro_options == MicroOptions()
    assert compactor.micro_options.is_spec
    messages = history([1, 2, 40, 300, 5, 6, 7])
    expected = copy.deepcopy(messages)
    _micro_compact(expected)
    result = compactor(messages)
    assert messages == expected
    assert result.truncated == 4


def test_default_path_still_truncates_short_results_into_longer_markers() -> None:
    messages = history([2, 2, 2, 2])  # "00", "11", ...: shorter than their markers
    Compactor(never_called, threshold=BIG)(messages)
    assert result_contents(messages)[0] == "[truncated: bash result, 2 chars]"


# ---------------------------------------------------------------- micro_min_chars


def test_micro_min_chars_keeps_results_shorter_than_n_characters_whole() -> None:
    messages = history([99, 100, 101, 5000, 10, 10, 10])
    result = Compactor(never_called, threshold=BIG, micro_min_chars=100)(messages)
    contents = result_contents(messages)
    assert contents[0] == "0" * 99
    assert contents[1] == "[truncated: bash result, 100 chars]"
    assert contents[2] == "[truncated: bash result, 101 chars]"
    assert contents[3] == "[truncated: bash result, 5000 chars]"
    assert result.truncated == 3


def test_micro_min_chars_zero_never_replaces_a_result_by_a_longer_marker() -> None:
    messages = start()
    for index in range(6):
        messages += tool_round(f"t{index}", "bash", "ok")
    before = copy.deepcopy(messages)
    result = Compactor(never_called, threshold=BIG, micro_min_chars=0)(messages)
    assert messages == before
    assert result.truncated == 0
    assert result.action is Action.NONE


def test_micro_min_chars_never_grows_any_result_string_or_blocks() -> None:
    rng = random.Random(7)
    messages = start()
    for index in range(60):
        size = rng.randint(0, 80)
        text = rng.choice(["x", "界", "ab "]) * size
        output: Any = text if index % 3 else [{"type": "text", "text": text}]
        messages += tool_round(f"t{index}", rng.choice(["bash", "a_much_longer_tool_name"]), output)
    originals = copy.deepcopy(result_contents(messages))
    Compactor(never_called, threshold=BIG, micro_min_chars=0, keep_recent=1)(messages)
    changed = 0
    for original, now in zip(originals, result_contents(messages), strict=True):
        if now == original:
            continue
        changed += 1
        assert is_marker(now)
        wrapped = [{"role": "user", "content": original}]
        assert estimate_tokens([{"role": "user", "content": now}]) <= estimate_tokens(wrapped)
        if isinstance(original, str):
            assert len(now) < len(original)
    assert changed > 0  # the long ones shrink


def test_micro_min_chars_truncates_a_large_list_of_blocks() -> None:
    blocks = [{"type": "text", "text": "y" * 3000}, {"type": "text", "text": "z" * 10}]
    messages = start() + tool_round("a", "read", blocks) + tool_round("b", "read", "tail")
    Compactor(never_called, threshold=BIG, micro_min_chars=0, keep_recent=1)(messages)
    assert result_contents(messages)[0] == "[truncated: read result, 3011 chars]"


@pytest.mark.parametrize(
    ("value", "error"), [(-1, ValueError), ("10", TypeError), (True, TypeError), (1.5, TypeError)]
)
def test_micro_min_chars_must_be_a_non_negative_int(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="micro_min_chars"):
        Compactor(never_called, micro_min_chars=value)


# ---------------------------------------------------------------- exclude_tools


def test_exclude_tools_results_are_never_truncated() -> None:
    names = ["memory", "bash", "plan", "bash", "bash", "bash", "bash"]
    messages = history([500] * 7, names=names)
    result = Compactor(never_called, threshold=BIG, exclude_tools=["memory", "plan"])(messages)
    contents = result_contents(messages)
    assert contents[0] == "0" * 500
    assert contents[2] == "2" * 500
    assert contents[1] == "[truncated: bash result, 500 chars]"
    assert contents[3] == "[truncated: bash result, 500 chars]"
    assert result.truncated == 2


@pytest.mark.parametrize("value", ["memory", b"memory", 3, ["memory", 3]])
def test_exclude_tools_must_be_a_collection_of_names(value: Any) -> None:
    with pytest.raises(TypeError, match="exclude_tools"):
        Compactor(never_called, exclude_tools=value)


def test_exclude_tools_accepts_any_iterable_of_names() -> None:
    compactor = Compactor(never_called, exclude_tools=(name for name in ["a", "b"]))
    assert compactor.micro_options.exclude_tools == frozenset({"a", "b"})


# ---------------------------------------------------------------- clear_at_least


def freed_by_truncating(size: int) -> int:
    """Estimated tokens one ``size``-character ASCII result frees as a marker."""
    whole = estimate_tokens([{"role": "user", "content": "0" * size}])
    marker = estimate_tokens(
        [{"role": "user", "content": f"[truncated: bash result, {size} chars]"}]
    )
    return whole - marker


def test_clear_at_least_changes_nothing_until_enough_can_be_freed() -> None:
    compactor = Compactor(never_called, threshold=BIG, keep_recent=1, clear_at_least=BIG)
    messages = start()
    for index in range(20):
        messages += tool_round(f"t{index}", "bash", "x" * 800)
        before = copy.deepcopy(messages)
        result = compactor(messages)
        assert messages == before
        assert result.truncated == 0
        assert not result.prefix_changed


def test_clear_at_least_truncates_every_eligible_result_at_once() -> None:
    bar = 3 * freed_by_truncating(800)  # reached when three results are older than the newest
    compactor = Compactor(never_called, threshold=BIG, keep_recent=1, clear_at_least=bar)
    messages = start()
    clears = []
    for index in range(24):
        messages += tool_round(f"t{index}", "bash", "x" * 800)
        tokens = estimate_tokens(messages)
        result = compactor(messages)
        contents = result_contents(messages)
        if result.truncated:
            clears.append(index)
            assert tokens - result.tokens_before >= bar
            assert all(is_marker(content) for content in contents[:-1])
            assert result.prefix_changed
        else:
            assert not result.prefix_changed
        assert contents[-1] == "x" * 800
    assert clears == [3, 6, 9, 12, 15, 18, 21]


def test_over_the_threshold_every_eligible_result_is_cleared_before_a_full_compaction() -> None:
    messages = history([800] * 6)
    tokens = estimate_tokens(messages)
    compactor = Compactor(never_called, threshold=tokens - 10, keep_recent=1, clear_at_least=BIG)
    result = compactor(messages)
    assert result.action is Action.MICRO  # the clear was enough: no summary
    assert result.truncated == 5
    assert result.tokens_before <= compactor.threshold
    assert result.prefix_changed


def test_still_over_the_threshold_after_clearing_the_full_compaction_sees_markers() -> None:
    provider = RecordingProvider()
    messages = history([800] * 6)
    result = Compactor(provider, threshold=10, keep_recent=1, clear_at_least=BIG)(messages)
    assert result.action is Action.FULL
    assert result.truncated == 5
    assert result.prefix_changed
    transcript = provider.prompts[0][-1]["content"]
    assert transcript.count("[truncated: bash result, 800 chars]") == 5


def test_force_clears_everything_eligible_first() -> None:
    provider = RecordingProvider()
    messages = history([800] * 4)
    result = Compactor(provider, threshold=BIG, keep_recent=1, clear_at_least=BIG)(
        messages, force=True
    )
    assert result.action is Action.FULL
    assert result.truncated == 3


@pytest.mark.parametrize("counter", [None, estimate_tokens])
def test_over_the_threshold_by_the_reported_size_clears_before_a_full_compaction(
    counter: Any,
) -> None:
    # The history's estimate is far below the threshold, but the API reported a
    # request over it (a large system prompt and tool definitions the estimate never
    # sees): the clear is decided on the same count as the trigger, the reported
    # one, so the old results go before any summary is asked for.
    provider = RecordingProvider()
    messages = history([4000] * 3)
    threshold = 4 * estimate_tokens(messages)
    compactor = Compactor(
        provider, threshold=threshold, keep_recent=1, clear_at_least=BIG, token_counter=counter
    )
    assert compactor(messages).truncated == 0  # under the threshold by any count
    compactor.record_usage(messages, threshold + 1000)
    result = compactor(messages)
    assert result.truncated == 2
    assert result.prefix_changed
    assert result.action is Action.MICRO  # the clear was enough: no summary
    assert provider.prompts == []


@pytest.mark.parametrize(("value", "error"), [(-5, ValueError), ("1", TypeError), (None, None)])
def test_clear_at_least_must_be_a_non_negative_int(value: Any, error: Any) -> None:
    if error is None:
        assert Compactor(never_called, clear_at_least=value).micro_options.clear_at_least == 0
        return
    with pytest.raises(error, match="clear_at_least"):
        Compactor(never_called, clear_at_least=value)


def test_the_archive_hook_receives_only_what_is_cleared() -> None:
    archived: list[Any] = []
    bar = 2 * freed_by_truncating(800)
    compactor = Compactor(
        never_called, threshold=BIG, keep_recent=1, clear_at_least=bar, archive=archived.append
    )
    messages = start()
    messages += tool_round("t0", "bash", "x" * 800)
    messages += tool_round("t1", "bash", "x" * 800)
    assert compactor(messages).truncated == 0
    assert archived == []
    messages += tool_round("t2", "bash", "x" * 800)
    assert compactor(messages).truncated == 2
    assert [record["tool_use_id"] for record in archived] == ["t0", "t1"]


# ---------------------------------------------------------------- the preset


def test_cache_friendly_preset_values() -> None:
    compactor = Compactor(never_called, threshold=30_000, micro="cache-friendly")
    assert compactor.micro == "cache-friendly"
    assert compactor.keep_recent == CACHE_FRIENDLY.keep_recent == 1
    assert compactor.micro_options == MicroOptions(
        min_chars=CACHE_FRIENDLY.min_chars,
        clear_at_least=round(0.3 * 30_000),
        short_over_threshold=True,
    )
    assert CACHE_FRIENDLY.min_chars == 2000


def test_over_the_threshold_the_preset_truncates_short_results_too() -> None:
    # Short results left whole pile up; over the threshold they go with the rest, so
    # the history left is no larger than the default's and no summary is needed.
    messages = history([1500] * 8 + [4000])
    expected = copy.deepcopy(messages)
    tokens = estimate_tokens(messages)
    compactor = Compactor(never_called, threshold=tokens - 10, micro="cache-friendly")
    result = compactor(messages)
    assert result.action is Action.MICRO
    assert result.truncated == 8
    assert result_contents(messages)[:8] == ["[truncated: bash result, 1500 chars]"] * 8
    assert result_contents(messages)[8] == "8" * 4000  # the newest unit stays whole
    # Under the threshold they stay whole.
    assert (
        Compactor(never_called, threshold=tokens + 10, micro="cache-friendly")(expected).truncated
        == 0
    )


def test_a_policy_that_keeps_short_results_keeps_them_over_the_threshold() -> None:
    provider = RecordingProvider()
    messages = history([1500] * 8 + [4000])
    tokens = estimate_tokens(messages)
    policy = CACHE_FRIENDLY.replace(short_over_threshold=False)
    compactor = Compactor(provider, threshold=tokens - 10, micro=policy)
    assert not compactor.micro_options.short_over_threshold
    result = compactor(messages)
    assert result.truncated == 0
    assert result.action is Action.FULL


def test_the_preset_given_its_own_values_explicitly_behaves_as_the_preset() -> None:
    sizes = [1500] * 8 + [4000]
    tokens = estimate_tokens(history(sizes))
    results = []
    for explicit in ({}, {"micro_min_chars": 2000, "keep_recent": 1}, {"micro": CACHE_FRIENDLY}):
        messages = history(sizes)
        chosen = {"micro": "cache-friendly", **explicit}
        compactor = Compactor(RecordingProvider(), threshold=tokens - 10, **chosen)
        result = compactor(messages)
        results.append((result.truncated, result.action, messages))
    assert results[0][0] == 8
    assert results[1] == results[0] == results[2]


def test_micro_policy_values_are_checked() -> None:
    with pytest.raises(ValueError, match="clear_fraction"):
        CACHE_FRIENDLY.replace(clear_fraction=2)
    with pytest.raises(TypeError, match="keep_recent"):
        CACHE_FRIENDLY.replace(keep_recent="1")


def test_explicit_options_override_the_preset() -> None:
    compactor = Compactor(
        never_called,
        threshold=30_000,
        micro="cache-friendly",
        keep_recent=2,
        micro_min_chars=0,
        exclude_tools=["memory"],
        clear_at_least=100,
    )
    assert compactor.keep_recent == 2
    # whether short results are cleared over the threshold is the policy's, not the options'
    assert compactor.micro_options == MicroOptions(0, frozenset({"memory"}), 100, True)


@pytest.mark.parametrize(("value", "error"), [("cache_friendly", ValueError), (None, TypeError)])
def test_micro_must_name_a_preset(value: Any, error: type[Exception]) -> None:
    with pytest.raises(error, match="micro"):
        Compactor(never_called, micro=value)


def agent_session(seed: int, turns: int) -> list[Messages]:
    """The messages each turn of a random agent session appends (assistant call, results)."""
    rng = random.Random(seed)
    steps = []
    for turn in range(turns):
        size = int(rng.choice([50, 300, 2500, 6000, 15000]) * rng.uniform(0.5, 1.5))
        name = rng.choice(["bash", "read_file", "grep"])
        steps.append(tool_round(f"c{turn}", name, rng.choice("abc ") * size))
    return steps


def test_preset_markers_and_prefix_stay_byte_identical_between_clears() -> None:
    compactor = Compactor(RecordingProvider(), threshold=20_000, micro="cache-friendly")
    messages = start()
    previous: list[str] = []
    markers: dict[str, str] = {}
    clears = quiet = 0
    for step in agent_session(3, 80):
        messages += step
        result = compactor(messages)
        dumps = [json.dumps(message, ensure_ascii=False) for message in messages]
        same_prefix = dumps[: len(previous)] == previous
        # prefix_changed says exactly whether the history sent last time was edited
        assert result.prefix_changed is (not same_prefix)
        clears += result.prefix_changed
        quiet += not result.prefix_changed
        for message in messages:
            for block in message["content"] if isinstance(message["content"], list) else []:
                content = block.get("content")
                if is_marker(content):
                    assert markers.setdefault(block["tool_use_id"], content) == content
        assert not is_marker(result_contents(messages)[-1])  # the newest result is whole
        previous = dumps
    assert markers
    assert quiet > 2 * clears  # the prefix survives most turns


def test_preset_rewrites_the_prefix_far_less_often_than_the_spec() -> None:
    changes = {}
    for micro in ("spec", "cache-friendly"):
        compactor = Compactor(RecordingProvider(), threshold=20_000, micro=micro)
        messages = start()
        changes[micro] = 0
        for step in agent_session(5, 60):
            messages += step
            changes[micro] += compactor(messages).prefix_changed
    assert changes["cache-friendly"] * 2 < changes["spec"]


# ---------------------------------------------------------------- prefix_changed


def test_prefix_changed_is_false_for_a_call_that_changes_nothing() -> None:
    messages = history([10, 10])
    assert not Compactor(never_called, threshold=BIG)(messages).prefix_changed


def test_prefix_changed_ignores_a_change_to_the_newest_message_only() -> None:
    messages = [*start(), {"role": "assistant", "content": "hi"}]
    messages += tool_round("only", "bash", "x" * 500)
    result = Compactor(never_called, threshold=BIG, keep_recent=0)(messages)
    assert result.truncated == 1
    assert not result.prefix_changed


def test_prefix_changed_does_not_take_part_in_equality() -> None:
    messages = history([500] * 5)
    result = Compactor(never_called, threshold=BIG)(messages)
    assert result.prefix_changed
    assert result == type(result)(Action.MICRO, result.tokens_before, result.tokens_after, 2)


# ---------------------------------------------------------------- dialects and async

OPTION_SETS: list[dict[str, Any]] = [
    {"micro_min_chars": 1000},
    {"exclude_tools": ["grep"]},
    {"keep_recent": 1, "clear_at_least": 3000},
    {"micro": "cache-friendly"},
]


def run_session(
    compactor: Compactor, steps: list[Messages], convert: Any
) -> tuple[Messages, list[tuple[Any, ...]]]:
    messages = convert(start())
    outcomes = []
    for step in steps:
        messages += convert(copy.deepcopy(step))
        result = compactor(messages)
        outcomes.append((result.action, result.truncated, result.prefix_changed))
    return messages, outcomes


@pytest.mark.parametrize("options", OPTION_SETS)
@pytest.mark.parametrize("convert", [to_chat, to_responses])
def test_options_behave_the_same_in_openai_histories(options: dict[str, Any], convert: Any) -> None:
    steps = agent_session(11, 30)
    anthropic, anthropic_outcomes = run_session(
        Compactor(RecordingProvider(), threshold=20_000, **options), steps, lambda m: m
    )
    other, other_outcomes = run_session(
        Compactor(RecordingProvider(), threshold=20_000, **options), steps, convert
    )
    assert other_outcomes == anthropic_outcomes
    assert result_contents(other) == result_contents(anthropic)
    assert sum(truncated for _, truncated, _ in other_outcomes) > 0


def test_chat_history_options_by_hand() -> None:
    messages: Messages = [{"role": "user", "content": "go"}]
    for index, (name, size) in enumerate(
        [("memory", 900), ("bash", 900), ("bash", 5), ("bash", 9)]
    ):
        call = {
            "id": f"c{index}",
            "type": "function",
            "function": {"name": name, "arguments": "{}"},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{index}", "content": "r" * size})
    compactor = Compactor(
        never_called, threshold=BIG, keep_recent=1, micro_min_chars=0, exclude_tools={"memory"}
    )
    result = compactor(messages)
    assert [m["content"] for m in messages if m["role"] == "tool"] == [
        "r" * 900,
        "[truncated: bash result, 900 chars]",
        "r" * 5,
        "r" * 9,
    ]
    assert result.truncated == 1
    assert result.prefix_changed


@pytest.mark.parametrize("options", OPTION_SETS)
def test_async_compactor_takes_the_same_options_and_decisions(options: dict[str, Any]) -> None:
    steps = agent_session(13, 30)
    sync_messages, sync_outcomes = run_session(
        Compactor(RecordingProvider(), threshold=15_000, **options), steps, lambda m: m
    )

    async def main() -> tuple[Messages, list[tuple[Any, ...]]]:
        compactor = AsyncCompactor(RecordingProvider(), threshold=15_000, **options)
        messages = start()
        outcomes = []
        for step in steps:
            messages += copy.deepcopy(step)
            result = await compactor(messages)
            outcomes.append((result.action, result.truncated, result.prefix_changed))
        return messages, outcomes

    async_messages, async_outcomes = asyncio.run(main())
    assert async_outcomes == sync_outcomes
    assert async_messages == sync_messages


# ---------------------------------------------------------------- the cold cache


class FakeClock:
    """A clock of the test's: seconds that pass only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.calls = 0

    def __call__(self) -> float:
        self.calls += 1
        return self.now


COLD_SIZES = [1500, 3000, 1500, 3000, 500]  # four due, freeing far less than 0.3 x threshold


def preset(clock: FakeClock, **options: Any) -> Compactor:
    return Compactor(never_called, threshold=30_000, micro="cache-friendly", clock=clock, **options)


def sent(compactor: Compactor, messages: Messages) -> None:
    """The loop's model request: the history is sent and its usage recorded."""
    compactor.record_usage(messages, estimate_tokens(messages))


def test_a_warm_cache_keeps_the_preset_batching() -> None:
    clock = FakeClock()
    compactor = preset(clock)
    messages = history(COLD_SIZES)
    sent(compactor, messages)
    clock.now += 299.0
    before = copy.deepcopy(messages)
    result = compactor(messages)
    assert result.truncated == 0
    assert messages == before
    assert not result.prefix_changed


def test_a_cold_cache_clears_everything_due_at_once() -> None:
    clock = FakeClock()
    compactor = preset(clock)
    messages = history(COLD_SIZES)
    sent(compactor, messages)
    clock.now += 300.0  # the default lifetime: the prefix is written again anyway
    result = compactor(messages)
    assert result.action is Action.MICRO
    assert result.truncated == 4
    assert result.prefix_changed
    contents = result_contents(messages)
    assert contents[:4] == [f"[truncated: bash result, {size} chars]" for size in COLD_SIZES[:4]]
    assert contents[4] == "4" * 500  # the newest unit stays whole


def test_a_cold_cache_still_leaves_excluded_tools_and_growing_markers_whole() -> None:
    clock = FakeClock()
    compactor = preset(clock, exclude_tools=["memory"])
    messages = history([3000, 3000, 2, 3000], names=["bash", "memory", "bash", "bash"])
    sent(compactor, messages)
    clock.now += 301.0
    result = compactor(messages)
    assert result.truncated == 1
    marker = "[truncated: bash result, 3000 chars]"
    assert result_contents(messages)[:3] == [marker, "1" * 3000, "22"]


def test_a_cold_cache_is_judged_from_the_last_recorded_request() -> None:
    clock = FakeClock()
    compactor = preset(clock)
    messages = history(COLD_SIZES)
    sent(compactor, messages)
    clock.now += 200.0
    assert compactor(messages).truncated == 0
    sent(compactor, messages)  # a new request refreshes the cache
    clock.now += 200.0
    assert compactor(messages).truncated == 0
    clock.now += 100.0
    assert compactor(messages).truncated == 4


def test_without_a_recorded_request_the_preset_batches_as_before() -> None:
    clock = FakeClock()
    compactor = preset(clock)
    messages = history(COLD_SIZES)
    clock.now += 10_000.0
    assert compactor(messages).truncated == 0


def test_cache_ttl_takes_seconds_or_a_timedelta() -> None:
    for ttl in (3600, 3600.0, timedelta(hours=1)):
        clock = FakeClock()
        compactor = preset(clock, cache_ttl=ttl)
        assert compactor.cache_ttl == ttl
        assert compactor.options.derived.cache_ttl == 3600.0
        messages = history(COLD_SIZES)
        sent(compactor, messages)
        clock.now += 3599.0
        assert compactor(messages).truncated == 0
        clock.now += 1.0
        assert compactor(messages).truncated == 4


def test_an_infinite_cache_ttl_never_expires() -> None:
    clock = FakeClock()
    compactor = preset(clock, cache_ttl=float("inf"))
    messages = history(COLD_SIZES)
    sent(compactor, messages)
    clock.now += 1e12
    assert compactor(messages).truncated == 0


def test_cache_ttl_and_clock_defaults() -> None:
    compactor = Compactor(never_called)
    assert compactor.cache_ttl == 300
    assert compactor.clock is time.monotonic


@pytest.mark.parametrize(
    ("value", "error"),
    [(0, ValueError), (-1, ValueError), (float("nan"), ValueError), ("300", TypeError),
     (True, TypeError), (None, TypeError)],
)  # fmt: skip
def test_cache_ttl_must_be_a_positive_number_of_seconds(value: Any, error: Any) -> None:
    with pytest.raises(error, match="cache_ttl"):
        Compactor(never_called, cache_ttl=value)
    compactor = Compactor(never_called)
    with pytest.raises(error, match="cache_ttl"):
        compactor.cache_ttl = value
    assert compactor.cache_ttl == 300
    with pytest.raises(ValueError, match="cache_ttl"):
        Compactor(never_called, cache_ttl=timedelta(0))


def test_clock_must_be_callable() -> None:
    with pytest.raises(TypeError, match="clock"):
        Compactor(never_called, clock=300)  # type: ignore[arg-type]


def test_a_failing_clock_is_logged_and_the_cache_taken_as_warm(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = FakeClock()
    compactor = preset(clock)
    messages = history(COLD_SIZES)
    sent(compactor, messages)

    def broken() -> float:
        raise RuntimeError("no time")

    compactor.options = compactor.options.replace(clock=broken)
    sent(compactor, messages)
    with caplog.at_level("WARNING"):
        assert compactor(messages).truncated == 0
    assert "clock" in caplog.text
    compactor.clock = lambda: "soon"  # type: ignore[assignment, return-value]
    sent(compactor, messages)
    assert compactor(messages).truncated == 0


def test_the_async_compactor_clears_a_cold_cache_too() -> None:
    clock = FakeClock()

    async def main() -> list[int]:
        compactor = AsyncCompactor(
            RecordingProvider(), threshold=30_000, micro="cache-friendly", clock=clock
        )
        messages = history(COLD_SIZES)
        compactor.record_usage(messages, estimate_tokens(messages))
        clock.now += 299.0
        warm = (await compactor(messages)).truncated
        clock.now += 1.0
        cold = (await compactor(messages)).truncated
        return [warm, cold]

    assert asyncio.run(main()) == [0, 4]


def test_spec_micro_is_unchanged_by_the_clock_and_cache_ttl() -> None:
    clock = FakeClock()
    plain = Compactor(never_called, threshold=BIG)
    timed = Compactor(never_called, threshold=BIG, clock=clock, cache_ttl=1)
    messages = history([1, 2, 40, 300, 5, 6, 7])
    other = copy.deepcopy(messages)
    for compactor, history_ in ((plain, messages), (timed, other)):
        sent(compactor, history_)
    clock.now += 10_000.0
    assert plain(messages) == timed(other)
    assert messages == other
    assert clock.calls == 0


@pytest.mark.parametrize("convert", [to_chat, to_responses])
def test_a_cold_cache_clears_everything_due_in_openai_histories_too(convert: Any) -> None:
    clock = FakeClock()
    compactor = preset(clock)
    messages = convert(history(COLD_SIZES))
    sent(compactor, messages)
    clock.now += 299.0
    assert compactor(messages).truncated == 0
    clock.now += 1.0
    assert compactor(messages).truncated == 4
    assert [is_marker(content) for content in result_contents(messages)] == [True] * 4 + [False]


def test_a_request_recorded_under_the_spec_policy_leaves_the_time_unknown() -> None:
    clock = FakeClock()
    compactor = preset(clock)
    messages = history(COLD_SIZES)
    sent(compactor, messages)
    compactor.micro = "spec"
    clock.now += 1000.0
    sent(compactor, messages)  # a recent request the spec policy does not time
    compactor.micro = "cache-friendly"
    assert compactor(messages).truncated == 0
