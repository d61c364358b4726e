"""The compacted dicts back as ``ModelMessage`` objects, keeping what they were.

A dict the compaction returned as it was (the same object) stands for its parts
as they were; a message all of whose dicts came back so is the original object.
A changed dict (a result truncated, a text cut, thinking cleared) is matched to
the dict it was made from, in order, by role and tool ids; its message keeps every
field and every part it still has, and only the edited content changes. What the
library wrote anew (the summary, the acknowledgement) becomes new messages.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic_ai import messages as pm

from bareagent_compact.integrations.pydantic_ai._from_dicts import (
    from_dict,
    is_summary,
    request_part,
    response_part,
    result_text,
)
from bareagent_compact.integrations.pydantic_ai._to_dicts import Converted, Origin
from bareagent_compact.prompts import SUMMARY_PREFIX, own_text

_CLEARED: Final = frozenset({"thinking", "redacted_thinking"})
"""The blocks a compaction may take out of a message it keeps."""


def _skeleton(message: Mapping[str, Any]) -> tuple[Any, ...]:
    """What an edit never changes: the role, the content's shape, and the types and
    tool ids of its blocks (thinking aside, which may be cleared)."""
    content = message.get("content")
    if not isinstance(content, list):
        return message.get("role"), type(content).__name__
    blocks = []
    for block in content:
        if isinstance(block, Mapping) and block.get("type") not in _CLEARED:
            found = block.get("id") if block.get("type") == "tool_use" else None
            blocks.append((block.get("type"), block.get("tool_use_id", found)))
    return message.get("role"), "list", tuple(blocks)


def _is_summary(message: Mapping[str, Any]) -> bool:
    text = own_text(message.get("content"))
    return message.get("role") == "user" and text is not None and text.startswith(SUMMARY_PREFIX)


def match(converted: Converted, new: Sequence[Mapping[str, Any]]) -> list[int | None]:
    """For each dict of ``new``, the index of the produced dict it is or was made
    from, else ``None`` (a dict the library wrote).

    Between two dicts returned as they were, the edited ones are matched from the
    end: what a summary replaced is the oldest part, so the edited dicts after it
    (the pending turn) belong to the newest candidates.
    """
    where = {id(d): i for i, d in enumerate(converted.dicts)}
    found: list[int | None] = [where.get(id(d)) for d in new]
    anchors = [j for j, i in enumerate(found) if i is not None]
    for before, after in zip([-1, *anchors], [*anchors, len(new)], strict=True):
        low = found[before] if before >= 0 else -1
        high = found[after] if after < len(new) else len(converted.dicts)
        assert low is not None and high is not None
        _match_gap(converted, new, found, range(before + 1, after), range(low + 1, high))
    return found


def _match_gap(
    converted: Converted, new: Sequence[Mapping[str, Any]], found: list[int | None],
    gap: range, candidates: range,
) -> None:
    """Match the edited dicts of ``new[gap]`` to ``candidates``, newest first."""
    own = _own(new, gap)
    stop = candidates.stop
    for j in reversed(gap):
        if j in own:
            continue
        free = [(i, converted.dicts[i]) for i in range(stop - 1, candidates.start - 1, -1)]
        index = _closest(new[j], free)
        if index is not None:
            found[j], stop = index, index


def _own(new: Sequence[Mapping[str, Any]], gap: range) -> set[int]:
    """The summaries of ``new[gap]`` and the acknowledgement after each."""
    own: set[int] = set()
    for j in gap:
        if _is_summary(new[j]):
            own.add(j)
            if j + 1 in gap and new[j + 1].get("role") == "assistant":
                own.add(j + 1)
    return own


def _ids(skeleton: tuple[Any, ...]) -> set[Any]:
    return {tool_id for _, tool_id in skeleton[2]} - {None} if len(skeleton) > 2 else set()


def _closest(message: Mapping[str, Any], candidates: list[tuple[int, Any]]) -> int | None:
    """The first candidate with the same skeleton, else the first of the same role
    holding every tool id ``message`` holds."""
    key = _skeleton(message)
    for i, candidate in candidates:
        if _skeleton(candidate) == key:
            return i
    for i, candidate in candidates:
        other = _skeleton(candidate)
        if other[0] == key[0] and _ids(key) <= _ids(other):
            return i
    return None


def _block_index(old: list[Any], block: Mapping[str, Any], after: int) -> int | None:
    """Where ``block`` was among ``old``: the same object, the same tool id, else the
    next block of its type."""
    for k, candidate in enumerate(old):
        if candidate is block:
            return k
    for key in ("id", "tool_use_id"):
        if isinstance(block.get(key), str):
            return next((k for k, b in enumerate(old) if b.get(key) == block[key]), None)
    kind = block.get("type")
    return next((k for k in range(after + 1, len(old)) if old[k].get("type") == kind), None)


def _edited(part: Any, block: Mapping[str, Any], item: int | None) -> Any:
    """``part`` with the content ``block`` now holds (every other field kept)."""
    if isinstance(part, pm.ToolReturnPart | pm.RetryPromptPart):
        return dataclasses.replace(part, content=result_text(block.get("content")))
    if isinstance(part, pm.ThinkingPart):
        return dataclasses.replace(part, content=str(block.get("thinking", part.content)))
    if isinstance(part, pm.ToolCallPart):
        return dataclasses.replace(part, args=dict(block.get("input") or {}))
    sequence = isinstance(part, pm.UserPromptPart) and not isinstance(part.content, str)
    if sequence and item is not None:
        items = list(part.content)
        items[item] = str(block.get("text", ""))
        return dataclasses.replace(part, content=items)
    if isinstance(part, pm.TextPart | pm.UserPromptPart | pm.SystemPromptPart):
        return dataclasses.replace(part, content=str(block.get("text", "")))
    return part


class _Rebuilt:
    """The parts of each original message that came back, in order of their index."""

    def __init__(self, converted: Converted) -> None:
        self.converted = converted
        self.parts: dict[int, dict[float, Any]] = {}
        self.whole: dict[int, int] = {}
        """Per message, how many of its dicts came back as the same object."""

    def keep(self, index: int) -> None:
        source = self.converted.sources[index]
        message = self.converted.messages[source.message]
        self.whole[source.message] = self.whole.get(source.message, 0) + 1
        slots = self.parts.setdefault(source.message, {})
        for _, p, _ in source.blocks:
            slots.setdefault(p, message.parts[p])

    def edit(self, index: int, new: Mapping[str, Any]) -> None:
        source = self.converted.sources[index]
        message = self.converted.messages[source.message]
        slots = self.parts.setdefault(source.message, {})
        old = self.converted.dicts[index]["content"]
        content = new.get("content")
        if not isinstance(old, list) or not isinstance(content, list):
            _, p, item = source.blocks[0]
            text = content if isinstance(content, str) else result_text(content)
            slots[p] = _edited(message.parts[p], {"text": text, "content": text}, item)
            return
        self._edit_blocks(slots, message, source.blocks, old, content)

    def _edit_blocks(
        self, slots: dict[float, Any], message: pm.ModelMessage, origins: list[Origin],
        old: list[Any], content: list[Any],
    ) -> None:
        after, where = -1, -1.0
        for block in content:
            if not isinstance(block, Mapping):
                continue
            k = _block_index(old, block, after)
            if k is None:  # a block the library added: a new part after the last one
                where += 0.001
                slots[where] = self._new_part(message, block)
                continue
            after = k
            _, p, item = origins[k]
            where = float(p)
            current = slots.get(p, message.parts[p])
            slots[p] = current if block == old[k] else _edited(current, block, item)

    def _new_part(self, message: pm.ModelMessage, block: Mapping[str, Any]) -> Any:
        if isinstance(message, pm.ModelResponse):
            return response_part(block)
        return request_part(block, self.converted.tool_names)

    def message(self, index: int) -> pm.ModelMessage:
        original = self.converted.messages[index]
        produced = sum(1 for s in self.converted.sources if s.message == index)
        slots = self.parts.get(index, {})
        parts = [slots[k] for k in sorted(slots)]
        if self.whole.get(index) == produced and len(parts) == len(original.parts):
            return original
        return dataclasses.replace(original, parts=parts)  # type: ignore[arg-type]


def back(
    converted: Converted, new: Sequence[Mapping[str, Any]], *,
    stamp: Mapping[str, Any] | None = None,
) -> list[pm.ModelMessage]:
    """The ``ModelMessage`` list that ``new`` (the compacted dicts) stands for.

    ``stamp`` holds fields (``run_id``, ``conversation_id``) given to the messages
    the library wrote anew.
    """
    found = match(converted, new)
    rebuilt = _Rebuilt(converted)
    order: list[int | pm.ModelMessage] = []
    seen: set[int] = set()
    previous: pm.ModelMessage | None = None
    for message, index in zip(new, found, strict=True):
        if index is None:
            summary = previous is not None and is_summary(previous)
            previous = from_dict(
                message, converted.tool_names, after_summary=summary, stamp=stamp
            )
            order.append(previous)
            continue
        if message is converted.dicts[index]:
            rebuilt.keep(index)
        else:
            rebuilt.edit(index, message)
        origin = converted.sources[index].message
        previous = converted.messages[origin]
        if origin not in seen:
            seen.add(origin)
            order.append(origin)
    return [rebuilt.message(item) if isinstance(item, int) else item for item in order]
