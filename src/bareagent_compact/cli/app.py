"""The parser of ``bareagent-compact VERB ...`` and ``main``, which runs a verb's handler."""

from __future__ import annotations

import argparse
import io
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, TextIO

from bareagent_compact.cli.command import COMMAND_TIMEOUT
from bareagent_compact.cli.common import EXIT_FAILED, EXIT_USAGE, PROG, CliError, CommandFailed
from bareagent_compact.cli.compact import cmd_compact
from bareagent_compact.cli.demo import DEMO_THRESHOLD
from bareagent_compact.cli.look import STORE_ENV, cmd_estimate, cmd_inspect, cmd_show
from bareagent_compact.cli.readers import AUTO, FORMATS, HistoryError
from bareagent_compact.cli.sessions import cmd_demo, cmd_replay
from bareagent_compact.micro import DEFAULT_KEEP_RECENT
from bareagent_compact.prompts import DEFAULT_THRESHOLD

if TYPE_CHECKING:
    from typing import TypeAlias

    Verbs: TypeAlias = argparse._SubParsersAction[argparse.ArgumentParser]
    """What ``add_subparsers`` returns: each verb's parser is added to it."""


class _Brief(logging.Formatter):
    """Log lines without tracebacks, for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{PROG}: {record.levelname.lower()}: {record.getMessage()}"


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


# -- options shared by several verbs ----------------------------------------------


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


def _format_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default=AUTO,
        help="how to read FILE (default auto: found from its records; see docs/cli.md)",
    )


# -- one parser per verb ----------------------------------------------------------


def _add_demo(verbs: Verbs) -> argparse.ArgumentParser:
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
    return demo


def _add_estimate(verbs: Verbs) -> argparse.ArgumentParser:
    estimate = verbs.add_parser(
        "estimate", help="estimated tokens of a history: total, by role, by tool, largest"
    )
    estimate.add_argument(
        "file", metavar="FILE", help="a JSON list, JSONL or request body; - reads stdin"
    )
    estimate.add_argument(
        "--top", type=_non_negative, default=10, help="largest messages listed (default 10)"
    )
    _format_option(estimate)
    estimate.set_defaults(handler=cmd_estimate)
    return estimate


def _add_inspect(verbs: Verbs) -> argparse.ArgumentParser:
    inspect = verbs.add_parser("inspect", help="sessions, snapshots and archives of a store")
    inspect.add_argument(
        "store",
        metavar="DIR_OR_DB",
        help="a JSONL directory, a sqlite3 file or a postgresql:// URL",
    )
    inspect.add_argument("--session", help="only this session")
    inspect.set_defaults(handler=cmd_inspect)
    return inspect


def _add_show(verbs: Verbs) -> argparse.ArgumentParser:
    show = verbs.add_parser("show", help="a session's snapshot as a readable transcript")
    show.add_argument("session", metavar="SESSION")
    show.add_argument("--store", metavar="DIR_OR_DB", help=f"the store (default: ${STORE_ENV})")
    show.add_argument("--at", help="snapshot number (0 = newest, 1 = the one before) or a UTC time")
    show.set_defaults(handler=cmd_show)
    return show


def _add_compact(verbs: Verbs) -> argparse.ArgumentParser:
    compact = verbs.add_parser(
        "compact", help="summarise a saved history with a shell command as the model"
    )
    compact.add_argument("file", metavar="FILE", help="the history; never written to")
    _format_option(compact)
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
    return compact


def _add_replay(verbs: Verbs) -> argparse.ArgumentParser:
    replay = verbs.add_parser(
        "replay", help="run a recorded session turn by turn through a Compactor"
    )
    replay.add_argument("file", metavar="FILE", help="the recorded history")
    _format_option(replay)
    _compactor_options(replay, threshold=True)
    replay.add_argument(
        "--provider-cmd", metavar="CMD", help="summarise with this command (default: offline)"
    )
    _command_options(replay)
    replay.add_argument("--plot", metavar="SVG", help="draw the context per turn to this file")
    replay.add_argument("--all", action="store_true", help="list every turn, not only compactions")
    replay.set_defaults(handler=cmd_replay)
    return replay


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Context compaction for LLM agents: look at, compact and replay sessions.",
        epilog="Exit codes: 0 done, 1 the operation failed, 2 bad usage or bad input.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log tracebacks too")
    verbs = parser.add_subparsers(dest="command", required=True, metavar="VERB")
    _add_demo(verbs)
    for add in (_add_estimate, _add_inspect, _add_show, _add_compact, _add_replay):
        add(verbs).add_argument("--json", action="store_true", help="print JSON for scripts")
    return parser


def _stdout() -> TextIO:
    """``sys.stdout``, writing what it cannot encode (a file name's undecodable bytes,
    a lone surrogate in a message) as backslash escapes rather than failing."""
    stream = sys.stdout
    if isinstance(stream, io.TextIOWrapper):
        stream.reconfigure(errors="backslashreplace")
    return stream


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """Entry point of ``python -m bareagent_compact`` and the ``bareagent-compact`` script."""
    args = build_parser().parse_args(argv)
    stream = _stdout() if out is None else out
    handler: Callable[[argparse.Namespace, TextIO], int] = args.handler
    log = logging.getLogger("bareagent_compact")
    console = logging.StreamHandler(sys.stderr)
    if not args.verbose:
        console.setFormatter(_Brief())
    log.addHandler(console)
    try:
        return handler(args, stream)
    except (CliError, HistoryError) as exc:
        sys.stderr.write(f"{PROG} {args.command}: error: {exc}\n")
        return EXIT_USAGE
    except CommandFailed as exc:
        sys.stderr.write(f"{PROG} {args.command}: failed: {exc}\n")
        return EXIT_FAILED
    except BrokenPipeError:  # e.g. piped into head
        return 0
    finally:
        log.removeHandler(console)
