"""Claude Code session files: ``~/.claude/projects/<project>/<session>.jsonl``.

One JSON record a line. The dialogue is in the records of ``type`` ``user`` and
``assistant``, each holding an Anthropic message under ``message`` (``role`` and
``content``, with ``tool_use`` and ``tool_result`` blocks), beside ``uuid``,
``parentUuid``, ``sessionId``, ``timestamp`` and ``isSidechain``. The reader
keeps ``role`` and ``content`` and builds the history the model was sent, one
assistant message per model call:

- the records of one streamed response (one ``message.id``, one content block
  each) are joined into one message, also when Claude Code logged a tool's
  result between them (it runs a tool while the response is still written);
- consecutive user records (tool results, an interruption, a prompt typed
  meanwhile) are joined into one user message, its ``tool_result`` blocks first.

Left out, and counted by kind: every other record (``progress``,
``file-history-snapshot``, ``queue-operation``, ``system``, ``summary`` ...),
the error messages Claude Code writes as the assistant's when a request failed
(``isApiErrorMessage``: no model output), the records of sub-agents inlined in
a session file (``isSidechain``), and Claude Code's own compaction summaries
(a user record with ``isCompactSummary``), which stand for dialogue the file
already holds. A file whose every dialogue record is a sidechain is a
sub-agent's transcript (``<session>/subagents/agent-*.jsonl``, and Claude
Code's compaction agent's ``agent-acompact-*.jsonl``): its records are read.
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
API_ERROR: Final = "API error message"


def _is_dialogue(record: Any) -> bool:
    return (
        isinstance(record, dict)
        and isinstance(record.get("type"), str)
        and record["type"] in ROLES
        and isinstance(record.get("message"), dict)
    )


def detect(parsed: Parsed) -> bool:
    """Whether any record is a Claude Code dialogue record."""
    return any(_is_dialogue(record) for record in parsed.records())


def _skip_kind(record: Any, sidechains: bool) -> str | None:
    """Why ``record`` is no message of the dialogue, or ``None`` when it is one."""
    if not isinstance(record, dict):
        return f"JSON {type(record).__name__}"
    if not _is_dialogue(record):
        kind = record.get("type")
        return kind if isinstance(kind, str) else "record without a type"
    if record.get("isSidechain") is True and not sidechains:
        return SIDECHAIN
    if record.get("isCompactSummary") is True:
        return COMPACT_SUMMARY
    if record.get("isApiErrorMessage") is True:
        return API_ERROR
    return None


def _only_sidechains(records: list[Any]) -> bool:
    """Whether every dialogue record is a sidechain's: a sub-agent's own transcript."""
    return all(r.get("isSidechain") is True for r in records if _is_dialogue(r))


def read(parsed: Parsed) -> HistoryFile:
    """The dialogue as Anthropic messages, and the records left out by kind."""
    records = parsed.records()
    sidechains = _only_sidechains(records)
    skipped: Counter[str] = Counter()
    history = _History()
    for record in records:
        kind = _skip_kind(record, sidechains)
        if kind is not None:
            skipped[kind] += 1
            continue
        message = record["message"]
        role = message.get("role")
        if role not in ROLES:
            role = record["type"]
        if role == "assistant":
            history.add_output(message.get("id"), message.get("content", ""))
        else:
            history.add_input(message.get("content", ""))
    return HistoryFile(history.messages, "jsonl", format=NAME, skipped=dict(skipped))


class _History:
    """The messages built so far: one per model call, and one per run of input between."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._response: int | None = None
        """The index of the latest assistant message (the latest response)."""
        self._response_id: Any = None

    def add_output(self, response_id: Any, content: Any) -> None:
        """A record of a response: joined to the latest one when it has its id."""
        if (
            self._response is not None
            and isinstance(response_id, str)
            and response_id == self._response_id
        ):
            message = self.messages[self._response]
            known = message["content"] = _blocks(message["content"])
            known.extend(b for b in _blocks(content) if b not in known)
            return
        self.messages.append({"role": "assistant", "content": content})
        self._response = len(self.messages) - 1
        self._response_id = response_id

    def add_input(self, content: Any) -> None:
        """A user record: joined to the user message before it, if the last one is one."""
        if not self.messages or self.messages[-1]["role"] != "user":
            self.messages.append({"role": "user", "content": content})
            return
        joined = _blocks(self.messages[-1]["content"]) + _blocks(content)
        results = [b for b in joined if _is_result(b)]
        self.messages[-1]["content"] = results + [b for b in joined if not _is_result(b)]


def _is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def _blocks(content: Any) -> list[Any]:
    """Content as a list of blocks (a string becomes one text block)."""
    if isinstance(content, list):
        return list(content)
    if content is None or content == "":
        return []
    return [{"type": "text", "text": content if isinstance(content, str) else str(content)}]
