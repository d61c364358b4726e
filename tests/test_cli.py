"""The command line end to end: every verb on histories in all three dialects, and bad input."""

from __future__ import annotations

import importlib.metadata
import io
import json
import os
import random
import shlex
import sqlite3
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

import bareagent_compact
from bareagent_compact import (
    Compactor,
    JsonlTranscriptManager,
    OfflineSummarizer,
    SqlTranscriptManager,
    _serialize,
    estimate_tokens,
)
from bareagent_compact.cli import main
from bareagent_compact.cli import replay as replay_module
from bareagent_compact.cli.common import Progress
from bareagent_compact.result import Action

DIALECTS = ("anthropic", "chat", "responses")
TOOLS = ("bash", "read_file", "grep")
ROUNDS = 24
THRESHOLD = "3000"
SUMMARISER = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
    "import sys; text = sys.stdin.read(); "
    "print('SUMMARY of', len(text), 'chars;', 'first goal:' if 'Fix the tests' in text else '')"
)


def session(dialect: str, rounds: int = ROUNDS, seed: int = 3) -> list[dict[str, Any]]:
    """One agent session (tool rounds, a pause every 8 rounds), written in ``dialect``."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Fix the tests 请修复测试"},
    ]
    for i in range(rounds):
        name, call_id = TOOLS[i % 3], f"call_{i}"
        args = {"cmd": f"step {i}"}
        output = "output line 数据 " * rng.randint(30, 240)
        if dialect == "anthropic":
            messages += [
                {"role": "assistant", "content": [
                    {"type": "text", "text": f"Step {i}."},
                    {"type": "tool_use", "id": call_id, "name": name, "input": args}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": call_id, "content": output}]},
            ]  # fmt: skip
        elif dialect == "chat":
            messages += [
                {"role": "assistant", "content": f"Step {i}.", "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": name, "arguments": json.dumps(args)}}]},
                {"role": "tool", "tool_call_id": call_id, "content": output},
            ]  # fmt: skip
        else:
            messages += [
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": f"Step {i}."}]},
                {"type": "function_call", "call_id": call_id, "name": name,
                 "arguments": json.dumps(args)},
                {"type": "function_call_output", "call_id": call_id, "output": output},
            ]  # fmt: skip
        if i % 8 == 7:
            messages.append({"role": "assistant", "content": f"Part {i // 8} done."})
            messages.append({"role": "user", "content": f"Now part {i // 8 + 1}."})
    return messages


def model_calls(messages: list[dict[str, Any]]) -> int:
    """How many times the agent called the model: once per run of assistant output."""
    count, previous = 0, True
    for m in messages:
        output = m.get("role") == "assistant" or m.get("type") in ("function_call", "message")
        count += output and not previous
        previous = output
    return count + (not previous)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture(params=DIALECTS)
def dialect(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def history_file(tmp_path: Path, dialect: str) -> Path:
    path = tmp_path / f"{dialect}.json"
    path.write_text(json.dumps(session(dialect), ensure_ascii=False), encoding="utf-8")
    return path


# -- estimate -------------------------------------------------------------------------


def test_estimate_gives_total_roles_tools_and_largest_messages_in_every_dialect(
    capsys: pytest.CaptureFixture[str], history_file: Path, dialect: str
) -> None:
    code, out, err = run(capsys, "estimate", str(history_file), "--json")
    assert code == 0 and err == ""
    report = json.loads(out)
    messages = session(dialect)
    assert report["messages"] == len(messages)
    assert report["tokens"] == estimate_tokens(messages)
    assert {name: t["calls"] for name, t in report["by_tool"].items()} == {
        "bash": 8, "read_file": 8, "grep": 8
    }  # fmt: skip
    assert all(t["results"] == 8 for t in report["by_tool"].values())
    # Tool results carry nearly all of the weight, whatever the dialect calls them.
    assert sum(t["tokens"] for t in report["by_tool"].values()) > 0.9 * report["tokens"]
    largest = report["largest"]
    assert len(largest) == 10
    assert [m["tokens"] for m in largest] == sorted((m["tokens"] for m in largest), reverse=True)
    assert largest[0]["tokens"] == max(estimate_tokens([m]) for m in messages)
    assert sum(r["messages"] for r in report["by_role"].values()) == len(messages)


def test_estimate_totals_agree_across_dialects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    totals = {}
    for name in DIALECTS:
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(session(name)), encoding="utf-8")
        totals[name] = json.loads(run(capsys, "estimate", str(path), "--json")[1])["by_tool"]
    assert totals["anthropic"] == totals["chat"] == totals["responses"]


def test_estimate_reads_jsonl_request_bodies_and_stdin(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    messages = session("chat", rounds=4)
    expected = estimate_tokens(messages)
    jsonl = tmp_path / "h.jsonl"
    jsonl.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"model": "m", "messages": messages}), encoding="utf-8")
    responses = tmp_path / "responses.json"
    responses.write_text(json.dumps({"input": session("responses", rounds=4)}), encoding="utf-8")
    for path in (jsonl, body):
        assert json.loads(run(capsys, "estimate", str(path), "--json")[1])["tokens"] == expected
    assert json.loads(run(capsys, "estimate", str(responses), "--json")[1])["tokens"] == expected
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(messages)))
    assert json.loads(run(capsys, "estimate", "-", "--json")[1])["tokens"] == expected


def test_estimate_text_lists_roles_tools_and_previews(
    capsys: pytest.CaptureFixture[str], history_file: Path, dialect: str
) -> None:
    code, out, _ = run(capsys, "estimate", str(history_file), "--top", "3")
    assert code == 0
    assert f"{len(session(dialect)):,} messages" in out
    assert "by role" in out and "by tool" in out and "largest messages" in out
    assert all(name in out for name in TOOLS)
    assert out.count("output line 数据") >= 3  # one preview per listed message


# -- bad input: a clear error, exit code 2, nothing written -----------------------------

BAD_INPUTS = {
    "missing": (None, "no such file"),
    "not json": (b"this is not json\n", "is not JSON"),
    "not utf-8": (b"\xff\xfe\x00[", "not UTF-8"),
    "not a history": (b'{"model": "m", "temperature": 1}', "not a message history"),
    "items not messages": (b"[1, 2, 3]", "any known format; it holds 3 records: a JSON int (3)"),
    "no role or type": (b'[{"content": "hi"}]', "it holds 1 record: keys content"),
    "lone surrogate": (
        b'[{"role": "user", "content": "a\\ud800b"}, {"role": "assistant", "content": "ok"}]',
        "message 0 holds a lone surrogate",
    ),
    "huge integer": (
        b'[{"role": "user", "content": ' + b"9" * 4301 + b"}]",
        "for integer string conversion: value has 4301 digits",
    ),
    "nested 300 deep": (
        b'[{"role": "user", "content": ' + b"[" * 300 + b"]" * 300 + b"}]",
        "message 0 is nested more than 200 levels deep",
    ),
    "empty": (b"  \n", "is empty"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
@pytest.mark.parametrize("verb", ["estimate", "compact", "replay"])
def test_bad_input_exits_2_with_a_clear_error_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, verb: str, case: str
) -> None:
    data, phrase = BAD_INPUTS[case]
    path = tmp_path / "input.json"
    if data is not None:
        path.write_bytes(data)
    before = sorted(p.name for p in tmp_path.iterdir())
    argv = [verb, str(path)]
    if verb == "compact":
        argv += ["--provider-cmd", "echo summary", "--out", str(tmp_path / "out.json")]
    if verb == "replay":
        argv += ["--plot", str(tmp_path / "out.svg")]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert f"bareagent-compact {verb}: error: " in err and phrase in err
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_a_directory_given_as_a_history_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(capsys, "estimate", str(tmp_path))
    assert code == 2 and "is a directory" in err


def test_bad_options_exit_2_through_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["replay", "x.json", "--threshold", "-5"], ["compact", "x.json"], ["nope"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
    assert "--provider-cmd" in capsys.readouterr().err


# -- compact ----------------------------------------------------------------------------


def test_compact_summarises_with_the_command_and_never_touches_the_input(
    capsys: pytest.CaptureFixture[str], history_file: Path, tmp_path: Path, dialect: str
) -> None:
    original = history_file.read_bytes()
    out_path = tmp_path / "compacted.json"
    code, out, err = run(
        capsys, "compact", str(history_file), "--provider-cmd", SUMMARISER, "--out", str(out_path)
    )
    assert code == 0 and out == ""
    assert "full compaction" in err and str(out_path) in err
    assert history_file.read_bytes() == original
    compacted = json.loads(out_path.read_text(encoding="utf-8"))
    assert compacted[0] == {"role": "system", "content": "You are a coding agent."}
    summary = compacted[1]["content"]
    assert summary.startswith("[Context Compressed]\nSUMMARY of ") and "first goal:" in summary
    assert estimate_tokens(compacted) < estimate_tokens(session(dialect)) / 10
    # The same dialect comes back: the pending tool result and its call are kept.
    assert compacted[-1] == session(dialect)[-1]


def test_compact_writes_jsonl_back_as_jsonl_on_stdout(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(m) + "\n" for m in session("chat")), encoding="utf-8")
    code, out, _ = run(capsys, "compact", str(path), "--provider-cmd", SUMMARISER)
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert lines[1]["content"].startswith("[Context Compressed]\nSUMMARY")
    code, out, _ = run(capsys, "compact", str(path), "--provider-cmd", SUMMARISER, "--json")
    report = json.loads(out)
    assert report["action"] == "full" and report["messages"] == lines
    assert report["tokens_in"] == estimate_tokens(session("chat"))


def test_compact_sends_the_prompt_as_json_when_asked(
    capsys: pytest.CaptureFixture[str], history_file: Path
) -> None:
    command = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
        "import json, sys; prompt = json.load(sys.stdin); "
        "print([m['role'] for m in prompt], len(prompt[1]['content']))"
    )
    code, out, _ = run(
        capsys, "compact", str(history_file), "--provider-cmd", command, "--prompt-format", "json"
    )
    assert code == 0
    assert "['system', 'user']" in json.loads(out)[1]["content"]


def test_a_failing_summary_command_exits_1_and_writes_nothing(
    capsys: pytest.CaptureFixture[str], history_file: Path, tmp_path: Path
) -> None:
    out_path = tmp_path / "out.json"
    failing = f"{shlex.quote(sys.executable)} -c " + shlex.quote(
        "import sys; sys.stderr.write('model unreachable'); sys.exit(3)"
    )
    code, out, err = run(
        capsys, "compact", str(history_file), "--provider-cmd", failing, "--out", str(out_path)
    )
    assert code == 1 and out == "" and not out_path.exists()
    assert "exited with status 3: model unreachable" in err and "nothing written" in err
    assert "Traceback" not in err


def test_compact_refuses_to_write_over_its_input(
    capsys: pytest.CaptureFixture[str], history_file: Path
) -> None:
    original = history_file.read_bytes()
    code, _, err = run(
        capsys, "compact", str(history_file), "--provider-cmd", SUMMARISER, "--out",
        str(history_file.parent / "." / history_file.name),
    )  # fmt: skip
    assert code == 2 and "is the input file" in err
    assert history_file.read_bytes() == original


# -- replay -----------------------------------------------------------------------------


def test_replay_reports_every_turn_in_every_dialect(
    capsys: pytest.CaptureFixture[str], history_file: Path, dialect: str
) -> None:
    code, out, err = run(capsys, "replay", str(history_file), "--threshold", THRESHOLD, "--json")
    assert code == 0 and err == ""  # no progress on a non-terminal
    report = json.loads(out)
    turns = report["turns"]
    messages = session(dialect)
    assert len(turns) == model_calls(messages) == report["summary"]["turns"]
    assert [t["turn"] for t in turns] == list(range(1, len(turns) + 1))
    full = [t for t in turns if t["action"] == "full"]
    assert full and report["summary"]["full"] == len(full)
    assert report["summary"]["summary_calls"] == len(full)  # the offline summariser
    limit = int(THRESHOLD)
    assert all(t["tokens_before"] > limit and t["tokens_after"] < limit for t in full)
    assert all(t["tokens_before"] <= limit for t in turns if t["action"] in ("none", "micro"))
    assert report["options"] == {
        "threshold": limit, "keep_recent": 3, "keep_tool_pairs": True, "micro": "spec",
        "pin_facts": False, "keep_tail_tokens": 0, "summariser": "offline summariser",
    }  # fmt: skip


def test_replay_with_a_high_threshold_only_micro_compacts(
    capsys: pytest.CaptureFixture[str], history_file: Path, dialect: str
) -> None:
    code, out, _ = run(capsys, "replay", str(history_file), "--threshold", "10000000", "--json")
    report = json.loads(out)
    assert code == 0
    assert {t["action"] for t in report["turns"]} == {"none", "micro"}
    assert report["summary"]["final_messages"] == len(session(dialect))
    assert report["summary"]["summary_calls"] == 0


def test_replay_prints_a_sparkline_without_plot_and_an_svg_with_it(
    capsys: pytest.CaptureFixture[str], history_file: Path, tmp_path: Path
) -> None:
    code, out, _ = run(capsys, "replay", str(history_file), "--threshold", THRESHOLD)
    assert code == 0
    context = next(line for line in out.splitlines() if line.startswith("context "))
    assert set(context[8:]) <= set("▁▂▃▄▅▆▇█") and "█" in context
    marks = out.splitlines()[out.splitlines().index(context) + 1]
    assert "F" in marks
    svg = tmp_path / "replay.svg"
    argv = ["replay", str(history_file), "--threshold", THRESHOLD, "--plot", str(svg)]
    code, out, _ = run(capsys, *argv)
    assert code == 0 and "context ▁" not in out and f"picture: {svg}" in out
    root = ET.parse(svg).getroot()
    fulls = [e for e in root.iter() if "full" in e.get("class", "").split()]
    assert len(fulls) == int(out.split("full compactions ")[1].split(",")[0])


def test_replay_counts_calls_of_a_summary_command(
    capsys: pytest.CaptureFixture[str], history_file: Path
) -> None:
    code, out, _ = run(
        capsys, "replay", str(history_file), "--threshold", THRESHOLD, "--provider-cmd", SUMMARISER,
        "--json",
    )  # fmt: skip
    report = json.loads(out)
    assert code == 0
    assert report["summary"]["summary_calls"] == report["summary"]["full"] > 0
    assert report["options"]["summariser"].startswith("command ")


def test_replay_exits_1_when_summaries_fail(
    capsys: pytest.CaptureFixture[str], history_file: Path
) -> None:
    code, out, err = run(
        capsys, "replay", str(history_file), "--threshold", THRESHOLD, "--provider-cmd", "exit 1"
    )
    assert code == 1
    assert "failed" in out and "summary provider failed" in err


def test_progress_is_drawn_only_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    screen, pipe = Terminal(), io.StringIO()
    for stream in (screen, pipe):
        progress = Progress("replaying turn", stream)
        for done in range(1, 4):
            progress(done, 3)
        progress.close()
    assert pipe.getvalue() == ""
    assert "\rreplaying turn 3/3" in screen.getvalue() and screen.getvalue().endswith("\x1b[K")


# -- inspect and show, on both stores ---------------------------------------------------


def fill_store(store: JsonlTranscriptManager | SqlTranscriptManager) -> dict[str, list[Any]]:
    """Compact one session per dialect into ``store``; returns every snapshot saved."""
    saved: dict[str, list[Any]] = {}
    for name in DIALECTS:
        compactor = Compactor(
            lambda prompt: "摘要 summary", store, threshold=int(THRESHOLD), session_id=name,
            archive=store.archive,
        )  # fmt: skip
        working: list[dict[str, Any]] = []
        saved[name] = []
        for message in session(name):
            working.append(message)
            result = compactor(working)
            if result.snapshot_saved:
                saved[name].append(json.loads(json.dumps(store.load(name))))
    return saved


@pytest.fixture(params=["jsonl", "sqlite"])
def store_path(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "jsonl":
        path = tmp_path / "transcripts"
        fill_store(JsonlTranscriptManager(path))
    else:
        path = tmp_path / "transcripts.db"
        with SqlTranscriptManager(path) as mgr:
            fill_store(mgr)
    return path


def test_inspect_lists_sessions_snapshots_archives_and_orphans(
    capsys: pytest.CaptureFixture[str], store_path: Path
) -> None:
    code, out, _ = run(capsys, "inspect", str(store_path), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["kind"] in ("jsonl", "sqlite")
    sessions = {s["session_id"]: s for s in report["sessions"]}
    assert set(sessions) == set(DIALECTS)
    for found in sessions.values():
        assert len(found["snapshots"]) >= 2 and found["snapshots"][0]["at"] == 0
        assert all(s["size"] > 0 for s in found["snapshots"])
        assert found["archive"]["records"] > 0
        assert found["latest"]["orphans"] == []
        # A snapshot is the history as it was before its summary.
        assert found["latest"]["tokens"] > int(THRESHOLD)
    code, text, _ = run(capsys, "inspect", str(store_path))
    assert code == 0 and "3 sessions" in text and "0 orphans" in text


def test_inspect_reports_orphans_in_the_latest_snapshot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    mgr = JsonlTranscriptManager(tmp_path)
    mgr.save([{"role": "user", "content": "go"}], "s")
    mgr.save([{"role": "user", "content": "go"}, {"role": "tool", "tool_call_id": "c9",
              "content": "lost"}, {"role": "assistant", "content": "ok"}], "s")  # fmt: skip
    report = json.loads(run(capsys, "inspect", str(tmp_path), "--json")[1])
    (orphan,) = report["sessions"][0]["latest"]["orphans"]
    assert orphan["kind"] == "tool_result" and orphan["tool_use_id"] == "c9"


def test_show_prints_the_latest_or_an_older_snapshot(
    capsys: pytest.CaptureFixture[str], store_path: Path
) -> None:
    if store_path.suffix == ".db":
        with SqlTranscriptManager(store_path) as mgr:
            records = mgr.snapshots("chat")
            expected = [mgr.load_snapshot(r) for r in records]
    else:
        mgr_files = JsonlTranscriptManager(store_path)
        records_files = mgr_files.snapshots("chat")
        expected = [mgr_files.load_snapshot(r.path) for r in records_files]
    code, out, _ = run(capsys, "show", "chat", "--store", str(store_path))
    assert code == 0
    assert out.split("\n", 2)[2] == _serialize(expected[0]) + "\n"
    assert f"snapshot 0 of {len(expected)}" in out
    code, out, _ = run(capsys, "show", "chat", "--store", str(store_path), "--at", "1", "--json")
    assert code == 0 and json.loads(out)["transcript"] == expected[1]
    saved = json.loads(out)["saved"]
    code, out, _ = run(capsys, "show", "chat", "--store", str(store_path), "--at", saved, "--json")
    assert json.loads(out)["at"] == 1


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_show_of_a_snapshot_holding_a_lone_surrogate_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    history = [
        {"role": "user", "content": "bad \ud800 text"},
        {"role": "assistant", "content": "ok"},
    ]
    if kind == "jsonl":
        store = tmp_path / "transcripts"
        JsonlTranscriptManager(store).save(history, "s")
    else:
        store = tmp_path / "transcripts.db"
        with SqlTranscriptManager(store) as mgr:
            mgr.save(history, "s")
    for extra in ([], ["--json"]):
        code, out, err = run(capsys, "show", "s", "--store", str(store), *extra)
        assert code == 2 and out == ""
        assert "message 0 holds a lone surrogate" in err
        assert len(err.strip().splitlines()) == 1


def test_show_at_0_is_what_the_last_summary_replaced(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The newest snapshot (``--at 0``) is the history just before the last summary,
    as the README's example says."""
    store = JsonlTranscriptManager(tmp_path)
    compactor = Compactor(lambda prompt: "summary", store, threshold=int(THRESHOLD), session_id="s")
    working: list[dict[str, Any]] = []
    replaced = []
    for message in session("chat"):
        working.append(message)
        before = json.loads(json.dumps(working))
        if compactor(working).action is Action.FULL:
            replaced.append(before)
    assert len(replaced) >= 2
    for at, expected in ((0, replaced[-1]), (1, replaced[-2])):
        code, out, _ = run(capsys, "show", "s", "--store", str(tmp_path), "--at", str(at), "--json")
        assert code == 0
        transcript = json.loads(out)["transcript"]
        assert len(transcript) == len(expected)  # micro-compaction may have cut results
        assert [m["role"] for m in transcript] == [m["role"] for m in expected]
        assert transcript[-1] == expected[-1]  # the newest message, which micro leaves whole
    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    (line,) = [x for x in readme.splitlines() if "what the last summary replaced" in x]
    assert "--at 1" not in line


def test_show_reads_the_store_from_the_environment(
    capsys: pytest.CaptureFixture[str], store_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BAREAGENT_COMPACT_STORE", str(store_path))
    code, out, _ = run(capsys, "show", "responses")
    assert code == 0 and "[tool_use:grep]" in out


@pytest.mark.parametrize(
    "case",
    [
        (["show", "chat", "--store", "{store}", "--at", "99"], "the session has snapshots 0 to"),
        (["show", "chat", "--store", "{store}", "--at", "yesterday"], "--at takes"),
        (["show", "ghost", "--store", "{store}"], "no snapshot of session 'ghost'"),
        (["show", "a\tb", "--store", "{store}"], "must be printable"),
        (["show", "chat"], "show needs --store"),
        (["inspect", "{missing}"], "no such file or directory"),
        (["inspect", "{text}"], "neither a directory of JSONL transcripts nor a sqlite3"),
        (["inspect", "{foreign}"], "holds no transcript store"),
    ],
)
def test_store_verbs_exit_2_on_bad_input_and_change_nothing(
    capsys: pytest.CaptureFixture[str],
    store_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    case: tuple[list[str], str],
) -> None:
    argv, phrase = case
    monkeypatch.delenv("BAREAGENT_COMPACT_STORE", raising=False)
    text = tmp_path / "notes.txt"
    text.write_text("hello", encoding="utf-8")
    foreign = tmp_path / "other.db"
    with closing(sqlite3.connect(foreign)) as db, db:
        db.execute("CREATE TABLE notes (x TEXT)")

    def contents() -> dict[Path, bytes]:
        # sqlite3's shared-memory index and write-ahead log change on any read.
        return {
            p: p.read_bytes()
            for p in tmp_path.rglob("*")
            if p.is_file() and not p.name.endswith(("-shm", "-wal"))
        }

    files = contents()
    names = {
        "store": str(store_path), "missing": str(tmp_path / "missing"),
        "text": str(text), "foreign": str(foreign),
    }  # fmt: skip
    code, out, err = run(capsys, *(a.format(**names) for a in argv))
    assert code == 2 and out == ""
    assert phrase in err
    assert contents() == files


# -- the installed entry points ---------------------------------------------------------


def test_python_m_runs_the_verbs_with_exit_codes(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text(json.dumps(session("responses", rounds=3)), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "bareagent_compact", "estimate", str(path), "--json"],
        capture_output=True, text=True, encoding="utf-8", check=False,
    )  # fmt: skip
    assert done.returncode == 0
    assert json.loads(done.stdout)["messages"] == len(session("responses", rounds=3))
    missing = subprocess.run(
        [sys.executable, "-m", "bareagent_compact", "replay", str(tmp_path / "nope.json")],
        capture_output=True, text=True, encoding="utf-8", check=False,
    )  # fmt: skip
    assert missing.returncode == 2 and "no such file" in missing.stderr


def test_compact_timeout_kills_the_whole_command_group(tmp_path: Path) -> None:
    history = tmp_path / "h.json"
    history.write_text(json.dumps([
        {"role": "user", "content": "a " * 50}, {"role": "assistant", "content": "b " * 50},
        {"role": "user", "content": "next"},
    ]))
    marker = tmp_path / "still-running"
    command = f"sh -c 'sleep 2; touch {marker}'"
    code = subprocess.run(
        [sys.executable, "-m", "bareagent_compact", "compact", str(history),
         "--provider-cmd", command, "--timeout", "0.5"],
        capture_output=True, text=True, check=False,
    ).returncode
    assert code == 1
    time.sleep(2.5)
    assert not marker.exists()  # the grandchild was killed with its group
    assert os.path.exists(history)


def test_compact_with_nothing_to_summarise_exits_0_and_writes_the_history(
    tmp_path: Path,
) -> None:
    history = tmp_path / "e.json"
    history.write_text("[]")
    out = tmp_path / "out.json"
    done = subprocess.run(
        [sys.executable, "-m", "bareagent_compact", "compact", str(history),
         "--provider-cmd", "cat", "--out", str(out)],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text()) == []


def test_replay_tokens_in_is_the_estimate_of_the_history_as_the_turn_starts(
    dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[int] = []

    class Spy(Compactor):
        def __call__(self, history: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append(estimate_tokens(history))
            return super().__call__(history, *args, **kwargs)

    monkeypatch.setattr(replay_module, "Compactor", Spy)
    done = replay_module.replay(session(dialect), OfflineSummarizer(), threshold=int(THRESHOLD))
    assert [t.tokens_in for t in done.turns] == seen
    quiet = [t for t in done.turns if t.action.value == "none"]
    assert quiet and all(t.tokens_in == t.tokens_before == t.tokens_after for t in quiet)


# -- --version ---------------------------------------------------------------------------


@pytest.mark.parametrize("installed", [True, False])
def test_version_prints_the_installed_version(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, installed: bool
) -> None:
    expected = importlib.metadata.version("bareagent-compact") if installed else "0+unknown"
    if not installed:  # what __version__ reads from a source tree never installed
        monkeypatch.setattr(bareagent_compact, "__version__", expected, raising=False)
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out == f"bareagent-compact {expected}\n"
