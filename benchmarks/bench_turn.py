"""What ``compactor(messages)`` costs at the start of every agent turn.

Run ``python benchmarks/bench_turn.py`` (add ``--json`` for machine-readable
output). The history is the one of ``bench_estimate.py`` (see ``_history.py``).
A :class:`Compactor` with the default threshold (50,000) and a provider that
must not be called runs once, which truncates the old tool results; the calls
after that are the steady state every turn pays, and are compared with one
``json.dumps`` of the same list. Every time is the median of several runs.

Figures printed:
- the steady-state call against ``json.dumps``, and its parts (validation,
  micro-compaction's scan, the estimate);
- the same for a long session whose steady state sits just under the threshold;
- a turn that brings one new tool result (micro-compaction truncates one);
- the first call, which truncates every old result, and ``_serialize``;
- how the steady-state call grows with the history (1x, 2x, 4x, 8x);
- ``tracemalloc`` peaks of a no-op call and of a full compaction.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import tracemalloc
from typing import Any

import _history
from bareagent_compact import DEFAULT_KEEP_RECENT, Compactor
from bareagent_compact._json import json_copy
from bareagent_compact.micro import micro_compact
from bareagent_compact.result import Action
from bareagent_compact.serialize import _serialize
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.validate import validate_messages

THRESHOLD = 50_000
Messages = list[dict[str, Any]]


def must_not_be_called(prompt: Messages) -> str:
    raise AssertionError("the provider was called on a turn below the threshold")


def trivial_provider(prompt: Messages) -> str:
    return "用户的目标：让上下文保持在窗口之内。已完成：基准测试。下一步：继续。"


def settled(messages: Messages) -> tuple[Compactor, Messages]:
    """A compactor and a copy of ``messages`` after the first call truncated old results."""
    compactor = Compactor(must_not_be_called, threshold=THRESHOLD)
    history = json_copy(messages)
    first = compactor(history)
    assert first.action in (Action.MICRO, Action.NONE), first
    assert compactor(history).action is Action.NONE
    return compactor, history


def new_turn(index: int) -> Messages:
    """One more assistant tool call and its result, as a real turn appends them."""
    tool_id = f"toolu_new_{index:04d}"
    return [
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me run the tests again."},
                {"type": "tool_use", "id": tool_id, "name": "bash", "input": {"command": "pytest"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": "." * 400 + "\n1 passed"}
            ],
        },
    ]


def near_threshold_history(messages: Messages) -> Messages:
    """A long session (``messages``' turns, repeated) whose steady state sits just
    under the threshold: the longest such prefix ending with a user message."""
    long = _history.scaled_history(messages, 16)

    def steady_tokens(end: int) -> int:
        prefix: Messages = json_copy(long[:end])
        micro_compact(prefix, DEFAULT_KEEP_RECENT)
        return estimate_tokens(prefix)

    low, high = 2, len(long)
    while low < high:
        middle = (low + high + 1) // 2
        if steady_tokens(middle) < THRESHOLD * 0.95:
            low = middle
        else:
            high = middle - 1
    while low and long[low - 1]["role"] != "user":
        low -= 1
    return long[:low]


def steady_parts(compactor: Compactor, history: Messages, repeats: int) -> _history.Timings:
    keep = compactor.keep_recent
    return _history.compare(
        {
            "compactor_call": lambda: compactor(history),
            "json_dumps": lambda: json.dumps(history, ensure_ascii=False),
            "validate_messages": lambda: validate_messages(history),
            "micro_compact_scan": lambda: micro_compact(history, keep),
            "estimate_tokens": lambda: estimate_tokens(history),
        },
        repeats,
    )


def steady_report(history: Messages, parts: _history.Timings) -> dict[str, Any]:
    return {
        "messages": len(history),
        "tokens": estimate_tokens(history),
        "json_chars": len(json.dumps(history, ensure_ascii=False)),
        "seconds": parts.seconds,
        "ratios_vs_json_dumps": {name: parts.ratio(name, "json_dumps") for name in parts.seconds},
    }


def timed_once(
    setup: Any, action: Any, repeats: int, reference: Any = None
) -> tuple[float, float | None]:
    """Median time of ``action(setup())``, each run on a fresh state, and the
    median ratio to one call of ``reference()`` timed in the same run."""
    samples: list[float] = []
    ratios: list[float] = []
    for _ in range(repeats):
        state = setup()
        start = time.perf_counter()
        action(state)
        samples.append(time.perf_counter() - start)
        if reference is not None:
            start = time.perf_counter()
            reference()
            ratios.append(samples[-1] / (time.perf_counter() - start))
    return statistics.median(samples), statistics.median(ratios) if ratios else None


def peak_bytes(action: Any) -> int:
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        action()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def run(repeats: int, scales: list[int]) -> dict[str, Any]:
    messages = _history.build_history()
    results: dict[str, Any] = {"history": _history.describe(messages), "repeats": repeats}

    compactor, history = settled(messages)
    parts = steady_parts(compactor, history, repeats)
    results["steady"] = steady_report(history, parts)

    near = near_threshold_history(messages)
    near_compactor, near_history = settled(near)
    near_parts = steady_parts(near_compactor, near_history, repeats)
    results["near_threshold"] = steady_report(near_history, near_parts)

    # A turn with one new tool result: micro-compaction truncates exactly one.
    def with_new_turn() -> Messages:
        grown: Messages = json_copy(history)
        grown += new_turn(len(grown))
        return grown

    one_new, one_new_ratio = timed_once(
        with_new_turn,
        compactor,
        max(repeats, 15),
        lambda: json.dumps(history, ensure_ascii=False),
    )
    first_call, _ = timed_once(
        lambda: json_copy(messages),
        Compactor(must_not_be_called, threshold=THRESHOLD),
        max(3, repeats // 2),
    )
    full = _history.compare(
        {
            "serialize": lambda: _serialize(messages),
            "json_dumps": lambda: json.dumps(messages, ensure_ascii=False),
        },
        repeats,
    )
    results["micro_and_serialize"] = {
        "turn_with_one_new_result_seconds": one_new,
        "first_call_truncating_all_seconds": first_call,
        "serialize_full_history_seconds": full.seconds["serialize"],
        "json_dumps_full_history_seconds": full.seconds["json_dumps"],
        "serialize_vs_json_dumps": full.ratio("serialize", "json_dumps"),
        "turn_with_one_new_result_vs_steady_json_dumps": one_new_ratio,
    }

    # Scaling of the steady-state call; all sizes take turns within each run.
    funcs: dict[str, Any] = {}
    sizes: dict[int, tuple[int, int]] = {}
    for scale in scales:
        scaled_compactor, scaled = settled(_history.scaled_history(messages, scale))
        funcs[f"call_{scale}"] = lambda c=scaled_compactor, h=scaled: c(h)
        funcs[f"json_dumps_{scale}"] = lambda h=scaled: json.dumps(h, ensure_ascii=False)
        sizes[scale] = (len(scaled), estimate_tokens(scaled))
    times = _history.compare(funcs, repeats)
    first = scales[0]
    results["scaling"] = {
        f"{scale}x": {
            "messages": sizes[scale][0],
            "tokens": sizes[scale][1],
            "call_seconds": times.seconds[f"call_{scale}"],
            "call_vs_1x": times.ratio(f"call_{scale}", f"call_{first}"),
            "json_dumps_vs_1x": times.ratio(f"json_dumps_{scale}", f"json_dumps_{first}"),
            "call_vs_json_dumps": times.ratio(f"call_{scale}", f"json_dumps_{scale}"),
        }
        for scale in scales
    }

    # Memory: a no-op call (at three sizes), and a full compaction (forced,
    # trivial provider).
    noop_peak = peak_bytes(lambda: compactor(history))
    near_peak = peak_bytes(lambda: near_compactor(near_history))
    eight_compactor, eight = settled(_history.scaled_history(messages, 8))
    eight_peak = peak_bytes(lambda: eight_compactor(eight))
    full_compactor = Compactor(trivial_provider, threshold=THRESHOLD, keep_tool_pairs=True)
    target = json_copy(history)
    systems = [m for m in target if m["role"] == "system"]
    transcript = _serialize([m for m in target[:-1] if m["role"] != "system"])
    full_peak = peak_bytes(lambda: full_compactor(target, force=True))
    assert target[len(systems)]["content"].startswith("[Context Compressed]")
    results["memory"] = {
        "noop_call_peak_bytes": noop_peak,
        "noop_call_long_session_peak_bytes": near_peak,
        "long_session_json_bytes": len(json.dumps(near_history, ensure_ascii=False).encode()),
        "noop_call_8x_peak_bytes": eight_peak,
        "history_8x_json_bytes": len(json.dumps(eight, ensure_ascii=False).encode()),
        "full_compaction_peak_bytes": full_peak,
        "history_json_bytes": len(json.dumps(history, ensure_ascii=False).encode()),
        "system_messages_json_bytes": len(json.dumps(systems, ensure_ascii=False).encode()),
        "transcript_chars": len(transcript),
        "transcript_object_bytes": sys.getsizeof(transcript),
    }
    return results


def _print_steady(title: str, block: dict[str, Any]) -> None:
    seconds, ratios = block["seconds"], block["ratios_vs_json_dumps"]
    print(
        f"{title}: {block['messages']} messages, {block['tokens']} tokens, "
        f"{block['json_chars']} JSON characters"
    )
    labels = {
        "json_dumps": "json.dumps(messages, ensure_ascii=False)",
        "compactor_call": "compactor(messages), no-op",
        "validate_messages": "  of which: validate_messages",
        "micro_compact_scan": "  of which: micro-compaction scan",
        "estimate_tokens": "  of which: estimate_tokens",
    }
    for name, label in labels.items():
        target = " (target <= 2.0)" if name == "compactor_call" else ""
        ratio = None if name == "json_dumps" else ratios[name]
        print(_history.report_line(label, seconds[name], ratio, "json.dumps" + target))


def print_report(results: dict[str, Any]) -> None:
    history = results["history"]
    print(
        f"Python {history['python']}; history: {history['messages']} messages, "
        f"{history['tokens']} estimated tokens, {history['json_chars']} JSON characters, "
        f"{history['messages_with_chinese']} messages with Chinese text; "
        f"Compactor(threshold={THRESHOLD}); median of {results['repeats']} runs"
    )
    _print_steady("steady state after micro-compaction", results["steady"])
    _print_steady("long session, steady state just under the threshold", results["near_threshold"])
    micro = results["micro_and_serialize"]
    print("micro-compaction and _serialize:")
    print(
        _history.report_line(
            "a turn with one new tool result (truncates one)",
            micro["turn_with_one_new_result_seconds"],
            micro["turn_with_one_new_result_vs_steady_json_dumps"],
            "json.dumps of the steady list",
        )
    )
    print(
        _history.report_line(
            "first call (truncates every old result)", micro["first_call_truncating_all_seconds"]
        )
    )
    print(
        _history.report_line(
            "_serialize(full history)",
            micro["serialize_full_history_seconds"],
            micro["serialize_vs_json_dumps"],
            "json.dumps of the full history",
        )
    )
    print("scaling of the no-op call (target: 4x the history at most 4.4x the time):")
    for scale, row in results["scaling"].items():
        print(
            f"  {scale:>3}: {row['messages']:5d} messages {row['tokens']:7d} tokens "
            f"{row['call_seconds'] * 1e3:8.3f} ms  call {row['call_vs_1x']:5.2f}x "
            f"(json.dumps {row['json_dumps_vs_1x']:5.2f}x)  "
            f"vs json.dumps {row['call_vs_json_dumps']:.2f}"
        )
    memory = results["memory"]
    print("tracemalloc peaks:")
    print(
        f"  no-op call: {memory['noop_call_peak_bytes']} bytes "
        f"(the history is {memory['history_json_bytes']} bytes of JSON); "
        f"8x: {memory['noop_call_8x_peak_bytes']} bytes "
        f"({memory['history_8x_json_bytes']} bytes of JSON); long session: "
        f"{memory['noop_call_long_session_peak_bytes']} bytes "
        f"({memory['long_session_json_bytes']} bytes of JSON)"
    )
    print(
        f"  full compaction: {memory['full_compaction_peak_bytes']} bytes "
        f"(system messages {memory['system_messages_json_bytes']} bytes of JSON; the "
        f"transcript sent to the provider is {memory['transcript_chars']} characters, "
        f"{memory['transcript_object_bytes']} bytes as a str)"
    )


def main(argv: list[str] | None = None) -> int:
    return _history.main(__doc__ or "", run, print_report, argv)


if __name__ == "__main__":
    sys.exit(main())
