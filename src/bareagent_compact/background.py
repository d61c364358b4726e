"""Background compaction (``background_at``): when a summary starts early, what it
summarises, and what it keeps until a later call swaps it in.

The summary runs on a frozen copy of the history; the swap is the ordinary
rebuild (:func:`bareagent_compact.rebuild.rebuild`), which keeps every message
appended since and refuses a history changed otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Generic, TypeVar

from bareagent_compact import dialects
from bareagent_compact._json import json_copy
from bareagent_compact.protocols import Message
from bareagent_compact.rebuild import Plan

AttemptT = TypeVar("AttemptT")


@dataclass(frozen=True, slots=True)
class Pending(Generic[AttemptT]):
    """A summary running in the background: its plan (``plan.snapshot`` holds the
    live messages, for the swap), the attempt it belongs to, and the driver's handle."""

    plan: Plan
    attempt: AttemptT
    handle: object
    edited: bool = False
    """Whether a message it summarises was edited in place since it started: the
    swap is refused."""
    summarised: frozenset[int] = field(init=False)
    """The positions of the messages it summarises (``plan.sources``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "summarised", frozenset(self.plan.sources))

    def voided(self) -> Pending[AttemptT]:
        """This summary, marked :attr:`edited`."""
        return replace(self, edited=True)


def starts_early(tokens: int, threshold: int, watermark: int | None, force: bool) -> bool:
    """True when a count past the watermark, not over the threshold, starts a
    summary in the background (never when forced: that one is made at once)."""
    return watermark is not None and not force and watermark < tokens <= threshold


def frozen(plan: Plan) -> tuple[Plan, list[Message]]:
    """``plan`` summarising copies of its messages, and the copy of the whole
    snapshot to save: later calls may truncate results of the live messages in
    place while the summary is made. ``ValueError`` if a message cannot be copied."""
    copy: list[Message] = json_copy(plan.snapshot)
    source = [m for m in copy[: plan.tail_start] if not dialects.is_system(m)]
    return replace(plan, source=source), copy
