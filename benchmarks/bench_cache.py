"""Prompt-cache cost of micro-compaction: the specification's default, micro-compaction
off, and ``micro="cache-friendly"``, replayed through the accuracy harness.

Run ``python benchmarks/bench_cache.py`` from the project root. It needs the harness
(``../shared/accuracy``, or ``$ACCURACY_DIR``) and its virtual environment
(``.venv-accuracy``, or ``$ACCURACY_VENV``; created by the harness's ``setup.sh``);
without them it says so and exits. It re-runs itself with that environment's
Python and ``PYTHONPATH=src``, replays every session kind with Anthropic
prompt-caching semantics (one cache breakpoint on the last message of every
request) through the harness's three factories (threshold 30,000), and prints per
kind: the share of input tokens read from the cache, the input cost per session
in uncached-token equivalents (uncached x1 + cache writes x1.25 + cache reads
x0.1), the peak and mean real context, the full compactions (all seeds), and
the cost and peak against the default. When the compactor has ``record_usage``
the harness feeds it the reported input size every turn.

    python benchmarks/bench_cache.py                  # seeds 0-7, o200k
    python benchmarks/bench_cache.py --seeds 0-3 --tokenizer cl100k --json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from _harness import HARNESS, reexec_in_harness_venv

CONFIGURATIONS = (
    ("spec default", "default"),
    ("micro off", "micro_off"),
    ("cache-friendly", "cache_friendly"),
)


def measure(seeds: list[int], tokenizer: str) -> dict[str, Any]:
    """Per configuration: the harness's per-kind figures and its configuration."""
    sys.path.insert(0, str(HARNESS))
    import factories  # type: ignore[import-not-found]  # noqa: PLC0415
    import replay  # type: ignore[import-not-found]  # noqa: PLC0415

    kinds = list(replay.sessions.KINDS)
    out: dict[str, Any] = {}
    for label, name in CONFIGURATIONS:
        results, _rows, config = replay.run(
            kinds, seeds, getattr(factories, name), tokenizer=tokenizer, cache=True, timing=False
        )
        out[label] = {"config": config, "kinds": results}
    return out


def table(measured: dict[str, Any]) -> str:
    """The per-kind comparison as a Markdown table."""
    base = measured["spec default"]["kinds"]
    lines = [
        "| kind | configuration | cache read | input cost / session | vs default "
        "| peak | vs default | mean | full compactions |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for kind in base:
        for label, figures in measured.items():
            row = figures["kinds"][kind]
            cost = row["input_cost_per_session"] / base[kind]["input_cost_per_session"]
            peak = row["peak_real"] / base[kind]["peak_real"]
            lines.append(
                f"| {kind} | {label} | {row['cache_read_share']:.0%} | "
                f"{row['input_cost_per_session']:,.0f} | {cost:.2f}x | {row['peak_real']:,d} | "
                f"{peak:.2f}x | {row['mean_real']:,.0f} | {row['full_compactions']} |"
            )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args_list = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0-7", help="session seeds, e.g. 0-3 (default 0-7)")
    parser.add_argument("--tokenizer", default="o200k", help="the harness's tokenizer (o200k)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(args_list)
    reexec_in_harness_venv(__file__, args_list)

    import replay  # noqa: PLC0415

    started = time.perf_counter()
    measured = measure(replay.parse_ints(args.seeds), args.tokenizer)
    if args.json:
        print(json.dumps(measured, indent=1))
        return
    config = measured["spec default"]["config"]
    usage = "fed" if config["record_usage"] else "absent"
    print(
        f"threshold {config['threshold']:,}; tokenizer {args.tokenizer}; seeds {args.seeds} x "
        f"{config['turns']} turns; Anthropic caching, one breakpoint on the last message; "
        f"record_usage {usage}; {time.perf_counter() - started:.0f} s"
    )
    print(table(measured))


if __name__ == "__main__":
    main()
