"""The command line on real agent logs (fixtures under ``tests/data/logs``), and bad input.

Each fixture is written from the public descriptions of its format: Claude Code
session JSONL, Codex CLI rollouts (both layouts), SWE-agent ``.traj`` (with a
``history`` and with ``trajectory`` steps only) and mini-swe-agent ``.traj.json``.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import random
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from bareagent_compact import (
    JsonlTranscriptManager,
    SqlTranscriptManager,
    check_request,
    estimate_tokens,
)
from bareagent_compact.cli import look, main
from bareagent_compact.cli.plot import svg_chart
from bareagent_compact.cli.readers import _base as readers_base
from bareagent_compact.cli.readers import read_history

LOGS = Path(__file__).parent / "data" / "logs"
SRC = Path(__file__).parents[1] / "src"
# file: (format, messages, skipped records by kind, model calls)
FIXTURES: dict[str, tuple[str, int, dict[str, int], int]] = {
    "claude_code.jsonl": (
        "claude-code",
        11,
        {"compaction summary": 1, "file-history-snapshot": 4, "progress": 4, "sidechain": 2,
         "summary": 1, "system": 1},
        6,
    ),
    "claude_code_v2.jsonl": (
        "claude-code",
        18,
        {"API error message": 1, "file-history-snapshot": 3, "queue-operation": 2, "summary": 1,
         "system": 1},
        9,
    ),
    "claude_code_subagent.jsonl": ("claude-code", 6, {}, 3),
    "claude_code_acompact.jsonl": ("claude-code", 6, {}, 3),
    "codex_rollout.jsonl": (
        "codex",
        16,
        {"compaction summary": 1, "event_msg": 10, "ghost_snapshot": 1, "session_meta": 1,
         "turn_context": 1},
        6,
    ),
    "codex_0_58.jsonl": (
        "codex",
        31,
        {"event_msg": 24, "ghost_snapshot": 2, "session_meta": 1, "turn_context": 3},
        11,
    ),
    "codex_legacy.jsonl": ("codex", 11, {"session metadata": 1, "state": 4}, 4),
    "swe_agent.traj": ("swe-agent", 11, {}, 5),
    "swe_agent_steps.traj": ("swe-agent", 8, {}, 4),
    "mini_swe_agent.traj.json": ("mini-swe-agent", 9, {}, 4),
}  # fmt: skip


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def lines(name: str) -> list[Any]:
    text = (LOGS / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.split("\n") if line.strip()]  # JSONL: "\n" only


def claude_dialogue() -> list[dict[str, Any]]:
    """The fixture's dialogue, found independently of the reader: one message per
    response (records sharing ``message.id`` joined), sub-agents and summaries left out."""
    messages: list[dict[str, Any]] = []
    last_id = None
    for r in lines("claude_code.jsonl"):
        if r.get("type") not in ("user", "assistant") or r.get("isSidechain"):
            continue
        if r.get("isCompactSummary"):
            continue
        m = r["message"]
        if m.get("id") is not None and m.get("id") == last_id:
            messages[-1]["content"] = messages[-1]["content"] + m["content"]
        else:
            messages.append({"role": m["role"], "content": m["content"]})
        last_id = m.get("id")
    return messages


# -- estimate ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_estimate_reads_each_log_format_and_counts_what_it_skipped(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    fmt, messages, skipped, _ = FIXTURES[name]
    code, out, err = run(capsys, "estimate", str(LOGS / name), "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["format"] == fmt
    assert report["messages"] == messages
    assert report["skipped"] == skipped
    code, text, _ = run(capsys, "estimate", str(LOGS / name))
    assert code == 0 and f"({fmt}): {messages} messages" in text
    if skipped:
        assert f"skipped {sum(skipped.values())} records that are no message" in text


def test_estimate_of_a_claude_code_file_is_that_of_its_dialogue_not_its_records(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = json.loads(run(capsys, "estimate", str(LOGS / "claude_code.jsonl"), "--json")[1])
    dialogue = estimate_tokens(claude_dialogue())
    raw = estimate_tokens([{"role": "user", "content": (LOGS / "claude_code.jsonl").read_text()}])
    assert abs(report["tokens"] - dialogue) <= dialogue * 0.02
    assert report["tokens"] < raw * 0.5
    # tool_use and tool_result blocks survive: the tools are found and their results counted
    assert set(report["by_tool"]) == {"Bash", "Read", "Grep"}
    assert report["by_tool"]["Bash"] == {**report["by_tool"]["Bash"], "calls": 2, "results": 2}


def test_a_streamed_claude_code_response_becomes_one_message(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    code, _, err = run(
        capsys, "compact", str(LOGS / "claude_code.jsonl"), "--provider-cmd", "echo SUMMARY",
        "--out", str(out), "--keep-recent", "1",
    )  # fmt: skip
    assert code == 0, err
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(set(m) == {"role", "content"} for m in written)  # plain Anthropic messages
    assert any("SUMMARY" in json.dumps(m) for m in written)


def _responses(name: str) -> dict[str, list[Any]]:
    """The blocks each response of a Claude Code file was logged with, by ``message.id``,
    found from the records (API error messages, which are no model output, left out)."""
    blocks: dict[str, list[Any]] = {}
    for r in lines(name):
        if r.get("type") == "assistant" and not r.get("isApiErrorMessage"):
            blocks.setdefault(r["message"]["id"], []).extend(r["message"]["content"])
    return blocks


def test_a_claude_code_2_session_reads_one_assistant_message_per_model_call(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Claude Code 2.x logs each block of a response as a record of its own, with the
    results of the tools it ran meanwhile between them: one message per ``message.id``."""
    history = read_history(LOGS / "claude_code_v2.jsonl")
    responses = _responses("claude_code_v2.jsonl")
    answers = [m["content"] for m in history.messages if m["role"] == "assistant"]
    assert answers == list(responses.values())
    roles = [m["role"] for m in history.messages]
    assert all(a != b for a, b in itertools.pairwise(roles))  # consecutive user records joined
    assert check_request(history.messages, "anthropic") == []
    code, out, err = run(capsys, "replay", str(LOGS / "claude_code_v2.jsonl"), "--json")
    assert code == 0, err
    assert json.loads(out)["summary"]["turns"] == len(responses) == 9


@pytest.mark.parametrize("name", ["claude_code_subagent.jsonl", "claude_code_acompact.jsonl"])
def test_a_sub_agent_transcript_whose_every_record_is_a_sidechain_is_read(name: str) -> None:
    """``subagents/agent-*.jsonl`` (and the compaction agent's ``agent-acompact-*``):
    every record ``isSidechain``; the records are the sub-agent's dialogue."""
    records = lines(name)
    assert all(r["isSidechain"] is True for r in records)
    history = read_history(LOGS / name)
    assert [m["content"] for m in history.messages if m["role"] == "assistant"] == list(
        _responses(name).values()
    )
    assert history.messages[0] == records[0]["message"]
    assert history.skipped == {}
    assert check_request(history.messages, "anthropic") == []


def test_joined_user_records_put_the_tool_results_first() -> None:
    history = read_history(LOGS / "claude_code_v2.jsonl")
    interrupted = [m for m in history.messages if "interrupted by user" in json.dumps(m)]
    assert len(interrupted) == 1
    kinds = [b["type"] for b in interrupted[0]["content"]]
    assert kinds == ["tool_result", "text", "text"]


def test_replay_says_which_records_it_left_out(capsys: pytest.CaptureFixture[str]) -> None:
    name = str(LOGS / "claude_code_v2.jsonl")
    code, out, err = run(capsys, "replay", name)
    assert code == 0, err
    assert "read as claude-code; skipped 8 records that are no message: API error message 1" in out
    report = json.loads(run(capsys, "replay", name, "--json")[1])
    assert report["format"] == "claude-code"
    assert report["skipped"] == FIXTURES["claude_code_v2.jsonl"][2]


def test_codex_rollouts_of_both_layouts_give_responses_items(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for name, calls in (("codex_rollout.jsonl", 4), ("codex_legacy.jsonl", 3)):
        report = json.loads(run(capsys, "estimate", str(LOGS / name), "--json")[1])
        assert report["by_role"]["function_call"]["messages"] == calls
        assert report["by_role"]["function_call_output"]["messages"] == calls
        assert report["by_tool"]["shell"]["results"] == calls
        assert "reasoning" in report["by_role"]


def test_a_codex_0_58_rollout_is_read_whole(capsys: pytest.CaptureFixture[str]) -> None:
    """Every Responses item of the rollout, in order, also those whose text holds
    U+2028 or U+0085, which Codex (serde_json) writes unescaped."""
    records = lines("codex_0_58.jsonl")
    assert records[0]["payload"]["cli_version"] == "0.58.0"
    items = [
        r["payload"]
        for r in records
        if r["type"] == "response_item" and r["payload"]["type"] != "ghost_snapshot"
    ]
    history = read_history(LOGS / "codex_0_58.jsonl")
    assert history.messages == items
    assert any("\u2028" in json.dumps(m, ensure_ascii=False) for m in history.messages)
    code, out, err = run(
        capsys, "replay", str(LOGS / "codex_0_58.jsonl"), "--threshold", "6855", "--json"
    )
    assert code == 0, err
    summary = json.loads(out)["summary"]
    assert summary["turns"] == 11 and summary["full"] >= 1


def test_a_swe_agent_history_keeps_the_chat_messages_and_their_tool_calls(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = json.loads(run(capsys, "estimate", str(LOGS / "swe_agent.traj"), "--json")[1])
    assert report["by_tool"]["str_replace_editor"] == {
        **report["by_tool"]["str_replace_editor"], "calls": 4, "results": 4,
    }  # fmt: skip
    steps = json.loads(run(capsys, "estimate", str(LOGS / "swe_agent_steps.traj"), "--json")[1])
    assert steps["by_role"]["assistant"]["messages"] == 4


# -- replay -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_replay_runs_each_log_format_turn_by_turn(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    model_calls = FIXTURES[name][3]
    code, out, err = run(capsys, "replay", str(LOGS / name), "--threshold", "1500", "--json")
    assert code == 0, err
    summary = json.loads(out)["summary"]
    assert summary["turns"] == model_calls
    assert summary["peak_tokens"] > 0


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_compare_replays_each_log_format_under_every_setting(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    settings = "default,cache-friendly,threshold=4000"
    code, out, err = run(
        capsys, "replay", str(LOGS / name), "--threshold", "1500", "--compare", settings, "--json"
    )
    assert code == 0, err
    rows = json.loads(out)["settings"]
    assert [row["label"] for row in rows] == settings.split(",")
    for row in rows:
        summary = row["summary"]
        assert summary["turns"] == FIXTURES[name][3] == len(row["turns"])
        assert summary["full"] <= summary["summary_calls"]
        assert summary["cost"] == pytest.approx(summary["request_cost"] + summary["summary_cost"])
    # A higher threshold never compacts more often than the lower one.
    assert rows[2]["summary"]["full"] <= rows[0]["summary"]["full"]


def test_replay_compacts_a_claude_code_session_past_the_threshold(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "replay", str(LOGS / "claude_code.jsonl"), "--threshold", "1000")
    assert code == 0 and "0 turns" not in out
    assert "full compactions 0" not in out


def test_replay_of_a_file_without_a_model_call_is_an_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "only_answers.jsonl"
    answer = '{"role": "assistant", "content": "a"}\n'
    path.write_text(answer * 2)
    code, out, err = run(capsys, "replay", str(path))
    assert code == 2 and out == ""
    assert "no turn to replay (2 messages read as messages" in err


# -- formats: forced, unknown -----------------------------------------------------------


def test_format_forces_a_reader(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "estimate", str(LOGS / "swe_agent.traj"), "--format", "swe-agent")
    assert code == 0 and "(swe-agent)" in out
    code, out, err = run(capsys, "estimate", str(LOGS / "claude_code.jsonl"), "--format", "codex")
    assert code == 2 and out == ""
    assert "holds no message of the dialogue when read as codex" in err
    code, _, err = run(capsys, "replay", str(LOGS / "swe_agent.traj"), "--format", "messages")
    assert code == 2 and "not a message history" in err and "keys" in err


def test_format_takes_every_format_a_file_can_be_read_as(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Each format a file is reported as (``estimate``'s ``format``) can be forced."""
    for name, (fmt, messages, _, _) in FIXTURES.items():
        code, out, err = run(capsys, "estimate", str(LOGS / name), "--format", fmt, "--json")
        assert code == 0, (name, err)
        assert (json.loads(out)["format"], json.loads(out)["messages"]) == (fmt, messages)
    body = tmp_path / "body.json"
    body.write_text(json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}))
    code, out, err = run(capsys, "estimate", str(body), "--format", "mini-swe-agent")
    assert code == 2 and "is no mini-swe-agent trajectory" in err
    with pytest.raises(SystemExit):
        main(["estimate", str(body), "--format", "nope"])
    err = " ".join(capsys.readouterr().err.split())
    for fmt in {f for f, *_ in FIXTURES.values()}:
        assert f"'{fmt}'" in err


def test_records_of_no_known_format_exit_2_naming_what_was_seen(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"type": "click", "x": 1}\n{"type": "click", "x": 2}\n{"type": "scroll"}\n')
    for verb in ("estimate", "replay"):
        code, out, err = run(capsys, verb, str(path))
        assert code == 2 and out == ""
        assert "not a message history in any known format" in err
        assert "type 'click' (2), type 'scroll' (1)" in err
        assert len(err.strip().splitlines()) == 1


# -- inspect: archive-only sessions ------------------------------------------------------


@pytest.mark.parametrize("kind", ["jsonl", "sqlite"])
def test_inspect_lists_a_session_that_has_only_an_archive(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str
) -> None:
    record = {"session_id": "micro-only", "tool_use_id": "t1", "tool_name": "bash",
              "content": "a long result " * 50}  # fmt: skip
    if kind == "jsonl":
        location = tmp_path / "store"
        mgr = JsonlTranscriptManager(location)
        mgr.archive(record)
        mgr.save([{"role": "user", "content": "hi"}], "with-snapshot")
    else:
        location = tmp_path / "store.db"
        with SqlTranscriptManager(location) as sql:
            sql.archive(record)
            sql.save([{"role": "user", "content": "hi"}], "with-snapshot")
    code, out, err = run(capsys, "inspect", str(location), "--json")
    assert code == 0, err
    sessions = {s["session_id"]: s for s in json.loads(out)["sessions"]}
    assert list(sessions) == ["with-snapshot", "micro-only"]
    assert sessions["micro-only"]["snapshots"] == []
    assert sessions["micro-only"]["archive"]["records"] == 1
    code, text, _ = run(capsys, "inspect", str(location))
    assert "2 sessions, 1 snapshot" in text and "session micro-only: 0 snapshots" in text


# -- show --at: UTC whatever TZ says ----------------------------------------------------


@pytest.mark.skipif(not hasattr(time, "tzset"), reason="time.tzset is POSIX only")
@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Asia/Kolkata"])
def test_show_at_compares_times_in_utc_whatever_tz_says(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, zone: str
) -> None:
    moments = iter(datetime(2025, 1, 2, 12, m, tzinfo=timezone.utc) for m in (0, 30, 59))
    mgr = JsonlTranscriptManager(tmp_path, clock=lambda: next(moments))
    for n in range(3):
        mgr.save([{"role": "user", "content": f"v{n}"}], "s")
    monkeypatch.setenv("TZ", zone)
    time.tzset()
    try:
        cases = {"2025-01-02T12:30:00+00:00": 1, "2025-01-02T12:29:59Z": 2,
                 "2025-01-02T07:30:00-05:00": 1, "2025-01-02T17:59:00+05:30": 2,
                 "2025-01-02T12:59:00": 0}  # fmt: skip
        for at, position in cases.items():
            argv = ("show", "s", "--store", str(tmp_path), "--at", at, "--json")
            code, out, err = run(capsys, *argv)
            assert code == 0, err
            assert json.loads(out)["at"] == position, (zone, at)
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


class _Python310Datetime(datetime):
    """``datetime`` whose ``fromisoformat`` refuses a ``Z`` suffix, as Python 3.10's does."""

    @classmethod
    def fromisoformat(cls, text: str) -> datetime:  # type: ignore[override]
        if text[-1:] in ("Z", "z"):
            raise ValueError(f"Invalid isoformat string: {text!r}")
        return datetime.fromisoformat(text)


def test_show_at_takes_a_utc_time_ending_in_z_where_fromisoformat_does_not(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    moments = iter(datetime(2025, 1, 2, 12, m, tzinfo=timezone.utc) for m in (0, 30))
    mgr = JsonlTranscriptManager(tmp_path, clock=lambda: next(moments))
    for n in range(2):
        mgr.save([{"role": "user", "content": f"v{n}"}], "s")
    monkeypatch.setattr(look, "datetime", _Python310Datetime)
    for at, position in (("2099-01-01T00:00:00Z", 0), ("2025-01-02T12:29:59z", 1)):
        code, out, err = run(capsys, "show", "s", "--store", str(tmp_path), "--at", at, "--json")
        assert code == 0, err
        assert json.loads(out)["at"] == position


# -- bad input: one line on stderr, exit 2, nothing written ------------------------------


def test_out_into_an_unwritable_place_exits_2_and_runs_nothing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    command = f"touch {marker}; echo SUMMARY"
    a_file = tmp_path / "plain"
    a_file.write_text("x")
    for out in ("/proc/bareagent-compact-test.json", str(a_file / "out.json")):
        code, stdout, err = run(
            capsys, "compact", str(LOGS / "claude_code.jsonl"), "--provider-cmd", command,
            "--out", out,
        )  # fmt: skip
        assert code == 2 and stdout == ""
        assert len(err.strip().splitlines()) == 1 and "error:" in err
    assert not marker.exists()


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses non-UTF-8 file names")
def test_non_utf8_file_names_under_plot_give_a_well_formed_svg(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path)
    source = raw + b"/in\xff\x1b.json"
    with open(source, "wb") as file:
        file.write((LOGS / "mini_swe_agent.traj.json").read_bytes())
    plot = raw + b"/chart\xfe.svg"
    env = {**os.environ, "PYTHONPATH": str(SRC), "LC_ALL": "C.UTF-8", "PYTHONIOENCODING": "utf-8"}
    done = subprocess.run(
        [sys.executable, "-m", "bareagent_compact", "replay", source, "--plot", plot],
        capture_output=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert b"Traceback" not in done.stderr
    root = ET.fromstring(Path(os.fsdecode(plot)).read_bytes())
    title = next(e.text for e in root.iter("{http://www.w3.org/2000/svg}title"))
    assert title == "replay of in\ufffd.json"


def test_svg_text_drops_control_characters_and_stays_well_formed() -> None:
    name = "a\x00b\x07c\x1b[31m<d>&\ud800e\x7f\ufffe"
    root = ET.fromstring(svg_chart([], 100, name).encode("utf-8"))
    texts = [e.text or "" for e in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "abc[31m<d>&\ufffde" in texts


# -- fuzz: exit 0 or 2, never a traceback ------------------------------------------------

FUZZ_CASES = 400


def _fuzz_inputs(rng: random.Random) -> list[bytes]:
    """Random bytes, cut-off fixtures, deep nesting, huge numbers and surrogates."""
    fixtures = [(LOGS / name).read_bytes() for name in sorted(FIXTURES)]
    pieces = [b"{", b"}", b"[", b"]", b'"', b":", b",", b"\n", b"\\ud800", b"\\udc00", b"1e999",
              b"9" * 5000, b"null", b'"type"', b'"role"', b'"message"', b'"payload"',
              b'"response_item"', b'"user"', b'"assistant"', b'"history"']  # fmt: skip
    cases = []
    for _ in range(FUZZ_CASES):
        kind = rng.randrange(6)
        base = rng.choice(fixtures)
        if kind == 0:
            data = rng.randbytes(rng.randrange(1, 300))
        elif kind == 1:
            data = base[: rng.randrange(1, len(base))]
        elif kind == 2:
            depth = rng.choice([150, 199, 201, 300, 2000, 100_000])
            opener = rng.choice([b"[", b'{"content": ', b'{"role": "user", "content": ['])
            data = b'[{"role": "user", "content": ' + opener * depth + b"]"
        elif kind == 3:
            data = b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 60)))
        elif kind == 4:
            data = bytearray(base)
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            data = bytes(data)
        else:
            lines_ = base.splitlines()
            spot = rng.randrange(len(lines_))
            lines_[spot] = lines_[spot].replace(b'"', b'"\\ud800', 1)
            lines_.insert(spot, b'{"type": "user", "message": ' + b"9" * 4400 + b"}")
            data = b"\n".join(rng.sample(lines_, len(lines_)))
        cases.append(data)
    return cases


def test_fuzz_the_readers_exit_0_or_2_and_never_a_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    rng = random.Random(21)
    path = tmp_path / "fuzz.jsonl"
    outcomes = {0: 0, 2: 0}
    verbs = (["estimate"], ["replay"], ["estimate", "--json"])
    for number, data in enumerate(_fuzz_inputs(rng)):
        path.write_bytes(data)
        verb = verbs[number % len(verbs)]
        code = main([*verb, str(path)])
        captured = capsys.readouterr()
        assert code in (0, 2), (number, data[:200], captured.err[-2000:])
        assert "Traceback" not in captured.err
        if code == 2:
            assert len(captured.err.strip().splitlines()) == 1, captured.err
        outcomes[code] += 1
    assert sum(outcomes.values()) == FUZZ_CASES
    assert outcomes[0] > 0 and outcomes[2] > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fuzz.jsonl"]


# -- hostile input: no traceback, no hang ------------------------------------------------

_ODD_TYPES = (
    '{"type": {"kind": "user"}, "message": {"role": "user", "content": "a"}}',
    '{"type": ["response_item"], "payload": {"type": "message", "role": "user"}}',
    '{"type": "response_item", "payload": {"type": {"a": 1}, "role": ["user"]}}',
)


@pytest.mark.parametrize("name", sorted(n for n in FIXTURES if n.endswith(".jsonl")))
def test_a_record_whose_type_is_an_object_or_a_list_is_no_traceback(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, name: str
) -> None:
    path = tmp_path / name
    path.write_text("\n".join(_ODD_TYPES) + "\n" + (LOGS / name).read_text())
    for fmt in ("auto", "claude-code", "codex", "swe-agent", "mini-swe-agent", "messages"):
        for verb in ("estimate", "replay"):
            code, _, err = run(capsys, verb, str(path), "--format", fmt)
            assert code in (0, 2), (fmt, verb, err)
            assert code == 0 or len(err.strip().splitlines()) == 1, err


def _limited_run(*argv: str) -> subprocess.CompletedProcess[str]:
    """The command in a child whose address space is bounded (reading ``/dev/zero``
    whole fails there at once), and which may not take long."""
    resource = pytest.importorskip("resource")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run(
        [sys.executable, "-m", "bareagent_compact", *argv],
        capture_output=True, text=True, check=False, timeout=60, env=env, preexec_fn=limit,
    )  # fmt: skip


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and /dev/zero")
@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "directory"])
def test_a_log_that_is_no_regular_file_is_refused_without_reading_it(
    tmp_path: Path, kind: str
) -> None:
    path = tmp_path / "session.jsonl"
    if kind == "fifo":
        os.mkfifo(path)  # opening it to read would wait for a writer forever
    elif kind == "dev-zero":
        path.symlink_to("/dev/zero")  # reading it never ends
    else:
        path.mkdir()
    for verb in ("estimate", "replay", "compact"):
        extra = ["--provider-cmd", "cat"] if verb == "compact" else []
        done = _limited_run(verb, str(path), *extra)
        assert done.returncode == 2, done.stderr[-500:]
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr[-500:]
        assert str(path) in done.stderr
        assert "regular file" in done.stderr or "directory" in done.stderr


def test_input_past_the_size_limit_is_refused_with_one_line(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(readers_base, "MAX_INPUT_BYTES", 1000)
    path = tmp_path / "big.jsonl"
    path.write_text('{"role": "user", "content": "' + "x" * 2000 + '"}\n')
    code, out, err = run(capsys, "estimate", str(path))
    assert code == 2 and out == "" and "more than 1,000 bytes" in err
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\0" * 5000)))
    code, out, err = run(capsys, "estimate", "-")
    assert code == 2 and out == "" and "more than 1,000 bytes" in err
    assert len(err.strip().splitlines()) == 1
