"""Write-behind: results whose records an archive's writer thread has not written
yet stay whole, and are truncated by a later call (or, before a full compaction
may fire, by this one, once the writer is waited for)."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.passes._archive import archived, records
from bareagent_compact.engine.turn import Turn
from bareagent_compact.micro import Due, Undo, apply_micro
from bareagent_compact.protocols import ArchiveRecord
from bareagent_compact.recall import HANDLE_KEY
from bareagent_compact.requests import ArchiveRequest, Outcome, Queued, Request, WaitRequest


def _waits(batch: list[ArchiveRecord], force: bool, writes_behind: bool) -> bool:
    """Whether to archive ``batch`` and wait for it: a forced call, an archive that
    does not write behind (any more), or a record without a handle (its content
    cannot be encoded; it could not be found again by a later call)."""
    return force or not writes_behind or any(HANDLE_KEY not in record for record in batch)


def hand(
    parts: Parts, turn: Turn, planned: list[Due], writes_behind: bool
) -> Generator[Request, Any, list[bool]]:
    """Truncate what the writer made durable since an earlier call, and hand it
    the new records; their results stay whole (held for :func:`catch_up`). A
    forced call waits for the writer. A record the writer failed on is warned
    about and handed over again; one without a handle is archived and waited
    for, as without write-behind (and so is every record once the archive no
    longer writes behind)."""
    queued = [parts.behind.get(due.record.get(HANDLE_KEY, "")) for due in planned]
    waiting = [held.ticket for held in queued if held is not None]
    if turn.force and waiting:
        yield WaitRequest(waiting)
    keep, fresh = _written(parts, turn, planned, queued)
    if fresh:
        batch = records([planned[position] for position in fresh], parts.session_id)
        outcomes = yield ArchiveRequest(batch, _waits(batch, turn.force, writes_behind))
        for position, outcome in zip(fresh, outcomes, strict=True):
            keep[position] = _durable(parts, turn, planned[position], outcome)
    _forget_written(parts, planned)
    return keep


def _written(
    parts: Parts, turn: Turn, planned: list[Due], queued: list[Queued | None]
) -> tuple[list[bool], list[int]]:
    """Which planned results the writer made durable, and the positions of those
    to hand over (new, or failed: warned about and handed over again)."""
    keep = [False] * len(planned)
    fresh: list[int] = []
    for position, held in enumerate(queued):
        settled = None if held is None else held.settled()
        if held is not None and settled is None:
            turn.kept_whole.append((planned[position], held))
        if settled is not None:
            parts.behind.pop(planned[position].record[HANDLE_KEY], None)
            keep[position] = archived(settled)
        if held is None or (settled is not None and not keep[position]):
            fresh.append(position)
    return keep, fresh


def _durable(parts: Parts, turn: Turn, due: Due, outcome: Outcome) -> bool:
    """Whether the record of ``due`` is durable now; one just handed to the writer
    is not yet, and is remembered by its handle until a later look finds it
    written."""
    value = outcome.value
    if not outcome.failed and isinstance(value, Queued):
        parts.behind[due.record[HANDLE_KEY]] = value
        turn.kept_whole.append((due, value))
        return False
    return archived(outcome)


def _forget_written(parts: Parts, planned: list[Due]) -> None:
    """Drop the writer's records done with and no longer planned (their results
    were replaced or removed meanwhile)."""
    held = parts.behind
    if not held:
        return
    current = {due.record.get(HANDLE_KEY) for due in planned}
    for handle in [h for h, q in held.items() if h not in current and q.ticket.done()]:
        del held[handle]


def catch_up(parts: Parts, turn: Turn, undo: Undo) -> Generator[Request, Any, int]:
    """Step 1, last, then the count of the history for the trigger: when this
    call left results whole for the writer and may fire a full compaction, wait
    for the writer and truncate those now durable (adding to ``undo``), so that
    the compaction sees the history it would see without write-behind."""
    held, turn.kept_whole = turn.kept_whole, []
    tokens = parts.counter.history(parts.view, turn)
    if not held or not parts.may_fire(tokens):
        return tokens
    yield WaitRequest([queued.ticket for _, queued in held])
    keep = []
    for due, queued in held:
        parts.behind.pop(due.record[HANDLE_KEY], None)
        keep.append(archived(queued.settled() or Outcome(reason="not written")))
    done = apply_micro([due for due, _ in held], keep)
    if not done:
        return tokens
    undo += done
    parts.counter.edited()
    turn.edited(0)
    return parts.counter.history(parts.view, turn)
