"""The new-list call (``compacted``): the caller's list and messages left as they
are, the messages compaction did not change handed back as the same objects.

The steps edit the history they are given in place. Here they are given a
working list of copies (containers copied, strings and numbers shared; SDK
objects read as dicts first), and afterwards every copy still equal to what it
was made from is swapped back for the caller's own object, in the new list and
in the result (so that ``undo`` on the new list finds the objects it holds).
Copying is one container walk of the history per call, beside the one ``==``
of the history cache; the in-place call does neither.

A background summary keeps the live messages it will replace (``plan.snapshot``)
across calls and checks them by identity at the swap: they are the caller's
objects between calls and this call's copies while it runs.
"""

from __future__ import annotations

import copy
from collections.abc import Generator, Sequence
from dataclasses import replace
from typing import Any

from bareagent_compact import dialects
from bareagent_compact.engine import step
from bareagent_compact.engine.parts import Parts
from bareagent_compact.history import container_copy
from bareagent_compact.plain import plain_view
from bareagent_compact.requests import Request
from bareagent_compact.result import CompactionResult

NewList = tuple[list[Any], CompactionResult]
"""What ``compacted`` returns: the new list and the result."""


def _working(message: Any) -> Any:
    """A copy of ``message`` the steps may edit; ``message`` itself when it cannot
    be copied (a value validation refuses, as the in-place call does)."""
    copied = container_copy(message)
    if copied is not None:
        return copied
    try:
        return copy.deepcopy(message)
    except Exception:  # refused by validation below, as in place
        return message


class Copies:
    """The working list of one call, and the way back to the caller's objects."""

    __slots__ = ("_back", "_forward", "_memo", "_systems", "work")

    def __init__(self, messages: Sequence[Any]) -> None:
        plain: Sequence[Any] = messages
        if not isinstance(messages, list) or dialects.holds_objects(messages):
            plain = plain_view(messages)  # SDK objects as dicts; a foreign one refused here
        self.work: list[Any] = []
        self._back: dict[int, tuple[Any, Any, Any]] = {}
        self._forward: dict[int, Any] = {}
        self._memo: dict[int, Any] = {}  # what back() gave for a message made meanwhile
        self._systems: list[tuple[Any, Any]] = []  # (read, the caller's) system messages
        for original, read in zip(messages, plain, strict=True):
            work = _working(read)
            self.work.append(work)
            if work is not original:
                # The copy, the caller's object, and what the copy equals while unchanged.
                self._back[id(work)] = (work, original, read)
                self._forward[id(original)] = work
            if type(read) is dict and dialects.is_system(read):
                self._systems.append((read, original))

    def back(self, value: Any) -> Any:
        """The caller's object for a copy still equal to what it was made from;
        anything else as it is."""
        found = self._back.get(id(value))
        if found is None or found[0] is not value:
            return self._system(value)
        _, original, read = found
        try:
            same = bool(value == read)
        except Exception:  # a value whose == raises: taken as changed
            same = False
        return original if same else value

    def _system(self, value: Any) -> Any:
        """A system message a rebuild copied: the caller's, when one equals it (the
        first not handed back yet); anything else as it is."""
        if id(value) in self._memo:
            return self._memo[id(value)]
        if not self._systems or type(value) is not dict or not dialects.is_system(value):
            return value
        for position, (read, original) in enumerate(self._systems):
            if read == value:
                del self._systems[position]
                self._memo[id(value)] = original
                return original
        return value

    def forward(self, value: Any) -> Any:
        """This call's copy of a caller's object; anything else as it is."""
        return self._forward.get(id(value), value)

    def result(self, result: CompactionResult) -> CompactionResult:
        """``result`` holding the caller's objects where the copies are unchanged."""
        if not result.replaced and not result.rebuilt:
            return result
        return replace(
            result,
            replaced=tuple(map(self.back, result.replaced)),
            rebuilt=tuple(map(self.back, result.rebuilt)),
        )


def _remap_pending(parts: Parts, mapping: Any) -> None:
    """Point the background summary's live messages through ``mapping``."""
    pending = parts.pending
    if pending is None:
        return
    snapshot = pending.plan.snapshot
    snapshot[:] = [mapping(message) for message in snapshot]


def steps(
    parts: Parts, messages: Sequence[Any], force: bool, instructions: str | None
) -> Generator[Request, Any, NewList]:
    """One compaction step on a copy of ``messages``: the new list and the result."""
    copies = Copies(messages)
    _remap_pending(parts, copies.forward)
    try:
        result = yield from step.steps(parts, copies.work, force, instructions)
    finally:
        _remap_pending(parts, copies.back)
    new = [copies.back(message) for message in copies.work]
    return new, copies.result(result)
