"""The parser of ``bareagent-compact VERB ...`` and ``main``, which runs a verb's handler."""

from __future__ import annotations

import argparse
import io
import logging
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final, NoReturn, TextIO

import bareagent_compact
from bareagent_compact.cli.command import COMMAND_TIMEOUT, MAX_OUTPUT_BYTES
from bareagent_compact.cli.common import EXIT_FAILED, EXIT_USAGE, PROG, CliError, CommandFailed
from bareagent_compact.cli.compact import cmd_compact
from bareagent_compact.cli.compare import (
    CACHE_READ_PRICE,
    CACHE_WRITE_PRICE,
    OUTPUT_PRICE,
    Prices,
    parse_prices,
)
from bareagent_compact.cli.demo import DEMO_THRESHOLD
from bareagent_compact.cli.look import STORE_ENV, cmd_estimate, cmd_inspect, cmd_show
from bareagent_compact.cli.readers import AUTO, FORMATS, HistoryError
from bareagent_compact.cli.sessions import cmd_demo, cmd_replay
from bareagent_compact.cli.settings import max_message_tokens_arg
from bareagent_compact.cli.turns import CACHE_MIN_TOKENS
from bareagent_compact.micro import DEFAULT_KEEP_RECENT
from bareagent_compact.micro_policy import MICRO_CACHE_FRIENDLY, MICRO_SPEC
from bareagent_compact.oversize import DEFAULT_MAX_MESSAGE_TOKENS, MAX_MESSAGE_FLOOR
from bareagent_compact.prompts import DEFAULT_THRESHOLD, LANGUAGES

if TYPE_CHECKING:
    from typing import TypeAlias

    Verbs: TypeAlias = argparse._SubParsersAction["_Parser"]
    """What ``add_subparsers`` returns: each verb's parser is added to it."""


_MICRO: Final = (MICRO_SPEC, MICRO_CACHE_FRIENDLY)


class _Parser(argparse.ArgumentParser):
    """A parser whose errors are one line on stderr (and exit code 2), like every verb's."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


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


def _positive_int(text: str) -> int:
    value = _non_negative(text)
    if value == 0:
        raise argparse.ArgumentTypeError("expected a number > 0, got 0")
    return value


def _prices(text: str) -> Prices:
    try:
        return parse_prices(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _price(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a price, got {text!r}") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a price >= 0, got {text}")
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
    """The ``Compactor``'s options (checked by it: a value it refuses exits 2)."""
    parser.add_argument(
        "--threshold",
        type=_non_negative,
        default=DEFAULT_THRESHOLD,
        help=f"full compaction past this many estimated tokens (default {DEFAULT_THRESHOLD:,})"
        if threshold
        else "the threshold the micro preset and the pinned facts' budget follow "
        f"(default {DEFAULT_THRESHOLD:,})",
    )
    parser.add_argument(
        "--keep-recent",
        type=_non_negative,
        help=f"tool-result messages micro-compaction leaves whole (default {DEFAULT_KEEP_RECENT}, "
        "or the --micro preset's)",
    )
    parser.add_argument(
        "--keep-tool-pairs",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the tool calls a pending turn answers (Compactor's keep_tool_pairs, default on)",
    )
    parser.add_argument(
        "--micro",
        default=MICRO_SPEC,
        help=f"micro-compaction: {' or '.join(_MICRO)} (default spec)",
    )
    parser.add_argument(
        "--max-message-tokens",
        type=max_message_tokens_arg,
        default=DEFAULT_MAX_MESSAGE_TOKENS,
        metavar="N|none",
        help="cut a single tool result or user text over this many estimated tokens to its "
        f"head and tail; none: never (default half the threshold, at least {MAX_MESSAGE_FLOOR:,})",
    )
    _summary_options(parser)


def _summary_options(parser: argparse.ArgumentParser) -> None:
    """The ``Compactor``'s options for the summary and what it keeps."""
    parser.add_argument(
        "--language", help=f"the summary's language: {' or '.join(sorted(LANGUAGES))} (default zh)"
    )
    parser.add_argument("--instructions", metavar="TEXT", help="added to the summary prompt")
    parser.add_argument(
        "--pin-facts",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="keep paths, errors and identifiers in a pinned block beside the summary "
        "(default off)",
    )
    parser.add_argument(
        "--keep-tail-tokens",
        type=_non_negative,
        default=0,
        help="keep at least this many estimated tokens of the newest messages (default 0)",
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
    parser.add_argument(
        "--max-output-bytes",
        type=_positive_int,
        default=MAX_OUTPUT_BYTES,
        help=f"a longer summary is a failure (default {MAX_OUTPUT_BYTES:,}, 1 MiB)",
    )


def _compare_options(parser: argparse.ArgumentParser) -> None:
    """``replay --compare`` and the prices its cost uses, per input token."""
    parser.add_argument(
        "--compare",
        metavar="SETTINGS",
        help="replay under each setting, e.g. default,cache-friendly,threshold=80k or "
        "micro=cache-friendly+threshold=20000 (see docs/cli.md)",
    )
    for flag, default, what in (
        ("--cache-write-price", CACHE_WRITE_PRICE, "a token written to the prompt cache"),
        ("--cache-read-price", CACHE_READ_PRICE, "a token read from the prompt cache"),
        ("--output-price", OUTPUT_PRICE, "a summary's output token"),
    ):
        parser.add_argument(
            flag,
            type=_price,
            default=default,
            help=f"price of {what}, in input-token prices (default {default:g}, Anthropic's)",
        )
    parser.add_argument(
        "--prices",
        metavar="TABLE",
        type=_prices,
        help="a price table per million tokens, e.g. input=3,output=15,cache_read=0.3,"
        "cache_write=3.75, or a JSON file of those keys: costs in that currency "
        "(instead of the three prices above)",
    )
    parser.add_argument(
        "--cache-min-tokens",
        type=_non_negative,
        default=CACHE_MIN_TOKENS,
        help=f"shorter requests are not cached (default {CACHE_MIN_TOKENS:,})",
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
    _compare_options(replay)
    replay.add_argument("--plot", metavar="SVG", help="draw the context per turn to this file")
    replay.add_argument("--all", action="store_true", help="list every turn, not only compactions")
    replay.set_defaults(handler=cmd_replay)
    return replay


class _Version(argparse.Action):
    """``--version``: the package's version (read from the installed metadata), looked
    up only when asked for, so that other commands do not pay for the lookup."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> NoReturn:
        sys.stdout.write(f"{parser.prog} {bareagent_compact.__version__}\n")
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog=PROG,
        description="Context compaction for LLM agents: look at, compact and replay sessions.",
        epilog="Exit codes: 0 done, 1 the operation failed, 2 bad usage or bad input.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log tracebacks too")
    parser.add_argument(
        "--version", action=_Version, help="print the version"
    )
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
