"""What ``micro="cache-friendly"`` costs against the default, summary requests counted.

Run ``python benchmarks/bench_preset_cost.py`` from the project root. It needs the
accuracy harness (``../shared/accuracy``, or ``$ACCURACY_DIR``) and its virtual
environment (``.venv-accuracy``, or ``$ACCURACY_VENV``; made by the harness's
``setup.sh``); without them it says so and exits. It re-runs itself with that
environment's Python and ``PYTHONPATH=src``, and replays every session kind with
Anthropic prompt-caching semantics (one cache breakpoint on the last message of
every request) through ``Compactor(OfflineSummarizer(), threshold=T)`` and the same
with ``micro="cache-friendly"``, at each threshold ``T`` and with each set of tool
definitions (the harness's own, and four times as many: a bigger agent whose
every request carries about 3,500 more tokens the count never sees). The harness
feeds ``record_usage`` the reported input size of every request.

Per kind it prints, default / preset: the full compactions and the summary
requests (all seeds), the input cost per session in uncached-token equivalents
(uncached x1 + cache writes x1.25 + cache reads x0.1), the same plus the summary
requests (each prompt read uncached x1, each summary written at the output price
x5), and the preset's ratio to the default for both; then whether the preset made
no more full compactions than the default in every kind, and its worst ratio.

    python benchmarks/bench_preset_cost.py                     # seeds 0-3, T = 30k, 15k, 60k
    python benchmarks/bench_preset_cost.py --seeds 4-7 --tokenizer cl100k --tools large
    python benchmarks/bench_preset_cost.py --thresholds 20000 --json
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from typing import Any

from _harness import reexec_in_harness_venv

CONFIGURATIONS = (("default", "spec"), ("cache-friendly", "cache-friendly"))
TOOL_COPIES = 4


def factory(threshold: int, micro: str) -> Callable[[], Any]:
    """A zero-argument factory of the compactor under test."""
    from bareagent_compact import Compactor, OfflineSummarizer  # noqa: PLC0415

    return lambda: Compactor(OfflineSummarizer(), threshold=threshold, micro=micro)


def tool_sets(names: list[str]) -> dict[str, dict[str, Any] | None]:
    """The ``FakeAPI`` keyword arguments of each named set of tool definitions."""
    import fake_api  # type: ignore[import-not-found]  # noqa: PLC0415

    large = [
        {**tool, "name": f"{tool['name']}_{index}"}
        for index in range(TOOL_COPIES)
        for tool in fake_api.TOOLS
    ]
    known: dict[str, dict[str, Any] | None] = {"default": None, "large": {"tools": large}}
    unknown = sorted(set(names) - set(known))
    if unknown:
        raise SystemExit(f"unknown tool set(s) {unknown}; known: default, large")
    return {name: known[name] for name in names}


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One entry per (tool set, threshold): the configuration and both compactors'
    per-kind figures."""
    import replay  # type: ignore[import-not-found]  # noqa: PLC0415

    seeds = replay.parse_ints(args.seeds)
    kinds = [kind for kind in args.kinds.split(",") if kind]
    out: list[dict[str, Any]] = []
    for tools, api_kwargs in tool_sets([t for t in args.tools.split(",") if t]).items():
        for threshold in replay.parse_ints(args.thresholds):
            entry: dict[str, Any] = {"tools": tools, "threshold": threshold}
            for label, micro in CONFIGURATIONS:
                results, _rows, config = replay.run(
                    kinds,
                    seeds,
                    factory(threshold, micro),
                    tokenizer=args.tokenizer,
                    cache=True,
                    timing=False,
                    api_kwargs=api_kwargs,
                )
                entry[label] = results
                entry["fixed_overhead"] = config["fixed_overhead"]
            out.append(entry)
    return out


def verdict(entry: dict[str, Any]) -> tuple[bool, float]:
    """Whether the preset made no more full compactions than the default in every
    kind, and its worst total cost (summaries counted) against the default's."""
    base, preset = entry["default"], entry["cache-friendly"]
    fewer = all(preset[kind]["full_compactions"] <= base[kind]["full_compactions"] for kind in base)
    worst = max(
        preset[kind]["total_cost_per_session"] / base[kind]["total_cost_per_session"]
        for kind in base
    )
    return fewer, worst


def table(entry: dict[str, Any]) -> str:
    """One (tool set, threshold) as a Markdown table."""
    base, preset = entry["default"], entry["cache-friendly"]
    lines = [
        "| kind | full compactions | summary calls | input cost / session | preset vs default "
        "| +summaries / session | preset vs default |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind, d in base.items():
        p = preset[kind]
        lines.append(
            f"| {kind} | {d['full_compactions']} / {p['full_compactions']} "
            f"| {d['summary_calls']} / {p['summary_calls']} "
            f"| {d['input_cost_per_session']:,.0f} / {p['input_cost_per_session']:,.0f} "
            f"| {p['input_cost_per_session'] / d['input_cost_per_session']:.2f}x "
            f"| {d['total_cost_per_session']:,.0f} / {p['total_cost_per_session']:,.0f} "
            f"| **{p['total_cost_per_session'] / d['total_cost_per_session']:.2f}x** |"
        )
    fewer, worst = verdict(entry)
    lines.append(
        f"\npreset: {'no more' if fewer else 'MORE'} full compactions than the default in "
        f"every kind; total cost with summaries at most {worst:.2f}x the default's"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args_list = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0-3", help="session seeds (default 0-3)")
    parser.add_argument(
        "--thresholds", default="30000,15000,60000", help="(default 30000,15000,60000)"
    )
    parser.add_argument("--tools", default="default,large", help="tool sets (default both)")
    parser.add_argument("--kinds", default="logs,shell,zh,code,json", help="(default all five)")
    parser.add_argument("--tokenizer", default="o200k", help="the harness's tokenizer (o200k)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(args_list)
    reexec_in_harness_venv(__file__, args_list)
    logging.basicConfig(level=logging.ERROR)

    started = time.perf_counter()
    measured = measure(args)
    if args.json:
        print(json.dumps(measured, indent=1))
        return
    for entry in measured:
        print(
            f"\nthreshold {entry['threshold']:,}; {entry['tools']} tools (fixed overhead "
            f"{entry['fixed_overhead']:,} tokens); tokenizer {args.tokenizer}; seeds "
            f"{args.seeds}; Anthropic caching; record_usage fed; default / preset\n"
        )
        print(table(entry))
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
