"""Micro-compaction (SPEC 11.1): truncate old tool results in place, no model call."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
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
from bareagent_compact.tokens import quarters_to_tokens, text_quarters, value_quarters
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


def plan_micro(
    messages: Sequence[Any], keep_recent: int, scan: MicroScan | None = None
) -> list[Due] | None:
    """The results micro-compaction would truncate now, with their markers (no change).

    ``None`` when the history may hold SDK objects (noticed on the way, at no
    extra cost for a plain history), or a system message holds a result block:
    convert them, then call :func:`plan_plain_micro`.
    """
    end = stale_end(messages, keep_recent)
    if end is None:
        if holds_objects(messages):
            return None
        if scan is not None:
            scan.found(0, True)  # nothing is due yet
        return []
    start = 0 if scan is None else scan.start(end)
    slots, plain = _stale_slots(messages, end, start)
    if not plain or holds_objects(messages, end):
        return None
    planned = _plan(messages, end, slots, None if scan is None else scan.names)
    if scan is not None:
        scan.found(end, len(planned) == len(slots))
    return planned


def plan_plain_micro(messages: Sequence[Any], keep_recent: int) -> list[Due]:
    """:func:`plan_micro` for a history whose SDK objects are converted already."""
    end = stale_end(messages, keep_recent)
    if end is None:
        return []
    return _plan(messages, end, _stale_slots(messages, end)[0])


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


MICRO_SPEC: Final = "spec"
"""``micro="spec"``: the specification's micro-compaction (the default)."""

MICRO_CACHE_FRIENDLY: Final = "cache-friendly"
"""``micro="cache-friendly"``: the policy :data:`CACHE_FRIENDLY`."""


class MicroOptions(NamedTuple):
    """The opt-in micro-compaction options; the defaults are the specification's behaviour.

    ``min_chars``: results whose text is shorter are never truncated, and no result
    is replaced by a marker that weighs as much as itself (``None``: off).
    ``exclude_tools``: tool names whose results are never truncated.
    ``clear_at_least``: estimated tokens a rewrite must free; below that nothing is
    truncated unless the history is over the threshold (``0``: every turn).
    ``short_over_threshold``: over the threshold (or forced), results shorter than
    ``min_chars`` are truncated too (those their marker shrinks), so that the history
    left is no larger than the specification's would be (the ``cache-friendly``
    policy's).
    """

    min_chars: int | None = None
    exclude_tools: frozenset[str] = frozenset()
    clear_at_least: int = 0
    short_over_threshold: bool = False

    @property
    def is_spec(self) -> bool:
        """True when no option is on: micro-compaction is the specification's."""
        return self.min_chars is None and not self.exclude_tools and not self.clear_at_least


@dataclass(frozen=True, slots=True)
class MicroPolicy:
    """A micro-compaction policy: what ``micro=`` names or is given.

    The presets are instances (:data:`SPEC`, :data:`CACHE_FRIENDLY`); a policy of
    one's own is ``CACHE_FRIENDLY.replace(min_chars=500)`` or a new value. The
    constructor's ``keep_recent``, ``micro_min_chars`` and ``clear_at_least``,
    when given, take the place of the policy's values, and nothing else changes:
    a preset given its own values behaves exactly as the preset.
    """

    name: str
    keep_recent: int
    min_chars: int | None
    clear_fraction: float
    """``clear_at_least`` as a fraction of the compactor's threshold."""
    short_over_threshold: bool = False
    """:attr:`MicroOptions.short_over_threshold`: over the threshold (or forced),
    results shorter than ``min_chars`` are truncated too."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TypeError("a MicroPolicy's name must be a non-empty str")
        check_keep_recent(self.keep_recent)
        if self.min_chars is not None:
            check_int("micro_min_chars", self.min_chars)
        fraction = self.clear_fraction
        if isinstance(fraction, bool) or not isinstance(fraction, int | float):
            raise TypeError(f"clear_fraction must be a number, got {type(fraction).__name__}")
        if not 0 <= fraction <= 1:  # NaN fails this too
            raise ValueError(f"clear_fraction must be in [0, 1], got {fraction!r}")
        if not isinstance(self.short_over_threshold, bool):
            raise TypeError("short_over_threshold must be a bool")

    def replace(self, **changes: Any) -> MicroPolicy:
        """A new, checked policy with ``changes``."""
        return dataclasses.replace(self, **changes)

    def resolve(
        self,
        threshold: int,
        *,
        keep_recent: object,
        min_chars: object,
        exclude_tools: object,
        clear_at_least: object,
    ) -> tuple[int, MicroOptions]:
        """``keep_recent`` and the :class:`MicroOptions` in force: the options given
        (not ``None``), else this policy's values."""
        keep = self.keep_recent if keep_recent is None else check_keep_recent(keep_recent)
        chars = self.min_chars if min_chars is None else check_int("micro_min_chars", min_chars)
        if clear_at_least is None:
            clear = round(self.clear_fraction * threshold)
        else:
            clear = check_int("clear_at_least", clear_at_least)
        names = check_exclude_tools(exclude_tools)
        return keep, MicroOptions(chars, names, clear, self.short_over_threshold)


SPEC: Final = MicroPolicy(MICRO_SPEC, DEFAULT_KEEP_RECENT, None, 0.0)
"""``micro="spec"``: the specification's micro-compaction."""

CACHE_FRIENDLY: Final = MicroPolicy(
    MICRO_CACHE_FRIENDLY, keep_recent=1, min_chars=2000, clear_fraction=0.3,
    short_over_threshold=True,
)  # fmt: skip
"""``micro="cache-friendly"``: keep the newest result unit whole, leave results under
``min_chars`` whole (and never grow one) until the history is over the threshold,
and rewrite old results only when that frees 0.3 x threshold or the history is over
the threshold (values chosen by measurement, see ``docs/performance.md``)."""

PRESETS: Final = {policy.name: policy for policy in (SPEC, CACHE_FRIENDLY)}
"""The policies ``micro=`` may name; a new preset is one more entry."""


def check_exclude_tools(exclude_tools: object) -> frozenset[str]:
    """Validate ``exclude_tools``: a collection of tool names (``str``), not one ``str``."""
    if exclude_tools is None:
        return frozenset()
    if isinstance(exclude_tools, str | bytes) or not isinstance(exclude_tools, Iterable):
        raise TypeError(
            "exclude_tools must be a collection of tool names (e.g. a list of str), got "
            f"{type(exclude_tools).__name__}"
        )
    names = frozenset(exclude_tools)
    for name in names:
        if not isinstance(name, str):
            raise TypeError(f"exclude_tools must hold str tool names, got {type(name).__name__}")
    return names


def resolve_micro(
    micro: object,
    threshold: int,
    *,
    keep_recent: object,
    min_chars: object,
    exclude_tools: object,
    clear_at_least: object,
) -> tuple[int, MicroOptions]:
    """Check ``micro`` (a preset's name or a :class:`MicroPolicy`) and fill the unset
    options (``None``) from it; returns ``keep_recent`` and the :class:`MicroOptions`."""
    if isinstance(micro, MicroPolicy):
        policy = micro
    elif isinstance(micro, str):
        found = PRESETS.get(micro)
        if found is None:
            raise ValueError(f"micro must be one of {sorted(PRESETS)}, got {micro!r}")
        policy = found
    else:
        raise TypeError(f"micro must be a str or a MicroPolicy, got {type(micro).__name__}")
    return policy.resolve(
        threshold,
        keep_recent=keep_recent,
        min_chars=min_chars,
        exclude_tools=exclude_tools,
        clear_at_least=clear_at_least,
    )


def _freed_quarters(due: Due) -> int:
    """What truncating ``due`` saves, in quarter tokens of the built-in estimate."""
    return value_quarters(due.record["content"]) - text_quarters(due.marker)


def _would_grow(due: Due, freed: int) -> bool:
    """True for a result its marker would not shrink (in estimated weight, and for
    text also in characters)."""
    if freed <= 0:
        return True
    content = due.record["content"]
    return isinstance(content, str) and len(due.marker) >= len(content)


def select_micro(
    planned: Sequence[Due], options: MicroOptions, must_clear: Callable[[], bool]
) -> list[Due]:
    """The planned results micro-compaction truncates now under ``options``.

    Results of excluded tools, and with ``min_chars`` short results and those a
    marker would not shrink, are left whole. With ``clear_at_least`` it is all of
    the rest or none: all when together they free at least that many estimated
    tokens or when ``must_clear()`` says so (the history is over the threshold,
    or a full compaction is forced), so the prefix of the history changes rarely
    and in one go. With ``short_over_threshold``, when ``must_clear()`` says so the
    short results go too (all but those a marker would not shrink).
    """
    if options.short_over_threshold and planned:
        if must_clear():
            return _all_shrinking(planned, options.exclude_tools)
        must_clear = _not_over  # asked once per call
    return _select(planned, options, must_clear)


def _select(
    planned: Sequence[Due], options: MicroOptions, must_clear: Callable[[], bool]
) -> list[Due]:
    """:func:`select_micro` with ``min_chars`` applied whatever the count."""
    chosen = _eligible(planned, options)
    if not chosen or (options.min_chars is None and not options.clear_at_least):
        return chosen
    freed = [_freed_quarters(due) for due in chosen]
    if options.min_chars is not None:
        chosen, freed = _shrinking(chosen, freed)
    if not chosen or not options.clear_at_least:
        return chosen
    if quarters_to_tokens(sum(freed)) >= options.clear_at_least or must_clear():
        return chosen
    return []


def _not_over() -> bool:
    return False


def _all_shrinking(planned: Sequence[Due], exclude: frozenset[str]) -> list[Due]:
    """The planned results not of an excluded tool that their marker shrinks."""
    chosen = [due for due in planned if due.record["tool_name"] not in exclude]
    return _shrinking(chosen, [_freed_quarters(due) for due in chosen])[0]


def _eligible(planned: Sequence[Due], options: MicroOptions) -> list[Due]:
    """The planned results not of an excluded tool, nor shorter than ``min_chars``."""
    exclude = options.exclude_tools
    min_chars = options.min_chars
    return [
        due
        for due in planned
        if due.record["tool_name"] not in exclude and (min_chars is None or due.chars >= min_chars)
    ]


def _shrinking(chosen: list[Due], freed: list[int]) -> tuple[list[Due], list[int]]:
    """The results (with what each frees) that their marker shrinks."""
    kept = [
        (due, saved)
        for due, saved in zip(chosen, freed, strict=True)
        if not _would_grow(due, saved)
    ]
    return [due for due, _ in kept], [saved for _, saved in kept]


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
