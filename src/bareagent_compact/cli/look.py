"""The verbs that only look: ``estimate`` (a history file), ``inspect`` and ``show`` (a store)."""

from __future__ import annotations

import argparse
import os
from dataclasses import asdict
from datetime import datetime, timezone
from typing import Any, Final, TextIO

from bareagent_compact.cli.common import (
    CliError,
    Progress,
    count,
    describe_skipped,
    emit_json,
    read_file,
    size,
    tokens_or_none,
)
from bareagent_compact.cli.histories import HistoryError, HistoryFile
from bareagent_compact.cli.inspection import Breakdown, breakdown
from bareagent_compact.cli.readers._base import check_content
from bareagent_compact.pairs import find_orphans
from bareagent_compact.protocols import Message
from bareagent_compact.serialize import _serialize
from bareagent_compact.stores import open as stores_open

STORE_ENV: Final = "BAREAGENT_COMPACT_STORE"
"""Default of ``show --store``."""
_STORE_ERRORS: Final = (ValueError, LookupError, RuntimeError, FileNotFoundError)
"""What reading a store raises for a location or a record it cannot use."""

# -- estimate ---------------------------------------------------------------------


def cmd_estimate(args: argparse.Namespace, out: TextIO) -> int:
    history = read_file(args.file, args.format)
    try:
        found = breakdown(history.messages, largest=args.top)
    except (TypeError, ValueError) as exc:
        raise CliError(f"{args.file} is not a history the estimate can read: {exc}") from None
    if args.json:
        emit_json(
            out,
            {
                "file": args.file,
                "format": history.format,
                "skipped": history.skipped,
                "messages": found.messages,
                "tokens": found.tokens,
                "by_role": {k: asdict(v) for k, v in found.by_role.items()},
                "by_tool": {k: {**asdict(v), "tokens": v.tokens} for k, v in found.by_tool.items()},
                "largest": [asdict(m) for m in found.largest],
            },
        )
        return 0
    _write_breakdown(out, args.file, found, history)
    return 0


def _write_breakdown(out: TextIO, file: str, found: Breakdown, history: HistoryFile) -> None:
    out.write(
        f"{file} ({history.format}): {found.messages:,} messages, "
        f"{found.tokens:,} estimated tokens\n"
    )
    if history.skipped:
        out.write(f"skipped {describe_skipped(history.skipped)}\n")
    out.write(f"\n{'by role':<24}{'messages':>9}{'tokens':>11}{'share':>8}\n")
    whole = max(found.tokens, 1)
    for role, part in sorted(found.by_role.items(), key=lambda kv: -kv[1].tokens):
        out.write(f"{role:<24}{part.messages:>9,}{part.tokens:>11,}{part.tokens / whole:>8.0%}\n")
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


# -- inspect ----------------------------------------------------------------------


def cmd_inspect(args: argparse.Namespace, out: TextIO) -> int:
    kind, report = _inspect_store(args.store, args.session)
    if args.json:
        emit_json(out, {"store": args.store, "kind": kind, "sessions": report})
        return 0
    total = sum(len(r["snapshots"]) for r in report)
    out.write(
        f"{args.store} ({kind}): {count(len(report), 'session')}, {count(total, 'snapshot')}\n"
    )
    for r in report:
        _write_session(out, r)
    return 0


def _inspect_store(location: str, session: str | None) -> tuple[str, list[dict[str, Any]]]:
    """The store's kind and a report per session (only ``session`` when given)."""
    store, kind = _open_store(location)
    try:
        sessions = [session] if session else _session_ids(store)
        report: list[dict[str, Any]] = []
        progress = Progress("inspecting sessions")
        for number, session_id in enumerate(sessions, start=1):
            report.append(_session_report(store, session_id))
            progress(number, len(sessions))
        progress.close()
    except _STORE_ERRORS as exc:
        raise CliError(f"{location}: {exc}") from None
    finally:
        stores_open.close(store)
    return kind, report


def _session_ids(store: stores_open.Store) -> list[str]:
    """Sessions with snapshots (newest first), then those with only an archive (sorted)."""
    with_snapshots = store.list_sessions()
    known = set(with_snapshots)
    return with_snapshots + [s for s in store.archived_sessions() if s not in known]


def _session_report(store: stores_open.Store, session_id: str) -> dict[str, Any]:
    snaps = stores_open.snapshots(store, session_id)
    archive = store.load_archive(session_id)
    latest = stores_open.load(store, snaps[0]) if snaps else []
    return {
        "session_id": session_id,
        "snapshots": [
            {"at": at, "saved": s.timestamp.isoformat(sep=" "), "size": s.size}
            for at, s in enumerate(snaps)
        ],
        "archive": {"records": len(archive), "size": stores_open.archive_size(archive)},
        "latest": {
            "messages": len(latest),
            "tokens": tokens_or_none(latest),
            "orphans": _orphans(latest),
        },
    }


def _orphans(messages: list[Message]) -> list[dict[str, Any]] | None:
    try:
        return [o._asdict() for o in find_orphans(messages)]
    except (TypeError, ValueError):
        return None  # not a history find_orphans can read


def _write_session(out: TextIO, r: dict[str, Any]) -> None:
    out.write(
        f"\nsession {r['session_id']}: {count(len(r['snapshots']), 'snapshot')}, archive "
        f"{count(r['archive']['records'], 'record')} ({size(r['archive']['size'])})\n"
    )
    out.write(f"  {'at':>4}  {'saved (UTC)':<28}{'size':>10}\n")
    for s in r["snapshots"]:
        out.write(f"  {s['at']:>4}  {s['saved']:<28}{size(s['size']):>10}\n")
    latest = r["latest"]
    tokens = "?" if latest["tokens"] is None else f"{latest['tokens']:,}"
    out.write(f"  latest: {latest['messages']} messages, {tokens} estimated tokens, ")
    out.write(_describe_orphans(latest["orphans"]) + "\n")


def _describe_orphans(orphans: list[dict[str, Any]] | None) -> str:
    if orphans is None:
        return "orphans not checked (the snapshot is not a message history)"
    return count(len(orphans), "orphan") + "".join(
        f"\n    {o['kind']} at message {o['message_index']}, block {o['block_index']}"
        f" (id {o['tool_use_id']})"
        for o in orphans[:10]
    )


def _open_store(location: str) -> tuple[stores_open.Store, str]:
    try:
        return stores_open.open_store(location)
    except stores_open.StoreError as exc:
        raise CliError(str(exc)) from None


# -- show -------------------------------------------------------------------------


def cmd_show(args: argparse.Namespace, out: TextIO) -> int:
    location = args.store or os.environ.get(STORE_ENV)
    if not location:
        raise CliError(f"show needs --store DIR_OR_DB (or {STORE_ENV} in the environment)")
    store, _ = _open_store(location)
    try:
        session_id = store.check_session_id(args.session)
        snaps = stores_open.snapshots(store, session_id)
        if not snaps:
            raise CliError(f"{location}: no snapshot of session {session_id!r}")
        position = _pick(snaps, args.at)
        snap = snaps[position]
        messages = stores_open.load(store, snap)
    except _STORE_ERRORS as exc:
        raise CliError(f"{location}: {exc}") from None
    finally:
        stores_open.close(store)
    try:  # what no transcript can show: text that is not Unicode, nesting too deep
        check_content(f"{location}: snapshot {position} of session {session_id!r}", messages)
    except HistoryError as exc:
        raise CliError(str(exc)) from None
    header = {
        "session_id": session_id,
        "at": position,
        "of": len(snaps),
        "saved": snap.timestamp.isoformat(sep=" "),
        "messages": len(messages),
        "tokens": tokens_or_none(messages),
    }
    if args.json:
        emit_json(out, {**header, "transcript": messages})
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


def _pick(snaps: list[stores_open.StoredSnapshot], at: str | None) -> int:
    """The position in ``snaps`` (newest first) that ``--at`` names."""
    if at is None:
        return 0
    try:
        position = int(at)
    except ValueError:
        return _pick_time(snaps, at)
    if not 0 <= position < len(snaps):
        raise CliError(f"--at {position}: the session has snapshots 0 to {len(snaps) - 1}")
    return position


def _pick_time(snaps: list[stores_open.StoredSnapshot], at: str) -> int:
    """The newest of ``snaps`` saved at or before the time ``at``."""
    try:  # Python 3.10's fromisoformat takes no "Z" (UTC) suffix: spelt as an offset
        moment = datetime.fromisoformat(at[:-1] + "+00:00" if at[-1:] in ("Z", "z") else at)
    except ValueError:
        raise CliError(
            f"--at takes a snapshot number (0 = newest) or a time such as "
            f"2025-01-02T03:04:05, got {at!r}"
        ) from None
    moment = _utc(moment)
    for position, snap in enumerate(snaps):
        if _utc(snap.timestamp) <= moment:
            return position
    raise CliError(f"no snapshot saved at or before {at}") from None


def _utc(moment: datetime) -> datetime:
    """``moment`` as a naive UTC time; a naive one is taken as UTC, whatever ``TZ`` says."""
    if moment.tzinfo is None:
        return moment
    return moment.astimezone(timezone.utc).replace(tzinfo=None)
