"""What an archive costs a turn: record by record against one batch per call.

Run ``python benchmarks/bench_archive.py`` (``--json`` for machine-readable
output). A long session built like the other benchmarks' (see ``_history.py``)
is replayed turn by turn: each turn appends the assistant's tool calls and the
user message with their results, then calls the compactor, as an agent loop
does. The threshold is out of reach, so every turn is micro-compaction only and
the history keeps growing. Two sessions are replayed:

- ``sequential``: one tool call per turn (the history as ``_history`` builds
  it), so a turn truncates one result;
- ``parallel``: the same tool calls, 1 to 4 per turn in one assistant message,
  so a turn truncates as many results as it brings.

Each is replayed with seven compactors side by side, the order rotating every
turn: no archive; the JSONL store and the sqlite store, each once with a hook
that calls ``store.archive`` per record (``before``: what every archive did
until group commit), once with ``archive=store.archive`` (``after``: the
store's ``archive_many`` gets all the records of a call) and once opened with
``write_behind=True`` (``behind``: a writer thread writes the records, and a
later call truncates the results once they are durable). Each turn's call is
timed with thread CPU time and with wall time (``fsync`` waits on the disk,
which thread CPU time does not count), and divided by one ``json.dumps`` of the
same list (median of three). The figures are medians over the turns; the
archive's share of a turn is ``(turn - turn without archive) / turn``, per turn.

The last table is a resumed session: the first call on the whole history,
which truncates every old result at once (with write-behind: hands them all to
the writer, and truncates none yet).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _history
from bareagent_compact import Compactor, JsonlTranscriptManager, SqlTranscriptManager
from bareagent_compact._json import json_copy

Messages = list[dict[str, Any]]
TOKENS = 120_000
"""The session's final size: well past the default threshold, as a long session is."""

VARIANTS = (
    "none",
    "jsonl before",
    "jsonl after",
    "jsonl behind",
    "sqlite before",
    "sqlite after",
    "sqlite behind",
)


def must_not_be_called(prompt: Messages) -> str:
    raise AssertionError("the provider was called: the threshold is out of reach")


def sequential_turns(messages: Messages) -> tuple[Messages, list[Messages]]:
    """The opening messages, and each turn's new messages (up to a user message)."""
    head, turns, turn = messages[:2], [], []
    for message in messages[2:]:
        turn.append(message)
        if message["role"] == "user":
            turns.append(turn)
            turn = []
    return head, turns


def parallel_turns(messages: Messages, seed: int = 7) -> tuple[Messages, list[Messages]]:
    """The same tool rounds merged 1 to 4 at a time into parallel calls."""
    head, turns = sequential_turns(messages)
    rng = random.Random(seed)
    merged: list[Messages] = []
    index = 0
    while index < len(turns):
        group = turns[index : index + rng.randint(1, 4)]
        index += len(group)
        calls: list[dict[str, Any]] = []
        answers: list[Any] = []
        rest: Messages = []
        for turn in group:
            if len(turn) != 2 or not isinstance(turn[1]["content"], list):
                rest += turn  # a plain exchange between the rounds
                continue
            calls += turn[0]["content"]
            answers += turn[1]["content"]
        new = [{"role": "assistant", "content": calls}, {"role": "user", "content": answers}]
        merged.append((new if calls else []) + rest)
    return head, [turn for turn in merged if turn]


class Replay:
    """One compactor and its own copy of the history."""

    def __init__(self, compactor: Compactor, head: Messages) -> None:
        self.compactor = compactor
        self.history = json_copy(head)
        self.records = 0

    def turn(self, new: Messages) -> tuple[float, float, float, float]:
        """CPU and wall seconds of the call, then of one ``json.dumps`` (median of 3)."""
        self.history += json_copy(new)
        cpu, wall = time.thread_time(), time.perf_counter()
        self.records += self.compactor(self.history).truncated
        cpu, wall = time.thread_time() - cpu, time.perf_counter() - wall
        dumps_cpu, dumps_wall = [], []
        for _ in range(3):
            start_cpu, start_wall = time.thread_time(), time.perf_counter()
            json.dumps(self.history, ensure_ascii=False)
            dumps_cpu.append(time.thread_time() - start_cpu)
            dumps_wall.append(time.perf_counter() - start_wall)
        return cpu, wall, statistics.median(dumps_cpu), statistics.median(dumps_wall)


def per_record(store: Any) -> Callable[[dict[str, Any]], None]:
    """A plain hook: the store's ``archive`` called record by record."""

    def hook(record: dict[str, Any]) -> None:
        store.archive(record)

    return hook


def stores(directory: Path) -> Iterator[tuple[str, Any]]:
    for name in ("jsonl", "sqlite"):
        for when in ("before", "after", "behind"):
            where = directory / f"{name}-{when}"
            behind = when == "behind"
            if name == "jsonl":
                yield f"{name} {when}", JsonlTranscriptManager(where, write_behind=behind)
            else:
                yield f"{name} {when}", SqlTranscriptManager(
                    where / "transcripts.db", write_behind=behind
                )


def archive_of(variant: str, store: Any) -> Any:
    return per_record(store) if variant.endswith("before") else store.archive


Sample = tuple[float, float, float, float]


def replay(head: Messages, turns: list[Messages], runs: int) -> dict[str, Any]:
    """Replay the turns ``runs`` times with every variant; the per-turn figures of all
    runs, summarised."""
    samples: dict[str, list[Sample]] = {v: [] for v in VARIANTS}
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            opened = dict(stores(Path(tmp)))
            replays = {"none": Replay(Compactor(must_not_be_called, threshold=10**9), head)}
            for variant, store in opened.items():
                archive = archive_of(variant, store)
                compactor = Compactor(must_not_be_called, threshold=10**9, archive=archive)
                replays[variant] = Replay(compactor, head)
            for index, new in enumerate(turns):
                order = VARIANTS[index % len(VARIANTS) :] + VARIANTS[: index % len(VARIANTS)]
                for variant in order:
                    samples[variant].append(replays[variant].turn(new))
            for variant, store in opened.items():
                if store.write_behind:  # what the last turn handed over, untimed
                    store.flush()
                    replays[variant].records += replays[variant].compactor(
                        replays[variant].history
                    ).truncated
                store.close()
    records = replays["jsonl after"].records
    assert all(r.records == records for r in replays.values())  # the same truncations
    return summarise(samples, records, len(turns), replays["none"].history)


def summarise(
    samples: dict[str, list[Sample]],
    records: int,
    turns: int,
    history: Messages,
) -> dict[str, Any]:
    none = samples["none"]
    result: dict[str, Any] = {
        "turns": turns,
        "final_messages": len(history),
        "final_tokens": _history.estimate_tokens(history),
        "records": records,
        "variants": {},
    }
    for variant, rows in samples.items():
        figures: dict[str, Any] = {}
        for clock, (call, dumps) in (("cpu", (0, 2)), ("wall", (1, 3))):
            ratios = [row[call] / row[dumps] for row in rows]
            figures[f"{clock}_median_x"] = statistics.median(ratios)
            figures[f"{clock}_p90_x"] = statistics.quantiles(ratios, n=10)[-1]
            figures[f"{clock}_median_ms"] = statistics.median(row[call] for row in rows) * 1e3
            if variant != "none":
                share = [
                    max(0.0, row[call] - base[call]) / row[call]
                    for row, base in zip(rows, none, strict=True)
                ]
                figures[f"{clock}_archive_share"] = statistics.median(share)
        figures["total_wall_ms"] = sum(row[1] for row in rows) * 1e3
        result["variants"][variant] = figures
    result["json_dumps_median_ms"] = statistics.median(row[3] for row in none) * 1e3
    return result


def resumed(messages: Messages, repeats: int) -> dict[str, Any]:
    """The first call on the whole history, which archives every old result at once."""
    times: dict[str, list[float]] = {v: [] for v in VARIANTS}
    dumps: list[float] = []
    truncated = 0
    for _ in range(repeats):
        with tempfile.TemporaryDirectory() as tmp:
            opened = dict(stores(Path(tmp)))
            for variant in VARIANTS:
                store = opened.get(variant)
                archive = None if store is None else archive_of(variant, store)
                compactor = Compactor(must_not_be_called, threshold=10**9, archive=archive)
                history = json_copy(messages)
                start = time.perf_counter()
                done = compactor(history).truncated
                times[variant].append(time.perf_counter() - start)
                if variant == "jsonl after":
                    truncated = done
            for store in opened.values():
                store.close()
        start = time.perf_counter()
        json.dumps(messages, ensure_ascii=False)
        dumps.append(time.perf_counter() - start)
    base = statistics.median(dumps)
    return {
        "records": truncated,
        "wall_ms": {v: statistics.median(t) * 1e3 for v, t in times.items()},
        "wall_x": {v: statistics.median(t) / base for v, t in times.items()},
    }


def run(tokens: int, repeats: int, runs: int) -> dict[str, Any]:
    messages = _history.build_history(tokens)
    results: dict[str, Any] = {"history": _history.describe(messages)}
    for name, split in (("sequential", sequential_turns), ("parallel", parallel_turns)):
        head, turns = split(messages)
        results[name] = replay(head, turns, runs)
    results["resumed"] = resumed(messages, repeats)
    return results


def print_report(results: dict[str, Any]) -> None:
    history = results["history"]
    print(
        f"Session: {history['messages']} messages, {history['tokens']:,} tokens at the end "
        f"(Python {history['python']}); ratios to json.dumps of the same list"
    )
    for name in ("sequential", "parallel"):
        session = results[name]
        print(
            f"\n{name}: {session['turns']} turns, {session['records']} records archived "
            f"per replay; json.dumps median {session['json_dumps_median_ms']:.3f} ms"
        )
        print(
            f"  {'':<15} {'CPU median':>10} {'CPU p90':>8} {'wall median':>11} {'wall p90':>9}"
            f" {'wall ms':>8} {'archive share (CPU / wall)':>27} {'total wall ms':>13}"
        )
        for variant, f in session["variants"].items():
            share = (
                f"{f['cpu_archive_share']:.0%} / {f['wall_archive_share']:.0%}"
                if "cpu_archive_share" in f
                else ""
            )
            print(
                f"  {variant:<15} {f['cpu_median_x']:9.2f}x {f['cpu_p90_x']:7.2f}x"
                f" {f['wall_median_x']:10.2f}x {f['wall_p90_x']:8.2f}x"
                f" {f['wall_median_ms']:8.2f} {share:>27} {f['total_wall_ms']:13.0f}"
            )
    resumed_ = results["resumed"]
    print(f"\nresumed: the first call truncates {resumed_['records']} results (wall, median)")
    for variant in VARIANTS:
        print(
            f"  {variant:<15} {resumed_['wall_ms'][variant]:9.2f} ms"
            f" {resumed_['wall_x'][variant]:9.2f}x"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--tokens", type=int, default=TOKENS, help="the session's final size")
    parser.add_argument("--runs", type=int, default=3, help="replays of each session")
    parser.add_argument("--repeats", type=int, default=5, help="runs of the resumed call")
    args = parser.parse_args(argv)
    results = run(args.tokens, args.repeats, args.runs)
    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
    else:
        print_report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
