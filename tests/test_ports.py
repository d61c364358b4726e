"""Plug-ins are inspected in one place (``engine/ports.py``): a store given as
itself, its archive method, a no-argument partial of it or a wrapper of it keeps
recall handles and the session-id check; the caller's own callables stay plain."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import Compactor, JsonlTranscriptManager
from bareagent_compact.engine.ports import Ports
from bareagent_compact.micro import TRUNCATED_PREFIX
from conftest import tool_history

NEVER = 10**9


def no_summary(prompt: Any) -> str:
    raise AssertionError("no summary expected below the threshold")


def handles_of(messages: list[dict[str, Any]]) -> list[str]:
    found = []
    for message in messages:
        content = message["content"]
        blocks = content if isinstance(content, list) else []
        for block in blocks:
            text = block.get("content")
            if isinstance(text, str) and text.startswith(TRUNCATED_PREFIX) and "recall" in text:
                found.append(text.rsplit("recall ", 1)[1].rstrip("]"))
    return found


def forms(store: JsonlTranscriptManager) -> dict[str, Any]:
    @functools.wraps(store.archive)
    def logged(record: dict[str, Any]) -> object:
        return store.archive(record)

    def closing(record: dict[str, Any]) -> object:
        return method(record)

    method = store.archive
    return {
        "store": store,
        "method": store.archive,
        "partial": functools.partial(store.archive),
        "wraps": logged,
        "closure": closing,
    }


@pytest.mark.parametrize("form", ["store", "method", "partial", "wraps", "closure"])
def test_every_form_of_a_store_archive_keeps_recall_handles(tmp_path: Path, form: str) -> None:
    store = JsonlTranscriptManager(tmp_path)
    messages = tool_history(8)
    compactor = Compactor(no_summary, threshold=NEVER, archive=forms(store)[form])
    result = compactor(messages)
    handles = handles_of(messages)
    assert result.truncated == len(handles) > 0
    original = compactor.recall(handles[0])
    assert original and not original.startswith(TRUNCATED_PREFIX)


@pytest.mark.parametrize("form", ["store", "method", "partial", "wraps", "closure"])
def test_every_form_of_a_store_archive_checks_the_session_id(tmp_path: Path, form: str) -> None:
    store = JsonlTranscriptManager(tmp_path)
    with pytest.raises(ValueError):
        Compactor(no_summary, session_id="a\x00b", archive=forms(store)[form])


def test_batching_is_used_only_when_the_store_is_called_as_itself(tmp_path: Path) -> None:
    store = JsonlTranscriptManager(tmp_path)
    made = {name: Ports(value) for name, value in forms(store).items()}
    assert made["store"].batch() is not None
    assert made["method"].batch() is not None
    assert made["partial"].batch() is not None
    assert made["wraps"].batch() is None  # batching would skip the wrapper
    assert made["closure"].batch() is None


def test_a_plain_callable_and_a_partial_with_arguments_are_the_callers_own(
    tmp_path: Path,
) -> None:
    store = JsonlTranscriptManager(tmp_path)
    seen: list[dict[str, Any]] = []

    def own(record: dict[str, Any]) -> None:
        seen.append(record)
        store.archive(record)

    for hook in (own, functools.partial(lambda tag, record: seen.append(record), "x")):
        ports = Ports(hook)
        assert ports.store is None and ports.reader is None and ports.batch() is None


def test_another_bound_method_still_reads_back_through_its_owner(tmp_path: Path) -> None:
    class Notebook:
        def __init__(self) -> None:
            self.kept: dict[str, dict[str, Any]] = {}

        def put(self, record: dict[str, Any]) -> None:
            self.kept[record["handle"]] = record

        def read_archived(self, session_id: str, handle: str) -> dict[str, Any] | None:
            record = self.kept.get(handle)
            return record if record and record["session_id"] == session_id else None

    notebook = Notebook()
    messages = tool_history(8)
    compactor = Compactor(no_summary, threshold=NEVER, archive=notebook.put)
    compactor(messages)
    handles = handles_of(messages)
    assert handles and compactor.recall(handles[0])
    assert Ports(notebook.put).batch() is None


def test_a_store_that_is_not_callable_and_has_no_archive_is_refused() -> None:
    with pytest.raises(TypeError, match="archive must be callable or a store"):
        Compactor(no_summary, archive=object())  # type: ignore[arg-type]
