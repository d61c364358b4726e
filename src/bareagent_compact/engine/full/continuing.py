"""The continuation summariser's hand-off: the history as the call received it,
copied before step 1 changes anything, and given to the plan of the full
compaction that fires in the same call."""

from __future__ import annotations

import logging
from dataclasses import replace

from bareagent_compact.continuation import kept_count, received, sent_part
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
    turn.received_sent = parts.counter.sent_prefix(turn.received)


def attach(parts: Parts, turn: Turn, made: Plan) -> Plan:
    """``made`` carrying the part of the history as received (when it was copied)
    the summary request sends (see :func:`sent_part`), how much of it is kept
    verbatim, its count and whether the model already accepted it."""
    conversation = turn.received
    if conversation is None:
        return made
    first = made.snapshot[made.tail_start] if made.tail_start < len(made.snapshot) else None
    sent, kept = sent_part(conversation, kept_count(conversation, turn.received_at, first))
    tokens = turn.received_tokens
    if len(sent) < len(conversation):  # the whole history's count, less what is left out
        tokens = max(0, tokens - parts.counter.count_live(conversation[len(sent):]))
    return replace(
        made,
        conversation=sent,
        conversation_kept=kept,
        conversation_tokens=tokens,
        conversation_accepted=0 < len(sent) <= turn.received_sent,
    )


def fits(parts: Parts, made: Plan, text: str) -> bool:
    """Whether the summary request (``made.conversation``, then the instruction
    ``text``) may be sent: the model accepted that conversation at the loop's last
    request, or its count with the instruction's is within ``summary_input_tokens``
    (``context_window`` when given)."""
    if made.conversation_accepted:
        return True
    options = parts.options
    room = max(options.summary_input_tokens, options.context_window or 0)
    asked = parts.counter.count([{"role": "user", "content": text}])
    return made.conversation_tokens + asked <= room
