"""Before micro-compaction: drop what precedes the server's own compaction
(``prune_before_server_compaction``) and clear old thinking
(``clear_thinking_after_turns``)."""

from __future__ import annotations

import logging
from collections.abc import Generator
from typing import Any

from bareagent_compact import dialects
from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.turn import Turn
from bareagent_compact.plain import plain_messages
from bareagent_compact.requests import Outcome, Request, SaveRequest
from bareagent_compact.thinking import clear_thinking

logger = logging.getLogger("bareagent_compact.compactor")


def run(parts: Parts, turn: Turn) -> Generator[Request, Any, tuple[int, int]]:
    """Prune and clear, as configured: how many messages were dropped and thinking
    blocks cleared. Not while a background summary is pending (its swap needs the
    history as it was, only appended to)."""
    if parts.pending is not None:
        return 0, 0
    pruned = yield from _prune(parts, turn)
    cleared = _clear_thinking(parts, turn)
    if pruned or cleared:
        turn.edited(0)
    return pruned, cleared


def _prune(parts: Parts, turn: Turn) -> Generator[Request, Any, int]:
    """Drop what comes before the newest server compaction artefact (system
    messages aside), after saving the whole list when there is a transcript
    manager; how many were dropped."""
    options = parts.options
    if not options.prune_before_server_compaction:
        return 0
    messages = turn.messages
    plain_messages(messages)
    dead = dialects.dead_indices(messages)
    if not dead:
        return 0
    if options.transcript_mgr is not None:
        saved: Outcome = yield SaveRequest(list(messages), parts.session_id)
        parts.reread(turn)
        if saved.failed and options.require_snapshot:
            logger.warning(
                "messages before the server's compaction kept: snapshot failed for "
                "session %r%s",
                parts.session_id,
                saved.because(),
                exc_info=saved.error,
            )
            turn.touched = True  # the next call tries again
            return 0
    for index in reversed(dead):
        del messages[index]
    parts.counter.edited()
    return len(dead)


def _clear_thinking(parts: Parts, turn: Turn) -> int:
    keep_turns = parts.options.derived.clear_thinking_after_turns
    if keep_turns is None:
        return 0
    plain_messages(turn.messages)
    cleared = clear_thinking(turn.messages, keep_turns)
    if cleared:
        parts.counter.edited()
    return cleared

