"""Faithful conversions of Anthropic-form histories to the two OpenAI forms, and a
generator of random Anthropic histories, for the dialect property tests.

The conversions follow each API's documented shapes: a Chat assistant message
carries its text as ``content`` (one string, several text parts, or ``None``
beside tool calls) and its calls as ``tool_calls`` with JSON-text arguments; each
tool result becomes a ``tool`` message. In Responses input, assistant text is an
assistant ``message`` item with ``output_text`` parts, each call a
``function_call`` item and each result a ``function_call_output`` item; plain
string messages use the ``{"role", "content"}`` shorthand.
"""

from __future__ import annotations

import json
import random
from typing import Any


def _arguments(tool_input: Any) -> str:
    return json.dumps(tool_input, ensure_ascii=False)


def _texts(content: list[dict[str, Any]]) -> list[str]:
    return [block["text"] for block in content if block.get("type") == "text"]


def _tool_uses(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [block for block in content if block.get("type") == "tool_use"]


def _results(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [block for block in content if block.get("type") == "tool_result"]


def _result_content(content: Any, part_type: str) -> Any:
    if isinstance(content, list):
        return [{"type": part_type, "text": block["text"]} for block in content]
    return content


def to_chat(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An Anthropic-form history as OpenAI Chat Completions messages."""
    out: list[dict[str, Any]] = []
    for message in history:
        content = message["content"]
        if isinstance(content, str):
            out.append({"role": message["role"], "content": content})
        elif _results(content):
            for block in _results(content):
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": block["tool_use_id"],
                        "content": _result_content(block["content"], "text"),
                    }
                )
        elif message["role"] == "assistant" and _tool_uses(content):
            texts = _texts(content)
            chat: dict[str, Any] = {
                "role": "assistant",
                "content": None if not texts else texts[0] if len(texts) == 1 else [
                    {"type": "text", "text": t} for t in texts
                ],
            }
            chat["tool_calls"] = [
                {
                    "id": block["id"],
                    "type": "function",
                    "function": {"name": block["name"], "arguments": _arguments(block["input"])},
                }
                for block in _tool_uses(content)
            ]
            out.append(chat)
        else:
            parts = [{"type": "text", "text": t} for t in _texts(content)]
            out.append({"role": message["role"], "content": parts})
    return out


def to_responses(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An Anthropic-form history as OpenAI Responses input items."""
    out: list[dict[str, Any]] = []
    for message in history:
        content = message["content"]
        role = message["role"]
        if isinstance(content, str):
            out.append({"role": role, "content": content})
        elif _results(content):
            for block in _results(content):
                out.append(
                    {
                        "type": "function_call_output",
                        "call_id": block["tool_use_id"],
                        "output": _result_content(block["content"], "input_text"),
                    }
                )
        elif role == "assistant":
            texts = _texts(content)
            if texts:
                out.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [
                            {"type": "output_text", "text": t, "annotations": []} for t in texts
                        ],
                    }
                )
            for block in _tool_uses(content):
                out.append(
                    {
                        "type": "function_call",
                        "call_id": block["id"],
                        "name": block["name"],
                        "arguments": _arguments(block["input"]),
                    }
                )
        else:
            out.append(
                {
                    "type": "message",
                    "role": role,
                    "content": [{"type": "input_text", "text": t} for t in _texts(content)],
                }
            )
    return out


CONVERTERS = {"chat": to_chat, "responses": to_responses}
PART_TYPES = {"chat": "text", "responses": "input_text"}


def convert_record(record: dict[str, Any], dialect: str) -> dict[str, Any]:
    """An archive record of an Anthropic-form result, with its content in ``dialect`` form."""
    return {**record, "content": _result_content(record["content"], PART_TYPES[dialect])}


def break_pairs(history: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """A copy of ``history`` with some tool calls and results removed or renamed,
    keeping every message (so roles still alternate as before)."""
    broken: list[dict[str, Any]] = []
    for message in history:
        content = message["content"]
        if isinstance(content, str):
            broken.append(dict(message))
            continue
        blocks = []
        for original in content:
            if original.get("type") in ("tool_use", "tool_result") and rng.random() < 0.15:
                continue
            block = dict(original)
            if block.get("type") == "tool_use" and rng.random() < 0.05:
                block["id"] = block["id"] + "-renamed"
            blocks.append(block)
        if message["role"] == "assistant" and not _texts(blocks):
            blocks.insert(0, {"type": "text", "text": "(calls)"})
        if message["role"] == "user" and not blocks:
            broken.append({"role": "user", "content": "(no results)"})
            continue
        broken.append({"role": message["role"], "content": blocks})
    return broken

WORDS = ("read", "the", "config", "文件", "失败", "error:", "path/to/x.py", "ok", "{}", "\n")


def _text(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(low, high)))


def random_history(rng: random.Random) -> list[dict[str, Any]]:
    """A well-formed Anthropic-form agent history: system messages, user tasks,
    assistant turns with 0-3 tool calls, and their results (text or blocks)."""
    history: list[dict[str, Any]] = []
    if rng.random() < 0.7:
        history.append({"role": "system", "content": _text(rng, 1, 8)})
    history.append({"role": "user", "content": _text(rng, 1, 10)})
    reuse_ids = rng.random() < 0.2
    counter = 0
    for _ in range(rng.randint(0, 12)):
        if rng.random() < 0.1:
            history.append({"role": "system", "content": "<reminder> " + _text(rng, 1, 4)})
        calls = rng.choice((0, 1, 1, 1, 2, 3))
        blocks: list[dict[str, Any]] = []
        if rng.random() < 0.7 or not calls:
            for _ in range(rng.choice((1, 1, 2))):
                blocks.append({"type": "text", "text": _text(rng, 0, 12)})
        uses = []
        for index in range(calls):
            counter += 1
            call_id = f"call_{index}" if reuse_ids else f"toolu_{counter}"
            uses.append(
                {
                    "type": "tool_use",
                    "id": call_id,
                    "name": rng.choice(("bash", "read_file", "grep")),
                    "input": {"arg": _text(rng, 0, 4), "n": rng.randint(0, 9)},
                }
            )
        blocks += uses
        if not uses and len(blocks) == 1 and rng.random() < 0.5:
            history.append({"role": "assistant", "content": blocks[0]["text"]})
        else:
            history.append({"role": "assistant", "content": blocks})
        if uses:
            if rng.random() < 0.08:
                break  # trailing calls whose results are still to come
            results = []
            for use in uses:
                if rng.random() < 0.2:
                    result: Any = [
                        {"type": "text", "text": _text(rng, 1, 30)}
                        for _ in range(rng.randint(1, 2))
                    ]
                else:
                    result = _text(rng, 0, 60)
                results.append({"type": "tool_result", "tool_use_id": use["id"], "content": result})
            history.append({"role": "user", "content": results})
        else:
            history.append({"role": "user", "content": _text(rng, 1, 10)})
    last = history[-1]
    if rng.random() < 0.3 and last["role"] == "user" and isinstance(last["content"], list):
        history.append({"role": "assistant", "content": _text(rng, 1, 6)})
        if rng.random() < 0.5:
            history.append({"role": "user", "content": _text(rng, 1, 6)})
    if rng.random() < 0.2:  # reminders an agent appends after the latest message
        for _ in range(rng.choice((1, 1, 2))):
            role = rng.choice(("system", "system", "developer"))
            history.append({"role": role, "content": "<reminder> trailing"})
    return history
