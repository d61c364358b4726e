"""`python -m bareagent_compact demo`: the offline scripted session."""

from __future__ import annotations

import io
import subprocess
import sys

from bareagent_compact.cli import main
from bareagent_compact.cli.demo import run_demo


def test_demo_reaches_micro_and_full_compaction_and_ends_with_a_forced_compact() -> None:
    out = io.StringIO()
    messages = run_demo(out)
    text = out.getvalue()
    rows = [line for line in text.splitlines() if line[:4].strip().isdigit()]
    actions = {row.split()[-2] for row in rows}
    assert {"none", "micro", "full"} <= actions
    assert "/compact (force=True): full" in text
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert messages[1]["content"].startswith("[Context Compressed]\n")


def test_demo_is_deterministic() -> None:
    first, second = io.StringIO(), io.StringIO()
    run_demo(first)
    run_demo(second)
    assert first.getvalue() == second.getvalue()


def test_demo_runs_as_a_module() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bareagent_compact", "demo", "--threshold", "100000"],
        capture_output=True,
        text=True,
        check=True,
        encoding="utf-8",
    )
    assert "threshold 100000" in done.stdout
    rows = [line for line in done.stdout.splitlines() if line[:4].strip().isdigit()]
    assert rows and all(row.split()[-2] in {"none", "micro"} for row in rows)
    assert "/compact (force=True): full" in done.stdout


def test_cli_requires_a_command(capsys: object) -> None:
    try:
        main([])
    except SystemExit as exit_:
        assert exit_.code == 2
    else:  # pragma: no cover - argparse always exits here
        raise AssertionError("expected SystemExit")


def test_demo_table_shows_what_micro_compaction_freed() -> None:
    out = io.StringIO()
    run_demo(out)
    text = out.getvalue()
    header = next(line for line in text.splitlines() if line.startswith("turn "))
    assert header.split()[-3:] == ["freed", "action", "trunc"]
    rows = [line.split() for line in out.getvalue().splitlines() if line[:4].strip().isdigit()]
    micro = [row for row in rows if row[-2] == "micro"]
    assert micro
    for row in micro:
        before, after, freed = int(row[-6]), int(row[-4]), int(row[-3])
        assert before - after == freed  # a micro row: micro-compaction did all of it
    # A result already as short as its marker frees nothing, and the row says so.
    assert any(int(row[-3]) == 0 for row in micro)
    assert all(row[-3] == "-" for row in rows if row[-1] == "0")
