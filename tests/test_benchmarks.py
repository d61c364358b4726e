"""The benchmark scripts keep running and keep measuring what they claim to.

No timing is asserted here (machines are shared and noisy); only that each
script runs as a plain ``python benchmarks/...`` and reports the figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


def run_json(script: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / script), "--repeats", "1", "--scales", "1,2", "--json"],
        capture_output=True,
        text=True,
        check=True,
        encoding="utf-8",
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


@pytest.mark.parametrize("script", ["bench_estimate.py", "bench_turn.py"])
def test_benchmark_builds_a_history_at_the_default_threshold(script: str) -> None:
    history = run_json(script)["history"]
    assert isinstance(history, dict)
    assert 50_000 <= history["tokens"] <= 55_000
    assert 60 <= history["messages"] <= 200
    assert history["messages_with_chinese"] > 0


def test_turn_benchmark_reports_ratios_and_memory() -> None:
    results = run_json("bench_turn.py")
    steady = results["steady"]
    assert isinstance(steady, dict)
    assert set(steady["ratios_vs_json_dumps"]) >= {"compactor_call", "estimate_tokens"}
    assert "memory" in results and "scaling" in results


def test_dialect_benchmark_reports_every_dialect_and_sdk_objects() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_dialects.py"), "--repeats", "2"],
        capture_output=True,
        text=True,
        check=True,
        encoding="utf-8",
    )
    for label in ("anthropic", "chat", "responses", "SDK objects"):
        assert label in done.stdout
    assert done.stdout.count("x json.dumps") == 7


def test_async_benchmark_reports_the_event_loop_stall() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_async.py"), "--runs", "1"],
        capture_output=True,
        text=True,
        check=True,
        encoding="utf-8",
    )
    assert done.stdout.count("longest event-loop stall") == 3


def test_background_benchmark_reports_the_call_times_of_both_modes() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_background.py"), "--delay", "0.02",
         "--turns", "60"],
        capture_output=True, text=True, check=True, encoding="utf-8",
    )  # fmt: skip
    assert done.stdout.count(" p99 ") == 2
    assert "background_at=0.8" in done.stdout


def test_archive_benchmark_compares_per_record_and_batched_archives() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_archive.py"), "--tokens", "16000",
         "--runs", "1", "--repeats", "1", "--json"],
        capture_output=True, text=True, check=True, encoding="utf-8",
    )  # fmt: skip
    results = json.loads(done.stdout)
    for session in ("sequential", "parallel"):
        variants = results[session]["variants"]
        assert set(variants) == {
            "none", "jsonl before", "jsonl after", "jsonl behind",
            "sqlite before", "sqlite after", "sqlite behind",
        }  # fmt: skip
        assert results[session]["records"] > 0
        assert "wall_archive_share" in variants["jsonl after"]
        assert "wall_archive_share" in variants["jsonl behind"]
    assert results["resumed"]["records"] > 0
    assert set(results["resumed"]["wall_x"]) == set(results["sequential"]["variants"])


def test_targets_benchmark_reports_every_dialect_mode_and_target(tmp_path: Path) -> None:
    path = tmp_path / "targets.json"
    done = subprocess.run(
        [sys.executable, str(BENCHMARKS / "bench_targets.py"), "--quick", "--json", str(path)],
        capture_output=True, text=True, check=True, encoding="utf-8",
    )  # fmt: skip
    results = json.loads(path.read_text(encoding="utf-8"))
    assert len(results["grid"]) == 3 * 2 * len(results["sizes"])
    assert {key.split("/")[0] for key in results["grid"]} == {"anthropic", "chat", "responses"}
    assert {key.split("/")[1] for key in results["grid"]} == {"spec", "cache-friendly"}
    for row in results["grid"].values():
        for figure in ("steady", "append", "append_usage", "first_raw", "first_settled"):
            assert row[figure] > 0
        assert row["memory"]["held_bytes_with_usage"] > 0
        assert row["memory"]["history_container_bytes"] > 0
    assert len(results["archive"]) == 3 * 2
    for case in results["archive"].values():
        assert case["with_archive"]["turns"] > 10
        assert case["with_archive"]["wall"] > 0 and case["without_archive"]["cpu"] > 0
    for target in ("<= 0.15x", "<= 0.4x", "<= 0.55x", "<= 1.5x", "<= 0.8x", "<= 1x"):
        assert target in done.stdout
