"""Shared fakes (a recording provider, an in-memory transcript manager) and the
history builders every test file uses."""

from __future__ import annotations

import copy
import json
import os
import random
import signal
import string
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

import bareagent_compact
from bareagent_compact import JsonlTranscriptManager, SqlTranscriptManager
from bareagent_compact.micro import is_truncated


class RecordingProvider:
    """A summary provider that records every prompt and answers from a script."""

    def __init__(self, answer: Any = "SUMMARY", events: list[str] | None = None) -> None:
        self.answer = answer
        self.prompts: list[list[dict[str, Any]]] = []
        self.events = events if events is not None else []

    def __call__(self, prompt: list[dict[str, Any]], /) -> Any:
        self.events.append("provider")
        self.prompts.append(copy.deepcopy(prompt))
        if isinstance(self.answer, BaseException):
            raise self.answer
        if callable(self.answer):
            return self.answer(prompt)
        return self.answer


class MemoryTranscripts:
    """A transcript manager that keeps deep copies of every snapshot in memory."""

    def __init__(self, events: list[str] | None = None, error: Exception | None = None) -> None:
        self.saved: list[tuple[list[dict[str, Any]], str]] = []
        self.events = events if events is not None else []
        self.error = error

    def save(self, messages: list[dict[str, Any]], session_id: str) -> None:
        self.events.append("save")
        if self.error is not None:
            raise self.error
        self.saved.append((copy.deepcopy(messages), session_id))


@pytest.fixture
def events() -> list[str]:
    return []


@pytest.fixture
def provider(events: list[str]) -> RecordingProvider:
    return RecordingProvider(events=events)


@pytest.fixture
def transcripts(events: list[str]) -> MemoryTranscripts:
    return MemoryTranscripts(events=events)


def tool_round(
    tool_id: str, name: str, output: Any, tool_input: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """An assistant tool call and the user message carrying its result."""
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input or {}}
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}],
        },
    ]


def tool_history(
    rounds: int,
    *,
    system: str | None = "You are an agent.",
    request: str = "task",
    output: Callable[[int], Any] = lambda turn: "x" * 100,
    name: Callable[[int], str] = lambda turn: "bash",
    tool_id: Callable[[int], str] = lambda turn: f"t{turn}",
    after: Callable[[int], list[dict[str, Any]]] = lambda turn: [],
) -> list[dict[str, Any]]:
    """An Anthropic agent history: a system prompt (unless ``None``), a user request,
    then ``rounds`` tool rounds, round ``turn`` calling ``name(turn)`` with id
    ``tool_id(turn)``, answered with ``output(turn)`` and followed by ``after(turn)``.
    The last tool result is the pending turn unless ``after`` adds more."""
    messages: list[dict[str, Any]] = [] if system is None else [
        {"role": "system", "content": system}
    ]
    messages.append({"role": "user", "content": request})
    for turn in range(rounds):
        messages += tool_round(tool_id(turn), name(turn), output(turn))
        messages += after(turn)
    return messages


def dialogue(n: int, text: Callable[[int], str] = lambda k: f"第{k}条") -> list[dict[str, Any]]:
    """``n`` plain-text messages alternating user and assistant, the ``k``-th ``text(k)``."""
    return [{"role": "user" if k % 2 == 0 else "assistant", "content": text(k)} for k in range(n)]


@pytest.fixture
def make_history() -> Callable[..., list[dict[str, Any]]]:
    """A history with a system prompt, a user request and ``rounds`` tool rounds."""

    def build(rounds: int = 5, size: int = 100, pending: bool = True) -> list[dict[str, Any]]:
        messages = tool_history(
            rounds,
            request="请读取配置",
            output=lambda turn: "x" * size,
            name=lambda turn: "bash" if turn % 2 else "read_file",
            tool_id=lambda turn: f"toolu_{turn}",
        )
        if not pending:
            messages.append({"role": "assistant", "content": "done"})
        return messages

    return build


READABLE_STORES: dict[str, Callable[[Path], Any]] = {
    "jsonl": lambda tmp: JsonlTranscriptManager(tmp / "transcripts"),
    "sqlite": lambda tmp: SqlTranscriptManager(tmp / "transcripts.db"),
}
"""The stores whose archive can be read back, each opened under a directory."""

_REOPEN: Final = {
    "jsonl": "JsonlTranscriptManager(sys.argv[1] + '/transcripts')",
    "sqlite": "SqlTranscriptManager(sys.argv[1] + '/transcripts.db')",
}


def recalled_in_new_process(kind: str, directory: Path, handles: list[str]) -> dict[str, str]:
    """What a compactor of session ``alpha`` in a new Python process recalls for each
    handle, from the ``kind`` store reopened under ``directory``."""
    script = (
        "import json, sys\n"
        "from bareagent_compact import Compactor, JsonlTranscriptManager, SqlTranscriptManager\n"
        f"mgr = {_REOPEN[kind]}\n"
        "compactor = Compactor(lambda p: 'S', None, session_id='alpha', archive=mgr.archive)\n"
        "handles = json.loads(sys.stdin.read())\n"
        "sys.stdout.write(json.dumps({h: compactor.recall(h) for h in handles}))\n"
    )
    source = Path(bareagent_compact.__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", script, str(directory)],
        input=json.dumps(sorted(handles)),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(source)},
    )
    result: dict[str, str] = json.loads(done.stdout)
    return result


def child_env() -> dict[str, str]:
    """The environment of a child Python process importing this checkout's package."""
    package_root = str(Path(bareagent_compact.__file__).resolve().parent.parent)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
    return env


def printed_then_killed(
    script: str, kind: str, directory: Path, run: int, delay: float
) -> dict[str, str]:
    """What a child running ``script`` (a compacting loop over a ``kind`` store under
    ``directory``, printing "ready", then a call id and a handle per truncated
    result) printed before it was killed with SIGKILL after ``delay`` seconds."""
    with subprocess.Popen(
        [sys.executable, "-c", script, kind, str(directory), str(run)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=child_env(),
    ) as proc:
        assert proc.stdout is not None
        if proc.stdout.readline() != b"ready\n":  # pragma: no cover - diagnostics
            _, err = proc.communicate(timeout=10)
            pytest.fail(f"the child did not start: {err.decode(errors='replace')}")
        time.sleep(delay)
        assert proc.poll() is None, "the child stopped before it was killed"
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=10)
    lines = (line.split() for line in out.decode().splitlines())
    return {parts[0]: parts[1] for parts in lines if len(parts) == 2}


def archiving_compactor(store: Any) -> bareagent_compact.Compactor:
    """A compactor of session ``alpha`` with ``archive=store.archive`` that only
    micro-compacts (its threshold is never reached)."""
    return bareagent_compact.Compactor(
        lambda prompt: "S", None, 10**9, "alpha", archive=store.archive
    )


def result_contents(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Every tool result's content by its call id (Anthropic messages)."""
    return {
        block["tool_use_id"]: block["content"]
        for message in messages
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    }


def truncated_ids(messages: list[dict[str, Any]]) -> list[str]:
    """The call ids of the tool results micro-compaction truncated, sorted."""
    return sorted(k for k, content in result_contents(messages).items() if is_truncated(content))


_CRASH_CHILD: Final = string.Template("""
import logging, sys
from bareagent_compact import Compactor, JsonlTranscriptManager, SqlTranscriptManager
from bareagent_compact.micro import is_truncated
logging.disable(logging.CRITICAL)  # a forced call's unusable summary is refused, with a warning
kind, directory, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
mgr = (JsonlTranscriptManager(directory + "/transcripts", write_behind=$behind) if kind == "jsonl"
       else SqlTranscriptManager(directory + "/transcripts.db", write_behind=$behind))
compactor = Compactor(lambda p: $summary, None, 10**9, "alpha", archive=mgr.archive)
messages = [{"role": "user", "content": "task"}]
print("ready", flush=True)
turn = 0
while True:
    for _ in range(1 + turn % 4):
        tid = f"{run}-{turn}"
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": tid, "name": "bash", "input": {}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": f"{tid} " + "y" * 3000}]})
        turn += 1
    compactor(messages, force=$force)
    for message in messages[-40:]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and is_truncated(block["content"]):
                print(block["tool_use_id"], block["content"].rsplit(" ", 1)[-1][:-1], flush=True)
    del messages[1:-$keep]
""")


def crash_child(*, write_behind: bool, summary: str, force: str, keep: int) -> str:
    """A child script for :func:`printed_then_killed`: it compacts a growing session
    of 3,000-character results with ``archive=`` a store (``write_behind`` or not),
    the summariser answering ``summary``, forcing calls when the expression
    ``force`` (of ``turn``) is true and keeping ``keep`` messages after the first;
    after each call it prints the recall handles of the results it truncated."""
    return _CRASH_CHILD.substitute(
        behind=write_behind, summary=repr(summary), force=force, keep=keep
    )


def printed_by_killed_children(
    script: str, kind: str, directory: Path, seed: int, delays: tuple[float, float]
) -> dict[str, str]:
    """What three children running ``script`` in turn printed, each killed after a
    random delay within ``delays``."""
    rng = random.Random(seed)
    printed: dict[str, str] = {}
    for run in range(3):
        printed |= printed_then_killed(script, kind, directory, run, rng.uniform(*delays))
    assert len(printed) > 20  # the children truncated results before being killed
    return printed


def assert_archived_as_printed(mgr: Any, printed: dict[str, str]) -> dict[str, Any]:
    """Every handle a child printed names the record of its result in ``mgr``'s
    archive of session ``alpha``; the archive's records by handle."""
    archived = {record["handle"]: record for record in mgr.load_archive("alpha")}
    for tool_use_id, handle in printed.items():
        assert handle in archived, tool_use_id
        assert archived[handle]["tool_use_id"] == tool_use_id
        assert archived[handle]["content"] == f"{tool_use_id} " + "y" * 3000
    return archived


class WriteOnlyArchive:
    """An archive object that keeps records but cannot read them back (no recall)."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []

    def archive(self, record: dict[str, Any]) -> None:
        self.records.append(record)
