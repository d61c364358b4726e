"""A pre-send check: the documented causes of a 400 that can be seen in the list
itself, without a network call.

:func:`check_request` reads the part of the history the server reads (from the
newest server compaction artefact on, plus the system messages) and reports, one
line per problem: unpaired tool calls and results (both ways); a compaction
block that does not open an assistant message, appears twice, or differs from
the one the server returned (when the original blocks are given); empty
content; a Responses ``reasoning`` item not followed by the item the model
produced with it. Each line names the message by its index in the list given.
None of the three APIs requires roles to alternate
(Anthropic merges consecutive messages of one role; Chat and Responses take
any order), so that is not reported.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact.pairs import find_orphans
from bareagent_compact.plain import dump_model, is_model, plain_view

_ANSWERS: Final = frozenset({"function_call", "message", "custom_tool_call"})
"""What follows a Responses reasoning item: an item the model produced with it."""


def _key(block: Any) -> str:
    """The identity of an artefact: its JSON, fields sorted (an SDK object as the
    server sent it)."""
    return json.dumps(dump_model(block) if is_model(block) else block, sort_keys=True, default=str)


def _orphan_errors(live: list[Any], at: Sequence[int]) -> list[str]:
    errors = []
    for orphan in find_orphans(live):
        half = "tool call" if orphan.kind == "tool_use" else "tool result"
        where = at[orphan.message_index]
        errors.append(f"message {where}: {half} {orphan.tool_use_id} unpaired")
    return errors


def _artefacts(messages: Sequence[Any]) -> Iterable[tuple[int, int, Any]]:
    """``(message index, position, artefact)`` for every compaction block and item."""
    for index, message in enumerate(messages):
        for position in dialects.compaction_positions(message):
            item = message if position == 0 and "role" not in message else None
            yield index, position, item if item is not None else message["content"][position]


def _misplaced(message: Any, position: int) -> bool:
    """An Anthropic block anywhere but first in an assistant message's content."""
    return "role" in message and (position != 0 or message["role"] != "assistant")


def _compaction_errors(messages: Sequence[Any], original: Iterable[Any] | None) -> list[str]:
    errors: list[str] = []
    seen: set[str] = set()
    known = None if original is None else {_key(block) for block in original}
    for index, position, artefact in _artefacts(messages):
        where = f"message {index}"
        if _misplaced(messages[index], position):
            errors.append(f"{where}: compaction block misplaced (must open an assistant message)")
        key = _key(artefact)
        if key in seen and artefact.get("content", "") is not None:
            errors.append(f"{where}: compaction artefact duplicated")
        seen.add(key)
        if known is not None and key not in known:
            errors.append(f"{where}: compaction artefact altered (not as the server returned it)")
        if artefact.get("content") == "":
            errors.append(f"{where}: compaction block with empty content")
    return errors


def _has_empty_text(content: Any) -> bool:
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == "text" and b.get("text") == "" for b in content
    )


def _empty_errors(live: Sequence[Any], at: Sequence[int]) -> list[str]:
    errors = []
    for index, message in zip(at, live, strict=True):
        if dialects.typed_item(message) is not None or dialects.is_system(message):
            continue
        content = message.get("content")
        if content in ("", []) and not message.get("tool_calls"):
            errors.append(f"message {index}: empty content")
        elif _has_empty_text(content):
            errors.append(f"message {index}: empty text block")
    return errors


def _reasoning_errors(live: Sequence[Any], at: Sequence[int]) -> list[str]:
    errors = []
    for index, message in enumerate(live):
        if dialects.typed_item(message) != "reasoning":
            continue
        following = live[index + 1] if index + 1 < len(live) else None
        follower = None if following is None else following.get("type", "message")
        if follower not in _ANSWERS or (
            follower == "message" and following is not None and following.get("role") != "assistant"
        ):
            errors.append(f"message {at[index]}: reasoning item without its following item")
    return errors


def check_request(
    messages: Sequence[Any], dialect: str | None = None, *, original: Iterable[Any] | None = None
) -> list[str]:
    """What in ``messages`` would make the API refuse the request, one line each
    (empty: nothing seen). ``dialect`` narrows the rules to one API
    (``"anthropic"``, ``"openai_chat"``, ``"openai_responses"``); ``original``, the
    compaction blocks and items as the server returned them, adds the check that
    each one sent is among them, unchanged. Nothing is sent and the list is not
    changed."""
    if dialect is not None and dialect not in dialects.DIALECTS:
        names = sorted(dialects.DIALECTS)
        raise ValueError(f"dialect must be one of {names} or None, got {dialect!r}")
    view = plain_view(messages)
    at = dialects.live_indices(view)  # problems are reported where they are in ``messages``
    live = [view[i] for i in at]
    errors = _orphan_errors(live, at) + _compaction_errors(view, original)
    errors += _empty_errors(live, at)
    if dialect in (None, "openai_responses"):
        errors += _reasoning_errors(live, at)
    return errors
