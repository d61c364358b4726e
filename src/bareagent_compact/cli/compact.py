"""The ``compact`` verb: summarise a saved history with a shell command as the model."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, Final, TextIO

from bareagent_compact.cli.command import CommandProvider
from bareagent_compact.cli.common import (
    LOGGER,
    PROG,
    CliError,
    CommandFailed,
    check_output_path,
    emit_json,
    read_file,
)
from bareagent_compact.cli.histories import HistoryFile, dump_history, write_history
from bareagent_compact.cli.settings import checked, compactor_options
from bareagent_compact.compactor import Compactor
from bareagent_compact.protocols import Message
from bareagent_compact.result import Action, CompactionResult, Reason
from bareagent_compact.tokens import estimate_tokens

_NOTHING_TO_DO: Final = (Reason.NOTHING_TO_SUMMARISE, Reason.NOTHING_NEW)
"""Reasons that are no failure: the history is written as it is."""


def cmd_compact(args: argparse.Namespace, out: TextIO) -> int:
    target = check_output_path(args.out, args.file) if args.out else None
    options = compactor_options(args)
    checked(options)
    history = read_file(args.file, args.format)
    messages = history.messages
    errors: list[str] = []
    provider = _provider(args, errors)
    compactor = Compactor(provider, **options)
    before = len(messages)
    try:
        tokens_in = estimate_tokens(messages)
        with _CommandErrorsSaidOnce(errors):
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
    if provider.oversized:
        raise CliError(f"{errors[-1]}; nothing written")
    _check_outcome(result, errors[-1] if errors else None)
    _write(args, out, target=target, history=history, messages=messages, report=report)
    if not args.json:
        sys.stderr.write(
            f"{PROG}: full compaction: {tokens_in:,} estimated tokens ({result.tokens_before:,} "
            f"after micro-compaction) -> {result.tokens_after:,}, {before} -> {len(messages)} "
            "messages" + (f", written to {target}" if target is not None else "") + "\n"
        )
    return 0


class _CommandErrorsSaidOnce(logging.Filter):
    """While installed, drops the compactor's "summary provider failed" warning when the
    command's own error was recorded: the verb's one error line says it."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__()
        self.errors = errors
        self.logger = logging.getLogger("bareagent_compact.compactor")

    def filter(self, record: logging.LogRecord) -> bool:
        return not (self.errors and str(record.msg).startswith("summary provider failed"))

    def __enter__(self) -> None:
        self.logger.addFilter(self)

    def __exit__(self, *exc: object) -> None:
        self.logger.removeFilter(self)


def _provider(args: argparse.Namespace, errors: list[str]) -> CommandProvider:
    """The ``--provider-cmd`` provider; each failure's text goes to ``errors``."""
    return CommandProvider(
        args.provider_cmd,
        args.timeout,
        args.prompt_format,
        on_error=errors.append,
        max_output_bytes=args.max_output_bytes,
    )


def _check_outcome(result: CompactionResult, command_error: str | None) -> None:
    """Nothing to do is logged; any other compaction that did not happen fails the verb."""
    if result.action is Action.FULL:
        return
    if result.reason in _NOTHING_TO_DO:
        logging.getLogger(LOGGER).info("no compaction: %s", result.reason)
        return
    detail = command_error or result.reason or result.action.value
    raise CommandFailed(f"no compaction: {detail}; nothing written")


def _write(
    args: argparse.Namespace,
    out: TextIO,
    *,
    target: Path | None,
    history: HistoryFile,
    messages: list[Message],
    report: dict[str, Any],
) -> None:
    """The new history to ``target`` (or ``out``), and the JSON report when asked for."""
    text = dump_history(history, messages)
    if target is not None:
        write_history(target, text)
        if args.json:
            emit_json(out, {**report, "out": str(target)})
    elif args.json:
        emit_json(out, {**report, "messages": messages})
    else:
        out.write(text)
