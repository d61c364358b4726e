"""The tool results of one turn, weighed together by the oversize cut.

Parallel calls answer in one turn; each result may be under ``max_message_tokens``
while together they outweigh the window. The oversize scan hands every result
text here, by the turn it answers, and cuts those over their share.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from bareagent_compact import dialects
from bareagent_compact.dialects import Kind, Slot
from bareagent_compact.text_weight import MOST_QUARTERS_PER_CHAR
from bareagent_compact.tokens import text_quarters

SlotsOf = Callable[[Any], Iterator[tuple[Slot, bool]]]
"""The text slots of a message, each with whether it is a tool result's."""


class TurnResults:
    """The tool results read, by the turn they answer: the results of one turn
    (parallel calls) are weighed together, so that together they stay within
    the limit, as one result does."""

    __slots__ = ("_budget", "_groups", "_messages", "_mixed", "_slots")

    def __init__(self, messages: Sequence[Any], budget: int, slots: SlotsOf) -> None:
        self._messages = messages
        self._budget = budget  # in quarter tokens
        self._slots = slots
        self._groups: dict[int, list[tuple[int, Slot]]] = {}
        self._mixed: dict[int, bool] = {}  # index taken -> whether it holds other texts

    def add(self, index: int, message: dict[str, Any]) -> bool:
        """Take the result texts of ``message``, with those of the other results
        of its turn (Chat and Responses give each result a message of its own);
        False when it holds none (its other texts, a user's, are weighed alone)."""
        kind = dialects.kind(message)
        if kind is Kind.RESULTS:
            return not self._take(index, index)
        if kind is not Kind.RESULT:
            return False
        start = dialects.turn_start(self._messages, index)
        if start not in self._groups:
            for sibling in self._turn(start):
                self._take(start, sibling)
        mixed = self._mixed.get(index)
        return not (self._take(start, index) if mixed is None else mixed)

    def _turn(self, start: int) -> Iterator[int]:
        """The indices of the result messages of the turn beginning at ``start``."""
        messages = self._messages
        for index in range(start, len(messages)):
            if index > start and not dialects.continues(messages[index - 1], messages[index]):
                return
            message = messages[index]
            if type(message) is dict and dialects.kind(message) is Kind.RESULT:
                yield index

    def _take(self, start: int, index: int) -> bool:
        """Add the result texts of ``messages[index]`` to the turn at ``start``;
        whether it holds other texts too."""
        group = self._groups.setdefault(start, [])
        others = False
        for slot, is_result in self._slots(self._messages[index]):
            if is_result:
                group.append((index, slot))
            else:
                others = True
        self._mixed[index] = others
        return others

    def budgets(self) -> Iterator[tuple[int, Slot, int]]:
        """Each result text to cut, with its budget in quarter tokens: the results
        of a turn over the limit together share it, the lighter ones kept whole.
        Every result of the turn is weighed, also one another turn shares (the
        same block object in two messages), so that a scan of the changed
        messages and a scan of them all weigh a turn alike."""
        for slots in self._groups.values():
            texts = [slot.holder[slot.key] for _, slot in slots]
            if sum(map(len, texts)) * MOST_QUARTERS_PER_CHAR <= self._budget:
                continue  # cannot be over the limit together
            weights = [text_quarters(text) for text in texts]
            cap = share(weights, self._budget)
            for (index, slot), weight in zip(slots, weights, strict=True):
                if weight > cap:
                    yield index, slot, cap


def share(weights: Sequence[int], budget: int) -> int:
    """The most each weight may keep so that together they are within ``budget``:
    weights under an equal share are kept whole, the rest share what they leave."""
    if sum(weights) <= budget:
        return budget
    remaining, left = budget, len(weights)
    for weight in sorted(weights):
        share = remaining // left
        if weight > share:
            return share
        remaining -= weight
        left -= 1
    return budget
