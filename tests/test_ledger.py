"""The usage ledger: a count anchored on the input sizes a (fake) API reports.

The fake API counts a request as a fixed overhead (system prompt and tool
definitions it never shows) plus, per message, a constant and one token per
word or punctuation mark of every string in it: a deterministic count that is
not the character-weight estimate, so that anchoring shows.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
import random
import re
import weakref
from typing import Any

import pytest

from bareagent_compact import AsyncCompactor, Compactor, estimate_tokens
from bareagent_compact.ledger import FEATURES, UsageLedger, message_features
from conftest import RecordingProvider

WORD = re.compile(r"\w+|[^\w\s]")


class FakeAPI:
    """Reports ``overhead + sum(per message + words and marks)`` for a request."""

    def __init__(self, overhead: int = 1_200, per_message: int = 4) -> None:
        self.overhead = overhead
        self.per_message = per_message

    def _strings(self, value: Any, structure: bool = False) -> int:
        if isinstance(value, str):
            return 0 if structure else len(WORD.findall(value))
        if isinstance(value, dict):
            return sum(self._strings(v, k in ("role", "type")) for k, v in value.items())
        if isinstance(value, list):
            return sum(self._strings(v) for v in value)
        return 0 if value is None else 1

    def __call__(self, messages: list[dict[str, Any]]) -> int:
        return self.overhead + sum(self.per_message + self._strings(m) for m in messages)


LOG_LINE = "2024-05-{d:02d} 10:{m:02d}:07 status half-configured libfoo{n}:amd64 1.{n}.{d}-2"
PROSE = "The build fails because the linker cannot find the symbol; let me look at the flags."


def tool_output(rng: random.Random) -> str:
    lines = rng.randrange(20, 120)
    return "\n".join(
        LOG_LINE.format(d=rng.randrange(1, 29), m=rng.randrange(60), n=rng.randrange(99))
        for _ in range(lines)
    )


def turn(rng: random.Random, index: int) -> list[dict[str, Any]]:
    """An assistant message with a tool call, then the user message with its result."""
    call_id = f"toolu_{index:04d}"
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": PROSE},
                {"type": "tool_use", "id": call_id, "name": "bash", "input": {"command": "tail"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": call_id, "content": tool_output(rng)}
            ],
        },
    ]


def start() -> list[dict[str, Any]]:
    return [
        {"role": "system", "content": "You are a careful build engineer. " * 10},
        {"role": "user", "content": "The nightly upgrade failed; find out why."},
    ]


def warmed_up(turns: int = 8, seed: int = 0) -> tuple[UsageLedger, FakeAPI, list[Any]]:
    """A ledger that has seen ``turns`` reports of a growing history."""
    rng = random.Random(seed)
    api, ledger, messages = FakeAPI(), UsageLedger(), start()
    for index in range(turns):
        ledger.count(messages)
        ledger.record(messages, api(messages))
        messages += turn(rng, index)
    return ledger, api, messages


def error(count: int, real: int) -> float:
    return abs(count - real) / real


def test_before_any_report_the_count_is_exactly_the_estimate() -> None:
    _, _, messages = warmed_up(turns=3)
    assert UsageLedger().count(messages) == estimate_tokens(messages)


def test_a_report_anchors_the_count_overhead_included() -> None:
    api, ledger, messages = FakeAPI(), UsageLedger(), start()
    ledger.record(messages, api(messages))
    assert ledger.count(messages) == api(messages)
    assert ledger.reported


def test_new_content_is_estimated_by_weights_refitted_on_each_report() -> None:
    ledger, api, messages = warmed_up(turns=10)
    rng = random.Random(99)
    errors, heuristic = [], []
    for index in range(10, 20):
        real = api(messages)
        errors.append(error(ledger.count(messages), real))
        heuristic.append(error(estimate_tokens(messages), real))
        ledger.record(messages, real)
        messages += turn(rng, index)
    assert max(errors) < 0.03
    assert max(errors) < min(heuristic) / 5


def test_content_truncated_since_the_report_leaves_at_the_size_it_was_charged() -> None:
    api, ledger, messages = FakeAPI(), UsageLedger(), start()
    ledger.record(messages, api(messages))
    rng = random.Random(1)
    for index in range(6):  # one message per report: each is charged exactly its size
        for message in turn(rng, index):
            messages.append(message)
            ledger.record(messages, api(messages))
    block = messages[-1]["content"][0]
    block["content"] = "[truncated: bash result, 4000 chars]"  # micro-compaction, in place
    real = api(messages)
    assert ledger.count(messages) != api(messages[:-1]) + api.per_message  # the edit is seen
    assert error(ledger.count(messages), real) < 0.01


def test_removed_messages_leave_exactly_what_they_were_charged() -> None:
    api, ledger, messages = FakeAPI(), UsageLedger(), start()
    ledger.record(messages, api(messages))
    rng = random.Random(2)
    for index in range(5):
        for message in turn(rng, index):
            messages.append(message)
            ledger.record(messages, api(messages))
    del messages[2:6]
    assert ledger.count(messages) == api(messages)


def test_an_in_place_edit_of_a_message_is_seen() -> None:
    ledger, api, messages = warmed_up(turns=6)
    ledger.record(messages, api(messages))
    before = ledger.count(messages)
    messages[3]["content"][0]["text"] = PROSE * 40  # deep inside a block
    after = ledger.count(messages)
    assert after > before + 200
    assert abs(after - api(messages)) < abs(before - api(messages))


def test_a_full_compaction_counts_the_summary_as_new_and_keeps_the_overhead() -> None:
    ledger, api, messages = warmed_up(turns=10)
    ledger.record(messages, api(messages))
    pending = messages[-1]
    messages[:] = [
        copy.deepcopy(messages[0]),  # the system message, copied by the rebuild
        {"role": "user", "content": "Summary of the conversation so far: " + PROSE * 6},
        {"role": "assistant", "content": "Understood."},
        pending,
    ]
    real = api(messages)
    assert error(ledger.count(messages), real) < 0.03
    assert ledger.count(messages) > api.overhead  # the overhead survived the rebuild


def test_a_caller_rebuilding_its_dicts_every_turn_keeps_the_anchor() -> None:
    api, ledger, messages = FakeAPI(), UsageLedger(), start()
    rng = random.Random(3)
    errors = []
    for index in range(16):
        sent = copy.deepcopy(messages)  # new dicts every turn, same content
        real = api(sent)
        if index >= 8:
            errors.append(error(ledger.count(sent), real))
        ledger.record(sent, real)
        messages += turn(rng, index)
    reference, _, _ = warmed_up(turns=16, seed=3)
    assert max(errors) < 0.03
    assert reference.count(messages) == ledger.count(copy.deepcopy(messages))


def test_when_every_message_changes_every_turn_it_is_a_calibrated_estimate() -> None:
    api, ledger, messages = FakeAPI(), UsageLedger(), start()
    rng = random.Random(4)
    errors, heuristic = [], []
    for index in range(16):
        sent = [{**m, "turn": str(index)} for m in messages]  # nothing is ever the same
        real = api(sent)
        if index >= 8:
            errors.append(error(ledger.count(sent), real))
            heuristic.append(error(estimate_tokens(sent), real))
        ledger.record(sent, real)
        messages += turn(rng, index)
    assert sum(errors) < sum(heuristic)
    assert max(errors) < 0.1


def test_usage_reported_every_few_calls_still_anchors_the_count() -> None:
    api, ledger, messages = FakeAPI(), UsageLedger(), start()
    rng = random.Random(5)
    errors = []
    for index in range(24):
        real = api(messages)
        count = ledger.count(messages)
        if index >= 12:
            errors.append(error(count, real))
        if index % 3 == 0:
            ledger.record(messages, real)
        messages += turn(rng, index)
    assert max(errors) < 0.04


def test_an_implausible_report_does_not_poison_the_calibration() -> None:
    clean, api, messages = warmed_up(turns=10)
    spiked, _, _ = warmed_up(turns=10)
    rng = random.Random(6)
    messages += turn(rng, 10)
    real = api(messages)
    clean.record(messages, real)
    spiked.record(messages, real + 6_000)  # another system prompt, this turn only
    assert spiked.count(messages) == real + 6_000  # the report itself is believed
    messages += turn(rng, 11)
    real = api(messages)
    clean.record(messages, real)
    spiked.record(messages, real)
    messages += turn(rng, 12)
    assert abs(spiked.count(messages) - clean.count(messages)) <= 0.002 * api(messages)


def test_messages_that_left_the_history_are_released() -> None:
    class Message(dict[str, Any]):
        """A dict that can be weakly referenced."""

    api, ledger = FakeAPI(), UsageLedger()
    old = Message(role="user", content=PROSE)
    messages: list[Any] = [*start(), old]
    ledger.record(messages, api(messages))
    ref = weakref.ref(old)
    del messages[-1], old
    ledger.count(messages)
    gc.collect()
    assert ref() is None


def test_tool_calls_and_outputs_of_every_dialect_are_counted() -> None:
    arguments = '{"command": "grep -rn timeout src", "path": "/srv/app"}'
    chat = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "bash", "arguments": arguments},
            }
        ],
    }
    call = {"type": "function_call", "call_id": "call_1", "name": "bash", "arguments": arguments}
    output = {"type": "function_call_output", "call_id": "call_1", "output": PROSE * 3}
    for message in (chat, call, output):
        bare = {k: v for k, v in message.items() if k in ("role", "type")}
        chars = FEATURES.index("characters")
        assert message_features(message)[chars] > message_features(bare)[chars] + 40


def test_the_ledger_anchors_openai_chat_and_responses_histories() -> None:
    api = FakeAPI()
    chat: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Check the logs."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": tool_output(random.Random(7))},
    ]
    responses: list[dict[str, Any]] = [
        {"role": "user", "content": "Check the logs."},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": tool_output(random.Random(8))},
    ]
    for messages, result_key in ((chat, "content"), (responses, "output")):
        ledger = UsageLedger()
        ledger.record(messages[:-2], api(messages[:-2]))
        ledger.record(messages, api(messages))
        assert ledger.count(messages) == api(messages)
        messages[-1][result_key] = "[truncated: bash result]"
        assert error(ledger.count(messages), api(messages)) < 0.02


@pytest.mark.parametrize(
    ("messages", "tokens", "exception"),
    [
        ({"role": "user"}, 10, TypeError),
        (["not a message"], 10, TypeError),
        ([], -1, ValueError),
        ([], True, TypeError),
        ([], 2.0, TypeError),
    ],
)
def test_bad_input_is_refused_at_the_boundary(
    messages: Any, tokens: Any, exception: type[Exception]
) -> None:
    with pytest.raises(exception):
        UsageLedger().record(messages, tokens)


def test_compactor_trigger_and_result_use_the_anchored_count() -> None:
    api = FakeAPI()
    compactor = Compactor(RecordingProvider(), threshold=10**9)
    _, _, messages = warmed_up(turns=4)
    first = compactor(messages)
    assert first.tokens_before == estimate_tokens(messages)  # no report yet: today's count
    usage = {"input_tokens": 5, "cache_read_input_tokens": api(messages) - 5}
    compactor.record_usage(messages, usage)
    result = compactor(messages)
    assert result.tokens_before == result.tokens_after == api(messages)


def test_compaction_fires_on_the_anchored_count() -> None:
    api = FakeAPI(overhead=9_000)  # big tool definitions the estimate never sees
    _, _, messages = warmed_up(turns=4)
    threshold = (estimate_tokens(messages) + api(messages)) // 2
    compactor = Compactor(RecordingProvider(), threshold=threshold)
    assert compactor(messages).action.value != "full"
    compactor.record_usage(messages, api(messages))
    result = compactor(messages)
    assert result.action.value == "full"
    assert result.tokens_before > threshold >= estimate_tokens(list(result.replaced))
    assert result.tokens_after < result.tokens_before


def test_an_explicit_token_counter_is_anchored_by_reported_usage() -> None:
    compactor = Compactor(RecordingProvider(), threshold=10**9, token_counter=len)
    messages = start()
    compactor.record_usage(messages, 50_000)
    assert compactor(messages).tokens_before == 50_000
    messages.append({"role": "user", "content": "and one more"})
    assert compactor(messages).tokens_before == 50_000 + 1


def test_async_compactor_records_usage_too() -> None:
    api = FakeAPI()
    compactor = AsyncCompactor(RecordingProvider(), threshold=10**9)
    _, _, messages = warmed_up(turns=3)
    compactor.record_usage(messages, api(messages))
    result = asyncio.run(compactor(messages))
    assert result.tokens_before == api(messages)


def test_below_a_dict_without_role_or_type_every_key_is_text() -> None:
    """A message's and a block's keys (and the values of role and type) are
    structure; a dict with neither (a tool's input) is data, and so is every dict
    nested in it, even one with a ``type``."""
    strings = FEATURES.index("strings")
    call = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "edit", "input": {}}],
    }
    assert message_features(call)[strings] == 2  # id and name
    call["content"][0]["input"] = {"path": "a.py", "options": {"type": "diff", "n": 1}}
    # path, a.py, options, then the nested dict's type, diff, n, 1
    assert message_features(call)[strings] == 2 + 7
    call["content"][0]["input"] = {"type": "diff", "path": "a.py"}  # reads as a block
    assert message_features(call)[strings] == 2 + 1


def test_an_image_costs_a_learned_constant_not_its_encoded_bytes() -> None:
    ledger, api, messages = warmed_up(turns=6)
    ledger.record(messages, api(messages))
    base64 = "iVBORw0KGgo" * 20_000  # 220 KB of encoded picture
    image = {
        "role": "user",
        "content": [
            {
                "type": "image",
                "source": {"type": "base64", "media_type": "image/png", "data": base64},
            },
            {"type": "text", "text": "What does this screenshot show?"},
        ],
    }
    chat_image = {
        "role": "user",
        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64}}],
    }
    media = FEATURES.index("media")
    for message in (image, chat_image):
        assert message_features(message)[media] == 1
        assert message_features(message)[FEATURES.index("characters")] < 200
    before = ledger.count(messages)
    messages.append(image)
    assert before < ledger.count(messages) < before + 5_000  # not the ~60,000 of the bytes
    charged = api(messages) + 1_600  # what the API charges for the picture
    ledger.record(messages, charged)
    messages.pop()
    assert abs(ledger.count(messages) - api(messages)) <= 0.01 * api(messages)


def test_an_early_report_below_the_estimate_never_makes_the_overhead_negative() -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "fix the bug"}]
    for i in range(20):
        messages += [
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": f"c{i}", "name": "bash", "input": {}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": f"c{i}", "content": f"line {i}\n" * 400}]},
        ]
    compactor = Compactor(lambda p: "summary", threshold=3000, micro_min_chars=10**6)
    compactor.record_usage(messages, 1500 + len(str(messages)) // 5)
    assert compactor._parts.counter._ledger.overhead >= 0
    result = compactor(messages)
    assert result.compacted and result.tokens_after > 0
    messages += [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "x " * 3000}]
    assert compactor._parts.counter._ledger.count(messages) >= estimate_tokens(messages[-2:]) // 2


@pytest.mark.parametrize(("share", "level"), [(0.06, logging.DEBUG), (0.4, logging.INFO)])
def test_a_rejected_report_is_logged_at_info_only_when_it_is_a_real_outlier(
    caplog: pytest.LogCaptureFixture, share: float, level: int
) -> None:
    ledger, api, messages = warmed_up(turns=30)
    messages += turn(random.Random(6), 30)
    real = api(messages)
    with caplog.at_level(logging.DEBUG, logger="bareagent_compact"):
        ledger.record(messages, real + round(share * real))
    told = [r for r in caplog.records if "is far from the expected" in r.getMessage()]
    assert [r.levelno for r in told] == [level]
