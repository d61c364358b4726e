"""Write-behind archives: a store opened with ``write_behind=True`` has a writer
thread archive the records, off the compactor's call.

A result is still truncated only once its record is durable: a call hands the
records to the writer and keeps their results whole; a later call (normally the
next) truncates those the writer has written. A call over the threshold, or
forced, waits for the writer and truncates at once, so a full compaction sees
the history it would see without write-behind.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import (
    AsyncCompactor,
    Compactor,
    JsonlTranscriptManager,
    SqlTranscriptManager,
)
from bareagent_compact.engine.ports import Ports
from bareagent_compact.recall import make_handle
from bareagent_compact.stores.behind import ArchiveWriter, known
from conftest import (
    READABLE_STORES,
    archiving_compactor,
    assert_archived_as_printed,
    child_env,
    crash_child,
    printed_by_killed_children,
    result_contents,
    tool_history,
    tool_round,
    truncated_ids,
)

ROUNDS = 12
TRUNCATED = ROUNDS - 3  # the three most recent results are kept
FAILED = "archive hook failed; tool result kept untruncated"

OPEN = {
    "jsonl": lambda tmp: JsonlTranscriptManager(tmp / "transcripts", write_behind=True),
    "sqlite": lambda tmp: SqlTranscriptManager(tmp / "transcripts.db", write_behind=True),
}
PLAIN = {
    "jsonl": lambda tmp: JsonlTranscriptManager(tmp / "plain"),
    "sqlite": lambda tmp: SqlTranscriptManager(tmp / "plain.db"),
}


def output(turn: int) -> str:
    return f"result {turn}: 漢字 " + "log line\n" * (200 + turn)


def session(rounds: int = ROUNDS) -> list[dict[str, Any]]:
    return tool_history(rounds, output=output)


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]


@pytest.fixture(params=sorted(OPEN))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, Any]]:
    mgr = OPEN[request.param](tmp_path)
    yield request.param, mgr
    mgr.close()


class Gate:
    """Holds every write of the writer thread until opened."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.held = threading.Event()  # the writer reached the gate

    def wait(self) -> None:
        if threading.current_thread().name.startswith("bareagent-archive-writer"):
            self.held.set()
            assert self.open.wait(30)


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Gate]:
    """``os.fsync`` and sqlite3 commits of the writer thread wait for the gate."""
    held = Gate()
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        held.wait()
        real_fsync(fd)

    real_transaction = SqlTranscriptManager._transaction

    def transaction(self: SqlTranscriptManager, work: Any, *, write: bool) -> Any:
        if write:
            held.wait()
        return real_transaction(self, work, write=write)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(SqlTranscriptManager, "_transaction", transaction)
    yield held
    held.open.set()


# -- the option ----------------------------------------------------------------------


def test_the_option_is_off_by_default_and_refuses_non_bools(tmp_path: Path) -> None:
    for kind, opener in PLAIN.items():
        mgr = opener(tmp_path)
        assert mgr.write_behind is False, kind
        assert Ports(mgr.archive).behind() is None
        assert mgr.flush() is True
        mgr.close()
    with pytest.raises(TypeError, match="write_behind must be a bool"):
        JsonlTranscriptManager(tmp_path, write_behind=1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="write_behind must be a bool"):
        SqlTranscriptManager(tmp_path / "x.db", write_behind="yes")  # type: ignore[arg-type]


def test_only_the_archive_method_of_a_store_writing_behind_is_handed_over(
    store: tuple[str, Any],
) -> None:
    _, mgr = store
    assert mgr.write_behind is True
    assert Ports(mgr.archive).behind() == mgr.archive_behind
    assert Ports(mgr.archive_many).behind() is None
    assert Ports(lambda record: None).behind() is None

    class Redacting(type(mgr)):  # type: ignore[misc]
        def archive(self, record: dict[str, Any]) -> None:
            super().archive({**record, "content": "redacted"})

    redacting = Redacting.__new__(Redacting)
    redacting._writer = mgr._writer
    assert Ports(redacting.archive).behind() is None  # its own archive keeps being called


# -- truncated on a later call -----------------------------------------------------------


def test_a_result_is_truncated_by_the_call_after_its_record_is_durable(
    store: tuple[str, Any],
) -> None:
    _, mgr = store
    compactor = archiving_compactor(mgr)
    messages = session()
    before = copy.deepcopy(messages)
    first = compactor(messages)
    assert first.truncated == 0 and messages == before  # handed to the writer, kept whole
    assert mgr.flush()
    second = compactor(messages)  # the history is unchanged: the call is not skipped
    assert second.truncated == TRUNCATED
    assert truncated_ids(messages) == sorted(f"t{turn}" for turn in range(TRUNCATED))
    handles = {r["tool_use_id"]: r["handle"] for r in mgr.load_archive("alpha")}
    assert sorted(handles) == truncated_ids(messages)  # each archived once
    assert all(compactor.recall(handles[f"t{turn}"]) == output(turn) for turn in range(TRUNCATED))
    assert compactor(messages).truncated == 0
    assert len(mgr.load_archive("alpha")) == TRUNCATED


def test_results_stay_whole_while_the_writer_has_not_written_them(
    store: tuple[str, Any], gate: Gate
) -> None:
    _, mgr = store
    compactor = archiving_compactor(mgr)
    messages = session()
    before = copy.deepcopy(messages)
    assert compactor(messages).truncated == 0
    assert gate.held.wait(10)
    assert compactor(messages).truncated == 0  # still with the writer: nothing handed twice
    assert messages == before
    assert mgr.flush(timeout=0.05) is False
    # New rounds while it writes: the scan reads the old results again next time.
    for turn in range(ROUNDS, ROUNDS + 2):
        messages += tool_round(f"t{turn}", "bash", output(turn))
    assert compactor(messages).truncated == 0
    gate.open.set()
    assert mgr.flush(timeout=10)
    assert compactor(messages).truncated == TRUNCATED + 2
    assert len(mgr.load_archive("alpha")) == TRUNCATED + 2


def test_new_results_are_handed_over_while_durable_ones_are_truncated(
    store: tuple[str, Any],
) -> None:
    _, mgr = store
    compactor = archiving_compactor(mgr)
    messages = session()
    compactor(messages)
    mgr.flush()
    messages += tool_round("t12", "bash", output(12))
    assert compactor(messages).truncated == TRUNCATED  # t9 is due now, and handed over
    assert "t9" not in truncated_ids(messages)
    mgr.flush()
    assert compactor(messages).truncated == 1
    assert [r["tool_use_id"] for r in mgr.load_archive("alpha")] == [f"t{t}" for t in range(10)]


# -- calls that may compact wait for the writer ----------------------------------------


def test_a_forced_call_waits_for_the_writer_and_truncates_at_once(
    store: tuple[str, Any],
) -> None:
    _, mgr = store
    prompts: list[Any] = []

    def provider(prompt: Any) -> str:
        prompts.append(prompt)
        return "S"

    compactor = Compactor(provider, None, 10**9, "alpha", archive=mgr.archive)
    messages = session()
    assert compactor(messages).truncated == 0
    messages += tool_round("t12", "bash", output(12))
    result = compactor(messages, force=True)
    assert result.truncated == TRUNCATED + 1  # what was pending, and what is due now
    assert str(prompts).count("[truncated: bash result") == TRUNCATED + 1
    assert len(mgr.load_archive("alpha")) == TRUNCATED + 1


def test_an_over_threshold_history_compacts_as_it_would_without_write_behind(
    tmp_path: Path,
) -> None:
    """Turn by turn, a compactor writing behind sends the same summary prompts and
    leaves the same history after each full compaction as one that waits."""
    seen: dict[str, list[Any]] = {"plain": [], "behind": []}
    histories: dict[str, list[Any]] = {"plain": [], "behind": []}
    for name, mgr in (
        ("plain", JsonlTranscriptManager(tmp_path / "plain")),
        ("behind", JsonlTranscriptManager(tmp_path / "behind", write_behind=True)),
    ):

        def provider(prompt: Any, name: str = name) -> str:
            seen[name].append(copy.deepcopy(prompt))
            return f"summary {len(seen[name])}"

        compactor = Compactor(provider, None, 2_500, "alpha", archive=mgr.archive)
        full = session(150)
        messages = full[:2]
        for start in range(2, len(full), 2):
            messages += full[start : start + 2]
            if compactor(messages).action.value == "full":
                histories[name].append(copy.deepcopy(messages))
        mgr.close()
    assert len(seen["plain"]) >= 3
    assert seen["behind"] == seen["plain"]
    assert histories["behind"] == histories["plain"]


# -- failures ------------------------------------------------------------------------------


def test_a_record_the_writer_fails_on_stays_whole_with_the_warning_and_is_retried(
    store: tuple[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    kind, mgr = store

    def broken(*args: Any, **kwargs: Any) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", broken)
    if kind == "sqlite":
        monkeypatch.setattr(SqlTranscriptManager, "_transaction", broken)
    compactor = archiving_compactor(mgr)
    messages = session()
    before = copy.deepcopy(messages)
    with caplog.at_level(logging.INFO, logger="bareagent_compact"):
        assert compactor(messages).truncated == 0
        assert mgr.flush(timeout=10)
        assert warnings(caplog) == []  # not known yet
        assert compactor(messages).truncated == 0
    assert messages == before
    assert warnings(caplog) == [FAILED] * TRUNCATED
    assert any("writing them one by one" in r.getMessage() for r in caplog.records)
    assert mgr.flush(timeout=10)  # the second call handed them over again: failed too
    monkeypatch.undo()
    caplog.clear()
    assert compactor(messages).truncated == 0
    assert warnings(caplog) == [FAILED] * TRUNCATED
    assert mgr.flush(timeout=10)
    assert compactor(messages).truncated == TRUNCATED
    # Lines whose fsync failed may be in the file too (the JSONL store, as without
    # write-behind): each result is there, and recalled.
    handles = {r["tool_use_id"]: r["handle"] for r in mgr.load_archive("alpha")}
    assert sorted(handles) == truncated_ids(messages)
    assert all(compactor.recall(handles[f"t{turn}"]) == output(turn) for turn in range(TRUNCATED))


def test_a_call_with_a_record_that_cannot_be_encoded_archives_and_waits(
    store: tuple[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    _, mgr = store
    deep: list[Any] = []
    inner = deep
    for _ in range(100_000):  # past the C recursion limit of Python 3.12+ too
        inner.append([])
        inner = inner[0]
    content = [{"type": "text", "text": "x" * 5000, "extra": deep}]
    messages = tool_history(ROUNDS, output=lambda turn: content if turn == 2 else output(turn))
    compactor = archiving_compactor(mgr)
    # Without a handle its result could not be found again later: the call waits,
    # as without write-behind, and the others are truncated at once.
    assert compactor(messages).truncated == TRUNCATED - 1
    assert warnings(caplog) == [FAILED]
    assert result_contents(messages)["t2"] is content
    assert len(mgr.load_archive("alpha")) == TRUNCATED - 1


# -- flush, close, exit ----------------------------------------------------------------------


def record(key: str, content: str = "x") -> dict[str, Any]:
    return {"session_id": "alpha", "tool_use_id": key, "tool_name": "bash", "content": content}


def test_flush_and_close_drain_the_queue(store: tuple[str, Any], gate: Gate) -> None:
    _, mgr = store
    tickets = [mgr.archive_behind([record(f"a{k}"), record(f"b{k}")]) for k in range(5)]
    assert gate.held.wait(10)
    assert mgr.flush(timeout=0.05) is False
    assert not all(ticket.done() for ticket in tickets)
    gate.open.set()
    mgr.close()
    assert all(ticket.result(0) == [None, None] for ticket in tickets)
    assert not [t for t in threading.enumerate() if t.name == "bareagent-archive-writer"]
    keys = [r["tool_use_id"] for r in mgr.load_archive("alpha")]
    assert keys == [f"{side}{k}" for k in range(5) for side in "ab"]
    # A closed store takes records again (a new writer thread).
    assert mgr.archive_behind([record("c")]).result(10) == [None]
    mgr.archive(record("d"))  # waits for the writer, as without write-behind
    assert [r["tool_use_id"] for r in mgr.load_archive("alpha")][-2:] == ["c", "d"]


def test_the_queue_is_bounded(tmp_path: Path) -> None:
    release = threading.Event()
    written: list[int] = []

    def write(items: list[int]) -> None:
        assert release.wait(10)
        written.extend(items)

    writer: ArchiveWriter[int] = ArchiveWriter(write, limit=4)
    first = writer.submit([known(1), known(2), known(3)])
    with pytest.raises(queue.Full):
        writer.submit([known(4), known(5)], block=False)
    fourth = writer.submit([known(4)], block=False)
    late = threading.Thread(target=writer.submit, args=([known(5), known(6)],))
    late.start()
    late.join(0.05)
    assert late.is_alive()  # waits for room
    release.set()
    late.join(10)
    assert writer.close(10)
    assert first.result() == [None] * 3 and fourth.result() == [None]
    assert written == [1, 2, 3, 4, 5, 6]


def within(seconds: float, work: Any) -> Any:
    """``work()`` run in a thread, its value; fails the test when it did not end
    within ``seconds`` (a wait without bound)."""
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(work()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert done, "still waiting"
    return done[0]


def test_a_writer_stopped_by_a_base_exception_fails_its_records_and_writes_directly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    written: list[int] = []

    def write(items: list[int]) -> None:
        if 1 in items:
            raise SystemExit(3)
        written.extend(items)

    writer: ArchiveWriter[int] = ArchiveWriter(write)
    with caplog.at_level(logging.ERROR, logger="bareagent_compact"):
        lost = writer.submit([known(1), known(2)])
        assert isinstance(lost.exception(10), OSError)  # failed, not left waiting
    assert any("writer thread stopped" in r.getMessage() for r in caplog.records)
    assert writer.stopped
    assert within(10, lambda: writer.flush(10)) is False  # records were not written
    assert within(10, lambda: writer.submit([known(3)]).result(0)) == [None]  # directly
    assert written == [3] and writer.pending == 0
    assert writer.close(10) is False  # reports the lost records, once
    assert not writer.stopped  # a later submission starts a new thread
    assert writer.submit([known(4)]).result(10) == [None] and written == [3, 4]
    assert writer.close(10)


def test_a_compactor_keeps_archiving_after_the_writer_thread_stopped(
    store: tuple[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, mgr = store
    stopped = threading.Event()

    def stop_the_writer() -> None:
        on_writer = threading.current_thread().name.startswith("bareagent-archive-writer")
        if on_writer and not stopped.is_set():
            stopped.set()
            raise SystemExit(1)

    real_fsync, real_transaction = os.fsync, SqlTranscriptManager._transaction

    def fsync(fd: int) -> None:
        stop_the_writer()
        real_fsync(fd)

    def transaction(self: SqlTranscriptManager, work: Any, *, write: bool) -> Any:
        if write:
            stop_the_writer()
        return real_transaction(self, work, write=write)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(SqlTranscriptManager, "_transaction", transaction)
    compactor = archiving_compactor(mgr)
    messages = session()
    before = copy.deepcopy(messages)
    assert within(10, lambda: compactor(messages).truncated) == 0
    assert stopped.wait(10)
    assert within(10, lambda: mgr.flush(10)) is False
    assert messages == before and not mgr.write_behind
    # The records the writer lost are archived again, directly, and truncated.
    assert within(10, lambda: compactor(messages).truncated) == TRUNCATED
    assert truncated_ids(messages) == sorted(f"t{turn}" for turn in range(TRUNCATED))
    messages += tool_round("t12", "bash", output(12))
    assert within(10, lambda: compactor(messages, force=True).truncated) == 1  # no wait
    handles = {r["tool_use_id"]: r["handle"] for r in mgr.load_archive("alpha")}
    assert sorted(handles) == [f"t{turn}" for turn in range(10)]
    assert all(compactor.recall(handles[f"t{turn}"]) == output(turn) for turn in range(10))


def test_a_store_left_open_is_flushed_at_exit(tmp_path: Path) -> None:
    script = (
        "import os, sys, time\n"
        "from bareagent_compact import JsonlTranscriptManager\n"
        "real = os.fsync\n"
        "def slow(fd):\n"
        "    time.sleep(0.2)\n"
        "    real(fd)\n"
        "os.fsync = slow\n"
        "mgr = JsonlTranscriptManager(sys.argv[1], write_behind=True)\n"
        "for k in range(3):\n"
        "    mgr.archive_behind([{'session_id': 'alpha', 'tool_use_id': str(k),\n"
        "                         'tool_name': 'bash', 'content': 'x'}])\n"
        "print(mgr._writer.pending)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)],
        capture_output=True,
        env=child_env(),
        timeout=60,
        check=True,
    )
    assert int(done.stdout) > 0  # still queued when the script ended
    keys = [r["tool_use_id"] for r in JsonlTranscriptManager(tmp_path).load_archive("alpha")]
    assert keys == ["0", "1", "2"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_fails_what_the_parent_queued(tmp_path: Path) -> None:
    script = (
        "import os, sys, threading\n"
        "from bareagent_compact.stores.behind import ArchiveWriter, known\n"
        "gate, written = threading.Event(), []\n"
        "def write(items):\n"
        "    gate.wait(10)\n"
        "    written.extend(items)\n"
        "writer = ArchiveWriter(write)\n"
        "taken = writer.submit([known(1)])\n"
        "queued = writer.submit([known(2)])\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    assert isinstance(taken.exception(5), OSError)\n"
        "    assert isinstance(queued.exception(5), OSError)\n"
        "    gate.set()\n"
        "    assert writer.submit([known(3)]).result(5) == [None] and written == [3]\n"
        "    os._exit(0)\n"
        "gate.set()\n"
        "_, status = os.waitpid(pid, 0)\n"
        "assert taken.result(5) == [None] and queued.result(5) == [None]\n"
        "assert written == [1, 2], written\n"
        "sys.exit(os.waitstatus_to_exitcode(status))\n"
    )
    subprocess.run([sys.executable, "-c", script], env=child_env(), timeout=60, check=True)


# -- recall ------------------------------------------------------------------------------------


def test_recalling_a_handle_whose_record_is_pending_waits_for_the_writer(
    store: tuple[str, Any], gate: Gate
) -> None:
    _, mgr = store
    compactor = archiving_compactor(mgr)
    messages = session()
    assert compactor(messages).truncated == 0
    assert gate.held.wait(10)
    handle = make_handle("alpha", "t4", output(4))
    assert handle is not None
    threading.Timer(0.05, gate.open.set).start()
    assert compactor.recall(handle) == output(4)  # read once the writer wrote it
    assert mgr.read_archived("alpha", handle) is not None


# -- the async compactor -------------------------------------------------------------------


def test_the_async_compactor_writes_behind(store: tuple[str, Any]) -> None:
    _, mgr = store
    compactor = AsyncCompactor(lambda prompt: "S", None, 10**9, "alpha", archive=mgr.archive)
    messages = session()

    async def main() -> tuple[int, int, int]:
        first = (await compactor(messages)).truncated
        await asyncio.to_thread(mgr.flush)
        second = (await compactor(messages)).truncated
        messages.extend(tool_round("t12", "bash", output(12)))
        forced = (await compactor(messages, force=True)).truncated
        return first, second, forced

    assert asyncio.run(main()) == (0, TRUNCATED, 1)
    assert len(mgr.load_archive("alpha")) == TRUNCATED + 1


def test_the_async_compactor_waits_for_room_in_a_worker_thread(tmp_path: Path, gate: Gate) -> None:
    mgr = JsonlTranscriptManager(tmp_path, write_behind=True)
    assert mgr._writer is not None
    mgr._writer._limit = 2
    mgr.archive_behind([record("a")])  # taken by the writer, held at the gate
    assert gate.held.wait(10)
    mgr.archive_behind([record("b")])  # queued: the queue is full
    compactor = AsyncCompactor(lambda prompt: "S", None, 10**9, "alpha", archive=mgr.archive)
    messages = session()
    ticks: list[float] = []

    async def main() -> int:
        async def tick() -> None:
            while True:
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        loop = asyncio.get_running_loop()
        loop.call_later(0.2, gate.open.set)
        truncated = (await compactor(messages)).truncated
        ticker.cancel()
        return truncated

    assert asyncio.run(main()) == 0
    assert len(ticks) >= 5  # the loop ran while the call waited for room
    mgr.close()
    assert len(mgr.load_archive("alpha")) == 2 + TRUNCATED


# -- crash safety --------------------------------------------------------------------------------


# Compacts a growing session with a store writing behind (some calls forced, whose
# unusable summaries leave the history as micro-compaction left it); after each
# call prints the recall handles of the results it truncated. Killed at random, it must never
# have printed a handle the store cannot give back.
CHILD = crash_child(write_behind=True, summary="", force="turn % 7 == 0", keep=12)


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
@pytest.mark.parametrize("kind", sorted(OPEN))
def test_a_compactor_writing_behind_killed_at_random_truncated_only_what_was_durable(
    kind: str, tmp_path: Path
) -> None:
    printed = printed_by_killed_children(CHILD, kind, tmp_path, 20250612, (0.4, 0.9))
    mgr = READABLE_STORES[kind](tmp_path)  # opened without write-behind
    try:
        assert_archived_as_printed(mgr, printed)
    finally:
        mgr.close()
