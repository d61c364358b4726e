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
    describe_skipped,
    emit_json,
    read_file,
    require_turns,
)
from bareagent_compact.cli.compare import (
    Outcome,
    Prices,
    compare_json,
    turn_json,
    write_notes,
    write_table,
)
from bareagent_compact.cli.demo import run_demo
from bareagent_compact.cli.histories import HistoryFile, write_history
from bareagent_compact.cli.plot import compare_chart, marks_line, sparkline, svg_chart
from bareagent_compact.cli.replay import ReplayResult, replay
from bareagent_compact.cli.settings import Setting, checked, compactor_options, parse_compare
from bareagent_compact.cli.turns import PromptCache, TurnRecord
from bareagent_compact.offline import OfflineSummarizer
from bareagent_compact.protocols import Message, SummaryProvider
from bareagent_compact.result import Action

# -- replay -----------------------------------------------------------------------


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    plot = check_output_path(args.plot, args.file) if args.plot else None
    base = compactor_options(args)
    options = checked(base)
    settings = parse_compare(args.compare, base) if args.compare is not None else None
    history = read_file(args.file, args.format)
    messages = history.messages
    provider, summarizer = _summarizer(args)
    if settings is not None:
        return _cmd_compare(
            args, out, messages, (provider, summarizer), settings=settings, plot=plot
        )
    started = time.perf_counter()
    done = _replay(args, messages, provider, base)
    elapsed = time.perf_counter() - started
    require_turns(args.file, history, len(done.turns))
    summary = _replay_summary(done)
    if plot is not None:
        _write_svg(plot, done.turns, args.threshold, f"replay of {Path(args.file).name}")
    if args.json:
        described = {**base, "keep_recent": options.derived.keep_recent, "summariser": summarizer}
        emit_json(
            out,
            {
                "file": args.file,
                "format": history.format,
                "skipped": history.skipped,
                "options": described,
                "summary": {**summary, "seconds": round(elapsed, 3)},
                "turns": [_turn_json(t) for t in done.turns],
                **({"plot": str(plot)} if plot else {}),
            },
        )
        return 0
    out.write(
        f"replay of {args.file}: {len(messages):,} messages, {summary['turns']:,} turns "
        f"({_read_as(history)}); threshold {args.threshold:,}, "
        f"keep_recent {options.derived.keep_recent}, "
        f"keep_tool_pairs {'on' if args.keep_tool_pairs else 'off'}, micro {args.micro}, "
        f"{summarizer}\n\n"
    )
    _write_turns(out, done.turns, every=args.all)
    _write_totals(out, summary, elapsed)
    _write_picture(out, plot, done.turns)
    return 0 if summary["failed"] == 0 else EXIT_FAILED


def _read_as(history: HistoryFile) -> str:
    """``read as claude-code; skipped 3 records that are no message: ...``."""
    if not history.skipped:
        return f"read as {history.format}"
    return f"read as {history.format}; skipped {describe_skipped(history.skipped)}"


def _summarizer(args: argparse.Namespace) -> tuple[SummaryProvider, str]:
    """The provider ``--provider-cmd`` names (the offline summariser by default), described."""
    if args.provider_cmd:
        provider = CommandProvider(
            args.provider_cmd,
            args.timeout,
            args.prompt_format,
            max_output_bytes=args.max_output_bytes,
        )
        return provider, f"command {shlex.quote(args.provider_cmd)}"
    return OfflineSummarizer(), "offline summariser"


def _replay(
    args: argparse.Namespace,
    messages: list[Message],
    provider: SummaryProvider,
    options: dict[str, Any],
    label: str = "replaying turn",
) -> ReplayResult:
    progress = Progress(label)
    try:
        return replay(
            messages,
            provider,
            progress=progress,
            cache=PromptCache(args.cache_min_tokens),
            **options,
        )
    except (TypeError, ValueError) as exc:
        raise CliError(f"{args.file} is not a history the compactor can read: {exc}") from None
    finally:
        progress.close()


def _cmd_compare(
    args: argparse.Namespace,
    out: TextIO,
    messages: list[Message],
    summarizer: tuple[SummaryProvider, str],
    *,
    settings: list[Setting],
    plot: Path | None,
) -> int:
    """``replay --compare``: every setting replayed, one table (or JSON) and one chart."""
    prices = _prices(args)
    outcomes = [
        Outcome(s, _replay(args, messages, summarizer[0], s.options, f"replaying {s.label}:"))
        for s in settings
    ]
    rows = compare_json(outcomes, prices)
    if plot is not None:
        series = [(o.setting.label, o.result.turns, o.threshold) for o in outcomes]
        _write(plot, compare_chart(series, f"replay of {Path(args.file).name}: settings compared"))
    if args.json:
        emit_json(out, {
            "file": args.file, "messages": len(messages), "summariser": summarizer[1],
            "prices": asdict(prices), "cache_min_tokens": args.cache_min_tokens,
            "settings": rows, **({"plot": str(plot)} if plot else {}),
        })  # fmt: skip
        return 0
    out.write(
        f"replay --compare of {args.file}: {len(messages):,} messages, "
        f"{rows[0]['summary']['turns']:,} turns, {len(rows)} settings; {summarizer[1]}\n\n"
    )
    write_table(out, rows, prices)
    write_notes(out, prices, args.cache_min_tokens)
    if plot is not None:
        out.write(f"picture: {plot}\n")
    failed = any(r["summary"]["failed"] for r in rows)
    return EXIT_FAILED if failed else 0


def _prices(args: argparse.Namespace) -> Prices:
    """The prices of ``--prices``, or of the three price flags (not both)."""
    given = Prices(args.cache_write_price, args.cache_read_price, args.output_price)
    if args.prices is None:
        return given
    if given != Prices():
        raise CliError(
            "--prices cannot be combined with --cache-write-price, --cache-read-price or "
            "--output-price: give every price in the table"
        )
    prices: Prices = args.prices
    return prices


def _turn_json(t: TurnRecord) -> dict[str, Any]:
    return turn_json(t)


def _replay_summary(done: ReplayResult) -> dict[str, Any]:
    # The most sent to the model in one turn, as the --compare table's "peak".
    peak = max(done.turns, key=lambda t: t.tokens_after, default=None)
    return {
        "turns": len(done.turns),
        "full": done.count(Action.FULL),
        "micro": done.count(Action.MICRO),
        "failed": done.count(Action.FAILED),
        "summary_calls": done.summary_calls,
        "peak_tokens": peak.tokens_after if peak else 0,
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
        f"peak {summary['peak_tokens']:,} estimated tokens sent at turn {summary['peak_turn']}; "
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
    _write(path, svg_chart(turns, threshold, title))


def _write(path: Path, svg: str) -> None:
    try:
        write_history(path, svg)
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
