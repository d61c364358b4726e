"""Step 8: rebuild the history around the summary in place, and what the
compaction's result says; the ``after_compact`` hook."""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator
from functools import partial
from typing import Any

from bareagent_compact.engine.full.attempt import Attempt
from bareagent_compact.engine.full.plan import kept_turns, texts_of
from bareagent_compact.engine.full.summarise import inflated, steps_meanwhile, with_pins
from bareagent_compact.engine.full.watch import EDITED, edited
from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.turn import Turn
from bareagent_compact.protocols import Message
from bareagent_compact.rebuild import (
    Plan,
    Rebuilt,
    rebuild,
    replace_all,
    replacement,
    warn_about,
)
from bareagent_compact.requests import HookRequest, Outcome, Request
from bareagent_compact.result import Action, CompactionResult, Reason
from bareagent_compact.server_summary import unfit
from bareagent_compact.summarize import Summarized

logger = logging.getLogger("bareagent_compact.compactor")


def conclude(
    parts: Parts,
    turn: Turn,
    made: Plan,
    attempt: Attempt,
    done: Summarized,
    *,
    watched: bool | None,
    background: bool = False,
) -> CompactionResult:
    """Check the summary (pinned facts, never a bigger history), rebuild, commit.
    ``watched``: the history cache held the history summarised, so a summarised
    message edited in place since voids the rebuild (``False``: not known;
    ``None``: known to be edited). The identifiers of the steps taken while the
    summary was made are checked against it on a ``background`` swap, and with
    ``pin_facts`` on any other."""
    unedited = partial(_unedited, turn, made, watched)
    if done.server is not None:
        return _conclude_server(parts, turn, made, attempt, done, unedited=unedited)
    if done.text is None:
        return attempt.failure(parts.trigger, done.reason or Reason.UNUSABLE_SUMMARY)
    checked = background or parts.options.derived.pin_facts
    meanwhile = steps_meanwhile(turn.messages, made) if checked else []
    turns = kept_turns(parts, made)
    summary = with_pins(parts, made, done.text, attempt, turns, meanwhile=meanwhile)
    if summary is None:
        return attempt.failure(parts.trigger, Reason.INFLATED_SUMMARY)
    attempt.summary = summary
    acknowledgement = texts_of(parts, made).acknowledgement
    rebuilt = rebuild(turn.messages, made, summary, acknowledgement, unedited=unedited)
    if rebuilt is None:
        return attempt.failure(parts.trigger, Reason.HISTORY_CHANGED)
    return _commit(parts, turn, made, attempt, rebuilt)


def _unedited(turn: Turn, made: Plan, watched: bool | None) -> bool:
    """Whether no summarised message is known to be edited in place (logged)."""
    if watched is None or (watched and edited(turn, made)):
        logger.warning(EDITED)
        return False
    return True


def _conclude_server(
    parts: Parts,
    turn: Turn,
    made: Plan,
    attempt: Attempt,
    done: Summarized,
    *,
    unedited: Callable[[], bool],
) -> CompactionResult:
    """A server's artefact: messages that keep every tool call paired (checked as
    placed), never a bigger history (counted as the server reads it), then placed
    exactly as returned; no pinned facts (it is opaque)."""
    server = done.server
    assert server is not None
    acknowledgement = parts.options.derived.acknowledgement
    placed = [
        *made.snapshot[: made.fixed_end],
        *made.systems,
        *replacement(made, server, acknowledgement, done.covered),
        *made.snapshot[made.head_end :],
    ]
    if unfit(server, placed, made.snapshot) is not None:
        return attempt.failure(parts.trigger, Reason.UNUSABLE_SUMMARY)
    if inflated(parts, made, server, attempt, covered=done.covered):
        return attempt.failure(parts.trigger, Reason.INFLATED_SUMMARY)
    attempt.summary = server.text
    rebuilt = rebuild(turn.messages, made, server, acknowledgement, done.covered, unedited=unedited)
    if rebuilt is None:
        return attempt.failure(parts.trigger, Reason.HISTORY_CHANGED)
    return _commit(parts, turn, made, attempt, rebuilt)


def _commit(
    parts: Parts, turn: Turn, made: Plan, attempt: Attempt, done: Rebuilt
) -> CompactionResult:
    """The rebuilt history's result; nothing here may raise, the summary is in
    hand and the history rebuilt (an interrupt while it is counted puts back the
    history it replaced, and propagates)."""
    messages = turn.messages
    rebuilt = done.messages
    parts.counter.edited()
    turn.edited(0)
    parts.view.rescan(moved=True)  # the positions the scans knew are gone
    try:
        after = _counted(parts, turn, made, attempt, rebuilt)
    except BaseException:
        replace_all(messages, [*done.replaced, *list(messages)[len(rebuilt) :]])
        raise
    parts.trigger.succeeded(after > parts.options.derived.threshold)
    logger.info(
        "full compaction of session %r: %d -> %d tokens, %d messages summarised in %d "
        "request(s)",
        parts.session_id,
        attempt.tokens,
        after,
        len(done.replaced),
        attempt.calls,
    )
    return CompactionResult(
        Action.FULL,
        attempt.tokens,
        after,
        attempt.truncated,
        attempt.saved,
        None,
        summary_calls=attempt.calls,
        parts=attempt.parts,
        replaced=tuple(done.replaced),
        rebuilt=tuple(rebuilt),
        pinned_identifiers=attempt.pinned_identifiers,
        cost=attempt.cost,
    )


def _counted(
    parts: Parts, turn: Turn, made: Plan, attempt: Attempt, rebuilt: list[Message]
) -> int:
    """The rebuilt history's count, and the warnings about it."""
    messages = turn.messages
    after = parts.counter.history(parts.view, turn)
    threshold = parts.options.derived.threshold
    try:
        arrived = len(messages) - len(rebuilt)
        without = (
            (arrived, parts.counter.count_live(rebuilt)) if after > threshold and arrived else None
        )
        warn_about(messages, made, attempt.tokens, after, threshold, arrived=without)
    except Exception:  # a malformed block must not turn success into an exception
        logger.warning("could not check the rebuilt history", exc_info=True)
    return after


def after(
    parts: Parts, result: CompactionResult, summary: str | None
) -> Generator[Request, Any, None]:
    """Tell ``after_compact`` how the attempt ended; a failing hook is ignored."""
    parts.last_result = result  # undoable even if the hook is interrupted
    hook = parts.options.after_compact
    if hook is None:
        return
    done: Outcome = yield HookRequest(hook, (result, summary))
    parts.view.rescan(moved=True)  # the hook may have edited the history
    if done.error is not None:
        logger.warning("after_compact hook failed; ignored", exc_info=done.error)
