"""How long an ``AsyncCompactor`` full compaction stalls the event loop.

Run ``python benchmarks/bench_async.py``. A heartbeat task wakes every
millisecond and records the longest gap between two wake-ups while a forced
full compaction runs over the benchmark history (``_history.py``), with a
summary provider that sleeps 0.5 s and a plain (synchronous)
``JsonlTranscriptManager``, which ``AsyncCompactor`` runs in a worker thread.
The same is measured for a plain ``async def`` provider. The figure that
matters is the longest stall against the summary time: what the loop could not
do while the compaction ran. Median of several runs.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import statistics
import sys
import tempfile
import time
from typing import Any

import _history
from bareagent_compact import AsyncCompactor, JsonlTranscriptManager

SUMMARY_SECONDS = 0.5


def slow_sync_provider(prompt: list[dict[str, Any]]) -> str:
    time.sleep(SUMMARY_SECONDS)
    return "用户的目标：保持上下文。已完成：基准测试。"


async def slow_async_provider(prompt: list[dict[str, Any]]) -> str:
    await asyncio.sleep(SUMMARY_SECONDS)
    return "用户的目标：保持上下文。已完成：基准测试。"


async def one_run(provider: Any, directory: str) -> tuple[float, float]:
    messages = copy.deepcopy(_history.build_history())
    compactor = AsyncCompactor(provider, JsonlTranscriptManager(directory), session_id="bench")
    longest = 0.0
    done = False

    async def heartbeat() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            longest = max(longest, now - last)
            last = now

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.01)
    start = time.perf_counter()
    result = await compactor(messages, force=True)
    total = time.perf_counter() - start
    done = True
    await beat
    assert result.compacted and result.snapshot_saved, result
    return longest, total


async def idle_run() -> float:
    """The longest heartbeat gap with nothing else running, for reference."""
    longest = 0.0
    last = time.perf_counter()
    end = last + SUMMARY_SECONDS
    while last < end:
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        longest = max(longest, now - last)
        last = now
    return longest


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args(argv).runs
    print(f"Python {sys.version.split()[0]}; summary takes {SUMMARY_SECONDS} s; {runs} runs")
    idle = [asyncio.run(idle_run()) for _ in range(runs)]
    print(f"  {'idle loop (reference)':<32} longest event-loop stall "
          f"{statistics.median(idle) * 1e3:7.2f} ms (max {max(idle) * 1e3:.2f} ms)")
    for label, provider in (("sync provider (worker thread)", slow_sync_provider),
                            ("async def provider", slow_async_provider)):
        stalls, totals = [], []
        with tempfile.TemporaryDirectory() as directory:
            for _ in range(runs):
                stall, total = asyncio.run(one_run(provider, directory))
                stalls.append(stall)
                totals.append(total)
        stall, worst = statistics.median(stalls) * 1e3, max(stalls) * 1e3
        print(
            f"  {label:<32} longest event-loop stall {stall:7.2f} ms (max {worst:.2f} ms) "
            f"during a {statistics.median(totals):.3f} s compaction"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
