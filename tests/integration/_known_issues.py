"""Probes for known problems of the installed library that some integration tests meet.

A test that meets one is marked ``xfail(strict=True)`` only while the probe
finds the problem, so the mark goes away by itself once it is fixed.
"""

from __future__ import annotations

from typing import Any

from openai.types.chat import ChatCompletionMessage

from bareagent_compact import Compactor


def _tool_call(index: int) -> dict[str, Any]:
    return {"id": f"c{index}", "type": "function", "function": {"name": "f", "arguments": "{}"}}


def sdk_objects_break_micro_compaction() -> bool:
    """Whether micro-compaction reads an appended SDK message object (a newest Chat
    reply after four plain tool rounds) before the compactor has converted it."""
    messages: list[Any] = [{"role": "user", "content": "go"}]
    for index in range(4):
        messages.append({"role": "assistant", "tool_calls": [_tool_call(index)]})
        messages.append({"role": "tool", "tool_call_id": f"c{index}", "content": "x" * 100})
    reply = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [_tool_call(4)]}
    messages.append(ChatCompletionMessage.model_validate(reply))
    messages.append({"role": "tool", "tool_call_id": "c4", "content": "x" * 100})
    try:
        Compactor(provider=lambda prompt: "summary")(messages)
    except AttributeError:
        return True
    return False


SDK_OBJECTS_BREAK_MICRO = sdk_objects_break_micro_compaction()
SDK_OBJECTS_BREAK_MICRO_REASON = (
    "micro-compaction (stale_end -> dialects.turn_start) calls .get() on a Chat or Responses "
    "SDK object appended since the last call, before the compactor converts it"
)
