"""The continuation summariser's hand-off: the history as the call received it,
copied before step 1 changes anything, and given to the plan of the full
compaction that fires in the same call."""

from __future__ import annotations

import logging
from dataclasses import replace

from bareagent_compact.continuation import kept_count, received
from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.turn import Turn
from bareagent_compact.protocols import is_continuation_summariser
from bareagent_compact.rebuild import Plan

logger = logging.getLogger("bareagent_compact.compactor")


def capture(parts: Parts, turn: Turn) -> None:
    """Before step 1: with a continuation summariser, when this call may fire a
    full compaction (forced, or the count as received may fire one: step 1 only
    lowers it), keep a copy of the history as received on ``turn``."""
    if not is_continuation_summariser(parts.provider) or parts.pending is not None:
        return
    tokens = parts.counter.history(parts.view, turn)
    if not (turn.force or parts.may_fire(tokens)):
        return
    try:
        turn.received = received(turn.messages)
    except ValueError:  # the plan fails on it too, with its own warning
        return
    turn.received_at = {id(m): i for i, m in enumerate(turn.messages)}
    turn.received_tokens = tokens


def attach(parts: Parts, turn: Turn, made: Plan) -> Plan:
    """``made`` carrying the history as received (when it was copied), how much of
    it is kept verbatim, and whether it is within what a request may carry:
    ``summary_input_tokens``, or ``context_window`` when given."""
    conversation = turn.received
    if conversation is None:
        return made
    first = made.snapshot[made.tail_start] if made.tail_start < len(made.snapshot) else None
    kept = kept_count(conversation, turn.received_at, first)
    options = parts.options
    room = max(options.summary_input_tokens, options.context_window or 0)
    return replace(
        made,
        conversation=conversation,
        conversation_kept=kept,
        conversation_fits=turn.received_tokens <= room,
    )
