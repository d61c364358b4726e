"""Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``.

One JSON record a line, in either of two layouts:

- ``{"timestamp", "type", "payload"}`` records: ``response_item`` records hold
  the Responses items of the dialogue (``message``, ``reasoning``,
  ``function_call``, ``function_call_output``, ``custom_tool_call`` ...);
  ``session_meta``, ``turn_context`` and ``event_msg`` records (which repeat
  the dialogue for the terminal) are left out, and so are ``compacted``
  records, Codex's own compaction summaries.
- the older layout: a first line of session metadata (``id``, ``timestamp``,
  ``instructions``, ``git``), then the Responses items themselves, one a line,
  with ``{"record_type": "state"}`` lines between them.

Everything left out is counted by kind.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from bareagent_compact.cli.readers._base import HistoryFile, Parsed, is_item
from bareagent_compact.protocols import Message

NAME: Final = "codex"
ITEM: Final = "response_item"
ENVELOPES: Final = frozenset({ITEM, "session_meta", "turn_context", "event_msg", "compacted"})
KINDS: Final = {"compacted": "compaction summary"}
"""Names for some skipped records in the counts."""


def _is_envelope(record: Any) -> bool:
    if not isinstance(record, dict) or "payload" not in record:
        return False
    kind = record.get("type")
    return isinstance(kind, str) and kind in ENVELOPES


def _is_old_meta(record: Any) -> bool:
    """The first line of the older layout, or one of its ``record_type`` lines."""
    if not isinstance(record, dict) or is_item(record):
        return False
    return "record_type" in record or {"id", "timestamp"} <= record.keys()


def detect(parsed: Parsed) -> bool:
    """Whether the records are a rollout of either layout."""
    records = parsed.records()
    if any(_is_envelope(record) for record in records):
        return True
    return bool(records) and _is_old_meta(records[0]) and len(records) > 1


def _item(record: Any) -> tuple[Message | None, str]:
    """The Responses item of ``record``, or ``None`` and the kind of record it is."""
    if _is_envelope(record):
        kind = record["type"]
        payload = record["payload"]
        if kind == ITEM and is_item(payload):
            return payload, kind
        if kind == ITEM:
            return None, _kind(payload, "response_item without an item")
        return None, KINDS.get(kind, kind)
    if is_item(record):
        return record, "item"
    if _is_old_meta(record):
        return None, "state" if "record_type" in record else "session metadata"
    return None, _kind(record, "record without a type")


def _kind(value: Any, default: str) -> str:
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else default


def read(parsed: Parsed) -> HistoryFile:
    """The Responses items of the rollout, and the records left out by kind."""
    items: list[Message] = []
    skipped: Counter[str] = Counter()
    for record in parsed.records():
        item, kind = _item(record)
        if item is None:
            skipped[kind] += 1
        else:
            items.append(item)
    return HistoryFile(items, "jsonl", format=NAME, skipped=dict(skipped))
