"""Pinned facts across rolling compactions, in every message dialect: error lines read
only where errors are reported, clipped around the error, and every pinned line
carried over whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bareagent_compact import Compactor
from bareagent_compact.facts import LINE_CHARS, PINNED_HEADING, extract
from bareagent_compact.prompts import SUMMARY_PREFIX
from conftest import RecordingProvider, tool_round
from converters import to_chat, to_responses

Shape = Callable[[list[dict[str, Any]]], list[dict[str, Any]]]
SHAPES: dict[str, Shape] = {
    "anthropic": lambda messages: messages,
    "chat": to_chat,
    "responses": to_responses,
}


def summary_of(messages: list[dict[str, Any]]) -> str:
    """The content of the summary message of a rebuilt history."""
    return next(
        m["content"] for m in messages
        if isinstance(m.get("content"), str) and m["content"].startswith(SUMMARY_PREFIX)
    )


def pinned(messages: list[dict[str, Any]]) -> list[str]:
    """The lines of the pinned block of a rebuilt history (none without a block)."""
    summary = summary_of(messages)
    if PINNED_HEADING not in summary:
        return []
    return summary[summary.index(PINNED_HEADING):].splitlines()[1:]


def rolling(
    shape: str, first: list[dict[str, Any]], rounds: int, later: Callable[[int], list[Any]]
) -> list[list[dict[str, Any]]]:
    """The histories after each of ``rounds`` forced rolling compactions (pins on, a
    summariser that keeps nothing): ``first`` before the first, ``later(n)`` appended
    before each later one, all in ``shape``."""
    convert = SHAPES[shape]
    compactor = Compactor(RecordingProvider("A vague summary."), pin_facts=True)
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are an agent."}]
    messages += convert(first)
    seen = []
    for n in range(rounds):
        if n:
            messages += convert(later(n))
        compactor(messages, force=True)
        seen.append([dict(m) for m in messages])
    return seen


@pytest.mark.parametrize("shape", SHAPES)
def test_a_tool_calls_input_is_never_pinned_as_an_error(shape: str) -> None:
    edit = {"file_path": "src/app.py", "old_string": "raise error: bad", "new_string": "pass"}
    first: list[dict[str, Any]] = [{"role": "user", "content": "Tidy src/app.py"}]
    first += tool_round("e0", "Edit", "The file src/app.py has been updated.", edit)
    first += tool_round("e1", "Write", "ok", {"file_path": "b.py", "content": "# ValueError: no"})
    for messages in rolling(shape, first, 3, lambda n: tool_round(f"r{n}", "bash", f"ok {n}")):
        lines = pinned(messages)
        assert "File: src/app.py" in lines
        assert [line for line in lines if line.startswith("Error")] == []


@pytest.mark.parametrize("shape", SHAPES)
def test_an_error_labelled_in_capitals_stays_pinned_across_rolling_compactions(
    shape: str,
) -> None:
    first: list[dict[str, Any]] = [{"role": "user", "content": "Start the service"}]
    first += tool_round("s0", "bash", "starting\nERROR: connection refused by db-7:5432")
    first += tool_round("s1", "bash", "retrying")
    histories = rolling(shape, first, 5, lambda n: tool_round(f"r{n}", "bash", f"step {n}"))
    for messages in histories:
        lines = pinned(messages)
        assert sum("ERROR: connection refused by db-7:5432" in line for line in lines) == 1, lines


@pytest.mark.parametrize("shape", SHAPES)
def test_a_multi_line_request_stays_whole_across_rolling_compactions(shape: str) -> None:
    request = "Please do three things:\n1. fix src/a.py\n2. run the tests\r\n\n3. ERROR: none"
    first: list[dict[str, Any]] = [{"role": "user", "content": request}]
    first += tool_round("m0", "bash", "done one")
    first += tool_round("m1", "bash", "done two")
    for messages in rolling(shape, first, 5, lambda n: tool_round(f"r{n}", "bash", f"ok {n}")):
        summary = summary_of(messages)
        assert request in summary
        assert summary.count("ERROR: none") == 1
        assert [line for line in pinned(messages) if line.startswith("Error")] == []


@pytest.mark.parametrize("shape", SHAPES)
def test_an_error_in_the_middle_of_a_long_line_is_pinned_clipped_around_it(shape: str) -> None:
    line = "a" * 3000 + " ValueError: bad port 8080 " + "b" * 3000
    first: list[dict[str, Any]] = [{"role": "user", "content": "Check the service"}]
    first += tool_round("l0", "bash", line)
    first += tool_round("l1", "bash", "ok")
    for messages in rolling(shape, first, 3, lambda n: tool_round(f"r{n}", "bash", f"ok {n}")):
        errors = [entry for entry in pinned(messages) if entry.startswith("Error")]
        assert len(errors) == 1 and "ValueError: bad port 8080" in errors[0]
        assert len(errors[0]) <= LINE_CHARS + 20


@pytest.mark.parametrize("shape", SHAPES)
def test_error_lines_are_read_from_results_and_assistant_text_not_user_text(shape: str) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Earlier I saw KeyError: 'port' here"},
        {"role": "assistant", "content": "The log says FAILED tests/test_x.py::test_y"},
        {"role": "user", "content": "ok"},
        *tool_round("x0", "bash", "[info] fine\nfatal: not a git repository"),
        *tool_round("x1", "Edit", "ok", {"old_string": "except KeyError:"}),
    ]
    errors = extract(SHAPES[shape](messages)).errors
    assert errors == ["The log says FAILED tests/test_x.py::test_y", "fatal: not a git repository"]
