"""The per-turn cost targets: every dialect, both micro modes, several history sizes.

Run ``python benchmarks/bench_targets.py`` (``--full`` for the whole grid,
``--json PATH`` to write every figure, ``--sizes 200,1000,5000``, ``--reps N``,
``--quick`` for a run of a few seconds). Standard library only; it uses the
public API of ``bareagent_compact`` (plus ``Compactor.forget()``), so it keeps
measuring the same things when the internals change.

The histories. One Anthropic-form agent session from ``_history.py`` (tool
results made of standard-library source and shell output, 0.3-6 KB each, a
third of the messages with Chinese text), grown long enough for every size;
the OpenAI Chat and Responses forms are made from it by the converters of the
dialect property tests (``tests/converters.py``). For a size ``n`` each form is
cut to the longest prefix of at most ``n`` messages (items, for Responses)
that ends with a complete turn; the turns after the cut are what an append
turn adds (an assistant message with its tool call, and the tool result: 2-3
messages in the dialect's form).

Every compactor has a provider that raises if called, and a threshold of twice
the estimate of the whole session after the default micro-compaction (at least
50,000): no full compaction fires, and micro-compaction still truncates the
result that ages out of ``keep_recent`` (default mode) or clears in batches
(``micro="cache-friendly"``), as it would in a real session. A call that
fires a full compaction stops the benchmark.

Timing is thread CPU time (``time.thread_time_ns``), the compactor and
``json.dumps(messages, ensure_ascii=False)`` of the same list interleaved in
the same loop; a figure is the median over repetitions of the ratio within each
repetition.

- **steady turn**: ``compactor(messages)`` again on an unchanged history, after
  a settling call (which truncates the old results) and one more call;
- **append turn**: the next turn of the session appended (outside the timing),
  then the call; the reference is ``json.dumps`` of the list after the call
  (what is sent). *With ``record_usage``*: after each call,
  ``record_usage(messages, usage)`` with ``usage`` = the estimate + 1,500
  (tools and system overhead, computed outside the timing); the figure is the
  call plus ``record_usage``;
- **first call**: a new compactor (built outside the timing) on the raw history
  (it truncates every old result; reference: ``json.dumps`` of the raw list),
  on a history another compactor settled (reference: that list), and on the
  settled history right after ``compactor.forget()``;
- **cache memory**: what the compactor holds once settled in an agent loop
  (the settling call, ``record_usage`` as after a model call, one more call:
  the usage ledger only fills once a usage is reported), as a ratio to the
  history's own containers; the grid also gives it without ``record_usage``.
  Method: a walk with ``gc.get_referents`` from the compactor (not entering
  classes, modules, functions, code or loggers) when built and again at the
  end (the objects of the first walk are kept alive, so their ids stay
  unique); the objects new in the second walk that are not reachable from the
  history itself (any object, strings included, so shared leaves do not count)
  are summed with ``sys.getsizeof``. The history's own objects are the dicts,
  lists and tuples reachable from the message list (``sys.getsizeof`` each;
  the strings, which any cache may share, are left out). A cross-check:
  ``tracemalloc``'s bytes still allocated after the same three calls of a new
  compactor on an already settled history (calls that change nothing in it,
  so all that stays is the compactor's);
- **turn with an archive**: a long session replayed turn by turn (append the
  next turn, call) with ``archive=store.archive`` of a
  ``JsonlTranscriptManager`` in a temporary directory (each record written and
  fsync-ed), against ``json.dumps`` after each turn; the median turn, in thread
  CPU time and in wall time (``time.perf_counter_ns``, which sees the fsync),
  again with ``JsonlTranscriptManager(directory, write_behind=True)`` (the
  records written and fsync-ed by a writer thread, each result truncated once
  its record is durable), and the same replay without an archive for comparison.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import logging
import math
import statistics
import sys
import tempfile
import time
import tracemalloc
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _history
from bareagent_compact import Action, Compactor, JsonlTranscriptManager, estimate_tokens

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from converters import to_chat, to_responses

Messages = list[dict[str, Any]]

MODES = ("spec", "cache-friendly")
DIALECTS: dict[str, Callable[[Messages], Messages]] = {
    "anthropic": lambda history: history,
    "chat": to_chat,
    "responses": to_responses,
}
USAGE_OVERHEAD = 1_500
"""Tokens a reported usage adds to the estimate (tools, system, framing)."""

TARGETS = {
    "steady": ("steady turn, every dialect and mode", "<= 0.15x", 0.15),
    "append": ("append turn (1-3 new messages), without record_usage", "<= 0.4x", 0.4),
    "append_usage": ("append turn, with record_usage", "<= 0.55x", 0.55),
    "first_raw": ("first call on a new compactor, raw history", "<= 1.5x", 1.5),
    "first_settled": ("first call on a new compactor, settled history", "<= 1.5x", 1.5),
    "memory": ("cache memory (after record_usage) / the history's own objects", "<= 0.8x", 0.8),
    "archive_cpu": ("turn with an archive, median, thread CPU", "<= 1x", 1.0),
    "archive_wall": ("turn with an archive, median, wall", "<= 1x", 1.0),
    "behind_cpu": ("turn with a write-behind archive, median, thread CPU", "<= 1x", 1.0),
    "behind_wall": ("turn with a write-behind archive, median, wall", "<= 1x", 1.0),
}


class ProviderCalledError(RuntimeError):
    """A full compaction fired: the benchmark's threshold is too low."""


def never_called(prompt: Messages) -> str:
    raise ProviderCalledError("the summary provider was called: a full compaction fired")


def copied(messages: Messages) -> Messages:
    result: Messages = json.loads(json.dumps(messages, ensure_ascii=False))
    return result


def dumps(messages: Messages) -> str:
    return json.dumps(messages, ensure_ascii=False)


def checked(result: Any) -> None:
    """Stop when a call did more than micro-compaction."""
    if result.action not in (Action.NONE, Action.MICRO):
        raise ProviderCalledError(f"a call ended with {result.action}: the threshold is too low")


def thread_ns(func: Callable[[], object], loops: int = 1) -> int:
    start = time.thread_time_ns()
    for _ in range(loops):
        func()
    return max(1, time.thread_time_ns() - start)


def timed_call(compactor: Compactor, messages: Messages) -> int:
    """The thread CPU time of one call on ``messages``, its result checked."""
    start = time.thread_time_ns()
    result = compactor(messages)
    spent = time.thread_time_ns() - start
    checked(result)
    return spent


def loops_for(func: Callable[[], object], min_ns: int) -> int:
    """How many calls of ``func`` take at least ``min_ns`` of thread CPU time."""
    loops = 1
    while thread_ns(func, loops) < min_ns and loops < 1 << 16:
        loops *= 2
    return loops


# ---------------------------------------------------------------- the histories


def boundaries(history: Messages) -> list[int]:
    """Indices where a turn starts (an assistant message after a user message)."""
    return [
        index
        for index in range(1, len(history))
        if history[index]["role"] == "assistant" and history[index - 1]["role"] == "user"
    ]


def session(messages: int, reserve: int) -> Messages:
    """An Anthropic-form session with at least ``messages + reserve`` messages."""
    target = (messages + reserve) * 700
    while True:
        history = _history.build_history(target_tokens=target)
        if len(history) >= messages + reserve:
            return history
        target *= 2


class Form:
    """One dialect's form of the session: its prefix of ``n`` messages and the turns after."""

    def __init__(self, history: Messages, convert: Callable[[Messages], Messages]) -> None:
        edges = [0, *boundaries(history), len(history)]
        self.turns = [convert(history[a:b]) for a, b in itertools.pairwise(edges)]
        # turns[0] is the opening (system prompt, first request); turns[i] the i-th turn.

    def prefix_turns(self, size: int) -> int:
        """How many turns (the opening included) fit in ``size`` messages."""
        total = count = 0
        for turn in self.turns:
            if total + len(turn) > size:
                break
            total += len(turn)
            count += 1
        return max(count, 2)

    def history(self, turns: int) -> Messages:
        return [message for turn in self.turns[:turns] for message in turn]


def threshold_for(history: Messages) -> int:
    """Twice the most the history holds after micro-compaction in either mode (the
    cache preset made to truncate all it may), at least 50,000."""
    floor = 0
    for options in ({}, {"micro": "cache-friendly", "clear_at_least": 0}):
        probe = Compactor(never_called, threshold=10**12, **options)  # type: ignore[arg-type]
        settled = copied(history)
        checked(probe(settled))
        floor = max(floor, estimate_tokens(settled))
    return max(50_000, 2 * floor)


# -------------------------------------------------------------- the measurements


def settle(history: Messages, threshold: int, mode: str) -> tuple[Compactor, Messages]:
    compactor = Compactor(never_called, threshold=threshold, micro=mode)
    messages = copied(history)
    checked(compactor(messages))
    checked(compactor(messages))
    return compactor, messages


def steady_ratio(compactor: Compactor, messages: Messages, reps: int, min_ns: int) -> float:
    call_loops = loops_for(lambda: compactor(messages), min_ns)
    dump_loops = loops_for(lambda: dumps(messages), min_ns)
    ratios = []
    for _ in range(reps):
        call = thread_ns(lambda: compactor(messages), call_loops) / call_loops
        dump = thread_ns(lambda: dumps(messages), dump_loops) / dump_loops
        ratios.append(call / dump)
    return statistics.median(ratios)


def append_ratios(
    compactor: Compactor, messages: Messages, turns: list[Messages], usage: bool, min_ns: int
) -> float:
    """Median over ``turns`` of (call [+ record_usage]) / json.dumps after each append."""
    dump_loops = loops_for(lambda: dumps(messages), min_ns)
    if usage:
        report_usage(compactor, messages)  # a session under way has reported before
    ratios = []
    for turn in turns:
        messages.extend(copied(turn))
        spent = timed_call(compactor, messages)
        if usage:
            tokens = estimate_tokens(messages) + USAGE_OVERHEAD
            start = time.thread_time_ns()
            compactor.record_usage(messages, tokens)
            spent += time.thread_time_ns() - start
        dump = thread_ns(lambda: dumps(messages), dump_loops) / dump_loops
        ratios.append(max(1, spent) / dump)
    return statistics.median(ratios)


def first_ratio(history: Messages, threshold: int, mode: str, reps: int) -> float:
    """A new compactor's first call on a copy of ``history`` / json.dumps of ``history``."""
    ratios = []
    for _ in range(reps):
        compactor = Compactor(never_called, threshold=threshold, micro=mode)
        messages = copied(history)
        spent = timed_call(compactor, messages)
        ratios.append(spent / thread_ns(lambda: dumps(history)))
    return statistics.median(ratios)


def forget_ratio(compactor: Compactor, messages: Messages, reps: int) -> float:
    """The call right after ``compactor.forget()``, on the settled history."""
    ratios = []
    for _ in range(reps):
        compactor.forget()
        spent = timed_call(compactor, messages)
        ratios.append(spent / thread_ns(lambda: dumps(messages)))
    return statistics.median(ratios)


# ------------------------------------------------------------------ the memory

_OPAQUE = (
    type,
    types.ModuleType,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.CodeType,
    types.FrameType,
    types.MethodDescriptorType,
    types.WrapperDescriptorType,
    logging.Logger,
)


def reachable(root: object, enter_opaque: bool = False) -> dict[int, object]:
    """Every object reachable from ``root`` by ``gc.get_referents``, by id; classes,
    modules, functions, code and loggers are neither counted nor entered."""
    seen: dict[int, object] = {}
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or (isinstance(item, _OPAQUE) and not enter_opaque):
            continue
        seen[id(item)] = item
        stack.extend(gc.get_referents(item))
    return seen


def container_bytes(messages: Messages) -> int:
    """``sys.getsizeof`` of the dicts, lists and tuples reachable from the history."""
    return sum(
        sys.getsizeof(item)
        for item in reachable(messages).values()
        if isinstance(item, dict | list | tuple)
    )


def report_usage(compactor: Compactor, messages: Messages) -> None:
    """What an agent does after its model call: report the request's input size."""
    compactor.record_usage(messages, estimate_tokens(messages) + USAGE_OVERHEAD)


def walked_bytes(history: Messages, threshold: int, mode: str, usage: bool) -> tuple[int, int]:
    """Bytes a compactor holds after settling ``history`` (and a reported usage and
    one more call when ``usage``), and the bytes of the history's own containers."""
    compactor = Compactor(never_called, threshold=threshold, micro=mode)
    messages = copied(history)
    before = reachable(compactor)  # kept alive until the end: its ids stay unique
    checked(compactor(messages))
    if usage:
        report_usage(compactor, messages)
    checked(compactor(messages))
    known = before.keys() | reachable(messages).keys()
    held = sum(sys.getsizeof(o) for key, o in reachable(compactor).items() if key not in known)
    return held, container_bytes(messages)


def traced_bytes(settled: Messages, threshold: int, mode: str) -> int:
    """``tracemalloc``'s bytes still held after a new compactor's calls on a settled
    history (call, reported usage, call), which change nothing in it."""
    compactor = Compactor(never_called, threshold=threshold, micro=mode)
    gc.collect()
    tracemalloc.start()
    try:
        checked(compactor(settled))
        report_usage(compactor, settled)
        checked(compactor(settled))
        gc.collect()
        return tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()


def held_bytes(history: Messages, threshold: int, mode: str) -> dict[str, float]:
    """What a compactor holds after settling, with and without a reported usage."""
    held, own = walked_bytes(history, threshold, mode, usage=False)
    held_usage, _ = walked_bytes(history, threshold, mode, usage=True)
    settled = settle(history, threshold, mode)[1]
    traced = traced_bytes(settled, threshold, mode)
    return {
        "history_container_bytes": own,
        "held_bytes": held,
        "ratio": held / own,
        "held_bytes_with_usage": held_usage,
        "ratio_with_usage": held_usage / own,
        "tracemalloc_retained_bytes_with_usage": traced,
        "tracemalloc_ratio_with_usage": traced / own,
    }


# ------------------------------------------------------------- the archive turn


def replay(form: Form, turns: int, threshold: int, mode: str, archive: Any) -> dict[str, float]:
    """Median turn of a session replayed from its start, thread CPU and wall."""
    compactor = Compactor(never_called, threshold=threshold, micro=mode, archive=archive)
    messages: Messages = []
    cpu: list[float] = []
    wall: list[float] = []
    for turn in form.turns[:turns]:
        messages += copied(turn)
        start_cpu, start_wall = time.thread_time_ns(), time.perf_counter_ns()
        result = compactor(messages)
        call_cpu = time.thread_time_ns() - start_cpu
        call_wall = time.perf_counter_ns() - start_wall
        checked(result)
        start_cpu, start_wall = time.thread_time_ns(), time.perf_counter_ns()
        dumps(messages)
        dump_cpu = max(1, time.thread_time_ns() - start_cpu)
        dump_wall = max(1, time.perf_counter_ns() - start_wall)
        cpu.append(call_cpu / dump_cpu)
        wall.append(call_wall / dump_wall)
    return {
        "cpu": statistics.median(cpu),
        "wall": statistics.median(wall),
        "wall_p90": statistics.quantiles(wall, n=10)[-1],
        "wall_max": max(wall),
        "turns": len(cpu),
        "messages": len(messages),
    }


def archive_case(form: Form, size: int, mode: str) -> dict[str, Any]:
    turns = form.prefix_turns(size)
    threshold = threshold_for(form.history(turns))
    with tempfile.TemporaryDirectory(prefix="bench-targets-") as directory:
        store = JsonlTranscriptManager(directory)
        archived = replay(form, turns, threshold, mode, store.archive)
        records = sum(
            path.read_text(encoding="utf-8").count("\n")
            for path in Path(directory).glob("*.archive.jsonl")
        )
    with tempfile.TemporaryDirectory(prefix="bench-targets-") as directory:
        behind_store = JsonlTranscriptManager(directory, write_behind=True)
        try:
            behind = replay(form, turns, threshold, mode, behind_store.archive)
        finally:
            behind_store.close()
    plain = replay(form, turns, threshold, mode, None)
    return {
        "with_archive": archived,
        "write_behind": behind,
        "without_archive": plain,
        "archive_records": records,
    }


# ----------------------------------------------------------------- the grid


def measure_case(form: Form, size: int, mode: str, options: argparse.Namespace) -> dict[str, Any]:
    turns = form.prefix_turns(size)
    raw = form.history(turns)
    extra = form.turns[turns : turns + options.reps]
    threshold = threshold_for(form.history(turns + len(extra)))
    compactor, messages = settle(raw, threshold, mode)
    row: dict[str, Any] = {
        "messages": len(raw),
        "threshold": threshold,
        "json_chars_raw": len(dumps(raw)),
        "json_chars_settled": len(dumps(messages)),
        "steady": steady_ratio(compactor, messages, options.reps, options.min_ns),
        "first_settled": first_ratio(messages, threshold, mode, options.first_reps),
        "first_forget": forget_ratio(compactor, messages, options.first_reps),
        "first_raw": first_ratio(raw, threshold, mode, options.first_reps),
    }
    row["append"] = append_ratios(compactor, messages, extra, False, options.min_ns)
    compactor, messages = settle(raw, threshold, mode)
    row["append_usage"] = append_ratios(compactor, messages, extra, True, options.min_ns)
    row["appended_messages"] = [len(turn) for turn in extra]
    row["memory"] = held_bytes(raw, threshold, mode)
    return row


def cases(options: argparse.Namespace) -> Iterator[tuple[str, str, int]]:
    for name in DIALECTS:
        for mode in MODES:
            for size in options.sizes:
                yield name, mode, size


def run(options: argparse.Namespace) -> dict[str, Any]:
    reserve = options.reps * 3 + 20
    history = session(max([*options.sizes, options.archive_messages]), reserve)
    forms = {name: Form(history, convert) for name, convert in DIALECTS.items()}
    grid: dict[str, Any] = {}
    for name, mode, size in cases(options):
        grid[f"{name}/{mode}/{size}"] = measure_case(forms[name], size, mode, options)
    archive = {
        f"{name}/{mode}": archive_case(forms[name], options.archive_messages, mode)
        for name in DIALECTS
        for mode in MODES
    }
    return {
        "python": sys.version.split()[0],
        "sizes": options.sizes,
        "reps": options.reps,
        "first_reps": options.first_reps,
        "archive_messages": options.archive_messages,
        "grid": grid,
        "archive": archive,
    }


# ---------------------------------------------------------------- the report


def figures(results: dict[str, Any]) -> dict[str, list[float]]:
    """Every measured value of each target row."""
    grid = results["grid"].values()
    out: dict[str, list[float]] = {
        key: [row[key] for row in grid]
        for key in ("steady", "append", "append_usage", "first_raw", "first_settled")
    }
    out["memory"] = [row["memory"]["ratio_with_usage"] for row in grid]
    archive = results["archive"].values()
    out["archive_cpu"] = [case["with_archive"]["cpu"] for case in archive]
    out["archive_wall"] = [case["with_archive"]["wall"] for case in archive]
    out["behind_cpu"] = [case["write_behind"]["cpu"] for case in archive]
    out["behind_wall"] = [case["write_behind"]["wall"] for case in archive]
    return out


def span(values: list[float]) -> str:
    return f"{min(values):.2f}-{max(values):.2f}x"


def summary_table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| | measured (min-max) | target | met |",
        "|---|---|---|---|",
    ]
    for key, values in figures(results).items():
        label, target, limit = TARGETS[key]
        met = "yes" if max(values) <= limit else "no"
        lines.append(f"| {label} | {span(values)} | {target} | {met} |")
    return lines


def full_grid(results: dict[str, Any]) -> list[str]:
    lines = [
        "| dialect / mode / n | msgs | steady | append | +usage | first raw | first settled "
        "| after forget() | memory | +usage | tracemalloc +usage |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, row in results["grid"].items():
        memory = row["memory"]
        lines.append(
            f"| {key} | {row['messages']} | {row['steady']:.2f} | {row['append']:.2f} "
            f"| {row['append_usage']:.2f} | {row['first_raw']:.2f} | {row['first_settled']:.2f} "
            f"| {row['first_forget']:.2f} | {memory['ratio']:.2f} "
            f"| {memory['ratio_with_usage']:.2f} | {memory['tracemalloc_ratio_with_usage']:.2f} |"
        )
    lines += [
        "",
        "| archive replay: dialect / mode | turns | records | CPU | wall | wall p90 | wall max "
        "| write-behind: CPU | wall | no archive: CPU | wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, case in results["archive"].items():
        arch, behind, plain = case["with_archive"], case["write_behind"], case["without_archive"]
        lines.append(
            f"| {key} | {arch['turns']} | {case['archive_records']} | {arch['cpu']:.2f} "
            f"| {arch['wall']:.2f} | {arch['wall_p90']:.2f} | {arch['wall_max']:.1f} "
            f"| {behind['cpu']:.2f} | {behind['wall']:.2f} "
            f"| {plain['cpu']:.2f} | {plain['wall']:.2f} |"
        )
    return lines


def print_report(results: dict[str, Any], full: bool, seconds: float) -> None:
    sizes = ", ".join(str(size) for size in results["sizes"])
    print(
        f"Python {results['python']}; ratios to json.dumps(messages, ensure_ascii=False) of the "
        f"same list, thread CPU time, interleaved; dialects {', '.join(DIALECTS)}; modes "
        f"{', '.join(MODES)}; n = {sizes}; {results['reps']} reps; archive session "
        f"{results['archive_messages']} messages; {seconds:.0f} s"
    )
    print("\n".join(summary_table(results)))
    if full:
        print()
        print("\n".join(full_grid(results)))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="200,1000,5000", help="history sizes in messages")
    parser.add_argument("--reps", type=int, default=15, help="repetitions per figure (median)")
    parser.add_argument("--archive-messages", type=int, default=1000, help="archive session")
    parser.add_argument("--full", action="store_true", help="print the whole grid as well")
    parser.add_argument("--json", metavar="PATH", help="write every figure to PATH")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, few repetitions")
    options = parser.parse_args(argv)
    if options.quick:
        options.sizes, options.reps, options.archive_messages = "40,80", 3, 60
    options.sizes = [int(size) for size in str(options.sizes).split(",")]
    options.first_reps = max(3, math.ceil(options.reps / 3))
    options.min_ns = 200_000 if options.quick else 2_000_000
    return options


def main(argv: list[str] | None = None) -> int:
    options = parse(argv)
    started = time.perf_counter()
    results = run(options)
    seconds = time.perf_counter() - started
    results["seconds"] = seconds
    if options.json:
        Path(options.json).write_text(json.dumps(results, indent=1), encoding="utf-8")
    print_report(results, options.full, seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
