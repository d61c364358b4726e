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
