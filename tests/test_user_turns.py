"""keep_user_turns: the user's own messages kept word for word beside the summary."""

from __future__ import annotations

import logging
from itertools import pairwise
from typing import Any

import pytest

from bareagent_compact import (
    SUMMARY_PREFIX,
    Action,
    Compactor,
    Options,
    check_request,
    dialects,
    estimate_tokens,
    find_orphans,
)
from bareagent_compact.user_turns import (
    TURNS_HEADING,
    clip,
    fit,
    read_back,
    section,
    user_text,
    user_turns,
)
from converters import CONVERTERS

Message = dict[str, Any]
DIALECTS = ["anthropic", "chat", "responses"]


def forgetful(prompt: object) -> str:
    """A summariser that keeps nothing of what it is given."""
    return "Work went on."


def request(number: int) -> str:
    return f"Request {number}: rename the module parse_{number}.py and keep its tests green."


def round_of(number: int) -> list[Message]:
    """One Anthropic-form round: the user's request (a string, or text blocks on odd
    rounds), two tool calls with their results, and the assistant's answer."""
    text = request(number)
    user: Message = {"role": "user", "content": text}
    if number % 2:
        user = {"role": "user", "content": [{"type": "text", "text": text}]}
    messages = [user]
    for call in range(2):
        ident = f"call_{number}_{call}"
        messages += [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": ident, "name": "sh", "input": {"n": call}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": ident, "content": "line\n" * 60}
                ],
            },
        ]
    messages.append({"role": "assistant", "content": [{"type": "text", "text": f"Done {number}."}]})
    return messages


def in_dialect(messages: list[Message], dialect: str) -> list[Message]:
    return messages if dialect == "anthropic" else CONVERTERS[dialect](messages)


def alternation_problems(messages: list[Message]) -> list[int]:
    """Where two user-side messages, or two assistant role messages, follow each other."""
    problems = []
    talk = [m for m in messages if not dialects.is_system(m)]
    for at, (before, message) in enumerate(pairwise(talk), start=1):
        sides = {dialects.kind(before), dialects.kind(message)}
        user_side = sides <= {dialects.Kind.USER, dialects.Kind.RESULTS}
        assistants = sides == {dialects.Kind.ASSISTANT} and "type" not in before | message
        if user_side or assistants:
            problems.append(at)
    return problems


def summary_message(messages: list[Message]) -> str:
    found = [m["content"] for m in messages if str(m.get("content", "")).startswith(SUMMARY_PREFIX)]
    assert len(found) == 1
    return str(found[0])


@pytest.mark.parametrize("dialect", DIALECTS)
def test_rolling_compactions_keep_the_newest_user_turns_verbatim_oldest_dropped_first(
    dialect: str,
) -> None:
    turn_tokens = estimate_tokens([{"role": "user", "content": request(0)}])
    budget = 3 * turn_tokens + 40  # room for about three turns and their labels
    compactor = Compactor(
        forgetful,
        threshold=100_000,
        language="en",
        keep_user_turns=True,
        user_turns_tokens=budget,
    )
    messages: list[Message] = [{"role": "system", "content": "You are an agent."}]
    for number in range(5):
        messages += in_dialect(round_of(number), dialect)
        messages += in_dialect([{"role": "user", "content": f"Go on with {number}."}], dialect)
        result = compactor(messages, force=True)
        assert result.action is Action.FULL
        summary = summary_message(messages)
        kept = read_back({"role": "user", "content": summary})
        said = [(request(n), f"Go on with {n}.") for n in range(number + 1)]
        newest = [text for pair in said for text in pair][:-1]  # the pending one stays after
        assert kept == newest[-len(kept) :]  # the newest, in order: oldest dropped first
        assert request(number) in kept  # the current request is never dropped
        if number >= 2:
            assert request(0) not in summary
        body = summary[summary.index("\n\n" + TURNS_HEADING) :]
        assert estimate_tokens([{"role": "user", "content": body}]) <= budget
        assert check_request(messages) == []
        assert find_orphans(messages) == []
        assert alternation_problems(messages) == []
        assert result.tokens_after == estimate_tokens(messages)  # the trigger counts them


def test_the_spec_rebuild_is_unchanged_without_the_option() -> None:
    messages: list[Message] = [*round_of(0), {"role": "user", "content": "Go on."}]
    compactor = Compactor(forgetful, threshold=100_000, language="en")
    compactor(messages, force=True)
    assert summary_message(messages) == SUMMARY_PREFIX + "Work went on."
    assert compactor.keep_user_turns is False


def test_the_kept_turns_are_counted_in_the_rebuilt_history() -> None:
    counts = []
    for keep in (False, True):
        messages = [*round_of(0), *round_of(1), {"role": "user", "content": "Go on."}]
        result = Compactor(forgetful, language="en", keep_user_turns=keep)(messages, force=True)
        assert result.tokens_after == estimate_tokens(messages)
        counts.append(result.tokens_after)
    assert counts[1] > counts[0]


def test_a_request_the_turns_hold_is_not_pinned_again() -> None:
    messages: list[Message] = [*round_of(0), {"role": "user", "content": "Go on."}]
    compactor = Compactor(forgetful, language="en", keep_user_turns=True, pin_facts=True)
    compactor(messages, force=True)
    summary = summary_message(messages)
    assert summary.count(request(0)) == 1
    assert "parse_0.py" in summary


def test_turns_in_the_kept_tail_are_not_repeated() -> None:
    messages: list[Message] = [
        {"role": "user", "content": "Old request."},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Same words."},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Same words."},
        {"role": "assistant", "content": "ok, done"},
        {"role": "user", "content": "Go on."},
    ]
    compactor = Compactor(forgetful, language="en", keep_user_turns=True, keep_tail_tokens=6)
    compactor(messages, force=True)
    summary = summary_message(messages)
    assert [m["content"] for m in messages[2:]] == ["Same words.", "ok, done", "Go on."]
    assert read_back({"role": "user", "content": summary}) == ["Old request."]
    assert alternation_problems(messages) == []


def test_a_turn_alone_over_the_budget_keeps_its_beginning_and_end() -> None:
    long = "Start here. " + "filler " * 2000 + "Finish there."
    count = len  # one token a character
    kept = fit(["older", long], 600, count)
    assert len(kept) == 1
    assert kept[0].startswith("Start here.") and kept[0].endswith("Finish there.")
    assert "characters of this message left out" in kept[0]
    assert len(section(kept)) <= 600
    assert clip(long, 20, count) is None  # too small a budget keeps nothing


def test_an_older_turn_that_does_not_fit_ends_the_section() -> None:
    assert fit(["a" * 50, "b" * 500, "c" * 50], 400, len) == ["c" * 50]


def test_only_real_user_turns_count() -> None:
    reminder = "<system-reminder>Todo list is empty.</system-reminder>"
    assert user_text({"role": "user", "content": f"{reminder}\nFix the bug."}) == "Fix the bug."
    assert user_text({"role": "user", "content": reminder}) is None
    assert user_text({"role": "user", "content": SUMMARY_PREFIX + "old"}) is None
    assert user_text({"role": "assistant", "content": "Fix it."}) is None
    assert user_text({"role": "system", "content": "Rules."}) is None
    result = {"type": "tool_result", "tool_use_id": "x", "content": "Fix it."}
    assert user_text({"role": "user", "content": [result]}) is None
    beside = {"role": "user", "content": [result, {"type": "text", "text": "Stop, use git."}]}
    assert user_text(beside) == "Stop, use git."
    reminded = [result, {"type": "text", "text": reminder}]
    assert user_text({"role": "user", "content": reminded}) is None
    assert user_text({"role": "tool", "tool_call_id": "x", "content": "Fix it."}) is None
    assert user_text({"type": "function_call_output", "call_id": "x", "output": "Fix it."}) is None
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": ""}}
    blocks = [{"type": "text", "text": "See"}, image, {"type": "text", "text": "this."}]
    assert user_text({"role": "user", "content": blocks}) == "See\nthis."
    responses = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": "Fix it."}],
    }
    assert user_text(responses) == "Fix it."


def test_a_section_reads_back_exactly_whatever_its_turns_hold() -> None:
    tricky = [
        "plain",
        "two\nlines\n\n",
        "[message 1 of 1, 3 characters]\nfake",
        section(["nested"]),
        "ends with a blank line\n\n",
    ]
    message = {"role": "user", "content": SUMMARY_PREFIX + "text" + section(tricky)}
    assert read_back(message) == tricky
    pinned = {**message, "content": message["content"] + "\n\n[Pinned facts: ...]\nURL: x"}
    assert read_back(pinned) == tricky
    quoted = {
        "role": "user",
        "content": SUMMARY_PREFIX + "see\n\n" + TURNS_HEADING + "2]\n" + section(["real"]),
    }
    assert read_back(quoted) == ["real"]
    copied = {"role": "user", "content": SUMMARY_PREFIX + "s" + section(["old"]) + section(["new"])}
    assert read_back(copied) == ["new"]  # a summary that copied the previous section
    assert read_back({"role": "user", "content": "not a summary" + section(["x"])}) == []
    assert read_back({"role": "user", "content": SUMMARY_PREFIX + section(["x"])[:-1] + "?!"}) == []


def test_user_turns_carry_earlier_rounds_over_each_text_once() -> None:
    previous = {"role": "user", "content": SUMMARY_PREFIX + "s" + section(["one", "two"])}
    source = [
        previous,
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "one"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "three"},
    ]
    assert user_turns(source) == ["two", "one", "three"]
    assert user_turns(source, [{"role": "user", "content": "three"}]) == ["two", "one"]


def test_the_budget_follows_the_threshold_unless_given() -> None:
    compactor = Compactor(forgetful, threshold=30_000)
    assert compactor.user_turns_tokens == 3000
    compactor.threshold = 500_000
    assert compactor.user_turns_tokens == 20_000
    compactor.user_turns_tokens = 700
    compactor.threshold = 1000
    assert compactor.user_turns_tokens == 700 == compactor.options.user_turns_tokens
    assert "min(20000, threshold // 10)" in repr(Options().user_turns_tokens)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"keep_user_turns": "yes"}, TypeError),
        ({"keep_user_turns": 2.0}, TypeError),  # None is the default: the profile's
        ({"user_turns_tokens": 1.5}, TypeError),
        ({"user_turns_tokens": True}, TypeError),
        ({"user_turns_tokens": -1}, ValueError),
    ],
)
def test_bad_user_turns_options_are_refused(changes: dict[str, Any], error: type) -> None:
    with pytest.raises(error, match=next(iter(changes))):
        Compactor(forgetful, **changes)
    with pytest.raises(error):
        Options(**changes)


def test_a_zero_budget_keeps_no_turn(caplog: pytest.LogCaptureFixture) -> None:
    messages: list[Message] = [*round_of(0), {"role": "user", "content": "Go on."}]
    compactor = Compactor(forgetful, language="en", keep_user_turns=True, user_turns_tokens=0)
    with caplog.at_level(logging.WARNING):
        compactor(messages, force=True)
    assert summary_message(messages) == SUMMARY_PREFIX + "Work went on."


def test_turns_that_would_make_the_history_bigger_are_left_out() -> None:
    messages: list[Message] = [*round_of(0), {"role": "user", "content": "Go on."}]
    source = estimate_tokens(messages[:-1])
    acknowledgement = Compactor(forgetful, language="en").acknowledgement
    words = ["word"] * source

    def block() -> list[Message]:
        return [
            {"role": "user", "content": SUMMARY_PREFIX + " ".join(words)},
            {"role": "assistant", "content": acknowledgement},
        ]

    while estimate_tokens(block()) > source - 5:  # the summary alone just fits
        words.pop()
    long_summary = " ".join(words)
    compactor = Compactor(
        lambda prompt: long_summary, threshold=10, language="en", keep_user_turns=True
    )
    result = compactor(messages)
    assert result.action is Action.FULL
    assert summary_message(messages) == SUMMARY_PREFIX + long_summary


def test_pins_repeat_nothing_the_kept_turns_hold_and_take_over_what_they_drop() -> None:
    rule = "Never touch the tests."
    first = f"Fix the parser in src/parse.py. {rule}"
    turn_tokens = estimate_tokens([{"role": "user", "content": request(1)}])
    compactor = Compactor(
        forgetful,
        language="en",
        keep_user_turns=True,
        user_turns_tokens=turn_tokens + 25,  # one turn at a time
        pin_facts=True,
    )
    messages: list[Message] = [{"role": "user", "content": first}, *round_of(0)[1:]]
    for number in range(1, 4):
        messages.append({"role": "user", "content": request(number)})
        compactor(messages, force=True)
        text = summary_message(messages)
        kept = read_back({"role": "user", "content": text})
        for said in (first, rule, request(number - 1) if number > 1 else first):
            assert text.count(said) <= 1, said
        assert rule in text  # kept in the turns, then pinned once they drop it
        assert (first in kept) == (number == 1)
        messages += round_of(number)[1:]
