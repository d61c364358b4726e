"""What a compaction costs on the cached prefix: the summary requests' cache reads
and writes counted, on a simulated clock with idle gaps.

Run from the project root with the accuracy harness's environment (it has the
tokenizers; the harness is ``../shared/accuracy`` or ``$ACCURACY_DIR``):

    PYTHONPATH=src:benchmarks:../shared/accuracy /work/venv-accuracy/bin/python \\
        benchmarks/bench_cache_economics.py          # all kinds, seeds 0-3, 15k/30k/60k

or ``python benchmarks/bench_cache_economics.py`` with ``$ACCURACY_VENV`` set (it
re-runs itself with that environment's Python). ``--api chat`` replays the same
sessions in OpenAI Chat form on the automatic-prefix cache model
(``_cache_replay_chat``), with the Chat adapters. Every session kind of the
harness is replayed through a fake Anthropic client whose prompt cache is
modelled exactly (``_cache_model``; the loop and the clock: ``_cache_replay``),
with ``record_usage`` fed after every loop request and the compactor's
``clock=`` the simulated clock, in three configurations:

    spec        Compactor(anthropic_provider(client, model), threshold=T)
    preset      the same with micro="cache-friendly"
    continue    micro="cache-friendly" with anthropic_continuation_provider(client,
                model, system=, tools=, cache_control=) given the loop's own settings
    continue+window  (optional: --configurations spec,preset,continue+window) the
                same with context_window=200_000, so a part sent over
                summary_input_tokens (64,000) that no usage report covered is
                still sent as a continuation

Per kind and threshold it prints: full compactions (spec / preset / continue);
the share of the summary requests' input read from the cache (preset /
continue); the summary input cost of one compaction (uncached x1, cache reads
x0.1, writes x1.25) and continue's against preset's; the session's total cost
(the loop's input priced the same way, plus the summary requests' input and
their output at x5) and continue's against preset's; refused requests.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _harness import HARNESS, reexec_in_harness_venv

CONFIGURATIONS = ("spec", "preset", "continue")
WINDOW = 200_000  # "continue+window": Claude's context window given, so a long history fits
TARGET_RATIO = {15_000: 0.4}  # the summary input of one compaction, continue vs preset
DEFAULT_TARGET_RATIO = 0.3
TARGET_READ_SHARE = 0.8


def factory(
    name: str, threshold: int, api: str = "anthropic"
) -> Callable[[Any, list[dict[str, Any]], Any], Any]:
    """How a configuration's compactor is made from the fake client, the loop's
    system blocks and the clock (``api``: ``anthropic`` or ``chat``)."""
    import fake_api  # type: ignore[import-not-found]  # noqa: PLC0415

    from _cache_replay_chat import chat_tools  # noqa: PLC0415
    from bareagent_compact import Compactor  # noqa: PLC0415
    from bareagent_compact import providers as p  # noqa: PLC0415

    def make(client: Any, system: list[dict[str, Any]], clock: Any) -> Any:
        transcript = p.anthropic_provider if api == "anthropic" else p.openai_chat_provider
        if name == "spec":
            return Compactor(transcript(client, "fake"), threshold=threshold, clock=clock)
        if name == "preset":
            provider = transcript(client, "fake")
        elif api == "anthropic":
            provider = p.anthropic_continuation_provider(
                client, "fake", system=system, tools=fake_api.TOOLS,
                cache_control={"type": "ephemeral"},
            )  # fmt: skip
        else:
            provider = p.openai_chat_continuation_provider(
                client, "fake", tools=chat_tools(fake_api.TOOLS)
            )
        window = {"context_window": WINDOW} if name == "continue+window" else {}
        return Compactor(
            provider, threshold=threshold, micro="cache-friendly", clock=clock, **window
        )

    return make


def figures(runs: list[Any]) -> dict[str, Any]:
    """One configuration's figures over the sessions of one kind."""
    loop = [c for run in runs for c in run.calls if c.kind == "loop"]
    summary = [c for run in runs for c in run.calls if c.kind == "summary"]
    fulls = sum(run.fulls for run in runs)
    summary_in = sum(c.total for c in summary)
    summary_cost = sum(c.input_cost for c in summary)
    total = sum(c.input_cost for c in loop) + summary_cost + 5.0 * sum(c.output for c in summary)
    return {
        "sessions": len(runs), "fulls": fulls, "summary_requests": len(summary),
        "micro_clears": sum(run.micro_clears for run in runs),
        "idle_gaps": sum(run.idle_gaps for run in runs),
        "summary_input": summary_in,
        "summary_read_share": sum(c.read for c in summary) / summary_in if summary_in else None,
        "summary_cost_per_compaction": summary_cost / fulls if fulls else None,
        "summary_input_per_compaction": summary_in / fulls if fulls else None,
        "loop_read_share": sum(c.read for c in loop) / max(1, sum(c.total for c in loop)),
        "total_per_session": total / len(runs),
        "refused": [r for run in runs for r in run.refused],
    }  # fmt: skip


def measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    """One entry per (threshold, kind): each configuration's figures."""
    import fake_api  # noqa: PLC0415
    import replay  # type: ignore[import-not-found]  # noqa: PLC0415
    import sessions  # type: ignore[import-not-found]  # noqa: PLC0415

    from _cache_model import Tokens  # noqa: PLC0415
    from _cache_replay import replay as replay_anthropic  # noqa: PLC0415
    from _cache_replay_chat import chat_tools, replay_chat  # noqa: PLC0415

    def replay_session(session: Any, make: Any) -> Any:
        if args.api == "chat":
            return replay_chat(session, make, tokens, chat_tools(fake_api.TOOLS))
        return replay_anthropic(session, make, tokens, fake_api.TOOLS, fake_api.FRAMEWORK_SYSTEM)

    encoder = getattr(fake_api, args.tokenizer)()
    encode = (
        (lambda s: encoder.encode(s, disallowed_special=()))
        if args.tokenizer in ("o200k", "cl100k") else encoder.encode
    )  # fmt: skip
    tokens = Tokens(encode)
    names = [n for n in args.configurations.split(",") if n]
    out = []
    for threshold in replay.parse_ints(args.thresholds):
        for kind in [k for k in args.kinds.split(",") if k]:
            entry: dict[str, Any] = {"threshold": threshold, "kind": kind}
            for name in names:
                make = factory(name, threshold, args.api)
                runs = [
                    replay_session(sessions.make_session(kind, seed, args.turns), make)
                    for seed in replay.parse_ints(args.seeds)
                ]  # fmt: skip
                entry[name] = figures(runs)
            out.append(entry)
            if args.progress:
                print(f"  {kind} {threshold}: done", file=sys.stderr, flush=True)
    return out


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if a is None or not b else a / b


def row(entry: dict[str, Any]) -> tuple[str, list[bool]]:
    """One Markdown row, and whether each target holds (where it can be judged)."""
    spec, preset = entry.get("spec"), entry["preset"]
    cont = entry.get("continue", entry.get("continue+window"))
    fulls = " / ".join(str(figures["fulls"]) for name, figures in entry.items()
                       if name not in ("threshold", "kind"))
    cells = [entry["kind"], fulls, _share(preset["summary_read_share"])]
    checks: list[bool] = []
    if cont is None:
        cells += ["-", _num(preset["summary_cost_per_compaction"]), "-", "-",
                  _num(preset["total_per_session"]), "-", "-"]  # fmt: skip
    else:
        ratio = _ratio(cont["summary_cost_per_compaction"], preset["summary_cost_per_compaction"])
        total = cont["total_per_session"] / preset["total_per_session"]
        target = TARGET_RATIO.get(entry["threshold"], DEFAULT_TARGET_RATIO)
        if cont["summary_read_share"] is not None:
            checks.append(cont["summary_read_share"] >= TARGET_READ_SHARE)
        if ratio is not None:
            checks.append(ratio <= target)
        checks.append(total <= 1.0)
        if spec is not None:
            checks.append(cont["fulls"] <= spec["fulls"])
        cells += [
            _share(cont["summary_read_share"]), _num(preset["summary_cost_per_compaction"]),
            _num(cont["summary_cost_per_compaction"]),
            "-" if ratio is None else f"**{ratio:.2f}x**",
            _num(preset["total_per_session"]), _num(cont["total_per_session"]), f"**{total:.2f}x**",
        ]  # fmt: skip
    refused = sum(len(figures["refused"]) for name, figures in entry.items()
                  if name not in ("threshold", "kind"))
    cells.append(str(refused))
    return "| " + " | ".join(cells) + " |", checks


def table(entries: list[dict[str, Any]], threshold: int) -> str:
    """One threshold's rows as a Markdown table, with the verdict."""
    lines = [
        "| kind | fulls spec / preset / continue | summary read from cache: preset | continue "
        "| summary input cost per compaction: preset | continue | continue vs preset "
        "| total per session: preset | continue | continue vs preset | refused |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    held: list[bool] = []
    for entry in entries:
        if entry["threshold"] == threshold:
            line, checks = row(entry)
            lines.append(line)
            held += checks
    if held:
        lines.append(f"\ntargets: {'all met' if all(held) else 'NOT all met'} "
                     f"({sum(held)} of {len(held)} checks)")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    args_list = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0-3", help="session seeds (default 0-3)")
    parser.add_argument("--thresholds", default="15000,30000,60000")
    parser.add_argument("--kinds", default="logs,shell,zh,code,json", help="(default all five)")
    parser.add_argument("--configurations", default=",".join(CONFIGURATIONS))
    parser.add_argument("--api", default="anthropic", choices=["anthropic", "chat"],
                        help="the fake API: Anthropic's cache or OpenAI Chat's (anthropic)")
    parser.add_argument("--turns", type=int, default=80, help="turns per session (80)")
    parser.add_argument("--tokenizer", default="o200k", choices=["o200k", "cl100k"])
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--progress", action="store_true", help="say when each kind is done")
    args = parser.parse_args(args_list)
    try:
        import fake_api  # noqa: F401, PLC0415  (the harness is on the path, with its tokenizers)
    except ImportError:
        reexec_in_harness_venv(__file__, args_list)
    sys.path.insert(0, str(HARNESS))
    logging.basicConfig(level=logging.ERROR)
    started = time.perf_counter()
    entries = measure(args)
    if args.json:
        Path(args.json).write_text(json.dumps(entries, indent=1), encoding="utf-8")
    for threshold in sorted({e["threshold"] for e in entries}):
        print(f"\nthreshold {threshold:,}; tokenizer {args.tokenizer}; seeds {args.seeds} x "
              f"{args.turns} turns; "
              f"{args.api} cache model, simulated clock; record_usage fed\n")  # fmt: skip
        print(table(entries, threshold))
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
