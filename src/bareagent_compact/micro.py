"""Micro-compaction (SPEC 11.1): truncate old tool results in place, no model call."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Sequence
from itertools import islice
from typing import Any, Final, NamedTuple, TypeAlias

from bareagent_compact import dialects
from bareagent_compact.dialects import UNKNOWN_TOOL
from bareagent_compact.plain import plain_messages
from bareagent_compact.protocols import ArchiveHook, ArchiveRecord, Message
from bareagent_compact.serialize import render_content
from bareagent_compact.validate import validate_messages

logger = logging.getLogger(__name__)

DEFAULT_KEEP_RECENT: Final = 3
"""How many of the newest tool-result units micro-compaction leaves untouched."""

TRUNCATED_PREFIX: Final = "[truncated:"
"""Results whose content starts with this are markers already and are skipped."""


def truncation_marker(tool_name: str, chars: int) -> str:
    """The text that replaces a truncated result: ``[truncated: bash result, 1204 chars]``."""
    return f"[truncated: {tool_name} result, {chars} chars]"


def check_keep_recent(keep_recent: object) -> int:
    """Validate ``keep_recent``: a non-negative ``int``."""
    if isinstance(keep_recent, bool) or not isinstance(keep_recent, int):
        raise TypeError(f"keep_recent must be an int, got {type(keep_recent).__name__}")
    if keep_recent < 0:
        raise ValueError(f"keep_recent must be >= 0, got {keep_recent}")
    return keep_recent


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
    """One tool result micro-compaction is about to truncate."""

    slot: dialects.Slot
    marker: str
    record: ArchiveRecord


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


def _tool_calls_plain(message: dict[str, Any]) -> bool:
    calls = message.get("tool_calls")
    return type(calls) is not list or all(type(call) is dict for call in calls)


def _stale_slots(messages: Sequence[Any], end: int) -> tuple[list[dialects.Slot], bool]:
    """Every result slot before ``end`` that is not a marker yet (systems skipped), and
    whether every block and tool call read was a plain dict (no SDK object)."""
    # This runs every turn over the whole history, so the common shapes are read
    # inline: a history whose old results are all markers already is read once.
    due: list[dialects.Slot] = []
    plain = True
    prefix = TRUNCATED_PREFIX
    system_roles = dialects.SYSTEM_ROLES
    for message in islice(messages, end):
        if type(message) is not dict:
            plain = False
            continue
        content = message.get("content")
        if type(content) is list:
            for block in content:
                if type(block) is not dict:
                    plain = False
                elif block.get("type") == "tool_result":
                    result = block.get("content")
                    if not (type(result) is str and result.startswith(prefix)) and (
                        message.get("role") not in system_roles
                    ):
                        due.append(dialects.Slot(block, "content", _id(block.get("tool_use_id"))))
        role = message.get("role")
        if role == "assistant":
            if "tool_calls" in message and not _tool_calls_plain(message):
                plain = False
        elif role == "tool" or (role is None and "output" in message):
            for slot in dialects.result_slots(message):
                if slot.holder is message and not is_truncated(message.get(slot.key)):
                    due.append(slot)
    return due, plain


def holds_objects(messages: Sequence[Any], start: int = 0) -> bool:
    """True when a message from ``start`` on is not a dict, or holds something other
    than a dict in its ``content`` list or its ``tool_calls`` (an SDK object)."""
    for message in islice(messages, start, None):
        if type(message) is not dict:
            return True
        content = message.get("content")
        if type(content) is list and not all(type(block) is dict for block in content):
            return True
        if "tool_calls" in message and not _tool_calls_plain(message):
            return True
    return False


def _id(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def plan_micro(messages: Sequence[Any], keep_recent: int) -> list[Due] | None:
    """The results micro-compaction would truncate now, with their markers (no change).

    ``None`` when the history may hold SDK objects (noticed on the way, at no
    extra cost for a plain history): convert them, then call
    :func:`plan_plain_micro`.
    """
    end = stale_end(messages, keep_recent)
    if end is None:
        return None if holds_objects(messages) else []
    slots, plain = _stale_slots(messages, end)
    if not plain or holds_objects(messages, end):
        return None
    return _plan(messages, end, slots)


def plan_plain_micro(messages: Sequence[Any], keep_recent: int) -> list[Due]:
    """:func:`plan_micro` for a history whose SDK objects are converted already."""
    end = stale_end(messages, keep_recent)
    if end is None:
        return []
    return _plan(messages, end, _stale_slots(messages, end)[0])


def _plan(messages: Sequence[Any], end: int, slots: list[dialects.Slot]) -> list[Due]:
    if not slots:
        return []
    # A block (or message) object shared with a kept message stays whole.
    kept: set[int] = set()
    for message in islice(messages, end, None):
        if isinstance(message, dict):
            kept.add(id(message))
            content = message.get("content")
            if isinstance(content, list):
                kept.update(id(block) for block in content)
    names = dialects.tool_names(messages)
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
        planned.append(Due(slot, truncation_marker(tool_name, chars), record))
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


def undo_micro(undo: Undo) -> None:
    """Put back what :func:`apply_micro` replaced, newest first."""
    for holder, key, original in reversed(undo):
        holder[key] = original


def archive_all(planned: Sequence[Due], archive: ArchiveHook | None) -> list[bool]:
    """Give each planned result to ``archive``; ``False`` where it failed.

    A result whose archiving failed is left whole: truncating it would lose the
    only copy. An awaitable returned by the hook counts as a failure here (it is
    closed): only an asynchronous compactor can await it.
    """
    if archive is None:
        return [True] * len(planned)
    outcome: list[bool] = []
    for due in planned:
        try:
            returned = archive(dict(due.record))
        except Exception:
            logger.warning("archive hook failed; tool result kept untruncated", exc_info=True)
            outcome.append(False)
            continue
        if inspect.isawaitable(returned):
            close = getattr(returned, "close", None)
            if callable(close):
                close()
            logger.warning(
                "archive hook returned an awaitable (use AsyncCompactor for async hooks); "
                "tool result kept untruncated"
            )
            outcome.append(False)
            continue
        outcome.append(True)
    return outcome


def micro_compact(
    messages: list[Message], keep_recent: int, archive: ArchiveHook | None = None
) -> int:
    """Truncate tool results older than the ``keep_recent`` newest tool-result units.

    ``archive``, when given, receives every result just before it is replaced; if
    it raises, that result is left whole (a warning is logged). Returns how many
    results were truncated.
    """
    planned = plan_micro(messages, keep_recent)
    if planned is None:
        plain_messages(messages)
        planned = plan_plain_micro(messages, keep_recent)
    if not planned:
        return 0
    return len(apply_micro(planned, archive_all(planned, archive)))


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
