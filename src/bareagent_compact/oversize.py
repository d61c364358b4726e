"""Oversize messages: one text over ``max_message_tokens`` is cut to its head and tail.

A single tool result (an Anthropic ``tool_result`` block, a Chat ``tool`` message,
a Responses ``function_call_output`` or ``custom_tool_call_output``) or a single
user text (text-action agents put their observations in user messages) can
outweigh the whole context window. Every call, in step 1 after micro-compaction,
each such text over the limit is replaced by its start and its end with a marker
between them saying how much was cut: ``[... 812,345 chars cut ...]``. The
compaction steps archive the original first (see :mod:`bareagent_compact.pipeline`).

Texts are weighed with the built-in estimate (SPEC 11.5), whatever the token
counter, so the check stays cheap; and only the messages appended since the last
call (and the newest few again) are read, so a turn costs the same however long
the history is. System messages, the assistant's messages, images and other
non-text blocks are never cut.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact.dialects import Kind, Slot
from bareagent_compact.micro import Due
from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.tokens import text_quarters
from bareagent_compact.validate import check_int

__all__ = [
    "DEFAULT_MAX_MESSAGE_TOKENS",
    "LEAST_MAX_MESSAGE_TOKENS",
    "MAX_MESSAGE_FLOOR",
    "MAX_MESSAGE_SHARE",
    "OVERSIZE_KIND",
    "OversizeScan",
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

_RESCAN: Final = 4
"""The newest messages already checked are read again on the next call, in case
the agent added to them in place."""

_TEXT_BLOCKS: Final = frozenset({"text", "input_text", "output_text"})
"""Block and part types whose ``text`` may be cut."""

_MOST_QUARTERS_PER_CHAR: Final = 6
"""The heaviest character of the built-in estimate (CJK, 1.5 tokens) in quarters: a
text of at most ``limit * 4 / 6`` characters cannot be over ``limit`` tokens."""

_SNAP: Final = 8
"""A cut moves to a line break within the last (or first) eighth of what is kept."""


class _DefaultLimit(int):
    """The default ``max_message_tokens``: known not to be chosen, so it follows the
    threshold (see :func:`message_limit`)."""

    __slots__ = ()


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


def cut_marker(chars: int) -> str:
    """The line that stands for ``chars`` characters cut out of a text."""
    return f"\n[... {chars:,} chars cut ...]\n"


def _joined(text: str, keep: int) -> str:
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
    return text[:head] + cut_marker(tail_start - head) + text[tail_start:]


def cut_text(text: str, limit: int) -> str | None:
    """``text`` cut to its head and tail within ``limit`` tokens (built-in estimate),
    or ``None`` when it is not over ``limit``."""
    budget = limit * 4
    if len(text) * _MOST_QUARTERS_PER_CHAR <= budget:
        return None
    quarters = text_quarters(text)
    if quarters <= budget:
        return None
    room = max(0, budget - text_quarters(cut_marker(len(text))))
    cut = _joined(text, len(text) * room // quarters)
    if text_quarters(cut) > budget:  # denser at its ends than on average
        cut = _joined(text, room // _MOST_QUARTERS_PER_CHAR)
    return cut


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
    next call reads from there (less the newest few, read again); otherwise, or
    when the limit changed, from the start. A message an archive failure kept
    whole is read again on the next call.
    """

    __slots__ = ("_checked", "_last", "_limit", "_planned_at")

    def __init__(self) -> None:
        self._checked = 0
        self._last: object = None
        self._limit: int | None = None
        self._planned_at: list[int] = []

    def _start(self, messages: Sequence[Any], limit: int) -> int:
        checked = self._checked
        if limit != self._limit or not checked or len(messages) < checked:
            return 0
        if messages[checked - 1] is not self._last:
            return 0
        return max(0, checked - _RESCAN)

    def _mark(self, messages: Sequence[Any], checked: int, limit: int | None) -> None:
        self._checked = checked
        self._last = messages[checked - 1] if checked else None
        self._limit = limit

    def plan(self, messages: Sequence[Any], limit: int | None) -> list[Due]:
        """The texts over ``limit`` and what each becomes (nothing is changed)."""
        if limit is None:
            return []
        planned: list[Due] = []
        self._planned_at = []
        seen: set[int] = set()
        floor = limit * 4 // _MOST_QUARTERS_PER_CHAR
        for index in range(self._start(messages, limit), len(messages)):
            message = messages[index]
            if not isinstance(message, dict) or not _may_hold_long(message, floor):
                continue
            for slot, is_result in text_slots(message):
                text = slot.holder[slot.key]
                cut = cut_text(text, limit)
                if cut is not None and id(slot.holder) not in seen:
                    seen.add(id(slot.holder))
                    planned.append(Due(slot, cut, _record(slot, text, is_result), len(text)))
                    self._planned_at.append(index)
        self._mark(messages, len(messages), limit)
        if planned:
            _name_tools(messages, planned)
        return planned

    def settle(self, messages: Sequence[Any], keep: Sequence[bool] | None) -> None:
        """Note which planned texts were kept whole (``keep`` false), to read again."""
        if keep is None or all(keep):
            return
        first = min(index for index, kept in zip(self._planned_at, keep, strict=True) if not kept)
        self._mark(messages, first, self._limit)


def _record(slot: Slot, text: str, is_result: bool) -> ArchiveRecord:
    """The archive record of a text about to be cut; a user text has no tool (``None``)."""
    return {
        "tool_use_id": slot.call_id,
        "tool_name": dialects.UNKNOWN_TOOL if is_result else None,
        "content": text,
        "kind": OVERSIZE_KIND,
    }


def _name_tools(messages: Sequence[Any], planned: list[Due]) -> None:
    """Fill in the tool name of each planned tool result's record."""
    names = dialects.tool_names(messages)
    for due in planned:
        call_id = due.slot.call_id
        if call_id is not None:
            due.record["tool_name"] = names.get(call_id, dialects.UNKNOWN_TOOL)
