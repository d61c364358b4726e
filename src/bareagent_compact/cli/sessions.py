"""The verbs that run a session turn by turn: ``replay`` (a recorded one) and ``demo``."""

from __future__ import annotations

import argparse
import shlex
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, TextIO

from bareagent_compact.cli.command import CommandProvider
from bareagent_compact.cli.common import (
    EXIT_FAILED,
    CliError,
    CommandFailed,
    Progress,
    check_output_path,
    emit_json,
    read_file,
    require_turns,
)
from bareagent_compact.cli.demo import run_demo
from bareagent_compact.cli.histories import write_history
from bareagent_compact.cli.plot import marks_line, sparkline, svg_chart
from bareagent_compact.cli.replay import ReplayResult, replay
from bareagent_compact.cli.turns import TurnRecord
from bareagent_compact.offline import OfflineSummarizer
from bareagent_compact.protocols import Message, SummaryProvider
from bareagent_compact.result import Action

# -- replay -----------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    plot = check_output_path(args.plot, args.file) if args.plot else None
    history = read_file(args.file, args.format)
    messages = history.messages
    provider, summariser = _summariser(args)
    started = time.perf_counter()
    done = _replay(args, messages, provider)
    elapsed = time.perf_counter() - started
    require_turns(args.file, history, len(done.turns))
    summary = _replay_summary(done)
    if plot is not None:
        _write_svg(plot, done.turns, args.threshold, f"replay of {Path(args.file).name}")
    if args.json:
        options = {
            "threshold": args.threshold,
            "keep_recent": args.keep_recent,
            "keep_tool_pairs": args.keep_tool_pairs,
            "summariser": summariser,
        }
        emit_json(
            out,
            {
                "file": args.file,
                "options": options,
                "summary": {**summary, "seconds": round(elapsed, 3)},
                "turns": [_turn_json(t) for t in done.turns],
                **({"plot": str(plot)} if plot else {}),
            },
        )
        return 0
    out.write(
        f"replay of {args.file}: {len(messages):,} messages, {summary['turns']:,} turns; "
        f"threshold {args.threshold:,}, keep_recent {args.keep_recent}, keep_tool_pairs "
        f"{'on' if args.keep_tool_pairs else 'off'}, {summariser}\n\n"
    )
    _write_turns(out, done.turns, every=args.all)
    _write_totals(out, summary, elapsed)
    _write_picture(out, plot, done.turns)
    return 0 if summary["failed"] == 0 else EXIT_FAILED


def _summariser(args: argparse.Namespace) -> tuple[SummaryProvider, str]:
    """The provider ``--provider-cmd`` names (the offline summariser by default), described."""
    if args.provider_cmd:
        provider = CommandProvider(args.provider_cmd, args.timeout, args.prompt_format)
        return provider, f"command {shlex.quote(args.provider_cmd)}"
    return OfflineSummarizer(), "offline summariser"


def _replay(
    args: argparse.Namespace, messages: list[Message], provider: SummaryProvider
) -> ReplayResult:
    progress = Progress("replaying turn")
    try:
        return replay(
            messages,
            provider,
            threshold=args.threshold,
            keep_recent=args.keep_recent,
            keep_tool_pairs=args.keep_tool_pairs,
            progress=progress,
        )
    except (TypeError, ValueError) as exc:
        raise CliError(f"{args.file} is not a history the compactor can read: {exc}") from None
    finally:
        progress.close()


def _turn_json(t: TurnRecord) -> dict[str, Any]:
    return {**asdict(t), "action": t.action.value}


def _replay_summary(done: ReplayResult) -> dict[str, Any]:
    peak = max(done.turns, key=lambda t: t.tokens_in, default=None)
    return {
        "turns": len(done.turns),
        "full": done.count(Action.FULL),
        "micro": done.count(Action.MICRO),
        "failed": done.count(Action.FAILED),
        "summary_calls": done.summary_calls,
        "peak_tokens": peak.tokens_in if peak else 0,
        "peak_turn": peak.turn if peak else None,
        "final_tokens": done.turns[-1].tokens_after if done.turns else 0,
        "final_messages": len(done.messages),
    }


def _write_turns(out: TextIO, turns: list[TurnRecord], *, every: bool) -> None:
    """A row per full or failed compaction (per turn with ``every``)."""
    out.write(f"{'turn':>6}{'msgs':>7}  {'tokens in -> sent':<22}{'action':<8}{'trunc':>6}"
              f"{'calls':>7}\n")  # fmt: skip
    shown = 0
    for t in turns:
        if every or t.action in (Action.FULL, Action.FAILED):
            shown += 1
            out.write(
                f"{t.turn:>6}{t.messages:>7}  {f'{t.tokens_in:,} -> {t.tokens_after:,}':<22}"
                f"{t.action.value:<8}{t.truncated:>6}{t.summary_calls:>7}"
                + (f"  ({t.reason})" if t.reason else "")
                + "\n"
            )
    if shown < len(turns):
        out.write(
            f"({len(turns) - shown:,} turns without a full or failed compaction not "
            "shown; --all lists them)\n"
        )


def _write_totals(out: TextIO, summary: dict[str, Any], elapsed: float) -> None:
    out.write(
        f"\nfull compactions {summary['full']}, micro {summary['micro']}, failed "
        f"{summary['failed']}, summary calls {summary['summary_calls']}\n"
        f"peak {summary['peak_tokens']:,} estimated tokens at turn {summary['peak_turn']}; "
        f"final {summary['final_tokens']:,} tokens, {summary['final_messages']:,} messages; "
        f"{elapsed:.2f}s\n"
    )


def _write_picture(out: TextIO, plot: Path | None, turns: list[TurnRecord]) -> None:
    """Where the SVG went, or else a sparkline of the context per turn."""
    if plot is not None:
        out.write(f"picture: {plot}\n")
    elif turns:
        out.write(f"\ncontext {sparkline([t.tokens_in for t in turns])}\n")
        out.write(f"        {marks_line(turns)}\n")
        out.write("        (F full, m micro, x failed compaction)\n")


def _write_svg(path: Path, turns: list[TurnRecord], threshold: int, title: str) -> None:
    try:
        write_history(path, svg_chart(turns, threshold, title))
    except OSError as exc:
        raise CommandFailed(f"cannot write {path}: {exc.strerror}") from None


# -- demo -------------------------------------------------------------------------


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    plot = check_output_path(args.plot) if args.plot else None
    turns: list[TurnRecord] = []
    run_demo(out, threshold=args.threshold, seed=args.seed, turns=turns)
    if plot is not None:
        _write_svg(plot, turns, args.threshold, "bareagent-compact demo")
        out.write(f"\nPicture: {plot}\n")
    return 0
