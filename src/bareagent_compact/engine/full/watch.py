"""The summarised messages edited in place while their summary is made: the
summary of the old text must not replace the new one.

The history cache holds copies of the history as the compactor last saw it
(:mod:`bareagent_compact.history`). A full compaction planned while the cache
holds the history compares, once its summary is in hand, each summarised message
with its copy (one C-level ``==`` each); a background summary also notes, on
every call until the swap, whether the messages the cache found edited since the
last call are among those it summarises. A history the cache cannot hold (not a
list of plain dicts) is checked by identity only, as every rebuild is.
"""

from __future__ import annotations

import logging

from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.turn import Turn
from bareagent_compact.rebuild import Plan

logger = logging.getLogger("bareagent_compact.compactor")

EDITED = (
    "a summarised message was edited in place while the summary was made; "
    "history left as it is"
)


def watching(turn: Turn) -> bool:
    """Whether the history cache now holds the history as it is (its copies can
    tell an edit made from now on)."""
    return turn.in_sync()


def edited(turn: Turn, made: Plan) -> bool:
    """Whether a message of ``made``'s source differs from its copy in the history
    cache (call only when :func:`watching` was true when the copies were the
    history summarised)."""
    messages = turn.messages
    copies = turn.history.copies
    sources = made.sources
    if not sources or sources[-1] >= min(len(messages), len(copies)):
        return False  # not known: the cache was dropped meanwhile (or the list cut)
    try:
        return any(messages[i] != copies[i] for i in sources)
    except Exception:  # a value whose == raises: it was put there meanwhile
        return True


def note_edits(parts: Parts, turn: Turn) -> None:
    """At the start of a call, while a background summary runs: mark it voided when
    the caller edited (or replaced) a message it summarises since the last call."""
    pending = parts.pending
    changes = turn.changes
    if pending is None or pending.edited or not changes:
        return
    sources = pending.plan.sources
    if not sources or changes[0] > sources[-1]:
        return  # only messages after the summarised part (the usual appends)
    if not pending.summarised.isdisjoint(changes):
        parts.pending = pending.voided()
