"""Oversize messages: one text over ``max_message_tokens`` is cut to its head and tail.

A single tool result (an Anthropic ``tool_result`` block, a Chat ``tool`` message,
a Responses ``function_call_output`` or ``custom_tool_call_output``) or a single
user text (text-action agents put their observations in user messages) can
outweigh the whole context window. Every call, in step 1 after micro-compaction,
each such text over the limit is replaced by its start and its end with a marker
between them saying how much was cut: ``[... 812,345 chars cut ...]``. The
compaction steps archive the original first (see :mod:`bareagent_compact.pipeline`).

When the archive reads records back (``archive=store.archive``, see
:mod:`bareagent_compact.recall`), the marker names a recall handle,
``[... 812,345 chars cut; recall o-1a2b3c4d5e6f ...]``, and the archive record
carries it: the model reads the original back with the recall tool.

Texts are weighed with the built-in estimate (SPEC 11.5), whatever the token
counter, so the check stays cheap; and only the messages appended since the last
call (and the newest few again) are read, so a turn costs the same however long
the history is. System messages, the assistant's messages, images and other
non-text blocks are never cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact._defaults import RuleDefault
from bareagent_compact.dialects import Kind, Slot
from bareagent_compact.micro import Due
from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.recall import HANDLE_KEY, make_handle
from bareagent_compact.text_weight import MOST_QUARTERS_PER_CHAR as _MOST_QUARTERS_PER_CHAR
from bareagent_compact.tokens import text_quarters
from bareagent_compact.turn_results import TurnResults
from bareagent_compact.validate import check_int

__all__ = [
    "DEFAULT_MAX_MESSAGE_TOKENS",
    "LEAST_MAX_MESSAGE_TOKENS",
    "MAX_MESSAGE_FLOOR",
    "MAX_MESSAGE_SHARE",
    "OVERSIZE_KIND",
    "OVERSIZE_PREFIX",
    "Handles",
    "OversizeScan",
    "cut_handles",
    "cut_marker",
    "cut_text",
    "message_limit",
    "text_slots",
]

MAX_MESSAGE_SHARE: Final = 0.5
"""Left at its default, ``max_message_tokens`` is this share of the threshold..."""

MAX_MESSAGE_FLOOR: Final = 4000
"""...but never less than this many tokens, so that the tiny thresholds used to
force a compaction never cut an ordinary message."""

LEAST_MAX_MESSAGE_TOKENS: Final = 100
"""The smallest ``max_message_tokens`` accepted: room for the marker, a head and a tail."""

OVERSIZE_KIND: Final = "oversize"
"""The ``kind`` of an archive record of a cut text (micro-compaction's have none)."""

OVERSIZE_PREFIX: Final = "o"
"""The recall handle prefix of a cut text (``o-1a2b3c4d5e6f``)."""

Handles = Callable[[str | None, str], str | None]
"""Gives the recall handle of a text about to be cut, from its tool call id (``None``
for a user text) and the text."""

_RESCAN: Final = 4
"""The newest messages already checked are read again on the next call, in case
the agent added to them in place."""

_TEXT_BLOCKS: Final = frozenset({"text", "input_text", "output_text"})
"""Block and part types whose ``text`` may be cut."""

_NO_TEXT_TO_CUT: Final = frozenset({"assistant", *dialects.SYSTEM_ROLES})
"""Roles whose messages hold no text this cut applies to (read past unopened)."""


_SNAP: Final = 8
"""A cut moves to a line break within the last (or first) eighth of what is kept."""

_TRIES: Final = 8
"""At most this many cuts of one text are weighed to land near its limit."""

_CLOSE: Final = 100
"""A cut within ``1 / _CLOSE`` of the limit is near enough."""


class _DefaultLimit(RuleDefault):
    """The default ``max_message_tokens``: known not to be chosen, so it follows the
    threshold (see :func:`message_limit`)."""

    __slots__ = ()
    RULE = "max({}, threshold // 2)"


DEFAULT_MAX_MESSAGE_TOKENS: Final = _DefaultLimit(MAX_MESSAGE_FLOOR)
"""The ``max_message_tokens`` default: half the threshold, at least 4,000 tokens."""


def check_max_message_tokens(value: object) -> None:
    """``None`` (off) or an ``int >= LEAST_MAX_MESSAGE_TOKENS``, else ``TypeError`` /
    ``ValueError``."""
    if value is not None:
        check_int("max_message_tokens", value, LEAST_MAX_MESSAGE_TOKENS)


def message_limit(chosen: int | None, threshold: int) -> int | None:
    """The limit in force: ``chosen`` as given, ``None`` (off), or, left at its default,
    ``max(MAX_MESSAGE_FLOOR, threshold * MAX_MESSAGE_SHARE)``."""
    if type(chosen) is _DefaultLimit:
        return max(MAX_MESSAGE_FLOOR, int(threshold * MAX_MESSAGE_SHARE))
    return None if chosen is None else int(chosen)


def cut_marker(chars: int, handle: str | None = None) -> str:
    """The line that stands for ``chars`` characters cut out of a text, naming the
    recall ``handle`` of the original when there is one."""
    if handle is None:
        return f"\n[... {chars:,} chars cut ...]\n"
    return f"\n[... {chars:,} chars cut; recall {handle} ...]\n"


def cut_handles(session_id: str, reader: object) -> Handles | None:
    """The handles of ``session_id``'s cut texts when the archive has a ``reader``
    (a store that reads records back); otherwise ``None`` (markers without a handle)."""
    if reader is None:
        return None

    def handle(key: str | None, text: str) -> str | None:
        return make_handle(session_id, key, text, prefix=OVERSIZE_PREFIX)

    return handle


def _joined(text: str, keep: int, handle: str | None) -> str:
    """``text`` keeping ``keep`` characters, half from its start and half from its end
    (each moved to a line break near the cut when there is one)."""
    length = len(text)
    head = keep - keep // 2
    tail_start = length - keep // 2
    newline = text.rfind("\n", head - head // _SNAP, head)
    if newline > 0:
        head = newline
    newline = text.find("\n", tail_start, tail_start + (length - tail_start) // _SNAP)
    if newline >= 0:
        tail_start = newline + 1
    return text[:head] + cut_marker(tail_start - head, handle) + text[tail_start:]


def _over(text: str, budget: int) -> int | None:
    """The weight of ``text`` in quarter tokens when over ``budget``, else ``None``."""
    if len(text) * _MOST_QUARTERS_PER_CHAR <= budget:
        return None
    quarters = text_quarters(text)
    return quarters if quarters > budget else None


def _cut(text: str, budget: int, quarters: int, handle: str | None) -> str:
    """``text`` (``quarters`` heavy) cut to its head and tail within ``budget`` quarters,
    as close under it as :data:`_TRIES` measured cuts get.

    The first guess keeps the share of the characters that the room (less half of
    what is near enough) is of the weight. Each cut is weighed; the next guess
    scales the characters kept by how far the kept text's own weight is from
    that (a text denser or lighter at its ends than on average), within the
    bracket of the largest cut known to fit and the smallest known not to. Each
    try costs a pass over what it keeps; the worst case (every character 1.5
    tokens) always fits and is the fallback.
    """
    marker = text_quarters(cut_marker(len(text), handle))
    room = max(0, budget - marker)
    aim = room - room // (2 * _CLOSE)  # the middle of what is near enough
    fits, over = room // _MOST_QUARTERS_PER_CHAR, len(text)
    best: str | None = None
    guess = len(text) * aim // quarters
    for _ in range(_TRIES):
        if not fits < guess < over:
            guess = (fits + over) // 2
        cut = _joined(text, guess, handle)
        weight = text_quarters(cut)
        if weight <= budget:
            fits, best = guess, cut
            if weight * _CLOSE >= budget * (_CLOSE - 1):
                break
        else:
            over = guess
        if over - fits <= 1:
            break
        guess = guess * aim // max(1, weight - marker)
    return best if best is not None else _joined(text, fits, handle)


def cut_text(text: str, limit: int, handle: str | None = None) -> str | None:
    """``text`` cut to its head and tail within ``limit`` tokens (built-in estimate),
    the marker naming ``handle`` if given; ``None`` when it is not over ``limit``."""
    quarters = _over(text, limit * 4)
    return None if quarters is None else _cut(text, limit * 4, quarters, handle)


def _content_slots(holder: dict[str, Any], key: str, call_id: str | None) -> Iterator[Slot]:
    """The texts of ``holder[key]``: itself when a string, else its text blocks."""
    value = holder.get(key)
    if isinstance(value, str):
        yield Slot(holder, key, call_id)
    elif isinstance(value, list):
        for block in value:
            if (
                isinstance(block, dict)
                and block.get("type") in _TEXT_BLOCKS
                and isinstance(block.get("text"), str)
            ):
                yield Slot(block, "text", call_id)


def text_slots(message: Message) -> Iterator[tuple[Slot, bool]]:
    """The texts of ``message`` that may be cut, each with whether it is (part of) a
    tool result: a user message's text (its string content or text blocks), and
    each tool result's text (string content or text blocks), in any dialect. The
    assistant's and system messages have none."""
    kind = dialects.kind(message)
    if kind is Kind.USER or kind is Kind.RESULTS:
        for slot in _content_slots(message, "content", None):
            yield slot, False
    if kind is Kind.RESULTS or kind is Kind.RESULT:
        for result in dialects.result_slots(message):
            for slot in _content_slots(result.holder, result.key, result.call_id):
                yield slot, True


def _holds_long(value: Any, floor: int, depth: int = 0) -> bool:
    """False when ``value`` (a content or an output) holds no string longer than
    ``floor`` characters where a text may be: a cheap test, with one call per block
    at most, that lets most messages skip :func:`text_slots` (True may still hold
    nothing over the limit)."""
    if type(value) is str:
        return len(value) > floor
    if type(value) is not list:
        return False
    for block in value:
        if type(block) is not dict:
            continue
        text = block.get("text")
        if type(text) is str and len(text) > floor:
            return True
        if _inner_long(block.get("content"), floor, depth):
            return True
    return False


def _inner_long(content: Any, floor: int, depth: int) -> bool:
    """:func:`_holds_long` for a block's ``content`` (a tool result's); deeper than
    that, anything but a short string counts as long."""
    if type(content) is str:
        return len(content) > floor
    return content is not None and (depth > 0 or _holds_long(content, floor, 1))


def _may_hold_long(message: dict[str, Any], floor: int) -> bool:
    """:func:`_holds_long` for a message's ``content`` and a Responses item's ``output``."""
    content = message.get("content")
    if type(content) is str:
        if len(content) > floor:
            return True
    elif _holds_long(content, floor):
        return True
    return "output" in message and _holds_long(message["output"], floor)


class OversizeScan:
    """Finds the texts over the limit, reading only what the last call did not check.

    It remembers how many leading messages hold no text over the limit, and the
    last of them: while that message is still at its place (the same object), the
    next call reads from there (less the newest few, read again), and the messages
    before it that the history cache saw edited; otherwise, or when the limit
    changed, from the start. A message an archive failure kept whole is read again
    on the next call.
    """

    __slots__ = ("_checked", "_last", "_limit", "_planned_at")

    def __init__(self) -> None:
        self._checked = 0
        self._last: object = None
        self._limit: int | None = None
        self._planned_at: list[int] = []

    def _start(self, messages: Sequence[Any], limit: int, trusted: bool) -> int:
        checked = self._checked
        if limit != self._limit or not checked or len(messages) < checked:
            return 0
        if not trusted and messages[checked - 1] is not self._last:
            return 0
        return max(0, checked - _RESCAN)

    def _mark(self, messages: Sequence[Any], checked: int, limit: int | None) -> None:
        self._checked = checked
        self._last = messages[checked - 1] if checked else None
        self._limit = limit

    def plan(
        self,
        messages: Sequence[Any],
        limit: int | None,
        handles: Handles | None = None,
        changed: Sequence[int] | None = None,
        live_from: int = 0,
    ) -> list[Due]:
        """The texts over ``limit`` and what each becomes (nothing is changed); with
        ``handles`` (see :func:`cut_handles`), each marker and record names a handle.
        ``changed``: the messages known to be new or edited since the last call
        (also read when they lie before where the scan resumes); when they are known,
        the others are taken as read, whatever their identity (a list made anew from
        JSON), so a full compaction must start the scan anew. ``live_from``: where
        the part the server reads begins; nothing before it (the dead part, before
        the newest server compaction artefact) is cut."""
        if limit is None:
            return []
        planned: list[Due] = []
        self._planned_at = []
        seen: set[int] = set()
        floor = limit * 4 // _MOST_QUARTERS_PER_CHAR
        turns = TurnResults(messages, limit * 4, text_slots)
        for index in self._indices(messages, limit, changed):
            message = messages[index]
            if index < live_from or not _weighed_alone(message, turns, index, floor):
                continue
            for slot, is_result in text_slots(message):
                due = None if id(slot.holder) in seen else _due(slot, is_result, limit, handles)
                if due is not None:
                    seen.add(id(slot.holder))
                    planned.append(due)
                    self._planned_at.append(index)
        for index, due in _turn_cuts(turns, seen, limit, handles):
            planned.append(due)
            self._planned_at.append(index)
        self._mark(messages, len(messages), limit)
        if planned:
            _name_tools(messages, planned)
        return planned

    def _indices(
        self, messages: Sequence[Any], limit: int, changed: Sequence[int] | None
    ) -> Iterable[int]:
        """The messages to read: from where the scan resumes, and those before it
        that ``changed`` names."""
        start = self._start(messages, limit, changed is not None)
        edited = sorted({i for i in changed if i < start}) if changed and start else []
        return chain(edited, range(start, len(messages)))

    def settle(self, messages: Sequence[Any], keep: Sequence[bool] | None) -> None:
        """Note which planned texts were kept whole (``keep`` false), to read again."""
        if keep is None or all(keep):
            return
        first = min(index for index, kept in zip(self._planned_at, keep, strict=True) if not kept)
        self._mark(messages, first, self._limit)


def _weighed_alone(message: Any, turns: TurnResults, index: int, floor: int) -> bool:
    """Whether ``message`` may hold a text over the limit weighed alone: not an
    assistant's or system message, nor tool results only (``turns`` takes them,
    to weigh with the other results of their turn)."""
    if type(message) is not dict or message.get("role") in _NO_TEXT_TO_CUT:
        return False
    return not turns.add(index, message) and _may_hold_long(message, floor)


def _turn_cuts(
    turns: TurnResults, seen: set[int], limit: int, handles: Handles | None
) -> Iterator[tuple[int, Due]]:
    """Each result text of ``turns`` to cut, and its cut (see :func:`_due`)."""
    for index, slot, budget in turns.budgets():
        if id(slot.holder) in seen:
            continue
        due = _due(slot, True, limit, handles, budget)
        if due is not None:
            seen.add(id(slot.holder))
            yield index, due


def _due(
    slot: Slot, is_result: bool, limit: int, handles: Handles | None, budget: int | None = None
) -> Due | None:
    """The cut of the text in ``slot`` when it is over ``limit`` (or ``budget``
    quarter tokens, the share of its turn's results), with its record."""
    text = slot.holder[slot.key]
    room = limit * 4 if budget is None else min(budget, limit * 4)
    quarters = _over(text, room)
    if quarters is None:
        return None
    handle = None if handles is None else handles(slot.call_id, text)
    cut = _cut(text, room, quarters, handle)
    return Due(slot, cut, _record(slot, text, is_result, handle), len(text))


def _record(slot: Slot, text: str, is_result: bool, handle: str | None) -> ArchiveRecord:
    """The archive record of a text about to be cut; a user text has no tool (``None``)."""
    record: ArchiveRecord = {
        "tool_use_id": slot.call_id,
        "tool_name": dialects.UNKNOWN_TOOL if is_result else None,
        "content": text,
        "kind": OVERSIZE_KIND,
    }
    if handle is not None:
        record[HANDLE_KEY] = handle
    return record


def _name_tools(messages: Sequence[Any], planned: list[Due]) -> None:
    """Fill in the tool name of each planned tool result's record."""
    names = dialects.tool_names(messages)
    for due in planned:
        call_id = due.slot.call_id
        if call_id is not None:
            due.record["tool_name"] = names.get(call_id, dialects.UNKNOWN_TOOL)
