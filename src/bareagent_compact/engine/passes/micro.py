"""Step 1: micro-compaction, with the archive taking each original first."""

from __future__ import annotations

import logging
from collections.abc import Generator
from functools import partial
from typing import Any

from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.passes import behind
from bareagent_compact.engine.passes._archive import archived, records
from bareagent_compact.engine.turn import Turn
from bareagent_compact.micro import (
    Due,
    Undo,
    apply_micro,
    plan_micro,
    plan_plain_micro,
)
from bareagent_compact.micro_policy import select_micro
from bareagent_compact.plain import plain_messages
from bareagent_compact.recall import with_handles
from bareagent_compact.requests import ArchiveRequest, Request
from bareagent_compact.validate import validate_messages

logger = logging.getLogger(__name__)


def trust_scan(parts: Parts, turn: Turn) -> None:
    """Let micro-compaction and the oversize scan read only past what they know,
    when the history before that is unchanged (what the cache saw change, unless
    this call already changed the history: then unknown)."""
    changed = turn.changes if turn.synced else None
    turn.changes = changed
    scan = parts.view.micro_scan
    scan.trusted = changed is not None and (not changed or changed[0] >= scan.clean)
    history = parts.view.history
    scan.names = partial(history.tool_names, turn.messages) if changed is not None else None


def _planned(parts: Parts, turn: Turn) -> list[Due]:
    """The results due for truncation (none before the newest server compaction
    artefact), with recall handles when the archive reads records back. Its scan
    also notices SDK objects, which are converted once, in place, before anything
    else reads them."""
    messages = turn.messages
    keep_recent = parts.options.derived.keep_recent
    scan = parts.view.micro_scan
    server = parts.view.server_scan
    planned = plan_micro(messages, keep_recent, scan, server.index(messages, turn.unchanged()))
    if planned is None:
        scan.reset()
        plain_messages(messages)
        validate_messages(messages)
        planned = plan_plain_micro(messages, keep_recent, server.index(messages))
    reader = parts.ports.reader
    return with_handles(planned, parts.session_id, reader, parts.view.handles)


def run(parts: Parts, turn: Turn) -> Generator[Request, Any, Undo]:
    """Truncate the results due, as the micro policy says; what to undo."""
    options = parts.options
    scan = parts.view.micro_scan
    cached = not parts.view.history.empty  # else copied once, at the end of the call
    turn.kept_whole = []
    planned = _planned(parts, turn)
    due = len(planned)
    policy = options.derived.micro_options
    if planned and not policy.is_spec:
        # Over the threshold (or forced) everything eligible is cleared before
        # the full compaction is decided on; with the cache expired too, since
        # the prefix is written again anyway.
        planned = select_micro(planned, policy, partial(_must_clear, parts, turn, cached))
    if not planned:
        scan.settle(not due)
        if due and parts.counter.may_go_cold():
            turn.touched = True  # held back: a call again may find the cache expired
        return []
    keep = None
    if parts.ports.archive is not None:
        keep = yield from _archive_due(parts, turn, planned)
        parts.reread(turn)
    undo = apply_micro(planned, keep)
    if undo:
        parts.counter.edited()  # the reported size no longer fits the edited messages
        # Only results past where the scan began: the messages before it hold
        # none that is due (so no block shared with one truncated here either).
        turn.edited(scan.read_from)
    scan.settle(len(undo) == due)
    if len(undo) < due:
        turn.touched = True  # a call again might truncate more
    return undo


def _must_clear(parts: Parts, turn: Turn, cached: bool) -> bool:
    """Whether a policy that holds results back clears everything due now: forced,
    the prompt cache expired, or the history over the threshold."""
    if turn.force:
        return True
    if parts.counter.cache_cold():
        logger.debug("the prompt cache has expired: clearing every result due")
        return True
    return parts.counter.history(parts.view, turn, cached) > parts.options.derived.threshold


def _archive_due(
    parts: Parts, turn: Turn, planned: list[Due]
) -> Generator[Request, Any, list[bool]]:
    """Which planned results may be truncated now: those whose record is durably
    archived. An archive that writes behind gets the records handed to its
    writer, and their results stay whole until the writer has written them."""
    writes_behind = parts.ports.behind() is not None
    if writes_behind or parts.behind:
        return (yield from behind.hand(parts, turn, planned, writes_behind))
    outcomes = yield ArchiveRequest(records(planned, parts.session_id))
    return [archived(outcome) for outcome in outcomes]
