"""How long the agent waits for ``await compactor(messages)``: today against
``background_at``.

Run ``python benchmarks/bench_background.py`` (about four minutes;
``--delay 0.2`` for a quick run). A scripted 200-turn agent session: each turn
the compactor is called, then the "model" answers (``--turn`` seconds, a
quarter of the summary time by default) with a text and a tool call whose
result (about 4,000 characters) is appended. The summariser is an ``async def``
that takes ``--delay`` seconds (2 s). The threshold is set so that a full
compaction fires about ten times in the session. The same session runs with
the compactor as it is by default (the call that crosses the threshold waits
for the summary) and with ``background_at`` (the summary starts in a task at
that share of the threshold and a later call swaps it in). Each call is timed
with ``time.perf_counter``; the figures are the p50, p99 and max of the 200
calls.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any

from bareagent_compact import Action, AsyncCompactor

THRESHOLD = 10000
"""Estimated tokens; with the session below, about ten full compactions in 200 turns."""


def tool_output(turn: int, size: int = 4000) -> str:
    """Deterministic shell-like output of about ``size`` characters."""
    lines = []
    total = 0
    n = 0
    while total < size:
        digest = hashlib.sha256(f"{turn}:{n}".encode()).hexdigest()[:16]
        line = f"2026-11-30T03:{n % 60:02d}:00Z worker-{n % 7} WARN request {digest} slow"
        lines.append(line)
        total += len(line) + 1
        n += 1
    return "\n".join(lines)


def model_turn(turn: int) -> list[dict[str, Any]]:
    """What one model answer and its tool result add to the history."""
    text = f"Step {turn}: the logs point at worker {turn % 7}; checking the next batch. " * 24
    call = {"type": "tool_use", "id": f"toolu_{turn}", "name": "bash",
            "input": {"command": f"grep -rn slow logs/{turn}.log"}}  # fmt: skip
    return [
        {"role": "assistant", "content": [{"type": "text", "text": text}, call]},
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"toolu_{turn}",
                 "content": tool_output(turn, 2000)}
            ],
        },
    ]  # fmt: skip


@dataclass
class Session:
    """The timings of one session's compactor calls."""

    calls: list[float] = field(default_factory=list)
    full: int = 0
    seconds: float = 0.0

    def line(self, label: str) -> str:
        ordered = sorted(self.calls)
        p50 = statistics.median(ordered)
        p99 = statistics.quantiles(ordered, n=100, method="inclusive")[98]
        return (
            f"  {label:<26} p50 {p50 * 1e3:8.2f} ms   p99 {p99 * 1e3:8.1f} ms   "
            f"max {ordered[-1] * 1e3:8.1f} ms   full={self.full}   session {self.seconds:6.1f} s"
        )


async def session(turns: int, delay: float, turn_time: float, background_at: float | None
                  ) -> Session:  # fmt: skip
    async def summarise(prompt: list[dict[str, Any]]) -> str:
        await asyncio.sleep(delay)
        return "Goal: find the slow requests. Done: read the worker logs. Next: the batch."

    compactor = AsyncCompactor(summarise, threshold=THRESHOLD, background_at=background_at,
                               language="en")  # fmt: skip
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are an operations agent."},
        {"role": "user", "content": "Workers time out at night. Find out why."},
    ]
    timings = Session()
    began = time.perf_counter()
    for turn in range(turns):
        start = time.perf_counter()
        result = await compactor(messages)
        timings.calls.append(time.perf_counter() - start)
        timings.full += result.action is Action.FULL
        await asyncio.sleep(turn_time)  # the model request and the tool
        messages += model_turn(turn)
    await compactor.aclose()
    timings.seconds = time.perf_counter() - began
    return timings


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delay", type=float, default=2.0, help="summary time, s (2)")
    parser.add_argument("--turn", type=float, default=None,
                        help="model time per turn, s (default: delay / 4)")  # fmt: skip
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--background-at", type=float, default=0.8)
    args = parser.parse_args(argv)
    turn_time = args.delay / 4 if args.turn is None else args.turn
    print(
        f"Python {sys.version.split()[0]}; {args.turns} turns, threshold {THRESHOLD}, summary "
        f"{args.delay} s, model {turn_time} s per turn; time of each compactor call"
    )
    today = asyncio.run(session(args.turns, args.delay, turn_time, None))
    print(today.line("today (waits at threshold)"))
    label = f"background_at={args.background_at}"
    background = asyncio.run(session(args.turns, args.delay, turn_time, args.background_at))
    print(background.line(label))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
