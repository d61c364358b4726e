"""``background_at``: the summary started early on a frozen copy, and swapped in
by a later call (the ordinary rebuild, which keeps what was appended since)."""

from __future__ import annotations

import logging
from collections.abc import Generator
from dataclasses import replace
from typing import Any

from bareagent_compact.background import Pending, frozen
from bareagent_compact.engine.full import continuing
from bareagent_compact.engine.full import plan as planning
from bareagent_compact.engine.full.attempt import Attempt
from bareagent_compact.engine.full.commit import after, conclude
from bareagent_compact.engine.full.summarise import snapshot, summarise
from bareagent_compact.engine.full.watch import watching
from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.turn import Turn
from bareagent_compact.protocols import Message
from bareagent_compact.rebuild import Plan
from bareagent_compact.requests import CollectRequest, Outcome, Request, StartRequest, Steps
from bareagent_compact.result import Action, CompactionResult, Reason
from bareagent_compact.summarize import Summarized

logger = logging.getLogger("bareagent_compact.compactor")


def start(parts: Parts, turn: Turn, attempt: Attempt) -> Steps:
    """Past ``background_at``: plan as for a full compaction, ask the hook, then
    have the snapshot and the summary made in the background, on a frozen copy;
    the call itself returns at once."""
    watermark = parts.options.derived.background_tokens
    assert watermark is not None
    made = planning.plan(parts, turn.messages, attempt, watermark)
    if isinstance(made, CompactionResult):
        return made
    made = continuing.attach(parts, turn, made)
    if planning.held(parts, made, attempt.tokens) is not None:
        return attempt.quiet()
    made = yield from planning.consult(parts, made, attempt, turn.instructions)
    if isinstance(made, CompactionResult):
        return made
    try:
        made, copy = frozen(made)
    except ValueError:
        logger.warning("compaction skipped: history cannot be encoded", exc_info=True)
        return attempt.failure(parts.trigger, Reason.NOT_ENCODABLE)
    prepared = _prepare(parts, made, attempt, copy, parts.session_id)
    started: Outcome = yield StartRequest(prepared)
    parts.pending = Pending(made, attempt, started.value)
    logger.info(
        "summary of %d messages started in the background at %d of %d tokens",
        len(made.source),
        attempt.tokens,
        parts.options.derived.threshold,
    )
    return attempt.quiet()


def _prepare(
    parts: Parts, made: Plan, attempt: Attempt, copy: list[Message], session_id: str
) -> Generator[Request, Any, Summarized]:
    """The background part: save the snapshot under ``session_id`` (the session of
    the history summarised, even if ``set_session_id`` ran since), then summarise
    (steps 5-7)."""
    if not (yield from snapshot(parts, made, attempt, copy, session_id)):
        return Summarized(None, Reason.SNAPSHOT_FAILED, 0, 0)
    return (yield from summarise(parts, made))


def swap(
    parts: Parts, turn: Turn, attempt: Attempt
) -> Generator[Request, Any, CompactionResult | None]:
    """Swap in the background summary when it is done, waiting for it when the
    history is over the threshold (or the call is forced); ``None`` while it
    runs, or when it was lost and a compaction is due now."""
    pending = parts.pending
    assert pending is not None
    due = attempt.force or attempt.tokens > parts.options.derived.threshold
    watched = None if pending.edited else watching(turn)
    answer: Outcome | None = yield CollectRequest(pending.handle, due)
    if answer is None:
        return None
    if parts.pending is pending:
        parts.pending = None
    if answer.failed:
        return _lost(parts, attempt, answer, due)
    done: Summarized = answer.value
    joined = replace(
        pending.attempt, force=attempt.force, tokens=attempt.tokens, truncated=attempt.truncated
    )
    joined.calls, joined.parts = done.calls, done.parts
    joined.cost = done.sent_cost
    result = conclude(parts, turn, pending.plan, joined, done, watched=watched, background=True)
    yield from after(parts, result, joined.summary if result.action is Action.FULL else None)
    return result


def _lost(parts: Parts, attempt: Attempt, answer: Outcome, due: bool) -> CompactionResult | None:
    """A background summary that ended without an answer: logged; a compaction
    due now is made at once (``None``), else the call says the summary was lost."""
    if answer.error is not None:
        parts.trigger.failed(attempt.tokens)
    logger.warning(
        "background summary lost%s; history left as it is%s",
        answer.because() if answer.error is None else " (it raised)",
        ", compacting now" if due else "",
        exc_info=answer.error,
    )
    return None if due else attempt.quiet(Reason.BACKGROUND_LOST)


def drop(parts: Parts, why: str) -> object | None:
    """Forget the summary running in the background (logged); its handle."""
    pending, parts.pending = parts.pending, None
    if pending is None:
        return None
    logger.info("background summary %s; history left as it is", why)
    return pending.handle
