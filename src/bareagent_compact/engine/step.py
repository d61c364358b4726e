"""One compaction step (SPEC 11.2 steps 1-8) on one call's :class:`Turn`: the
passes of step 1 in order, then the full compaction; and the shortcut of a call
on a history the last call left with nothing to do."""

from __future__ import annotations

from collections.abc import MutableSequence
from dataclasses import replace
from typing import Any

from bareagent_compact.engine.full import continuing
from bareagent_compact.engine.full import run as full
from bareagent_compact.engine.full.watch import note_edits
from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.passes import behind, micro, oversize, prune
from bareagent_compact.engine.turn import Turn
from bareagent_compact.history import HistoryCache
from bareagent_compact.micro import Undo, changes_prefix, freed_tokens, undo_micro
from bareagent_compact.plain import plain_messages
from bareagent_compact.requests import Steps
from bareagent_compact.result import Action, CompactionResult
from bareagent_compact.validate import validate_messages


def steps(
    parts: Parts, messages: MutableSequence[Any], force: bool, instructions: str | None
) -> Steps:
    """One compaction step on ``messages`` in place."""
    turn = Turn(messages, force, instructions, parts.view.history)
    changed = _changed(parts, turn)
    note_edits(parts, turn)
    repeat = not force and instructions is None and parts.pending is None
    quiet = _idle_result(parts, turn) if repeat and changed == [] else None
    if quiet is not None:
        return quiet
    parts.view.idle = False
    continuing.capture(parts, turn)  # before step 1 changes anything
    pruned, cleared = yield from prune.run(parts, turn)
    micro.trust_scan(parts, turn)
    undo = yield from micro.run(parts, turn)
    try:
        yield from oversize.run(parts, turn, undo)
        tokens = yield from behind.catch_up(parts, turn, undo)
        prefix_changed = changes_prefix(messages, undo)
        result = yield from full.run(parts, turn, len(undo), tokens)
    except BaseException:
        # The driver gave up (cancelled or interrupted) during a request, or an
        # interrupt came while the summary was read or counted: the history goes
        # back exactly as it was, and what was cut is looked at again.
        undo_micro(undo)
        parts.view.rescan()
        raise
    result = _reported(result, undo, prefix_changed, pruned, cleared)
    _finish(parts, turn, result, repeat and not (pruned or cleared))
    return result


def _changed(parts: Parts, turn: Turn) -> list[int] | None:
    """Validate the messages and compare them with the history cache: the indices
    of the messages new or edited since the last call, ``None`` if unknown.

    Only those are validated. SDK objects are converted here (as step 1 would)
    so that the cache can compare them; nothing held yet: the history is copied
    once, after this call's edits.
    """
    history = parts.view.history
    messages = turn.messages
    changed = None if history.empty else history.sync(messages)
    try:
        changed = _converted(history, messages, changed)
        validate_messages(messages, objects=True, only=changed)
    except TypeError:
        history.forget()
        raise
    if changed is None and not history.empty and isinstance(messages, list):
        plain_messages(messages)
        changed = history.sync(messages)
    turn.synced = changed is not None
    turn.edited_from = len(messages) if turn.synced else 0
    turn.changes = changed
    return changed


def _converted(
    history: HistoryCache, messages: MutableSequence[Any], changed: list[int] | None
) -> list[int] | None:
    """``changed``, or, when SDK objects kept the cache from copying the messages it
    found new or edited, those messages converted (and only those: the others
    equal their plain copies) and the cache brought up to date."""
    for _ in range(2):  # objects as messages, then inside the messages
        uncopied = history.uncopied
        if changed is not None or uncopied is None or history.empty:
            return changed
        validate_messages(messages, objects=True, only=uncopied)
        plain_messages(messages, only=uncopied)
        changed = history.sync(messages)
    return changed


def _idle_result(parts: Parts, turn: Turn) -> CompactionResult | None:
    """The result of a call on a history left as the last call left it, when that
    call left nothing to do: only the count can differ (a usage report). ``None``
    unless so, and the count is below every limit."""
    if not parts.view.idle:
        return None
    tokens = parts.counter.history(parts.view, turn)
    if parts.may_fire(tokens):
        return None
    parts.trigger.calls += 1
    return CompactionResult(Action.NONE, tokens, tokens, 0)


def _finish(parts: Parts, turn: Turn, result: CompactionResult, repeat: bool) -> None:
    """Leave the history cache holding the history as this call leaves it, and
    note whether a call on it would change nothing."""
    if result.action is Action.FULL:
        turn.edited(0)
    in_sync = turn.in_sync()
    if repeat:
        parts.view.idle = in_sync and _leaves_nothing(parts, turn, result)


def _leaves_nothing(parts: Parts, turn: Turn, result: CompactionResult) -> bool:
    """Whether this call left nothing to do on its history: below every limit,
    and nothing planned, or (the specification's policy) every planned
    truncation made."""
    return (
        not turn.touched
        and parts.view.micro_scan.whole
        and result.action in (Action.NONE, Action.MICRO)
        and result.reason is None
        and parts.pending is None
        and parts.counter.idle_safe()
    )


def _reported(
    result: CompactionResult, undo: Undo, prefix_changed: bool, pruned: int, cleared: int
) -> CompactionResult:
    """``result`` with what step 1 and the pruning did to the history."""
    if undo:
        # The size before step 1: the count after it, plus what it removed.
        result = replace(result, tokens_before_micro=result.tokens_before + freed_tokens(undo))
    if result.action is Action.FULL:
        result = replace(result, prefix_changed=True, truncations=tuple(undo))
    elif prefix_changed:
        result = replace(result, prefix_changed=True)
    if pruned or cleared:
        result = replace(result, prefix_changed=True, pruned=pruned, thinking_cleared=cleared)
    return result
