"""What one recall from the JSONL store costs on a large archive: time and peak memory.

Run ``python benchmarks/bench_recall.py`` (``--mb 200`` by default, ``--json`` for
machine-readable output). A session's archive of about ``--mb`` megabytes is
written in a temporary directory (records of ``--record`` characters, each with
a handle, as micro-compaction archives truncated results), then read back by
handle:

- ``first``: the first recall of a manager opened on the archive (a new
  process resuming a session);
- ``next``: later recalls of the same manager, each of another record
  (median of ``--repeat``);
- ``after append``: a recall right after one more record was appended.

Each is timed with ``time.perf_counter`` (median of ``--repeat`` runs, each on
a new manager for ``first``) and its peak memory is traced with ``tracemalloc``
in a separate run (tracing slows the code it traces). The archive file is in
the page cache after it is written, so the figures are what the code costs,
not the disk.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bareagent_compact import JsonlTranscriptManager

SESSION = "bench"


def record(n: int, size: int) -> dict[str, Any]:
    return {
        "session_id": SESSION,
        "tool_use_id": f"toolu_{n}",
        "tool_name": "bash",
        "content": (f"line {n:08d} of a long tool result\n" * (size // 32 + 1))[:size],
        "handle": f"r-{n:012x}",
    }


def write_archive(directory: Path, megabytes: float, size: int) -> int:
    """Write the archive; how many records it holds."""
    mgr = JsonlTranscriptManager(directory)
    count = max(1, int(megabytes * 1_000_000 // (size + 120)))
    for start in range(0, count, 500):
        mgr.archive_many([record(n, size) for n in range(start, min(count, start + 500))])
    return count


def timed(call: Callable[[], object]) -> float:
    start = time.perf_counter()
    found = call()
    elapsed = time.perf_counter() - start
    if found is None:
        raise AssertionError("the record was not found")
    return elapsed


def peak(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def measure(directory: Path, count: int, size: int, repeat: int) -> dict[str, dict[str, float]]:
    """Median seconds and peak bytes of the three kinds of recall."""
    handles = [f"r-{n:012x}" for n in range(count - 1, 0, -max(1, count // (repeat + 1)))]
    figures: dict[str, dict[str, float]] = {}

    def first(traced: bool) -> float:
        mgr = JsonlTranscriptManager(directory)
        call = lambda: mgr.read_archived(SESSION, handles[0])  # noqa: E731
        return peak(call) if traced else timed(call)

    figures["first"] = {
        "seconds": statistics.median(first(False) for _ in range(repeat)),
        "peak_bytes": first(True),
    }
    mgr = JsonlTranscriptManager(directory)
    mgr.read_archived(SESSION, handles[0])
    times = [timed(lambda h=h: mgr.read_archived(SESSION, h)) for h in handles[1 : repeat + 1]]
    figures["next"] = {
        "seconds": statistics.median(times),
        "peak_bytes": peak(lambda: mgr.read_archived(SESSION, handles[-1])),
    }
    appended: list[float] = []
    for n in range(repeat):
        mgr.archive(record(count + n, size))
        appended.append(timed(lambda n=n: mgr.read_archived(SESSION, f"r-{count + n:012x}")))
    mgr.archive(record(count + repeat, size))
    last = f"r-{count + repeat:012x}"
    figures["after append"] = {
        "seconds": statistics.median(appended),
        "peak_bytes": peak(lambda: mgr.read_archived(SESSION, last)),
    }
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--mb", type=float, default=200.0, help="archive size in MB")
    parser.add_argument("--record", type=int, default=10_000, help="characters per record")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp(prefix="bench-recall-"))
    try:
        count = write_archive(directory, args.mb, args.record)
        size = (directory / f"{SESSION}.archive.jsonl").stat().st_size
        figures = measure(directory, count, args.record, args.repeat)
    finally:
        shutil.rmtree(directory)
    if args.json:
        print(json.dumps({"archive_bytes": size, "records": count, "recalls": figures}))
        return
    print(f"archive: {size / 1e6:.0f} MB, {count:,} records of {args.record:,} characters")
    print(f"{'recall':<14} {'time':>10} {'peak memory':>12}")
    for name, figure in figures.items():
        print(
            f"{name:<14} {figure['seconds'] * 1000:>8.2f} ms {figure['peak_bytes'] / 1e6:>9.2f} MB"
        )


if __name__ == "__main__":
    main()
