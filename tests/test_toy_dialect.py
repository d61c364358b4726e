"""A fourth dialect is one module and one registration: the registry asks it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import toy_dialect
from bareagent_compact import dialects, estimate_tokens
from bareagent_compact.dialects import Kind
from bareagent_compact.micro import micro_compact
from toy_dialect import call, result, say


@pytest.fixture
def toy() -> Iterator[dialects.Dialect]:
    dialects.register(toy_dialect.DIALECT)
    try:
        yield toy_dialect.DIALECT
    finally:
        dialects.unregister(toy_dialect.DIALECT)


def _history(turns: int) -> list[dict[str, Any]]:
    messages = [say("user", "list the files, then read each one")]
    for turn in range(turns):
        messages.append(call(f"t{turn}", "read", {"path": f"file{turn}.txt"}))
        messages.append(result(f"t{turn}", f"line {turn} of a long file\n" * 40))
    messages.append(say("assistant", "done"))
    return messages


def test_the_built_in_dialects_are_registered_in_order() -> None:
    assert [d.name for d in dialects.registered()] == list(dialects.DIALECTS)
    assert dialects.DIALECTS == ("anthropic", "openai_chat", "openai_responses")


def test_registration_appends_and_unregistering_restores(toy: dialects.Dialect) -> None:
    assert dialects.registered()[-1] is toy
    assert [d.name for d in dialects.registered()[:-1]] == list(dialects.DIALECTS)
    with pytest.raises(ValueError, match="registered already"):
        dialects.register(toy)


def test_unregistered_the_items_are_opaque_responses_items() -> None:
    item = call("t1", "read", {})
    assert dialects.dialect_of(item).name == "openai_responses"
    assert dialects.calls(item) == []


def test_kind_calls_and_results_go_through_the_registry(toy: dialects.Dialect) -> None:
    messages = _history(2)
    assert dialects.dialect_of(messages[1]) is toy
    assert [dialects.kind(m) for m in messages] == [
        Kind.USER, Kind.ASSISTANT, Kind.RESULT, Kind.ASSISTANT, Kind.RESULT, Kind.ASSISTANT,
    ]  # fmt: skip
    assert [c.call_id for c in dialects.calls(messages[1])] == ["t0"]
    assert dialects.results(messages[2]) == [(0, "t0")]
    assert dialects.tool_names(messages) == {"t0": "read", "t1": "read"}
    assert dialects.role_label(messages[2]) == "user"
    assert dialects.render_message(messages[2], {"t0": "read"}).startswith("[tool_result:read]")
    # plain role messages still read as before beside the toy items
    assert dialects.dialect_of({"role": "user", "content": "hi"}).name == "anthropic"


def test_a_toy_history_is_counted_and_micro_compacted(toy: dialects.Dialect) -> None:
    messages = _history(6)
    before = estimate_tokens(messages)
    assert before > 0
    truncated = micro_compact(messages, keep_recent=2)
    assert truncated == 4
    outputs = [m["output"] for m in messages if m["type"] == toy_dialect.RESULT]
    assert all(o.startswith("[truncated: read result,") for o in outputs[:4])
    assert not any(o.startswith("[truncated:") for o in outputs[4:])
    assert estimate_tokens(messages) < before


def test_what_a_registered_dialect_weighs_beside_content_is_counted() -> None:
    plain, noted = [say("user", "hello")], [say("user", "hello", note="word " * 100)]
    assert estimate_tokens(noted) == estimate_tokens(plain)  # a note is no part yet
    dialects.register(toy_dialect.DIALECT)
    try:
        assert estimate_tokens(noted) == estimate_tokens(plain) + 125
    finally:
        dialects.unregister(toy_dialect.DIALECT)
    assert estimate_tokens(noted) == estimate_tokens(plain)
