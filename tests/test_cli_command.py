"""The summary command is bounded: its output is capped, and it is killed with its whole
process group at the timeout, whatever it does with its standard output."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bareagent_compact.cli.command import MAX_OUTPUT_BYTES, CommandProvider, OutputTooLarge

HANG_GUARD = 10.0
"""Seconds a bounded command must return within (a guard against hangs, not a benchmark)."""

PROMPT = [{"role": "system", "content": "Summarise."}, {"role": "user", "content": "history"}]


def history(tmp_path: Path) -> Path:
    path = tmp_path / "h.json"
    path.write_text(json.dumps([
        {"role": "user", "content": "a " * 50}, {"role": "assistant", "content": "b " * 50},
        {"role": "user", "content": "next"},
    ]))  # fmt: skip
    return path


def compact(path: Path, command: str, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bareagent_compact", "compact", str(path),
         "--provider-cmd", command, *options],
        capture_output=True, text=True, check=False, timeout=60,
    )  # fmt: skip


def gone(pid: int, within: float = 5.0) -> bool:
    """True once ``pid`` is no running process (absent, or a zombie awaiting its reaper)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def read_pid(path: Path) -> int:
    deadline = time.monotonic() + 5
    while not path.exists() or not path.read_text().strip():
        assert time.monotonic() < deadline, "the command never wrote its child's pid"
        time.sleep(0.02)
    return int(path.read_text())


def test_yes_as_the_command_is_capped_fails_fast_and_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    started = time.monotonic()
    done = compact(history(tmp_path), "yes", "--out", str(out), "--timeout", "30")
    assert time.monotonic() - started < HANG_GUARD
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and f"more than {MAX_OUTPUT_BYTES:,} bytes" in done.stderr
    assert not out.exists() and done.stdout == ""


def test_the_cap_is_an_option_and_output_under_it_is_the_summary(tmp_path: Path) -> None:
    path = history(tmp_path)
    command = f"{sys.executable} -c \"print('S' * 300)\""
    over = compact(path, command, "--max-output-bytes", "200", "--out", str(tmp_path / "o.json"))
    assert over.returncode == 2 and "more than 200 bytes" in over.stderr
    assert not (tmp_path / "o.json").exists()
    under = compact(path, command, "--max-output-bytes", "400", "--json")
    assert under.returncode == 0, under.stderr
    assert "S" * 300 in json.dumps(json.loads(under.stdout)["messages"])


def test_a_process_left_holding_stdout_does_not_delay_the_summary(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    command = f"sh -c 'setsid sleep 15 & echo $! > {pidfile}; echo SUMMARY'"
    started = time.monotonic()
    try:
        done = compact(history(tmp_path), command, "--json")
        assert time.monotonic() - started < HANG_GUARD
        assert done.returncode == 0, done.stderr
        assert "SUMMARY" in json.dumps(json.loads(done.stdout)["messages"])
    finally:
        if pidfile.exists() and pidfile.read_text().strip():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pidfile.read_text()), 9)


def test_a_timeout_kills_the_command_and_its_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    provider = CommandProvider(f"sleep 30 & echo $! > {pidfile}; wait", timeout=0.5)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"timed out after 0\.5s"):
        provider(PROMPT)
    assert time.monotonic() - started < HANG_GUARD
    assert gone(read_pid(pidfile))


def test_a_timeout_counts_even_when_the_command_closed_its_stdout(tmp_path: Path) -> None:
    provider = CommandProvider("exec >&-; sleep 30", timeout=0.5)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="timed out"):
        provider(PROMPT)
    assert time.monotonic() - started < HANG_GUARD


def test_a_command_that_never_reads_a_large_prompt_still_answers() -> None:
    big = [{"role": "user", "content": "x" * 5_000_000}]
    assert CommandProvider("echo done", timeout=10)(big) == "done"


def test_the_provider_reports_the_cap_apart_from_other_failures() -> None:
    errors: list[str] = []
    provider = CommandProvider("yes", timeout=10, on_error=errors.append, max_output_bytes=1000)
    with pytest.raises(OutputTooLarge):
        provider(PROMPT)
    assert provider.oversized and "more than 1,000 bytes" in errors[-1]
    provider.command = "echo fine"
    assert provider(PROMPT) == "fine" and not provider.oversized


def test_a_failing_command_names_its_status_and_last_stderr_lines() -> None:
    provider = CommandProvider("echo one >&2; echo two >&2; exit 3", timeout=10)
    with pytest.raises(RuntimeError, match="status 3: one / two"):
        provider(PROMPT)
