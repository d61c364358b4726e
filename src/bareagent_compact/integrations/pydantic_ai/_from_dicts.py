"""Anthropic Messages dicts read as Pydantic AI ``ModelMessage`` objects.

Used for what the library writes anew (the summary and its acknowledgement) and
for any dict whose original message is unknown; a dict that came from a
``ModelMessage`` goes back through ``_back`` instead, keeping that message's fields.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pydantic_ai import messages as pm

from bareagent_compact.prompts import SUMMARY_PREFIX, own_text

MARK: Final = "bareagent_compact"
"""The ``metadata`` key that marks the summary (``"summary"``) and the
acknowledgement (``"acknowledgement"``) a compaction wrote; it is never sent."""


def result_text(content: object) -> str:
    """A ``tool_result`` block's ``content`` as text (a list's text blocks joined)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            b["text"] for b in content if isinstance(b, Mapping) and isinstance(b.get("text"), str)
        )
    return "" if content is None else str(content)


def _blocks(content: object) -> list[Mapping[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, Mapping)]
    return []


@functools.cache
def _fields(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def known(cls: type, given: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords of ``given`` that ``cls`` has as fields (older Pydantic AI
    versions lack some, such as ``metadata`` or ``outcome``)."""
    return {k: v for k, v in given.items() if k in _fields(cls)}


def request_part(block: Mapping[str, Any], tool_names: Mapping[str, str]) -> pm.ModelRequestPart:
    """The request part of one block of a user message."""
    if block.get("type") == "tool_result":
        call_id = str(block.get("tool_use_id"))
        outcome = {"outcome": "failed"} if block.get("is_error") else {}
        return pm.ToolReturnPart(
            tool_name=tool_names.get(call_id, "unknown"),
            content=result_text(block.get("content")),
            tool_call_id=call_id,
            **known(pm.ToolReturnPart, outcome),
        )
    return pm.UserPromptPart(str(block.get("text", "")))


def response_part(block: Mapping[str, Any]) -> pm.ModelResponsePart:
    """The response part of one block of an assistant message (a signed thinking block
    as Anthropic's, so that it is sent back to Anthropic)."""
    kind = block.get("type")
    if kind == "thinking":
        signature = block.get("signature")
        return pm.ThinkingPart(
            str(block.get("thinking", "")), signature=signature,
            provider_name="anthropic" if signature is not None else None,
        )
    if kind == "redacted_thinking":
        return pm.ThinkingPart(
            "", id="redacted_thinking", signature=block.get("data"), provider_name="anthropic"
        )
    if kind == "tool_use":
        return pm.ToolCallPart(
            str(block.get("name")), dict(block.get("input") or {}),
            tool_call_id=str(block.get("id")),
        )
    return pm.TextPart(str(block.get("text", "")))


def from_dict(
    message: Mapping[str, Any], tool_names: Mapping[str, str], *, after_summary: bool = False,
    stamp: Mapping[str, Any] | None = None,
) -> pm.ModelMessage:
    """One message dict as a ``ModelRequest`` (system, user) or ``ModelResponse``."""
    role = message.get("role")
    content = message.get("content")
    extra = dict(stamp or {})
    if role == "assistant":
        if after_summary and own_text(content) is not None:
            extra["metadata"] = {MARK: "acknowledgement"}
        parts = [response_part(b) for b in _blocks(content)]
        return pm.ModelResponse(parts, **known(pm.ModelResponse, extra))
    if role == "system":
        text = content if isinstance(content, str) else result_text(content)
        return pm.ModelRequest([pm.SystemPromptPart(text)], **known(pm.ModelRequest, extra))
    own = own_text(content)
    if own is not None and own.startswith(SUMMARY_PREFIX):
        extra["metadata"] = {MARK: "summary"}
    prompt = [request_part(b, tool_names) for b in _blocks(content)]
    return pm.ModelRequest(prompt, **known(pm.ModelRequest, extra))


def from_dicts(
    messages: Sequence[Mapping[str, Any]], *, stamp: Mapping[str, Any] | None = None
) -> list[pm.ModelMessage]:
    """Anthropic Messages dicts as new ``ModelMessage`` objects (tool results named
    after the calls before them; the library's summary and acknowledgement marked
    in ``metadata`` under ``"bareagent_compact"``)."""
    names: dict[str, str] = {}
    out: list[pm.ModelMessage] = []
    summary = False
    for message in messages:
        for block in _blocks(message.get("content")):
            if block.get("type") == "tool_use":
                names[str(block.get("id"))] = str(block.get("name"))
        new = from_dict(message, names, after_summary=summary, stamp=stamp)
        summary = is_summary(new)
        out.append(new)
    return out


def is_summary(message: pm.ModelMessage) -> bool:
    """Whether ``message`` holds a summary a compaction wrote: marked so, or (once a
    later run merged it into the request before it, as Pydantic AI does with
    consecutive requests of a ``message_history``) a user prompt of the summary's."""
    if (getattr(message, "metadata", None) or {}).get(MARK) == "summary":
        return True
    return isinstance(message, pm.ModelRequest) and any(
        isinstance(p, pm.UserPromptPart) and isinstance(p.content, str)
        and p.content.startswith(SUMMARY_PREFIX)
        for p in message.parts
    )
