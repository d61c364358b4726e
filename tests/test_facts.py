"""Pinned facts across rolling compactions, in every message dialect: error lines read
only where errors are reported, clipped around the error, and every pinned line
carried over whole."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from bareagent_compact import Compactor
from bareagent_compact.facts import LINE_CHARS, PINNED_HEADING, Facts, extract, pinned_with
from bareagent_compact.identifiers import identifiers, used_meanwhile
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


# ------------------------------------------- identifiers used meanwhile


def found(messages: list[dict[str, Any]]) -> list[str]:
    return [f"{i.label}{i.value}" for i in identifiers(messages)]


def test_identifiers_are_urls_paths_ids_and_numbers_of_three_digits_or_with_a_unit() -> None:
    text = (
        "GET https://api.example.com/v2/orders?id=7 then src/app.py; request req_8f3a21c9 "
        "of ORD-20931 at 404 costs $500, took 250ms and 3.5 GB (80%) of 1,500 tokens; "
        "42 steps, python3, utf-8, v2 and 7 are not identifiers"
    )
    assert found([{"role": "user", "content": text}]) == [
        "URL: https://api.example.com/v2/orders?id=7",
        "File: src/app.py",
        "Id: req_8f3a21c9",
        "Id: ORD-20931",
        "Number: 404",
        "Number: $500",
        "Number: 250ms",
        "Number: 3.5 GB",
        "Number: 80%",
        "Number: 1,500 tokens",
    ]


def test_identifiers_skip_tool_names_and_read_errors_only_where_they_are_reported() -> None:
    messages = tool_round("c1", "mcp__server2__tool1", "fine", {"old_string": "raise KeyError"})
    messages += tool_round("c2", "bash", "KeyError: 'port'")
    assert found(messages) == ["Error: KeyError: 'port'"]


def test_used_meanwhile_are_the_identifiers_only_the_summarised_part_held() -> None:
    summarised = tool_round("s1", "bash", "read src/a.py src/b.py src/c.py\nOSError: disk full now")
    meanwhile = tool_round("m1", "bash", "src/a.py src/b.py src/c.py src/d.py\nOSError: disk full")
    kept = tool_round("k1", "bash", "src/b.py")
    used = used_meanwhile(summarised, meanwhile, kept, "The summary names src/c.py.")
    assert [i.line for i in used] == ["Error: OSError: disk full", "File: src/a.py"]


def appending(messages: list[dict[str, Any]], answer: str) -> Callable[[Any], str]:
    """A summariser that appends a step to ``messages`` while it runs (as another
    thread would), a step that uses the path and the id of the history's start."""

    def summarise(prompt: Any) -> str:
        messages.extend(tool_round("m1", "bash", "edited src/app/payments.py for req_8f3a21c9"))
        return answer

    return summarise


def first_history() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Fix the payments"}]
    messages += tool_round("s1", "bash", "opened src/app/payments.py " + "x " * 300)
    messages += tool_round("s2", "bash", "request req_8f3a21c9 logged " + "y " * 300)
    messages += tool_round("s3", "bash", "ok")
    return messages


@pytest.mark.parametrize("pin_facts", [True, False])
def test_a_sync_summary_checks_the_steps_appended_meanwhile_with_pin_facts(pin_facts: bool) -> None:
    messages = first_history()
    compactor = Compactor(appending(messages, "A vague summary."), pin_facts=pin_facts)
    result = compactor(messages, force=True)
    assert result.compacted and messages[-1]["content"][0]["tool_use_id"] == "m1"
    lines = pinned(messages)
    if pin_facts:
        assert result.pinned_identifiers == 2
        assert "Id: req_8f3a21c9" in lines and "File: src/app/payments.py" in lines
    else:  # the specification's compaction: nothing added to its summary
        assert result.pinned_identifiers == 0 and lines == []


def test_an_id_pinned_as_used_meanwhile_is_carried_over_by_rolling_compactions() -> None:
    messages = first_history()
    compactor = Compactor(appending(messages, "A vague summary."), pin_facts=True)
    compactor(messages, force=True)
    compactor.provider = RecordingProvider("Another vague summary.")
    for n in range(3):
        messages += tool_round(f"r{n}", "bash", f"ok {n}")
        assert compactor(messages, force=True).pinned_identifiers == 0
        assert pinned(messages).count("Id: req_8f3a21c9") == 1


def test_an_identifier_a_line_already_pinned_holds_is_not_pinned_again() -> None:
    failed = "FAILED tests/test_x.py::test_a - AssertionError"
    summarised = tool_round("s1", "bash", f"{failed}\nsee tests/test_x.py")
    meanwhile = tool_round("m1", "bash", f"ran tests/test_x.py again\n{failed}")
    used = used_meanwhile(summarised, meanwhile, [], "A vague summary.")
    assert [i.line for i in used] == [f"Error: {failed}", "File: tests/test_x.py"]
    block, count = pinned_with(Facts(), "A vague summary.", 500, len, used)
    assert count == 1 and block.splitlines()[3] == f"Error: {failed}"
    assert "File: " not in block
