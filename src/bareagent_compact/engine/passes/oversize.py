"""Step 1, continued: each text over ``max_message_tokens`` cut to its head and
tail (see :mod:`bareagent_compact.oversize`), once its original is kept."""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from typing import Any

from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.passes._archive import archived, records
from bareagent_compact.engine.turn import Turn
from bareagent_compact.micro import Due, Undo, apply_micro
from bareagent_compact.oversize import OversizeScan, cut_handles
from bareagent_compact.requests import ArchiveRequest, Outcome, Request, SaveRequest

logger = logging.getLogger("bareagent_compact.compactor")


def run(parts: Parts, turn: Turn, undo: Undo) -> Generator[Request, Any, None]:
    """Cut the oversize texts the scan finds (none before the newest server
    compaction artefact: the dead part stays as it is), adding to ``undo``."""
    options = parts.options
    view = parts.view
    handles = cut_handles(parts.session_id, parts.ports.reader)  # recall handles
    if turn.changes is None:
        view.oversize = OversizeScan()  # what changed is not known: read it all
    messages = turn.messages
    live_from = max(view.server_scan.index(messages, turn.unchanged()), 0)
    planned = view.oversize.plan(
        messages, options.derived.max_message_tokens, handles, turn.changes, live_from
    )
    if not planned:
        return
    turn.touched = True
    keep = yield from _may_cut(parts, turn, planned)
    view.oversize.settle(messages, keep)
    if parts.ports.archive is not None or options.transcript_mgr is not None:
        parts.reread(turn)  # _may_cut asked one of them
    if keep is not None and not any(keep):
        return
    cut = apply_micro(planned, keep)
    turn.edited(0)
    logger.info("cut %d oversize text(s) to their head and tail", len(cut))
    undo += cut
    parts.counter.edited()


def _may_cut(
    parts: Parts, turn: Turn, planned: Sequence[Due]
) -> Generator[Request, Any, list[bool] | None]:
    """Which planned texts may be cut: those the archive hook took; without one,
    all once a snapshot is saved (or not required); with neither, all (``None``)."""
    options = parts.options
    if parts.ports.archive is not None:
        outcomes = yield ArchiveRequest(records(planned, parts.session_id))
        return [archived(outcome, "oversize text kept whole") for outcome in outcomes]
    if options.transcript_mgr is None:
        return None
    saved: Outcome = yield SaveRequest(list(turn.messages), parts.session_id)
    if saved.failed:
        logger.warning(
            "transcript snapshot before cutting an oversize text failed%s",
            saved.because(),
            exc_info=saved.error,
        )
    return [not saved.failed or not options.require_snapshot] * len(planned)
