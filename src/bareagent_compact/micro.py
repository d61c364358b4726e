"""Micro-compaction (SPEC 11.1): truncate old tool results in place, no model call."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from itertools import islice
from typing import Any, Final, NamedTuple, TypeAlias

from bareagent_compact import dialects
from bareagent_compact.dialects import (
    RESULT_KEY,
    TOOL_RESULT,
    TOOL_ROLE,
    UNKNOWN_TOOL,
    block_slot,
    plain_tool_calls,
)
from bareagent_compact.plain import plain_messages
from bareagent_compact.protocols import ArchiveRecord, Message
from bareagent_compact.serialize import render_content
from bareagent_compact.tokens import value_quarters
from bareagent_compact.validate import check_int, validate_messages

logger = logging.getLogger(__name__)

DEFAULT_KEEP_RECENT: Final = 3
"""How many of the newest tool-result units micro-compaction leaves untouched."""

TRUNCATED_PREFIX: Final = "[truncated:"
"""Results whose content starts with this are markers already and are skipped."""


def truncation_marker(tool_name: str, chars: int, handle: str | None = None) -> str:
    """The text that replaces a truncated result: ``[truncated: bash result, 1204 chars]``,
    or with a recall ``handle`` ``[truncated: bash result, 1204 chars; recall r-...]``."""
    if handle is None:
        return f"[truncated: {tool_name} result, {chars} chars]"
    return f"[truncated: {tool_name} result, {chars} chars; recall {handle}]"


def check_keep_recent(keep_recent: object) -> int:
    """Validate ``keep_recent``: a non-negative ``int``."""
    return check_int("keep_recent", keep_recent)


def is_tool_result_message(message: Any) -> bool:
    """True for a message that opens or continues a tool-result unit.

    Anthropic: ``content`` is a list holding at least one ``tool_result`` block.
    OpenAI: a Chat ``tool`` message or a Responses result item (runs of them make
    one unit). System messages never count.
    """
    if type(message) is not dict and not isinstance(message, dict):
        return False
    return dialects.kind(message) in _RESULT_KINDS


_RESULT_KINDS: Final = (dialects.Kind.RESULTS, dialects.Kind.RESULT)


def is_truncated(content: Any) -> bool:
    """True for a result that is already a truncation marker."""
    return isinstance(content, str) and content.startswith(TRUNCATED_PREFIX)


class Due(NamedTuple):
    """One tool result micro-compaction is about to truncate.

    ``chars`` is the length of the result's text, the number the marker shows.
    """

    slot: dialects.Slot
    marker: str
    record: ArchiveRecord
    chars: int = 0


def stale_end(messages: Sequence[Any], keep_recent: int) -> int | None:
    """Where the tool-result units older than the ``keep_recent`` newest end.

    ``None`` when there are fewer units than that. A unit is one Anthropic
    message of ``tool_result`` blocks or one run of OpenAI result messages.
    """
    index = len(messages)
    to_keep = keep_recent
    while to_keep and index:
        index -= 1
        message = messages[index]
        if not is_tool_result_message(message):
            continue
        if dialects.kind(message) is dialects.Kind.RESULT:
            index = dialects.turn_start(messages, index)
        to_keep -= 1
    return None if to_keep else index


def _stale_slots(
    messages: Sequence[Any], end: int, start: int = 0
) -> tuple[list[dialects.Slot], bool]:
    """Every result slot from ``start`` to ``end`` that is not a marker yet (systems
    skipped), and whether every block and tool call read was a plain dict (no SDK object)."""
    # This runs every turn over the whole history, so Anthropic blocks (the common
    # shape) are read inline: a history whose old results are all markers already is
    # read once, with no call per message; other dialects are asked per message.
    due: list[dialects.Slot] = []
    plain = True
    prefix = TRUNCATED_PREFIX
    tool_result = TOOL_RESULT
    for message in islice(messages, start, end):
        if type(message) is not dict:
            plain = False
            continue
        content = message.get("content")
        if type(content) is list:
            for block in content:
                if type(block) is not dict:
                    plain = False
                elif block.get("type") == tool_result:
                    result = block.get("content")
                    if type(result) is not str or not result.startswith(prefix):
                        plain &= _add_block_slot(message, block, due)
        role = message.get("role")
        if role != "user":
            plain &= _other_slots(message, role, due)
    return due, plain


def _add_block_slot(
    message: dict[str, Any], block: dict[str, Any], due: list[dialects.Slot]
) -> bool:
    """Add the slot of a result block not truncated yet; False for one in a system
    message, never truncated, but maybe the very block of a result that is: such a
    history is read whole (as one holding SDK objects), so no scan resumes past it."""
    if message.get("role") in dialects.SYSTEM_ROLES:
        return False
    due.append(block_slot(block))
    return True


def _other_slots(message: dict[str, Any], role: Any, due: list[dialects.Slot]) -> bool:
    """The result slots of a Chat ``tool`` message or a Responses result item that are
    not markers yet; False when an assistant message's ``tool_calls`` hold an SDK object."""
    if role == "assistant":
        return "tool_calls" not in message or plain_tool_calls(message)
    if role == TOOL_ROLE or (role is None and RESULT_KEY in message):
        slot = dialects.own_result_slot(message)
        if slot is not None and not is_truncated(message.get(slot.key)):
            due.append(slot)
    return True


def holds_objects(messages: Sequence[Any], start: int = 0) -> bool:
    """True when a message from ``start`` on is not a dict, or holds something other
    than a dict in its ``content`` list or its ``tool_calls`` (an SDK object)."""
    return dialects.holds_objects(islice(messages, start, None))


Names = Callable[[], dict[str, str]]
"""What gives the map of tool call ids to tool names, when it is needed."""


def live_start(messages: Sequence[Any], index: int | None = None) -> int:
    """Where the part the server reads begins: the message holding the newest server
    compaction artefact (``index`` when known), 0 without one. Nothing before it
    (the dead part) is truncated or cut: it stays as it is, byte for byte."""
    if index is None:
        index = dialects.server_compaction_index(messages)
    return max(index, 0)


def plan_micro(
    messages: Sequence[Any],
    keep_recent: int,
    scan: MicroScan | None = None,
    live_from: int | None = None,
) -> list[Due] | None:
    """The results micro-compaction would truncate now, with their markers (no change).

    ``None`` when the history may hold SDK objects (noticed on the way, at no
    extra cost for a plain history), or a system message holds a result block:
    convert them, then call :func:`plan_plain_micro`. ``live_from``: see
    :func:`live_start` (found when not given); no result before it is truncated.
    """
    end = stale_end(messages, keep_recent)
    if end is None:
        if holds_objects(messages):
            return None
        if scan is not None:
            scan.found(0, True)  # nothing is due yet
        return []
    start = 0 if scan is None else scan.start(end)
    start = max(start, live_start(messages, live_from))
    slots, plain = _stale_slots(messages, end, start)
    if not plain or holds_objects(messages, end):
        return None
    planned = _plan(messages, end, slots, None if scan is None else scan.names)
    if scan is not None:
        scan.found(end, len(planned) == len(slots))
    return planned


def plan_plain_micro(
    messages: Sequence[Any], keep_recent: int, live_from: int | None = None
) -> list[Due]:
    """:func:`plan_micro` for a history whose SDK objects are converted already."""
    end = stale_end(messages, keep_recent)
    if end is None:
        return []
    start = live_start(messages, live_from)
    return _plan(messages, end, _stale_slots(messages, end, start)[0])


class MicroScan:
    """How far the history is known to hold no result due for truncation, so that
    a call reads only what lies past it; ``names``: the tool names map, kept by
    the caller. Trusted only while the messages before it are unchanged."""

    __slots__ = ("_clean", "_end", "_whole", "names", "read_from", "trusted")

    def __init__(self, names: Names | None = None) -> None:
        self._clean = 0  # the messages before this index hold no result due
        self._end = 0
        self._whole = False
        self.names = names
        self.trusted = False
        self.read_from = 0  # where the last scan began: no result before it is due

    @property
    def whole(self) -> bool:
        """Whether the last plan held every result found due (none was skipped for
        being shared with a message kept whole)."""
        return self._whole

    @property
    def clean(self) -> int:
        """The messages before this index hold no result due (when trusted)."""
        return self._clean

    def reset(self) -> None:
        """Nothing is known: the next scan reads from the first message."""
        self._clean, self._whole, self.read_from = 0, False, 0

    def start(self, end: int) -> int:
        """Where a scan ending at ``end`` begins."""
        self.read_from = min(self._clean, end) if self.trusted else 0
        return self.read_from

    def found(self, end: int, whole: bool) -> None:
        """A plan ending at ``end`` was made; ``whole``: it holds every slot found."""
        if not self.trusted:
            self._clean = 0
        self._end, self._whole = end, whole

    def settle(self, all_made: bool) -> None:
        """The plan's truncations were made (``all_made``: every one of them)."""
        if all_made and self._whole:
            self._clean = self._end


def _plan(
    messages: Sequence[Any], end: int, slots: list[dialects.Slot], names_of: Names | None = None
) -> list[Due]:
    if not slots:
        return []
    # A block (or message) object shared with a kept message stays whole.
    kept: set[int] = set()
    for message in islice(messages, end, None):
        if isinstance(message, dict):
            kept.update(map(id, dialects.holders(message)))
    names = dialects.tool_names(messages) if names_of is None else names_of()
    planned: list[Due] = []
    seen: set[int] = set()
    for slot in slots:
        if id(slot.holder) in kept or id(slot.holder) in seen:
            continue  # shared with a kept message, or the same object listed twice
        seen.add(id(slot.holder))
        content = slot.holder.get(slot.key)
        tool_name = names.get(slot.call_id, UNKNOWN_TOOL) if slot.call_id else UNKNOWN_TOOL
        chars = len(render_content(content, names))
        record: ArchiveRecord = {
            "tool_use_id": slot.call_id,
            "tool_name": tool_name,
            "content": content,
        }
        planned.append(Due(slot, truncation_marker(tool_name, chars), record, chars))
    return planned


Undo: TypeAlias = list[tuple[dict[str, Any], str, Any]]
"""What :func:`apply_micro` replaced: ``(holder, key, original content)``."""


def apply_micro(planned: Sequence[Due], keep: Sequence[bool] | None = None) -> Undo:
    """Truncate the planned results (those whose ``keep`` flag is true, if given)."""
    undo: Undo = []
    for position, due in enumerate(planned):
        if keep is not None and not keep[position]:
            continue
        holder, key, _ = due.slot
        undo.append((holder, key, holder.get(key)))
        holder[key] = due.marker
    return undo


def freed_tokens(undo: Undo) -> int:
    """What the replacements in ``undo`` removed from the history, in whole tokens of
    the built-in estimate (the originals' weight less what stands in their place now,
    rounded down: within one token of the difference of two rounded counts)."""
    quarters = sum(
        value_quarters(original) - value_quarters(holder.get(key)) for holder, key, original in undo
    )
    return max(quarters, 0) // 4


def undo_micro(undo: Undo) -> None:
    """Put back what :func:`apply_micro` replaced, newest first."""
    for holder, key, original in reversed(undo):
        holder[key] = original


def changes_prefix(messages: Sequence[Any], undo: Undo) -> bool:
    """True when ``undo`` records a change to a message before the newest one, which
    invalidates a prompt cache from that message on."""
    if not undo or not messages:
        return False
    newest = set(map(id, dialects.holders(messages[-1])))
    return any(id(holder) not in newest for holder, _, _ in undo)


def micro_compact(messages: list[Message], keep_recent: int) -> int:
    """Truncate tool results older than the ``keep_recent`` newest tool-result units;
    returns how many were truncated. (The compactors hand each result to their
    ``archive`` hook first, through the compaction steps.)"""
    planned = plan_micro(messages, keep_recent)
    if planned is None:
        plain_messages(messages)
        planned = plan_plain_micro(messages, keep_recent)
    if not planned:
        return 0
    return len(apply_micro(planned))


def _micro_compact(messages: list[Any], keep_recent: int = DEFAULT_KEEP_RECENT) -> int:
    """Micro-compaction of SPEC 11.1, in place; returns the number of blocks truncated.

    Every tool result in tool-result units older than the ``keep_recent`` newest
    ones is replaced by ``[truncated: {tool} result, {n} chars]``: an Anthropic
    ``tool_result`` block's ``content``, a Chat ``tool`` message's ``content``, a
    Responses ``function_call_output``'s ``output``. Text, system messages and
    tool calls are never touched. SDK objects are first turned into plain dicts.
    """
    keep_recent = check_keep_recent(keep_recent)
    plain_messages(messages)
    validate_messages(messages)
    return micro_compact(messages, keep_recent)


_POLICY_NAMES: Final = frozenset(
    {"MICRO_SPEC", "MICRO_CACHE_FRIENDLY", "MicroOptions", "MicroPolicy", "SPEC",
     "CACHE_FRIENDLY", "PRESETS", "check_exclude_tools", "resolve_micro", "select_micro"}
)  # fmt: skip


def __getattr__(name: str) -> Any:
    """The policy names, kept importable from here (they live in ``micro_policy``)."""
    if name in _POLICY_NAMES:
        from bareagent_compact import micro_policy  # noqa: PLC0415 (it imports this module)

        return getattr(micro_policy, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
