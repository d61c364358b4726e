"""Command line: ``bareagent-compact VERB ...`` or ``python -m bareagent_compact VERB ...``.

Verbs: ``demo``, ``estimate``, ``inspect``, ``show``, ``compact`` and ``replay``;
each takes ``--json`` for scripts. Exit codes: 0 done, 1 the operation failed
(e.g. the summary command failed), 2 bad usage or bad input, with nothing written.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any, Final, TextIO

from bareagent_compact import _stores
from bareagent_compact.compactor import Compactor
from bareagent_compact.demo import DEMO_THRESHOLD, run_demo
from bareagent_compact.histories import HistoryError, dump_history, read_history, write_history
from bareagent_compact.inspection import breakdown
from bareagent_compact.micro import DEFAULT_KEEP_RECENT
from bareagent_compact.offline import OfflineSummarizer
from bareagent_compact.pairs import find_orphans
from bareagent_compact.plot import marks_line, sparkline, svg_chart
from bareagent_compact.prompts import DEFAULT_THRESHOLD
from bareagent_compact.protocols import Message, SummaryProvider
from bareagent_compact.replay import ReplayResult, TurnRecord, replay
from bareagent_compact.result import Action, Reason
from bareagent_compact.serialize import _serialize
from bareagent_compact.tokens import estimate_tokens

PROG: Final = "bareagent-compact"
EXIT_FAILED: Final = 1
EXIT_USAGE: Final = 2
STORE_ENV: Final = "BAREAGENT_COMPACT_STORE"
"""Default of ``show --store``."""
COMMAND_TIMEOUT: Final = 600.0


class CliError(Exception):
    """Bad usage or bad input: reported on stderr with exit code 2."""


class CommandFailed(Exception):
    """The operation itself failed: reported on stderr with exit code 1."""


# -- helpers ----------------------------------------------------------------------


class Progress:
    """``label n/total`` on a terminal's stderr, at most ten times a second; nothing otherwise."""

    def __init__(self, label: str, stream: TextIO | None = None) -> None:
        self.stream = sys.stderr if stream is None else stream
        self.label = label
        self.enabled = self.stream.isatty()
        self._shown = 0.0

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if self.enabled and (now - self._shown >= 0.1 or done == total):
            self._shown = now
            self.stream.write(f"\r{self.label} {done:,}/{total:,}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self._shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


class CommandProvider:
    """A summary provider that runs a shell command: the prompt on stdin, the summary on stdout.

    The prompt is the system message, a blank line and the transcript (``text``),
    or the two messages as JSON (``json``). A non-zero exit, a timeout or empty
    output is a failed summary; the last error is kept in ``error``.
    """

    def __init__(self, command: str, timeout: float, prompt_format: str = "text") -> None:
        self.command = command
        self.timeout = timeout
        self.prompt_format = prompt_format
        self.error: str | None = None

    def __call__(self, prompt: list[Message], /) -> str:
        if self.prompt_format == "json":
            text = json.dumps(prompt, ensure_ascii=False)
        else:
            text = "\n\n".join(str(m.get("content", "")) for m in prompt)
        # Its own process group, so that a timeout ends the command and everything
        # it started (a model CLI under `sh -c` keeps running, and billing, otherwise).
        process = subprocess.Popen(
            self.command,
            shell=True,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(text, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            self.error = f"the summary command timed out after {self.timeout:g}s"
            raise RuntimeError(self.error) from None
        done = subprocess.CompletedProcess(self.command, process.returncode, stdout, stderr)
        if done.returncode != 0:
            tail = done.stderr.strip().splitlines()[-3:]
            self.error = f"the summary command exited with status {done.returncode}" + (
                ": " + " / ".join(tail) if tail else ""
            )
            raise RuntimeError(self.error)
        if not done.stdout.strip():
            self.error = "the summary command printed nothing"
        return done.stdout.strip()


def _kill_group(process: subprocess.Popen[str]) -> None:
    """End a timed-out command and every process it started, then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()
    process.communicate()


class _Brief(logging.Formatter):
    """Log lines without tracebacks, for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{PROG}: {record.levelname.lower()}: {record.getMessage()}"


def _emit_json(out: TextIO, value: Any) -> None:
    out.write(json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n")


def _read(path: str) -> list[Message]:
    try:
        return read_history(path).messages
    except HistoryError as exc:
        raise CliError(str(exc)) from None


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'s' * (number != 1)}"


def _size(size: int) -> str:
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


def _check_output_path(path: str, *inputs: str) -> Path:
    """An output path whose directory exists and which is none of ``inputs``."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise CliError(f"{path} is a directory")
    if not target.parent.resolve().is_dir():
        raise CliError(f"{path}: the directory {target.parent} does not exist")
    for name in inputs:
        if name != "-" and target.resolve() == Path(name).expanduser().resolve():
            raise CliError(f"{path} is the input file; write the result elsewhere")
    return target


def _non_negative(text: str) -> int:
    try:
        value = int(text.replace(",", "").replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


# -- estimate ---------------------------------------------------------------------


def cmd_estimate(args: argparse.Namespace, out: TextIO) -> int:
    messages = _read(args.file)
    found = breakdown(messages, largest=args.top)
    if args.json:
        _emit_json(
            out,
            {
                "file": args.file,
                "messages": found.messages,
                "tokens": found.tokens,
                "by_role": {k: asdict(v) for k, v in found.by_role.items()},
                "by_tool": {k: {**asdict(v), "tokens": v.tokens} for k, v in found.by_tool.items()},
                "largest": [asdict(m) for m in found.largest],
            },
        )
        return 0
    out.write(f"{args.file}: {found.messages:,} messages, {found.tokens:,} estimated tokens\n")
    out.write(f"\n{'by role':<24}{'messages':>9}{'tokens':>11}{'share':>8}\n")
    whole = max(found.tokens, 1)
    for role, size in sorted(found.by_role.items(), key=lambda kv: -kv[1].tokens):
        out.write(f"{role:<24}{size.messages:>9,}{size.tokens:>11,}{size.tokens / whole:>8.0%}\n")
    if found.by_tool:
        out.write(f"\n{'by tool':<24}{'calls':>9}{'results':>9}{'tokens':>11}{'share':>8}\n")
        for name, tool in sorted(found.by_tool.items(), key=lambda kv: -kv[1].tokens):
            out.write(
                f"{name[:23]:<24}{tool.calls:>9,}{tool.results:>9,}{tool.tokens:>11,}"
                f"{tool.tokens / whole:>8.0%}\n"
            )
    out.write(f"\nlargest messages\n{'index':>7}  {'role':<22}{'tokens':>9}  preview\n")
    for item in found.largest:
        out.write(f"{item.index:>7}  {item.label[:21]:<22}{item.tokens:>9,}  {item.preview}\n")
    return 0


# -- inspect and show -------------------------------------------------------------


def _orphans(messages: list[Message]) -> list[dict[str, Any]] | None:
    try:
        return [o._asdict() for o in find_orphans(messages)]
    except (TypeError, ValueError):
        return None  # not a history find_orphans can read


def cmd_inspect(args: argparse.Namespace, out: TextIO) -> int:
    store, kind = _stores_open(args.store)
    try:
        sessions = [args.session] if args.session else store.list_sessions()
        report: list[dict[str, Any]] = []
        progress = Progress("inspecting sessions")
        for number, session_id in enumerate(sessions, start=1):
            snaps = _stores.snapshots(store, session_id)
            archive = store.load_archive(session_id)
            latest = _stores.load(store, snaps[0]) if snaps else []
            orphans = _orphans(latest)
            report.append(
                {
                    "session_id": session_id,
                    "snapshots": [
                        {"at": at, "saved": s.timestamp.isoformat(sep=" "), "size": s.size}
                        for at, s in enumerate(snaps)
                    ],
                    "archive": {"records": len(archive), "size": _stores.archive_size(archive)},
                    "latest": {
                        "messages": len(latest),
                        "tokens": _tokens_or_none(latest),
                        "orphans": orphans,
                    },
                }
            )
            progress(number, len(sessions))
        progress.close()
    except (ValueError, LookupError, RuntimeError, FileNotFoundError) as exc:
        raise CliError(f"{args.store}: {exc}") from None
    finally:
        _stores.close(store)
    if args.json:
        _emit_json(out, {"store": args.store, "kind": kind, "sessions": report})
        return 0
    total = sum(len(r["snapshots"]) for r in report)
    out.write(
        f"{args.store} ({kind}): {_count(len(report), 'session')}, {_count(total, 'snapshot')}\n"
    )
    for r in report:
        out.write(
            f"\nsession {r['session_id']}: {_count(len(r['snapshots']), 'snapshot')}, archive "
            f"{_count(r['archive']['records'], 'record')} ({_size(r['archive']['size'])})\n"
        )
        out.write(f"  {'at':>4}  {'saved (UTC)':<28}{'size':>10}\n")
        for s in r["snapshots"]:
            out.write(f"  {s['at']:>4}  {s['saved']:<28}{_size(s['size']):>10}\n")
        latest = r["latest"]
        tokens = "?" if latest["tokens"] is None else f"{latest['tokens']:,}"
        orphans = latest["orphans"]
        described = (
            "orphans not checked (the snapshot is not a message history)"
            if orphans is None
            else _count(len(orphans), "orphan")
            + "".join(
                f"\n    {o['kind']} at message {o['message_index']}, block {o['block_index']}"
                f" (id {o['tool_use_id']})"
                for o in orphans[:10]
            )
        )
        out.write(f"  latest: {latest['messages']} messages, {tokens} estimated tokens, ")
        out.write(described + "\n")
    return 0


def _stores_open(location: str) -> tuple[_stores.Store, str]:
    try:
        return _stores.open_store(location)
    except _stores.StoreError as exc:
        raise CliError(str(exc)) from None


def _tokens_or_none(messages: list[Message]) -> int | None:
    try:
        return estimate_tokens(messages)
    except (TypeError, ValueError):
        return None


def _pick(snaps: list[_stores.StoredSnapshot], at: str | None) -> int:
    """The position in ``snaps`` (newest first) that ``--at`` names."""
    if at is None:
        return 0
    try:
        position = int(at)
    except ValueError:
        try:
            moment = datetime.fromisoformat(at)
        except ValueError:
            raise CliError(
                f"--at takes a snapshot number (0 = newest) or a time such as "
                f"2025-01-02T03:04:05, got {at!r}"
            ) from None
        if moment.tzinfo is not None:
            moment = moment.astimezone(tz=None).replace(tzinfo=None)
        for position, snap in enumerate(snaps):
            if snap.timestamp <= moment:
                return position
        raise CliError(f"no snapshot saved at or before {at}") from None
    if not 0 <= position < len(snaps):
        raise CliError(f"--at {position}: the session has snapshots 0 to {len(snaps) - 1}")
    return position


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    location = args.store or os.environ.get(STORE_ENV)
    if not location:
        raise CliError(f"show needs --store DIR_OR_DB (or {STORE_ENV} in the environment)")
    store, _ = _stores_open(location)
    try:
        session_id = store.check_session_id(args.session)
        snaps = _stores.snapshots(store, session_id)
        if not snaps:
            raise CliError(f"{location}: no snapshot of session {session_id!r}")
        position = _pick(snaps, args.at)
        snap = snaps[position]
        messages = _stores.load(store, snap)
    except (ValueError, LookupError, RuntimeError, FileNotFoundError) as exc:
        raise CliError(f"{location}: {exc}") from None
    finally:
        _stores.close(store)
    header = {
        "session_id": session_id,
        "at": position,
        "of": len(snaps),
        "saved": snap.timestamp.isoformat(sep=" "),
        "messages": len(messages),
        "tokens": _tokens_or_none(messages),
    }
    if args.json:
        _emit_json(out, {**header, "transcript": messages})
        return 0
    tokens = "?" if header["tokens"] is None else f"{header['tokens']:,}"
    out.write(
        f"session {session_id}, snapshot {position} of {len(snaps)} (0 = newest), saved "
        f"{header['saved']} UTC, {len(messages)} messages, {tokens} estimated tokens\n\n"
    )
    try:
        out.write(_serialize(messages) + "\n")
    except ValueError as exc:
        raise CliError(f"the snapshot cannot be shown as a transcript: {exc}") from None
    return 0


# -- compact ----------------------------------------------------------------------


def cmd_compact(args: argparse.Namespace, out: TextIO) -> int:
    target = _check_output_path(args.out, args.file) if args.out else None
    history = _read_file(args.file)
    messages = history.messages
    provider = CommandProvider(args.provider_cmd, args.timeout, args.prompt_format)
    compactor = Compactor(
        provider, keep_recent=args.keep_recent, keep_tool_pairs=args.keep_tool_pairs
    )
    before = len(messages)
    try:
        tokens_in = estimate_tokens(messages)
        result = compactor(messages, force=True)
    except (TypeError, ValueError) as exc:
        raise CliError(f"{args.file} is not a history the compactor can read: {exc}") from None
    report = {
        "action": result.action.value,
        "tokens_in": tokens_in,
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "messages_before": before,
        "messages_after": len(messages),
        "truncated": result.truncated,
        "reason": result.reason,
    }
    if result.action is not Action.FULL and result.reason in (
        Reason.NOTHING_TO_SUMMARISE,
        Reason.NOTHING_NEW,
    ):
        # Nothing to do is not a failure: the history is written as it is.
        logging.getLogger(__name__).info("no compaction: %s", result.reason)
    elif result.action is not Action.FULL:
        detail = provider.error or result.reason or result.action.value
        raise CommandFailed(f"no compaction: {detail}; nothing written")
    text = dump_history(history, messages)
    if target is not None:
        write_history(target, text)
        if args.json:
            _emit_json(out, {**report, "out": str(target)})
    elif args.json:
        _emit_json(out, {**report, "messages": messages})
    else:
        out.write(text)
    if not args.json:
        sys.stderr.write(
            f"{PROG}: full compaction: {tokens_in:,} estimated tokens ({result.tokens_before:,} "
            f"after micro-compaction) -> {result.tokens_after:,}, {before} -> {len(messages)} "
            "messages" + (f", written to {target}" if target is not None else "") + "\n"
        )
    return 0


def _read_file(path: str) -> Any:
    try:
        return read_history(path)
    except HistoryError as exc:
        raise CliError(str(exc)) from None


# -- replay and demo --------------------------------------------------------------


def _write_svg(path: Path, turns: list[TurnRecord], threshold: int, title: str) -> None:
    try:
        write_history(path, svg_chart(turns, threshold, title))
    except OSError as exc:
        raise CommandFailed(f"cannot write {path}: {exc.strerror}") from None


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


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    plot = _check_output_path(args.plot, args.file) if args.plot else None
    messages = _read(args.file)
    provider: SummaryProvider
    if args.provider_cmd:
        provider = CommandProvider(args.provider_cmd, args.timeout, args.prompt_format)
        summariser = f"command {shlex.quote(args.provider_cmd)}"
    else:
        provider = OfflineSummarizer()
        summariser = "offline summariser"
    progress = Progress("replaying turn")
    started = time.perf_counter()
    try:
        done = replay(
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
    elapsed = time.perf_counter() - started
    options = {
        "threshold": args.threshold,
        "keep_recent": args.keep_recent,
        "keep_tool_pairs": args.keep_tool_pairs,
        "summariser": summariser,
    }
    summary = _replay_summary(done)
    if plot is not None:
        _write_svg(plot, done.turns, args.threshold, f"replay of {Path(args.file).name}")
    if args.json:
        _emit_json(
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
    out.write(f"{'turn':>6}{'msgs':>7}  {'tokens in -> sent':<22}{'action':<8}{'trunc':>6}"
              f"{'calls':>7}\n")  # fmt: skip
    shown = 0
    for t in done.turns:
        if args.all or t.action in (Action.FULL, Action.FAILED):
            shown += 1
            out.write(
                f"{t.turn:>6}{t.messages:>7}  {f'{t.tokens_in:,} -> {t.tokens_after:,}':<22}"
                f"{t.action.value:<8}{t.truncated:>6}{t.summary_calls:>7}"
                + (f"  ({t.reason})" if t.reason else "")
                + "\n"
            )
    if shown < len(done.turns):
        out.write(
            f"({len(done.turns) - shown:,} turns without a full or failed compaction not "
            "shown; --all lists them)\n"
        )
    out.write(
        f"\nfull compactions {summary['full']}, micro {summary['micro']}, failed "
        f"{summary['failed']}, summary calls {summary['summary_calls']}\n"
        f"peak {summary['peak_tokens']:,} estimated tokens at turn {summary['peak_turn']}; "
        f"final {summary['final_tokens']:,} tokens, {summary['final_messages']:,} messages; "
        f"{elapsed:.2f}s\n"
    )
    if plot is not None:
        out.write(f"picture: {plot}\n")
    elif done.turns:
        out.write(f"\ncontext {sparkline([t.tokens_in for t in done.turns])}\n")
        out.write(f"        {marks_line(done.turns)}\n")
        out.write("        (F full, m micro, x failed compaction)\n")
    return 0 if summary["failed"] == 0 else EXIT_FAILED


def cmd_demo(args: argparse.Namespace, out: TextIO) -> int:
    plot = _check_output_path(args.plot) if args.plot else None
    turns: list[TurnRecord] = []
    run_demo(out, threshold=args.threshold, seed=args.seed, turns=turns)
    if plot is not None:
        _write_svg(plot, turns, args.threshold, "bareagent-compact demo")
        out.write(f"\nPicture: {plot}\n")
    return 0


# -- the parser -------------------------------------------------------------------


def _compactor_options(parser: argparse.ArgumentParser, *, threshold: bool) -> None:
    if threshold:
        parser.add_argument(
            "--threshold",
            type=_non_negative,
            default=DEFAULT_THRESHOLD,
            help=f"full compaction past this many estimated tokens (default {DEFAULT_THRESHOLD:,})",
        )
    parser.add_argument(
        "--keep-recent",
        type=_non_negative,
        default=DEFAULT_KEEP_RECENT,
        help=f"tool-result messages micro-compaction leaves whole (default {DEFAULT_KEEP_RECENT})",
    )
    parser.add_argument(
        "--keep-tool-pairs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the tool calls a pending turn answers (Compactor's keep_tool_pairs, default on)",
    )


def _command_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=_positive_float,
        default=COMMAND_TIMEOUT,
        help=f"seconds the summary command may take (default {COMMAND_TIMEOUT:g})",
    )
    parser.add_argument(
        "--prompt-format",
        choices=("text", "json"),
        default="text",
        help="the prompt on the command's stdin: plain text (default) or the two messages as JSON",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Context compaction for LLM agents: look at, compact and replay sessions.",
        epilog="Exit codes: 0 done, 1 the operation failed, 2 bad usage or bad input.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log tracebacks too")
    verbs = parser.add_subparsers(dest="command", required=True, metavar="VERB")

    demo = verbs.add_parser("demo", help="run a scripted agent session offline")
    demo.add_argument(
        "--threshold",
        type=_non_negative,
        default=DEMO_THRESHOLD,
        help=f"full-compaction threshold in estimated tokens (default {DEMO_THRESHOLD})",
    )
    demo.add_argument(
        "--seed", type=int, default=7, help="seed of the scripted session (default 7)"
    )
    demo.add_argument("--plot", metavar="SVG", help="also draw the context per turn to this file")
    demo.set_defaults(handler=cmd_demo, json=False)

    estimate = verbs.add_parser(
        "estimate", help="estimated tokens of a history: total, by role, by tool, largest"
    )
    estimate.add_argument(
        "file", metavar="FILE", help="a JSON list, JSONL or request body; - reads stdin"
    )
    estimate.add_argument(
        "--top", type=_non_negative, default=10, help="largest messages listed (default 10)"
    )
    estimate.set_defaults(handler=cmd_estimate)

    inspect = verbs.add_parser("inspect", help="sessions, snapshots and archives of a store")
    inspect.add_argument(
        "store",
        metavar="DIR_OR_DB",
        help="a JSONL directory, a sqlite3 file or a postgresql:// URL",
    )
    inspect.add_argument("--session", help="only this session")
    inspect.set_defaults(handler=cmd_inspect)

    show = verbs.add_parser("show", help="a session's snapshot as a readable transcript")
    show.add_argument("session", metavar="SESSION")
    show.add_argument("--store", metavar="DIR_OR_DB", help=f"the store (default: ${STORE_ENV})")
    show.add_argument("--at", help="snapshot number (0 = newest, 1 = the one before) or a UTC time")
    show.set_defaults(handler=cmd_show)

    compact = verbs.add_parser(
        "compact", help="summarise a saved history with a shell command as the model"
    )
    compact.add_argument("file", metavar="FILE", help="the history; never written to")
    compact.add_argument(
        "--provider-cmd",
        required=True,
        metavar="CMD",
        help="shell command reading the prompt on stdin and printing the summary",
    )
    compact.add_argument(
        "--out", metavar="PATH", help="write the new history here (default stdout)"
    )
    _compactor_options(compact, threshold=False)
    _command_options(compact)
    compact.set_defaults(handler=cmd_compact)

    replay_ = verbs.add_parser(
        "replay", help="run a recorded session turn by turn through a Compactor"
    )
    replay_.add_argument("file", metavar="FILE", help="the recorded history")
    _compactor_options(replay_, threshold=True)
    replay_.add_argument(
        "--provider-cmd", metavar="CMD", help="summarise with this command (default: offline)"
    )
    _command_options(replay_)
    replay_.add_argument("--plot", metavar="SVG", help="draw the context per turn to this file")
    replay_.add_argument("--all", action="store_true", help="list every turn, not only compactions")
    replay_.set_defaults(handler=cmd_replay)

    for sub in (estimate, inspect, show, compact, replay_):
        sub.add_argument("--json", action="store_true", help="print JSON for scripts")
    return parser


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of ``python -m bareagent_compact`` and the ``bareagent-compact`` script."""
    args = build_parser().parse_args(argv)
    stream = sys.stdout if out is None else out
    handler: Callable[[argparse.Namespace, TextIO], int] = args.handler
    log = logging.getLogger("bareagent_compact")
    console = logging.StreamHandler(sys.stderr)
    if not args.verbose:
        console.setFormatter(_Brief())
    log.addHandler(console)
    try:
        return handler(args, stream)
    except CliError as exc:
        sys.stderr.write(f"{PROG} {args.command}: error: {exc}\n")
        return EXIT_USAGE
    except CommandFailed as exc:
        sys.stderr.write(f"{PROG} {args.command}: failed: {exc}\n")
        return EXIT_FAILED
    except BrokenPipeError:  # e.g. piped into head
        return 0
    finally:
        log.removeHandler(console)
