"""LangChain messages as OpenAI Chat dicts and back: a dict the compactor left as it was
maps back to the original object, an edited one to the original with its new content."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from typing import Any, Final

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from bareagent_compact.prompts import SUMMARY_PREFIX
from bareagent_compact.rebuild import is_own_output

Dict = dict[str, Any]
SUMMARY_MARK: Final = {"lc_source": "summarization"}
"""What LangChain's own summary message carries in ``additional_kwargs``."""


def _call_dict(call: Any) -> Dict:
    arguments = json.dumps(call.get("args", {}), ensure_ascii=False, default=str)
    return {"id": call.get("id"), "type": "function",
            "function": {"name": call.get("name"), "arguments": arguments}}


def to_dict(message: BaseMessage) -> Dict:
    """One LangChain message as an OpenAI Chat message dict (content blocks shared, not
    copied: the compactor never changes what it is given)."""
    content = message.content
    if isinstance(message, AIMessage):
        out: Dict = {"role": "assistant", "content": content}
        if message.tool_calls:
            ids = {call.get("id") for call in message.tool_calls}
            if isinstance(content, list):  # Anthropic's tool_use blocks stand for tool_calls
                out["content"] = [b for b in content if not _is_use(b, ids)]
            out["tool_calls"] = [_call_dict(call) for call in message.tool_calls]
        return out
    if isinstance(message, ToolMessage):
        return {"role": "tool", "tool_call_id": message.tool_call_id, "content": content}
    if isinstance(message, HumanMessage):
        return {"role": "user", "content": content}
    if isinstance(message, SystemMessage):
        return {"role": "system", "content": content}
    if isinstance(message, FunctionMessage):
        return {"role": "function", "name": message.name, "content": content}
    if isinstance(message, ChatMessage):
        return {"role": message.role, "content": content}
    raise TypeError(f"a {type(message).__name__} is no message the compactor can read")


def to_dicts(messages: Sequence[BaseMessage]) -> list[Dict]:
    """LangChain messages as OpenAI Chat dicts, one each, in order."""
    return [to_dict(message) for message in messages]


def _is_use(block: object, ids: set[Any]) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_use" and block.get("id") in ids


def _calls_of(out: Dict) -> list[Dict]:
    calls = []
    for call in out.get("tool_calls") or []:
        function = call.get("function") or {}
        try:
            args = json.loads(function.get("arguments") or "{}")
        except ValueError:
            args = {}
        calls.append({"name": function.get("name"), "args": args, "id": call.get("id"),
                      "type": "tool_call"})
    return calls


def from_dict(out: Dict) -> BaseMessage:
    """A new LangChain message for a dict the compactor wrote (the summary is marked the
    way LangChain marks its own)."""
    role, content = out.get("role"), out.get("content")
    content = "" if content is None else content
    fresh = str(uuid.uuid4())
    if role == "user":
        summary = _text(content).startswith(SUMMARY_PREFIX)
        return HumanMessage(content=content, id=fresh,
                            additional_kwargs=dict(SUMMARY_MARK) if summary else {})
    if role == "assistant":
        return AIMessage(content=content, tool_calls=_calls_of(out), id=fresh)
    if role == "tool":
        return ToolMessage(content=content, tool_call_id=out.get("tool_call_id") or "", id=fresh)
    if role in ("system", "developer"):
        return SystemMessage(content=content, id=fresh)
    return ChatMessage(role=str(role), content=content, id=fresh)


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return str(content[0].get("text", ""))
    return ""


def _edited(origin: BaseMessage, out: Dict) -> BaseMessage:
    """``origin`` with the content (and tool calls) the compactor gave it, every other field
    kept; a message of another role if the compactor changed the role."""
    if to_dict(origin).get("role") != out.get("role"):
        return from_dict(out)
    update: Dict = {"content": "" if out.get("content") is None else out.get("content")}
    if isinstance(origin, AIMessage) and origin.tool_calls:
        kept = {call.get("id") for call in out.get("tool_calls") or []}
        update["tool_calls"] = [c for c in origin.tool_calls if c.get("id") in kept]
        if isinstance(origin.content, list):  # the tool_use blocks put back after the rest
            uses = [b for b in origin.content if _is_use(b, kept)]
            body = update["content"]
            body = [{"type": "text", "text": body}] if isinstance(body, str) and body else body
            update["content"] = [*(body or []), *uses]
    return origin.model_copy(update=update)


def _origins(new: Sequence[Dict], old: Sequence[Dict], ack: str) -> list[int | None]:
    """For each dict of ``new``, the index in ``old`` of the message it stands for: the same
    object; else the same tool call id; else the same place between two unchanged ones. A
    summary or acknowledgement the compactor wrote stands for none (it is a new message)."""
    where = {id(d): i for i, d in enumerate(old)}
    found: list[int | None] = [where.get(id(d)) for d in new]
    by_call = {_key(d): i for i, d in enumerate(old) if _key(d) is not None}
    for j, d in enumerate(new):
        if found[j] is None and _key(d) is not None:
            found[j] = by_call.get(_key(d))
    for j, d in enumerate(new):
        if found[j] is not None or is_own_output(d, ack):
            continue
        after = next((k for k in range(j + 1, len(new)) if found[k] is not None), None)
        anchor = found[after] if after is not None else None
        guess = anchor - (after - j) if anchor is not None and after is not None else (
            len(old) - (len(new) - j)
        )
        if 0 <= guess < len(old) and old[guess].get("role") == d.get("role"):
            found[j] = guess if guess not in found else None
    return found


def _key(d: Dict) -> tuple[str, str] | None:
    if d.get("role") == "tool" and d.get("tool_call_id"):
        return ("tool", str(d["tool_call_id"]))
    calls = d.get("tool_calls")
    if calls:
        return ("calls", ",".join(str(c.get("id")) for c in calls))
    return None


def to_messages(
    new: Sequence[Dict], old: Sequence[Dict], originals: Sequence[BaseMessage],
    *, acknowledgement: str | None = None,
) -> list[BaseMessage]:
    """``new`` (what ``compacted`` returned for ``old``, the dicts of ``originals``) as
    LangChain messages: the original object for a dict left as it was, the original with its
    new content for an edited one, a new message for one the compactor wrote (the summary,
    and the acknowledgement: the compactor's own ``acknowledgement`` or a preset one)."""
    messages: list[BaseMessage] = []
    for out, index in zip(new, _origins(new, old, acknowledgement or ""), strict=True):
        if index is None:
            messages.append(from_dict(out))
        elif out is old[index]:
            messages.append(originals[index])
        else:
            messages.append(_edited(originals[index], out))
    return messages
