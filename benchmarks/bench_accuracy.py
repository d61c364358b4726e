"""How close the count at the trigger is to the real input size, with ``record_usage``.

Run it with the measurement harness's environment (``../shared/accuracy``: real
tokenizers and a fake model API that reports the input size of each request)::

    bash ../shared/accuracy/setup.sh                  # once: ./.venv-accuracy
    .venv-accuracy/bin/python benchmarks/bench_accuracy.py

Every session of the harness (five kinds, 80 turns) is replayed through a
``Compactor(OfflineSummarizer(), threshold=30000)`` that is told each request's
usage, and, per kind, it prints: the median and 95th percentile of
|count - real| / real over turns whose real size is at least half the threshold,
early fires (a full compaction with real < 0.95 x threshold), late turns
(real > 1.05 x threshold and no compaction), and the counting cost of a turn
(the compactor's count plus ``record_usage``) in units of one ``estimate_tokens``
over the same list (median over turns). The defaults are the held-out cases: the
ledger's starting weights were fitted on tokenizer o200k, seeds 0-3, with the
harness's own tool definitions; this measures seeds 4-7 on the three other
tokenizers, with those tool definitions and with four times as many.
``--baseline`` adds the same table for the estimate alone (no ``record_usage``).

Without the harness's requirements it says what is missing and exits.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path:
    sys.path.insert(0, str(SRC))

from bareagent_compact import Compactor, OfflineSummarizer, estimate_tokens  # noqa: E402

THRESHOLD = 30_000
HARNESS = Path(
    os.environ.get("ACCURACY_HARNESS", Path(__file__).resolve().parents[2] / "shared" / "accuracy")
)
HELD_OUT_SEEDS = "4-7"
HELD_OUT_TOKENIZERS = "cl100k,qwen,claude_legacy"


def anchored() -> Compactor:
    """The library's defaults: the count is anchored on the reported usage."""
    return Compactor(OfflineSummarizer(), threshold=THRESHOLD)


class _EstimateOnly(Compactor):
    """Today's count without reports: ``record_usage`` is not there to call."""

    record_usage = None  # type: ignore[assignment]


def estimate_only() -> Compactor:
    return _EstimateOnly(OfflineSummarizer(), threshold=THRESHOLD, token_counter=estimate_tokens)


def load_harness(path: Path) -> tuple[Any, Any] | None:
    """The harness's ``replay`` and ``fake_api`` modules, or ``None`` (with the reason
    printed) when it cannot run here."""
    if not (path / "replay.py").is_file():
        print(f"bench_accuracy: no measurement harness at {path} (set ACCURACY_HARNESS)")
        return None
    sys.path.insert(0, str(path))
    try:
        fake_api = importlib.import_module("fake_api")
        replay = importlib.import_module("replay")
        fake_api.FakeAPI("o200k")  # the tokenizers load, offline
    except Exception as exc:  # an ImportError, or a vocabulary that cannot load
        print(
            f"bench_accuracy: the harness's requirements are not installed ({exc!r}); run\n"
            f"  bash {path}/setup.sh && .venv-accuracy/bin/python benchmarks/bench_accuracy.py"
        )
        return None
    return replay, fake_api


def large_tools(fake_api: Any, copies: int = 4) -> list[dict[str, Any]]:
    """The harness's tool definitions ``copies`` times over, renamed: a bigger agent."""
    return [
        {**tool, "name": f"{tool['name']}_{index}"}
        for index in range(copies)
        for tool in fake_api.TOOLS
    ]


def table(results: dict[str, dict[str, Any]]) -> str:
    lines = [f"{'kind':6s} {'turns':>5s} {'>=T/2':>5s} {'median':>7s} {'p95':>7s} "
             f"{'early':>5s} {'late':>4s} {'cost':>6s}"]  # fmt: skip
    for kind, s in results.items():
        lines.append(
            f"{kind:6s} {s['turns']:5d} {s['near_turns']:5d} {s['med_err']:7.1%} "
            f"{s['p95_err']:7.1%} {s['early']:5d} {s['late']:4d} {s['cost_ratio_median']:5.2f}x"
        )
    early = sum(s["early"] for s in results.values())
    late = sum(s["late"] for s in results.values())
    worst = max(s["p95_err"] for s in results.values())
    lines.append(f"all kinds: early {early}, late {late}, worst p95 {worst:.1%}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harness", type=Path, default=HARNESS, help="(default %(default)s)")
    parser.add_argument("--seeds", default=HELD_OUT_SEEDS, help="(default %(default)s)")
    parser.add_argument("--tokenizers", default=HELD_OUT_TOKENIZERS, help="(default %(default)s)")
    parser.add_argument("--kinds", default="logs,shell,zh,code,json", help="(default: all five)")
    parser.add_argument(
        "--tools", default="default,large", help="tool definitions: default, large (both)"
    )
    parser.add_argument("--usage", choices=["int", "anthropic"], default="int")
    parser.add_argument("--cache", action="store_true", help="Anthropic prompt-caching semantics")
    parser.add_argument("--baseline", action="store_true", help="also the estimate alone")
    parser.add_argument("--json", metavar="PATH", help="write every table's figures")
    args = parser.parse_args(argv)

    harness = load_harness(args.harness)
    if harness is None:
        return 0
    replay, fake_api = harness
    logging.basicConfig(level=logging.ERROR)

    seeds = replay.parse_ints(args.seeds)
    kinds = [k for k in args.kinds.split(",") if k]
    tools = {"default": None, "large": {"tools": large_tools(fake_api)}}
    factories: dict[str, Callable[[], Compactor]] = {"record_usage": anchored}
    if args.baseline:
        factories["estimate only"] = estimate_only
    report: list[dict[str, Any]] = []
    for tokenizer in [t for t in args.tokenizers.split(",") if t]:
        for tool_set in [t for t in args.tools.split(",") if t]:
            for label, factory in factories.items():
                results, _, config = replay.run(
                    kinds,
                    seeds,
                    factory,
                    tokenizer=tokenizer,
                    cache=args.cache,
                    usage_form=args.usage,
                    api_kwargs=tools[tool_set],
                )
                print(
                    f"\n{label}: tokenizer {tokenizer}, {tool_set} tools (fixed overhead "
                    f"{config['fixed_overhead']:,} tokens), seeds {args.seeds}, threshold "
                    f"{config['threshold']:,}, usage as {args.usage}"
                    f"{', prompt caching' if args.cache else ''}"
                )
                print(table(results))
                sys.stdout.flush()
                report.append(
                    {
                        "compactor": label,
                        "tokenizer": tokenizer,
                        "tools": tool_set,
                        "config": config,
                        "kinds": results,
                    }
                )
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
