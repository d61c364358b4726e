"""Claude Code session files: ``~/.claude/projects/<project>/<session>.jsonl``.

One JSON record a line. The dialogue is in the records of ``type`` ``user`` and
``assistant``, each holding an Anthropic message under ``message`` (``role`` and
``content``, with ``tool_use`` and ``tool_result`` blocks), beside ``uuid``,
``parentUuid``, ``sessionId``, ``timestamp`` and ``isSidechain``. The reader
keeps ``role`` and ``content`` of each and joins the records of one streamed
response (the same ``message.id``, one content block each) into one message.

Left out, and counted by kind: every other record (``progress``,
``file-history-snapshot``, ``system``, ``summary`` ...), the records of
sub-agents (``isSidechain``), and Claude Code's own compaction summaries (a
user record with ``isCompactSummary``), which stand for dialogue the file
already holds.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from bareagent_compact.cli.readers._base import HistoryFile, Parsed
from bareagent_compact.protocols import Message

NAME: Final = "claude-code"
ROLES: Final = ("user", "assistant")
COMPACT_SUMMARY: Final = "compaction summary"
SIDECHAIN: Final = "sidechain"


def _is_dialogue(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and record.get("type") in ROLES
        and isinstance(record.get("message"), dict)
    )


def detect(parsed: Parsed) -> bool:
    """Whether any record is a Claude Code dialogue record."""
    return any(_is_dialogue(record) for record in parsed.records())


def _skip_kind(record: Any) -> str | None:
    """Why ``record`` is no message of the dialogue, or ``None`` when it is one."""
    if not isinstance(record, dict):
        return f"JSON {type(record).__name__}"
    if not _is_dialogue(record):
        kind = record.get("type")
        return kind if isinstance(kind, str) else "record without a type"
    if record.get("isSidechain") is True:
        return SIDECHAIN
    if record.get("isCompactSummary") is True:
        return COMPACT_SUMMARY
    return None


def read(parsed: Parsed) -> HistoryFile:
    """The dialogue as Anthropic messages, and the records left out by kind."""
    messages: list[Message] = []
    skipped: Counter[str] = Counter()
    previous_id: object = None
    for record in parsed.records():
        kind = _skip_kind(record)
        if kind is not None:
            skipped[kind] += 1
            continue
        message = record["message"]
        role = message.get("role") if isinstance(message.get("role"), str) else record["type"]
        response_id = message.get("id") if role == "assistant" else None
        if response_id is not None and response_id == previous_id and messages:
            messages[-1]["content"] = _blocks(messages[-1]["content"]) + _blocks(
                message.get("content")
            )
        else:
            messages.append({"role": role, "content": message.get("content", "")})
        previous_id = response_id
    return HistoryFile(messages, "jsonl", format=NAME, skipped=dict(skipped))


def _blocks(content: Any) -> list[Any]:
    """Content as a list of blocks (a string becomes one text block)."""
    if isinstance(content, list):
        return content
    if content is None or content == "":
        return []
    return [{"type": "text", "text": content if isinstance(content, str) else str(content)}]
