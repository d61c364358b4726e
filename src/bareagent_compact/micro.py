"""Micro-compaction (SPEC 11.1): truncate old tool results in place, no model call."""

from __future__ import annotations

import logging
from itertools import islice
from typing import Any, Final

from bareagent_compact.protocols import ArchiveHook, Message
from bareagent_compact.serialize import render_content, tool_name_for, tool_names
from bareagent_compact.validate import validate_messages

logger = logging.getLogger(__name__)

DEFAULT_KEEP_RECENT: Final = 3
"""How many of the newest tool_result messages micro-compaction leaves untouched."""

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
    """True when ``content`` is a list holding at least one ``tool_result`` block."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return False
    return any(isinstance(b, dict) and b.get("type") == "tool_result" for b in content)


def is_truncated(content: Any) -> bool:
    """True for a result that is already a truncation marker."""
    return isinstance(content, str) and content.startswith(TRUNCATED_PREFIX)


def micro_compact(
    messages: list[Message], keep_recent: int, archive: ArchiveHook | None = None
) -> int:
    """Truncate tool results older than the ``keep_recent`` newest tool_result messages.

    ``archive``, when given, receives every result just before it is replaced; if
    it raises, that result is left whole (a warning is logged). Returns how many
    blocks were truncated.
    """
    # This runs every turn over the whole history, so it is written for speed: the
    # newest tool_result messages are found from the end, and a history whose old
    # results are all markers already is read once, without a call per message.
    stale_end = len(messages)
    to_keep = keep_recent
    while to_keep and stale_end:
        stale_end -= 1
        if is_tool_result_message(messages[stale_end]):
            to_keep -= 1
    if to_keep:
        return 0  # fewer tool_result messages than keep_recent
    due: list[dict[str, Any]] = []
    prefix = TRUNCATED_PREFIX
    for message in islice(messages, stale_end):
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):
            for block in content:
                if isinstance(block, dict) and block.get("type") == "tool_result":
                    result = block.get("content")
                    if not (isinstance(result, str) and result.startswith(prefix)):
                        due.append(block)
    if not due:
        return 0
    # A block object shared with a kept message (a result appended twice) stays whole.
    kept = {
        id(block)
        for message in islice(messages, stale_end, None)
        if isinstance(message, dict) and isinstance(message.get("content"), list)
        for block in message["content"]
    }
    names: dict[str, str] | None = None
    truncated = 0
    for block in due:
        if id(block) in kept:
            continue
        content = block.get("content")
        if is_truncated(content):
            continue  # the same block listed twice
        if names is None:
            names = tool_names(messages)
        tool_name = tool_name_for(block, names)
        chars = len(render_content(content, names))
        if archive is not None:
            record = {
                "tool_use_id": block.get("tool_use_id"),
                "tool_name": tool_name,
                "content": content,
            }
            try:
                archive(record)
            except Exception:
                # Truncating now would lose the only copy: keep the result.
                logger.warning("archive hook failed; tool result kept untruncated", exc_info=True)
                continue
        block["content"] = truncation_marker(tool_name, chars)
        truncated += 1
    return truncated


def _micro_compact(messages: list[Message], keep_recent: int = DEFAULT_KEEP_RECENT) -> int:
    """Micro-compaction of SPEC 11.1, in place; returns the number of blocks truncated.

    Every ``tool_result`` block in tool_result messages older than the
    ``keep_recent`` newest ones is replaced by ``[truncated: {tool} result, {n} chars]``.
    Text, system messages and ``tool_use`` blocks are never touched.
    """
    validate_messages(messages)
    return micro_compact(messages, check_keep_recent(keep_recent))
