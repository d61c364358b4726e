"""Messages as they are: a JSON list, JSONL, or a request body; and mini-swe-agent's.

- a JSON array of messages (``[{"role": ...}, ...]``);
- JSONL, one message per line (what the transcript stores write);
- a JSON object holding the list under ``messages`` (Anthropic and OpenAI Chat
  request bodies) or ``input`` (OpenAI Responses request bodies);
- mini-swe-agent's ``.traj.json``: the list under ``messages`` of an object whose
  ``trajectory_format`` starts with ``mini-swe-agent`` (its own format, read as
  the request bodies are).

A message is an object with a ``role``, or a Responses item (``function_call``,
``reasoning``, ...) with only a ``type``.
"""

from __future__ import annotations

from typing import Any, Final

from bareagent_compact.cli.readers._base import HistoryError, HistoryFile, Parsed, describe, is_item

NAME: Final = "messages"
WRAPPER_KEYS: Final = ("messages", "input")
"""Keys of a request body that hold the history, tried in this order."""
MINI_SWE_AGENT: Final = "mini-swe-agent"


def _is_mini(value: Any) -> bool:
    """Whether ``value`` is a mini-swe-agent trajectory (``trajectory_format``)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("messages"), list)
        and str(value.get("trajectory_format", "")).startswith(MINI_SWE_AGENT)
    )


def detect_mini(parsed: Parsed) -> bool:
    """Whether the file is a mini-swe-agent ``.traj.json``."""
    return parsed.layout == "json" and _is_mini(parsed.value)


def read_mini(parsed: Parsed) -> HistoryFile:
    """The ``messages`` of a mini-swe-agent trajectory."""
    value = parsed.value
    if parsed.layout != "json" or not isinstance(value, dict):
        raise HistoryError(f"{parsed.name} is no mini-swe-agent trajectory: not one JSON object")
    if not isinstance(value.get("messages"), list):
        raise HistoryError(f"{parsed.name} is no mini-swe-agent trajectory: no 'messages' list")
    if not _is_mini(value):
        raise HistoryError(
            f"{parsed.name} is no mini-swe-agent trajectory: its 'trajectory_format' "
            f"does not start with {MINI_SWE_AGENT!r} (--format messages reads it)"
        )
    return HistoryFile(
        _check(parsed.name, value["messages"]), "wrapped", value, "messages", MINI_SWE_AGENT
    )


def detect(parsed: Parsed) -> bool:
    """Whether the file holds messages as they are (in a list, as JSONL, or wrapped)."""
    value = parsed.value
    if parsed.layout == "json" and isinstance(value, dict) and not is_item(value):
        return any(isinstance(value.get(key), list) for key in WRAPPER_KEYS)
    return all(is_item(record) for record in parsed.records())


def read(parsed: Parsed) -> HistoryFile:
    """The messages of ``parsed``; ``HistoryError`` when it holds anything else."""
    value = parsed.value
    if parsed.layout == "json" and isinstance(value, dict):
        if is_item(value):
            return HistoryFile([value], "jsonl")  # JSONL of one message
        return _unwrap(parsed.name, value)
    return HistoryFile(_check(parsed.name, parsed.records()), parsed.layout)


def _unwrap(name: str, body: dict[str, Any]) -> HistoryFile:
    """The messages of a request body (or a mini-swe-agent trajectory)."""
    for key in WRAPPER_KEYS:
        if isinstance(body.get(key), list):
            return HistoryFile(_check(name, body[key]), "wrapped", body, key, NAME)
    raise HistoryError(
        f"{name} is not a message history: a JSON object with "
        f"{describe([body]).split(': ', 1)[1].removesuffix(' (1)')}, without a "
        f"{' or '.join(repr(k) for k in WRAPPER_KEYS)} list"
    )


def _check(name: str, values: list[Any]) -> list[Any]:
    for index, message in enumerate(values):
        if not is_item(message):
            raise HistoryError(
                f"{name} is not a message history: item {index} is neither a message "
                f"with a 'role' nor a Responses item (the file holds {describe(values)})"
            )
    return values
