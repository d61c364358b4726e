"""Group commit: the records one compactor call archives are written together.

With ``archive=store.archive`` the compactor calls the store's ``archive_many``
once per call: the JSONL store appends them with one write and one ``fsync``,
the SQL store in one transaction. A result is still truncated only once its
record is durably archived.
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import (
    ArchiveBatcher,
    AsyncCompactor,
    Compactor,
    JsonlTranscriptManager,
    SqlTranscriptManager,
)
from bareagent_compact.engine.ports import Ports
from conftest import (
    READABLE_STORES,
    archiving_compactor,
    assert_archived_as_printed,
    crash_child,
    printed_by_killed_children,
    recalled_in_new_process,
    result_contents,
    tool_history,
    tool_round,
    truncated_ids,
)

ROUNDS = 12
TRUNCATED = ROUNDS - 3  # the three most recent results are kept
FAILED = "archive hook failed; tool result kept untruncated"


def output(turn: int) -> str:
    return f"result {turn}: 漢字 🚀 " + "log line\n" * (200 + turn)


def session(rounds: int = ROUNDS) -> list[dict[str, Any]]:
    return tool_history(rounds, output=output)


def too_deep() -> list[Any]:
    """Content JSON cannot encode (nested deeper than the recursion limit)."""
    outer: list[Any] = []
    inner = outer
    for _ in range(100_000):  # past the C recursion limit of Python 3.12+ too
        inner.append([])
        inner = inner[0]
    return outer


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every ``os.fsync`` call from now on (each still syncs)."""
    calls: list[int] = []
    real = os.fsync

    def counting(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return calls


@pytest.fixture(params=sorted(READABLE_STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    mgr = READABLE_STORES[request.param](tmp_path)
    yield request.param, mgr
    mgr.close()


class Batcher:
    """An archive that records how it was called."""

    def __init__(self, fail: bool = False) -> None:
        self.calls: list[tuple[str, int]] = []
        self.records: list[dict[str, Any]] = []
        self.fail = fail

    def archive(self, record: dict[str, Any]) -> None:
        self.calls.append(("archive", 1))
        if self.fail:
            raise OSError(28, "No space left on device")
        self.records.append(record)

    def archive_many(self, records: list[dict[str, Any]]) -> None:
        self.calls.append(("archive_many", len(records)))
        if self.fail:
            raise OSError(28, "No space left on device")
        self.records.extend(records)


# -- JSONL: one write, one fsync ----------------------------------------------------


def test_one_call_writes_all_its_records_with_one_fsync(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    mgr = JsonlTranscriptManager(tmp_path)
    compactor = archiving_compactor(mgr)
    messages = session()
    result = compactor(messages)
    assert result.truncated == TRUNCATED
    assert len(fsyncs) == 2  # the new archive file, and its directory
    for turn in range(ROUNDS, ROUNDS + 4):
        messages += tool_round(f"t{turn}", "bash", output(turn))
    del fsyncs[:]
    assert compactor(messages).truncated == 4
    assert len(fsyncs) == 1  # the file existed: no directory fsync
    records = mgr.load_archive("alpha")
    assert [r["content"] for r in records] == [output(turn) for turn in range(TRUNCATED + 4)]


def test_a_plain_one_record_hook_is_still_called_per_record(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    mgr = JsonlTranscriptManager(tmp_path)
    seen: list[dict[str, Any]] = []

    def hook(record: dict[str, Any]) -> None:
        seen.append(record)
        mgr.archive(record)

    messages = session()
    result = Compactor(lambda prompt: "S", None, 10**9, "alpha", archive=hook)(messages)
    assert result.truncated == TRUNCATED == len(seen)
    assert len(fsyncs) == TRUNCATED + 1  # one per record, and the new file's directory
    assert [r["content"] for r in mgr.load_archive("alpha")] == [r["content"] for r in seen]


def test_archive_many_writes_nothing_when_one_record_cannot_be_encoded(
    store: tuple[str, Any],
) -> None:
    _, mgr = store
    good = {"session_id": "alpha", "tool_use_id": "a", "tool_name": "bash", "content": "ok"}
    bad = {**good, "tool_use_id": "b", "content": too_deep()}
    with pytest.raises(ValueError, match="too deeply"):
        mgr.archive_many([good, {**good, "tool_use_id": "c"}, bad])
    assert mgr.load_archive("alpha") == []
    mgr.archive_many([good, {**good, "tool_use_id": "c"}])
    mgr.archive({**good, "tool_use_id": "d"})
    mgr.archive_many([])
    assert [r["tool_use_id"] for r in mgr.load_archive("alpha")] == ["a", "c", "d"]


def test_archive_many_spreads_records_over_their_sessions(store: tuple[str, Any]) -> None:
    _, mgr = store
    records = [
        {"session_id": session_id, "tool_use_id": f"{session_id}{k}", "tool_name": "x",
         "content": f"{session_id} {k}"}
        for k in range(3) for session_id in ("alpha", "beta")
    ]  # fmt: skip
    mgr.archive_many(records)
    for session_id in ("alpha", "beta"):
        loaded = mgr.load_archive(session_id)
        assert [r["content"] for r in loaded] == [f"{session_id} {k}" for k in range(3)]


# -- failures: nothing truncated that is not archived ------------------------------


def test_a_failing_batch_keeps_every_original_and_logs_the_warning(
    store: tuple[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kind, mgr = store

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    # The disk is full for the batch and for each record tried alone.
    monkeypatch.setattr(os, "fsync", broken)
    if kind == "sqlite":
        monkeypatch.setattr(mgr, "_transaction", broken)
    compactor = archiving_compactor(mgr)
    messages = session()
    before = copy.deepcopy(messages)
    with caplog.at_level(logging.INFO, logger="bareagent_compact"):
        result = compactor(messages)
    assert result.truncated == 0
    assert messages == before
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [FAILED] * TRUNCATED
    assert any("archive_many failed" in r.getMessage() for r in caplog.records)
    monkeypatch.undo()
    assert compactor(messages).truncated == TRUNCATED
    handles = {r["tool_use_id"]: r["handle"] for r in mgr.load_archive("alpha")}
    assert sorted(handles) == truncated_ids(messages)
    assert all(compactor.recall(handles[f"t{turn}"]) == output(turn) for turn in range(TRUNCATED))


def test_a_failing_batch_of_a_batcher_keeps_every_original(
    caplog: pytest.LogCaptureFixture,
) -> None:
    archive = Batcher(fail=True)
    messages = session()
    before = copy.deepcopy(messages)
    result = Compactor(lambda prompt: "S", None, 10**9, archive=archive.archive)(messages)
    assert result.truncated == 0 and messages == before and archive.records == []
    assert archive.calls == [("archive_many", TRUNCATED)] + [("archive", 1)] * TRUNCATED
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        FAILED
    ] * TRUNCATED


def test_one_record_the_archive_refuses_does_not_keep_the_others_whole(
    store: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    _, mgr = store
    deep = [{"type": "text", "text": "x" * 5000, "extra": too_deep()}]
    messages = tool_history(ROUNDS, output=lambda turn: deep if turn == 2 else output(turn))
    compactor = archiving_compactor(mgr)
    assert compactor(messages).truncated == TRUNCATED - 1
    assert "t2" not in truncated_ids(messages)
    assert result_contents(messages)["t2"] is deep
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [FAILED]
    assert len(mgr.load_archive("alpha")) == TRUNCATED - 1


# -- crash safety --------------------------------------------------------------------


def test_every_truncated_result_is_read_back_after_reopening_the_store(
    store: tuple[str, Any], tmp_path: Path
) -> None:
    kind, mgr = store
    compactor = archiving_compactor(mgr)
    full = session(20)
    messages = full[:2]
    for start in range(2, len(full), 2):
        messages += full[start : start + 2]
        compactor(messages)
    handles = {r["tool_use_id"]: r["handle"] for r in mgr.load_archive("alpha")}
    assert sorted(handles) == truncated_ids(messages) and len(handles) == 17
    mgr.close()
    recalled = recalled_in_new_process(kind, tmp_path, list(handles.values()))
    assert recalled == {handles[f"t{turn}"]: output(turn) for turn in range(17)}


# Compacts a growing session; after each call prints the recall handles of the
# results it truncated. Killed at random, it must never have printed a handle
# the store cannot give back.
CHILD = crash_child(write_behind=False, summary="S", force="False", keep=8)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("kind", sorted(READABLE_STORES))
def test_a_compactor_killed_at_random_truncated_only_what_was_archived(
    kind: str, tmp_path: Path
) -> None:
    printed = printed_by_killed_children(CHILD, kind, tmp_path, 20250611, (0.3, 0.7))
    mgr = READABLE_STORES[kind](tmp_path)
    try:
        archived = assert_archived_as_printed(mgr, printed)
        last = printed[max(printed, key=lambda key: tuple(map(int, key.split("-"))))]
        assert mgr.read_archived("alpha", last) == archived[last]
    finally:
        mgr.close()


# -- the async compactor -----------------------------------------------------------


def test_the_async_compactor_writes_a_call_with_one_fsync(
    tmp_path: Path, fsyncs: list[int]
) -> None:
    mgr = JsonlTranscriptManager(tmp_path)
    mgr.archive({"session_id": "alpha", "tool_use_id": "x", "tool_name": "x", "content": "x"})
    del fsyncs[:]
    compactor = AsyncCompactor(lambda prompt: "S", None, 10**9, "alpha", archive=mgr.archive)
    messages = session()
    assert asyncio.run(compactor(messages)).truncated == TRUNCATED
    assert len(fsyncs) == 1
    handles = {r["tool_use_id"]: r["handle"] for r in mgr.load_archive("alpha")[1:]}
    assert sorted(handles) == truncated_ids(messages)
    assert compactor.recall(handles["t0"]) == output(0)


def test_the_async_compactor_awaits_an_async_batch_once() -> None:
    class AsyncBatcher:
        def __init__(self) -> None:
            self.calls: list[int] = []

        async def archive(self, record: dict[str, Any]) -> None:
            self.calls.append(1)

        async def archive_many(self, records: list[dict[str, Any]]) -> None:
            await asyncio.sleep(0)
            self.calls.append(len(records))

    archive = AsyncBatcher()
    compactor = AsyncCompactor(lambda prompt: "S", None, 10**9, archive=archive.archive)
    messages = session()
    assert asyncio.run(compactor(messages)).truncated == TRUNCATED
    assert archive.calls == [TRUNCATED]


def test_the_async_compactor_keeps_every_original_of_a_failing_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    archive = Batcher(fail=True)
    messages = session()
    before = copy.deepcopy(messages)
    compactor = AsyncCompactor(lambda prompt: "S", None, 10**9, archive=archive.archive)
    assert asyncio.run(compactor(messages)).truncated == 0
    assert messages == before
    assert archive.calls == [("archive_many", TRUNCATED)] + [("archive", 1)] * TRUNCATED
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        FAILED
    ] * TRUNCATED


# -- SQL: one transaction --------------------------------------------------------------


def test_the_sql_store_archives_a_call_in_one_transaction(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mgr = SqlTranscriptManager(tmp_path / "transcripts.db")
    writes: list[bool] = []
    real = mgr._transaction

    def counting(work: Any, *, write: bool) -> Any:
        writes.append(write)
        return real(work, write=write)

    monkeypatch.setattr(mgr, "_transaction", counting)
    compactor = archiving_compactor(mgr)
    messages = session()
    assert compactor(messages).truncated == TRUNCATED
    assert writes == [True]
    monkeypatch.undo()
    records = mgr.load_archive("alpha")
    assert [r["content"] for r in records] == [output(turn) for turn in range(TRUNCATED)]
    mgr.close()


# -- which hooks are batched -----------------------------------------------------------


def test_only_the_archive_method_of_a_batcher_is_batched() -> None:
    class Redacting(Batcher):
        def archive(self, record: dict[str, Any]) -> None:
            super().archive({**record, "content": "redacted"})

    class OwnBatch(Batcher):
        def archive_many(self, records: list[dict[str, Any]]) -> None:
            super().archive_many(records)

    batcher = Batcher()
    assert isinstance(batcher, ArchiveBatcher)
    assert Ports(batcher.archive).batch() == batcher.archive_many
    assert Ports(OwnBatch().archive).batch() is not None
    assert Ports(Redacting().archive).batch() is None  # its own archive keeps being called
    assert Ports(batcher.archive_many).batch() is None
    assert Ports(lambda record: None).batch() is None
    assert Ports([].append).batch() is None
    mgr = JsonlTranscriptManager(".")
    assert Ports(mgr.archive).batch() == mgr.archive_many
    assigned = Batcher()
    assigned.archive_many = lambda records: None  # type: ignore[method-assign]
    assert Ports(assigned.archive).batch() is assigned.archive_many


def test_a_subclass_overriding_archive_alone_gets_each_record() -> None:
    class Redacting(Batcher):
        def archive(self, record: dict[str, Any]) -> None:
            super().archive({**record, "content": "redacted"})

    archive = Redacting()
    messages = session()
    assert Compactor(lambda prompt: "S", None, 10**9, archive=archive.archive)(messages).truncated
    assert archive.calls == [("archive", 1)] * TRUNCATED
    assert {r["content"] for r in archive.records} == {"redacted"}


def test_a_sync_compactor_never_calls_an_async_batch() -> None:
    class Mixed(Batcher):
        async def archive_many(self, records: list[dict[str, Any]]) -> None:  # type: ignore[override]
            raise AssertionError("never awaited")

    archive = Mixed()
    messages = session()
    result = Compactor(lambda prompt: "S", None, 10**9, archive=archive.archive)(messages)
    assert result.truncated == TRUNCATED
    assert archive.calls == [("archive", 1)] * TRUNCATED
    assert json.dumps(archive.records[0]["content"]) == json.dumps(output(0))
