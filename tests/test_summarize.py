"""Full compaction that always gets the session back under budget: parts, overflow
retries, back-off after failures, and refused inflated summaries."""

from __future__ import annotations

import asyncio
import copy
import logging
import math
import random
import re
from typing import Any

import pytest

from bareagent_compact import Action, AsyncCompactor, Compactor, Reason, SummaryCost
from bareagent_compact.prompts import (
    CHINESE_ROLLING_LEAD_IN,
    ENGLISH_ROLLING_LEAD_IN,
    ENGLISH_SUMMARY_PROMPT,
    SUMMARY_PREFIX,
)
from bareagent_compact.providers import SummaryText
from bareagent_compact.serialize import _serialize
from bareagent_compact.summarize import (
    MIN_BUDGET,
    cut_middle,
    history_room,
    prompt_room,
    segments,
    summarize_source,
)
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.trigger import BACKOFF_CAP
from conftest import RecordingProvider, tool_round

MARKER = re.compile(r"MARKER\d+")


class ContextLengthError(Exception):
    """What an OpenAI-compatible server says when the prompt is too long."""


class LimitedSummarizer:
    """A summariser with a hard input limit in characters; its summary lists every
    marker word it was shown (in the transcript or the running summary)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.calls = 0
        self.sizes: list[int] = []

    def __call__(self, prompt: list[dict[str, Any]]) -> str:
        self.calls += 1
        text = prompt[1]["content"]
        if len(text) > self.limit:
            raise ContextLengthError(
                f"This model's maximum context length is {self.limit} tokens. However, "
                f"you requested {len(text)} tokens. Please reduce the length of the messages."
            )
        self.sizes.append(len(text))
        seen = sorted(set(MARKER.findall(text)), key=lambda m: int(m[6:]))
        return "Summary. Markers: " + " ".join(seen)


def session(parts: int, part_chars: int) -> list[dict[str, Any]]:
    """A tool-using session whose summary source holds ``parts`` chunks of about
    ``part_chars`` characters, each with its own marker word, then a pending request."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}]
    messages.append({"role": "user", "content": "Investigate the build."})
    filler = "log line with some words 0123456789\n"
    for number in range(parts):
        call, result = tool_round(
            f"t{number}", "bash", f"MARKER{number}\n" + filler * (part_chars // len(filler))
        )
        messages += [call, result, {"role": "assistant", "content": f"checked part {number}"}]
        messages.append({"role": "user", "content": "continue"})
    messages.append({"role": "user", "content": "What did you find?"})
    return messages


@pytest.mark.parametrize("times", [1, 5, 50])
def test_a_source_many_times_the_summarisers_limit_is_summarised_in_parts(times: int) -> None:
    limit = 20_000
    summarizer = LimitedSummarizer(limit)
    messages = session(parts=times, part_chars=limit - 2_000)
    compactor = Compactor(summarizer, threshold=1_000, keep_recent=1_000)
    result = compactor(messages)
    assert result.action is Action.FULL, result
    assert result.tokens_after <= 1_000
    summary = messages[1]["content"]
    assert MARKER.findall(summary) == [f"MARKER{n}" for n in range(times)]
    assert all(size <= limit for size in summarizer.sizes)
    assert result.summary_calls == summarizer.calls
    if times > 1:
        assert result.parts >= times


def test_an_explicit_input_budget_needs_no_overflow_to_split() -> None:
    summarizer = LimitedSummarizer(limit=10_000)
    messages = session(parts=6, part_chars=6_000)
    result = Compactor(summarizer, threshold=1_000, keep_recent=1_000,
                       summary_input_tokens=2_000)(messages)
    assert result.action is Action.FULL
    assert result.summary_calls == summarizer.calls == result.parts  # no call overflowed
    assert MARKER.findall(messages[1]["content"]) == [f"MARKER{n}" for n in range(6)]


def test_a_source_within_the_budget_is_one_call_with_the_spec_prompt() -> None:
    provider = RecordingProvider()
    messages = session(parts=2, part_chars=500)
    result = Compactor(provider, threshold=10)(messages)
    assert result.summary_calls == 1 and result.parts == 1
    assert len(provider.prompts) == 1
    assert not provider.prompts[0][1]["content"].startswith("The first message")


def test_one_message_over_the_budget_is_cut_with_a_visible_marker() -> None:
    summarizer = LimitedSummarizer(limit=8_000)
    huge = "HEAD " + "x" * 200_000 + " TAIL"
    messages = [
        {"role": "user", "content": "read the log"},
        {"role": "assistant", "content": "reading"},
        {"role": "user", "content": huge},
        {"role": "assistant", "content": "that was long"},
        {"role": "user", "content": "now?"},
    ]
    result = Compactor(summarizer, threshold=100, summary_input_tokens=1_500)(messages)
    assert result.action is Action.FULL
    assert all(size <= 8_000 for size in summarizer.sizes)


def test_cut_text_keeps_head_and_tail_with_a_marker() -> None:
    text = "HEAD " + "x" * 10_000 + " TAIL"
    cut = cut_middle(text, tokens=2_500, budget=250)
    assert cut.startswith("HEAD ") and cut.endswith(" TAIL")
    assert "characters cut here" in cut
    assert len(cut) < 1_200


def test_parts_never_split_a_tool_call_from_its_results() -> None:
    messages = session(parts=4, part_chars=100)[1:-1]
    for segment in segments(messages):
        calls = {b["id"] for m in segment if isinstance(m["content"], list)
                 for b in m["content"] if b["type"] == "tool_use"}
        results = {b["tool_use_id"] for m in segment if isinstance(m["content"], list)
                   for b in m["content"] if b["type"] == "tool_result"}
        assert results <= calls


class AlwaysFailing:
    def __init__(self, until: int | None = None) -> None:
        self.calls: list[int] = []
        self.until = until
        self.turn = 0

    def __call__(self, prompt: list[dict[str, Any]]) -> str:
        self.calls.append(self.turn)
        if self.until is None or self.turn < self.until:
            raise RuntimeError("HTTP 529 overloaded")
        return "recovered summary"


def over_threshold() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": "task " * 400},
        {"role": "assistant", "content": "working " * 400},
        {"role": "user", "content": "next"},
    ]


def test_a_failing_summariser_is_called_at_most_35_times_in_1000_turns() -> None:
    provider = AlwaysFailing()
    compactor = Compactor(provider, threshold=100)
    reasons = set()
    for turn in range(1_000):
        provider.turn = turn
        messages = over_threshold()
        result = compactor(messages)
        reasons.add(result.reason)
    assert len(provider.calls) == 35  # the bound stated in docs/how-it-works.md
    assert reasons == {Reason.PROVIDER_RAISED, Reason.BACKING_OFF}
    gaps = [b - a for a, b in zip(provider.calls, provider.calls[1:], strict=False)]
    assert gaps[:6] == [2, 3, 5, 9, 17, 33] and set(gaps[5:]) == {BACKOFF_CAP + 1}


def test_after_recovery_the_first_compaction_succeeds_within_the_back_off_cap() -> None:
    provider = AlwaysFailing(until=500)
    compactor = Compactor(provider, threshold=100)
    first_success = None
    for turn in range(1_000):
        provider.turn = turn
        if compactor(over_threshold()).action is Action.FULL:
            first_success = turn
            break
    assert first_success is not None and 500 <= first_success <= 500 + BACKOFF_CAP


def test_force_always_tries_and_growth_ends_the_back_off() -> None:
    provider = AlwaysFailing()
    compactor = Compactor(provider, threshold=100)
    compactor(over_threshold())
    compactor(over_threshold())  # call 2 would be skipped
    assert len(provider.calls) == 1
    assert compactor(over_threshold(), force=True).reason == Reason.PROVIDER_RAISED
    assert len(provider.calls) == 2
    bigger = over_threshold() * 3
    assert compactor(bigger).reason == Reason.PROVIDER_RAISED  # grown 2x: tried at once
    assert len(provider.calls) == 3


def test_micro_compaction_still_runs_while_backing_off() -> None:
    provider = AlwaysFailing()
    compactor = Compactor(provider, threshold=10)
    compactor(over_threshold())
    messages = over_threshold()[:2]
    for turn in range(5):
        messages += tool_round(f"t{turn}", "bash", "out " * 20)
    result = compactor(messages)
    assert result.reason == Reason.BACKING_OFF and result.truncated == 2


def test_reasons_are_stable_strings() -> None:
    assert Reason.PROVIDER_RAISED == "provider raised"
    assert str(Reason.BACKING_OFF) == "backing off after a failed summary"
    assert {r.value for r in Reason} >= {
        "provider raised", "unusable summary", "snapshot failed", "history cannot be encoded",
        "nothing to summarise", "nothing new to summarise",
    }


def test_async_compactor_summarises_in_parts_too() -> None:
    summarizer = LimitedSummarizer(limit=20_000)

    async def provider(prompt: list[dict[str, Any]]) -> str:
        return summarizer(prompt)

    messages = session(parts=5, part_chars=18_000)
    result = asyncio.run(AsyncCompactor(provider, threshold=1_000, keep_recent=1_000)(messages))
    assert result.action is Action.FULL
    assert MARKER.findall(messages[1]["content"]) == [f"MARKER{n}" for n in range(5)]


def test_a_counter_that_ignores_its_input_still_ends_in_a_bounded_number_of_calls() -> None:
    provider = RecordingProvider()
    messages = session(parts=3, part_chars=300)
    result = Compactor(provider, token_counter=lambda m: 10**6)(messages, force=True)
    assert result.summary_calls == len(provider.prompts) <= 64
    assert result.action in (Action.FULL, Action.FAILED)


@pytest.mark.parametrize(
    "options",
    [
        {"summary_input_tokens": 548},  # the least the default prompt allows
        {"summary_input_tokens": 1998, "system_prompt": "Summarise it carefully. " * 120},
        {"token_counter": lambda m: 70_000},
    ],
)
def test_a_budget_eaten_by_the_prompt_itself_still_ends(options: dict[str, Any]) -> None:
    messages = [{"role": "user", "content": "start"}]
    for turn in range(5):
        messages += tool_round(f"t{turn}", "bash", "x " * 300)
    provider = RecordingProvider()
    compactor = Compactor(provider, threshold=100, keep_recent=100, **options)
    result = compactor(messages, instructions="Keep every path. " * 400)
    assert result.action in (Action.FULL, Action.FAILED)
    assert result.summary_calls == len(provider.prompts) <= 64
    budget = compactor.summary_input_tokens
    assert all(compactor.token_counter(prompt) <= budget for prompt in provider.prompts)


class GrowingSummarizer:
    """Each answer longer than the one before: about 50 more estimated tokens a call."""

    def __init__(self) -> None:
        self.prompts: list[list[dict[str, Any]]] = []

    def __call__(self, prompt: list[dict[str, Any]]) -> str:
        self.prompts.append(prompt)
        return "summary " + "word " * (40 * len(self.prompts))


def advised_least_budget(**options: Any) -> int:
    """The least summary_input_tokens that the constructor's own error advises."""
    with pytest.raises(ValueError, match="use summary_input_tokens >= ") as caught:
        Compactor(RecordingProvider(), summary_input_tokens=MIN_BUDGET, **options)
    found = re.search(r"use summary_input_tokens >= (\d+)", str(caught.value))
    assert found is not None
    return int(found.group(1))


@pytest.mark.parametrize("language", ["zh", "en"])
def test_the_advised_least_budget_and_a_little_more_summarise_in_parts(language: str) -> None:
    options: dict[str, Any] = {} if language == "zh" else {"language": "en"}
    least = advised_least_budget(**options)
    messages: list[dict[str, Any]] = [{"role": "user", "content": "start"}]
    for turn in range(30):
        messages += tool_round(f"t{turn}", "bash", f"M{turn} " + "output line here " * 40)
    messages.append({"role": "assistant", "content": "done"})
    for budget in range(least, least + 21):
        provider = GrowingSummarizer()
        compactor = Compactor(
            provider, summary_input_tokens=budget, threshold=100, keep_recent=100, **options
        )
        result = compactor(copy.deepcopy(messages), force=True)
        assert (result.action, result.reason) == (Action.FULL, None), budget
        assert result.parts == len(provider.prompts) > 2, budget  # answers past 50 tokens
        assert all(estimate_tokens(prompt) <= budget for prompt in provider.prompts), budget
        # every part after the first carries the (cut) running summary of those before
        assert all(SUMMARY_PREFIX in prompt[1]["content"] for prompt in provider.prompts[1:])


# A summary request always has room for the history.
HEAD = re.compile(r"M\d+:")
HISTORY_START = re.compile(r"\[(?:user|assistant)\]\n(?:\[tool_result:\w+\] )?M\d+:")


def random_source(rng: random.Random, budget: int) -> list[dict[str, Any]]:
    """Messages each opening with its own ``M<n>:`` head: mostly small, some over
    the whole budget, some Chinese, some tool rounds."""
    messages: list[dict[str, Any]] = []
    for number in range(rng.randint(1, 40)):
        head = f"M{number}: "
        weight = rng.choice([1, 1, 1, 2, 8, 40]) if rng.random() < 0.3 else 1
        words = rng.randint(1, 60) * weight * max(1, budget // 400)
        filler = ("数据" if rng.random() < 0.2 else "words ") * words
        if rng.random() < 0.2:
            call, result = tool_round(f"t{number}", "bash", head + filler)
            call["content"].insert(0, {"type": "text", "text": head + "calling"})
            messages += [call, result]
        else:
            role = "user" if number % 2 == 0 else "assistant"
            messages.append({"role": role, "content": head + filler})
    return messages


def drive(generator: Any, answer: Any) -> tuple[Any, list[list[dict[str, Any]]]]:
    """Run a summary generator to its end, answering every request with ``answer``."""
    prompts: list[list[dict[str, Any]]] = []
    try:
        request = next(generator)
        while True:
            prompts.append(request.prompt)
            request = generator.send(answer(request.prompt))
    except StopIteration as stop:
        return stop.value, prompts


def source_tokens(source: list[dict[str, Any]]) -> int:
    """The source's transcript, with room for a role line and a separator per message."""
    return estimate_tokens([{"role": "user", "content": _serialize(source)}]) + 6 * len(source)


def test_every_summary_request_fits_the_budget_and_leaves_the_history_its_share() -> None:
    for seed in range(150):
        rng = random.Random(seed)
        budget = rng.randint(MIN_BUDGET, 6_000)
        share = history_room(budget)
        base_tokens = rng.randint(prompt_room(budget) // 2, prompt_room(budget))
        base = "Summarise. " * (base_tokens // 3)  # 3 tokens each
        extra = "\n\nAdditional instructions: " + "keep ids " * rng.randint(0, budget // 2)
        lead_in = rng.choice([ENGLISH_ROLLING_LEAD_IN, CHINESE_ROLLING_LEAD_IN, ""])
        source = random_source(rng, budget)
        answer_words = rng.randint(1, budget // 3)
        done, prompts = drive(
            summarize_source(
                source, None, system_prompt=base + extra, base_prompt=base, lead_in=lead_in,
                rolling=rng.random() < 0.5, budget=budget, count=estimate_tokens,
                read=lambda answer: (answer, None),
            ),
            lambda prompt, n=answer_words: "S " * n,
        )
        assert done.text is not None and done.reason is None, seed
        seen: set[str] = set()
        for prompt in prompts:
            assert estimate_tokens(prompt) <= budget, seed
            body = prompt[1]["content"]
            start = HISTORY_START.search(body)
            assert start is not None, seed  # every request carries some history
            fixed = estimate_tokens([prompt[0], {"role": "user", "content": body[:start.start()]}])
            assert budget - fixed >= share, seed
            seen |= set(HEAD.findall(body))
        assert seen == {HEAD.findall(_serialize([m]))[0] for m in source}, seed  # every head
        assert len(prompts) <= 2 * math.ceil(source_tokens(source) / share) + 1, seed


def test_a_320_turn_session_with_instructions_near_the_budget_takes_few_requests() -> None:
    provider = RecordingProvider(answer="Summary of the part.")
    messages: list[dict[str, Any]] = [{"role": "system", "content": "agent"}]
    for turn in range(320):
        messages.append({"role": "user", "content": f"M{2 * turn}: look at src/m{turn}.py "
                         + "and explain it " * 6})
        messages.append({"role": "assistant", "content": f"M{2 * turn + 1}: it defines "
                         + "several helpers " * 8})
    messages.append({"role": "user", "content": "what next?"})
    source = messages[1:-1]
    compactor = Compactor(provider, language="en", summary_input_tokens=2_000, threshold=1_000)
    result = compactor(messages, instructions="Keep every identifier and path. " * 230)
    assert result.action is Action.FULL
    assert all(estimate_tokens(prompt) <= 2_000 for prompt in provider.prompts)
    bound = 2 * math.ceil(source_tokens(source) / history_room(2_000)) + 1
    assert result.summary_calls == len(provider.prompts) <= bound  # 640 before: one per message
    seen = {head for prompt in provider.prompts for head in HEAD.findall(prompt[1]["content"])}
    assert seen == {f"M{n}:" for n in range(640)}


def test_instructions_crowding_out_the_history_are_cut_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = RecordingProvider()
    messages = session(parts=6, part_chars=3_000)
    compactor = Compactor(provider, language="en", summary_input_tokens=2_000, threshold=100)
    with caplog.at_level(logging.INFO, logger="bareagent_compact"):
        result = compactor(messages, instructions="Keep ids. " * 1_000)
    assert result.action is Action.FULL
    assert "instructions were cut" in caplog.text
    system = provider.prompts[0][0]["content"]
    assert system.startswith(ENGLISH_SUMMARY_PROMPT + "\n\nAdditional instructions: Keep ids.")
    assert all(estimate_tokens(prompt) <= 2_000 for prompt in provider.prompts)


def test_a_counter_leaving_no_room_for_the_history_fails_the_step_and_keeps_history(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = RecordingProvider()
    messages = session(parts=3, part_chars=300)
    before = copy.deepcopy(messages)

    def counter(batch: list[dict[str, Any]]) -> int:  # a system prompt of 40,000 tokens
        return sum(40_000 if m.get("role") == "system" else 30_000 for m in batch)

    compactor = Compactor(provider, token_counter=counter, threshold=5)
    with caplog.at_level(logging.WARNING, logger="bareagent_compact"):
        result = compactor(messages, force=True)
    assert result.action is Action.FAILED
    assert result.reason is Reason.SUMMARY_BUDGET_TOO_SMALL
    assert result.summary_calls == 0 and not provider.prompts
    assert messages == before
    assert "no room for the history" in caplog.text


def test_a_message_over_the_history_share_keeps_as_much_of_its_head_and_tail_as_fits() -> None:
    provider = RecordingProvider()
    huge = "HEAD " + "x" * 200_000 + " TAIL"
    messages = [
        {"role": "user", "content": "read the log"},
        {"role": "assistant", "content": "reading"},
        {"role": "user", "content": huge},
        {"role": "assistant", "content": "that was long"},
        {"role": "user", "content": "now?"},
    ]
    compactor = Compactor(provider, language="en", summary_input_tokens=2_000, threshold=100)
    compactor(messages, instructions="Keep ids. " * 700)  # most of the budget
    cut = [p[1]["content"] for p in provider.prompts if "characters cut here" in p[1]["content"]]
    assert len(cut) == 1
    assert "HEAD " in cut[0] and " TAIL" in cut[0]
    kept = cut[0].count("x")
    assert kept >= 4 * history_room(2_000) * 0.8  # most of the room, not a bare marker


@pytest.mark.parametrize("rounds", [2, 60])
def test_parts_are_logged_only_when_there_are_two_or_more(
    caplog: pytest.LogCaptureFixture, rounds: int
) -> None:
    source = [
        {"role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k}: " + "word " * 40}
        for k in range(rounds)
    ]
    with caplog.at_level(logging.INFO, logger="bareagent_compact"):
        done, prompts = drive(
            summarize_source(
                source, None, system_prompt="Summarise.", base_prompt="Summarise.",
                lead_in="", rolling=False, budget=1000, count=estimate_tokens,
                read=lambda answer: (answer, None),
            ),
            lambda prompt: "S",
        )
    told = [r.getMessage() for r in caplog.records if "summarising part" in r.getMessage()]
    assert done.parts == len(prompts) and (len(prompts) == 1) == (rounds == 2)
    parts = [] if len(prompts) == 1 else range(1, len(prompts) + 1)
    assert told == [f"summarising part {n}" for n in parts]


class CostedSummarizer(LimitedSummarizer):
    """A ``LimitedSummarizer`` whose answers carry an Anthropic-shaped usage: each
    request's size in characters, half of it read from the cache, 7 tokens written."""

    def __call__(self, prompt: list[dict[str, Any]]) -> str:
        text = super().__call__(prompt)
        self.outputs = [*getattr(self, "outputs", []), len(text)]
        size = len(prompt[1]["content"])
        usage = {"input_tokens": size - size // 2 - 7, "cache_read_input_tokens": size // 2,
                 "cache_creation_input_tokens": 7, "output_tokens": len(text)}
        return SummaryText(text, usage)


def test_the_cost_of_a_summary_in_parts_sums_every_parts_usage() -> None:
    summarizer = CostedSummarizer(limit=10_000)
    messages = session(parts=6, part_chars=6_000)
    result = Compactor(summarizer, threshold=1_000, keep_recent=1_000,
                       summary_input_tokens=2_000)(messages)
    assert result.action is Action.FULL and result.parts > 1
    sizes, outputs = summarizer.sizes, summarizer.outputs
    read = sum(s // 2 for s in sizes)
    assert result.cost == SummaryCost(result.parts, sum(sizes), read, 7 * len(sizes), sum(outputs))


def test_the_cost_counts_the_overflowing_requests_without_tokens() -> None:
    summarizer = CostedSummarizer(limit=20_000)
    messages = session(parts=5, part_chars=18_000)
    result = Compactor(summarizer, threshold=1_000, keep_recent=1_000)(messages)
    assert result.action is Action.FULL
    cost = result.cost
    assert cost is not None
    assert cost.requests == result.summary_calls == summarizer.calls
    assert summarizer.calls > len(summarizer.sizes)  # some requests overflowed
    assert cost.input_tokens == sum(summarizer.sizes)  # only the answered ones report usage


def test_a_provider_returning_a_plain_str_reports_an_unknown_cost() -> None:
    messages = session(parts=2, part_chars=500)
    result = Compactor(RecordingProvider(), threshold=100, keep_recent=100)(messages, force=True)
    assert result.action is Action.FULL
    assert result.cost == SummaryCost(1, None, None, None, None)


def test_no_summary_request_means_no_cost() -> None:
    result = Compactor(RecordingProvider(), threshold=100_000)(session(parts=1, part_chars=100))
    assert result.action is Action.NONE
    assert result.cost is None


def test_an_sdk_response_returned_as_it_is_reports_its_usage() -> None:
    def raw(prompt: list[dict[str, Any]]) -> dict[str, Any]:
        return {"choices": [{"finish_reason": "stop",
                             "message": {"role": "assistant", "content": "the summary"}}],
                "usage": {"prompt_tokens": 900, "completion_tokens": 30,
                          "prompt_tokens_details": {"cached_tokens": 512}}}

    result = Compactor(raw, threshold=100, keep_recent=100)(session(2, 500), force=True)
    assert result.action is Action.FULL
    assert result.cost == SummaryCost(1, 900, 512, None, 30)


def test_a_failed_summary_still_reports_what_its_requests_used() -> None:
    def empty(prompt: list[dict[str, Any]]) -> str:
        return SummaryText("  ", {"input_tokens": 50, "output_tokens": 1})

    result = Compactor(empty, threshold=100, keep_recent=100)(session(2, 500), force=True)
    assert result.action is Action.FAILED
    assert result.cost == SummaryCost(1, 50, None, None, 1)
