"""SWE-agent trajectories: ``<instance>.traj``, one JSON object.

The dialogue is under ``history``: OpenAI Chat messages (``role``, ``content``
as a string or a list of text parts, ``tool_calls`` on the assistant's
messages) with SWE-agent's own keys beside them (``agent``, ``message_type``,
``thought``, ``action`` ...), which are left out; a ``tool`` observation names
its call in ``tool_call_ids``. A file without ``history`` is read from its
``trajectory`` steps: each step's ``response`` (or ``thought`` and
``action``) as the assistant's message and its ``observation`` as the user's.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Final

from bareagent_compact.cli.readers._base import HistoryError, HistoryFile, Parsed
from bareagent_compact.protocols import Message

NAME: Final = "swe-agent"
KEPT: Final = ("role", "content", "tool_calls", "tool_call_id", "name")
"""The keys of an OpenAI Chat message; the rest of a history entry is SWE-agent's own."""


def detect(parsed: Parsed) -> bool:
    """Whether the file is one object with a ``history`` or ``trajectory`` list."""
    value = parsed.value
    return (
        parsed.layout == "json"
        and isinstance(value, dict)
        and "messages" not in value
        and (isinstance(value.get("history"), list) or isinstance(value.get("trajectory"), list))
    )


def read(parsed: Parsed) -> HistoryFile:
    """The dialogue as OpenAI Chat messages, and the entries left out by kind."""
    value = parsed.value
    if not detect(parsed):
        raise HistoryError(f"{parsed.name} is no SWE-agent trajectory: no 'history' list")
    skipped: Counter[str] = Counter()
    messages: list[Message] = []
    if isinstance(value.get("history"), list):
        for entry in value["history"]:
            message = _message(entry)
            if message is None:
                skipped["entry without a role"] += 1
            else:
                messages.append(message)
    else:
        messages = [m for step in value["trajectory"] for m in _step(step, skipped)]
    return HistoryFile(messages, "json", format=NAME, skipped=dict(skipped))


def _message(entry: Any) -> Message | None:
    """A history entry as an OpenAI Chat message (``None`` for one without a role)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("role"), str):
        return None
    message = {key: entry[key] for key in KEPT if key in entry}
    message.setdefault("content", "")
    if message["role"] == "tool" and "tool_call_id" not in message:
        _name_call(message, entry.get("tool_call_ids"))
    if not message.get("tool_calls"):
        message.pop("tool_calls", None)
    return message


def _name_call(message: Message, ids: Any) -> None:
    """Give a ``tool`` observation the one call it answers, else make it the user's."""
    if isinstance(ids, list) and len(ids) == 1 and isinstance(ids[0], str):
        message["tool_call_id"] = ids[0]
    else:
        message["role"] = "user"  # an observation that names no one call


def _step(step: Any, skipped: Counter[str]) -> list[Message]:
    """One trajectory step as the assistant's message and the observation that followed."""
    if not isinstance(step, dict):
        skipped["step that is not an object"] += 1
        return []
    response = step.get("response")
    if not isinstance(response, str) or not response:
        response = "\n".join(str(step.get(k) or "") for k in ("thought", "action")).strip()
    observation = step.get("observation")
    return [
        {"role": "assistant", "content": response},
        {"role": "user", "content": observation if isinstance(observation, str) else ""},
    ]
