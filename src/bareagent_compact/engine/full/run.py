"""Steps 2-8 in order: plan, consult the hook, snapshot, summarise, check,
rebuild and commit (or start, or swap in, a background summary)."""

from __future__ import annotations

from bareagent_compact.background import starts_early
from bareagent_compact.engine.full import background, continuing
from bareagent_compact.engine.full import plan as planning
from bareagent_compact.engine.full.attempt import Attempt
from bareagent_compact.engine.full.commit import after, conclude
from bareagent_compact.engine.full.summarise import snapshot, summarise
from bareagent_compact.engine.full.watch import watching
from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.turn import Turn
from bareagent_compact.requests import Steps
from bareagent_compact.result import Action, CompactionResult, Reason


def run(parts: Parts, turn: Turn, truncated: int, tokens: int) -> Steps:
    """The full compaction of one call; ``tokens``: the history's count,
    ``truncated``: the results step 1 truncated."""
    attempt = Attempt(turn.force, tokens, truncated)
    parts.trigger.calls += 1
    derived = parts.options.derived
    if parts.pending is not None:
        swapped = yield from background.swap(parts, turn, attempt)
        if swapped is not None:
            return swapped
    elif starts_early(tokens, derived.threshold, derived.background_tokens, turn.force):
        return (yield from background.start(parts, turn, attempt))
    made = planning.plan(parts, turn.messages, attempt, derived.threshold)
    if isinstance(made, CompactionResult):
        return made
    made = continuing.attach(parts, turn, made)
    watched = watching(turn)  # the copies tell an edit made from now on
    held = None if turn.force else planning.held(parts, made, attempt.tokens)
    if held is not None:
        return attempt.quiet(held)
    made = yield from planning.consult(parts, made, attempt, turn.instructions)
    if isinstance(made, CompactionResult):
        return made
    if not (yield from snapshot(parts, made, attempt)):
        return attempt.failure(parts.trigger, Reason.SNAPSHOT_FAILED)
    done = yield from summarise(parts, made, truncated)
    attempt.calls, attempt.parts = done.calls, done.parts
    attempt.cost = done.sent_cost
    result = conclude(parts, turn, made, attempt, done, watched=watched)
    yield from after(parts, result, attempt.summary if result.action is Action.FULL else None)
    return result
