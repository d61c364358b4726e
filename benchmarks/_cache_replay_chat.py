"""The same replay as ``_cache_replay`` through a fake OpenAI Chat Completions
client on :class:`~_cache_model.OpenAICache` (automatic prefixes of 1,024 tokens
and more, in 128-token steps, 5 minutes idle lifetime).

The harness's Anthropic-form steps are converted as they come: an assistant
reply to one message with ``content`` (its text) and ``tool_calls`` (JSON-text
arguments); a user message of tool results to one ``tool`` message per result.
The loop sends the history as it is (its system message first) with the tools in
Chat form; the clock's schedule is ``_cache_replay``'s.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from _cache_model import REPLY_PRIMING, OpenAICache, SimClock, Tokens, render_chat
from _cache_replay import Call, SessionRun, pauses, summary_text


def chat_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic tool definitions in Chat form."""
    return [
        {"type": "function", "function": {"name": t["name"], "description": t["description"],
                                          "parameters": t["input_schema"]}}
        for t in tools
    ]  # fmt: skip


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict))


def to_chat(message: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One Anthropic-form message as Chat messages."""
    content = message["content"]
    if isinstance(content, str):
        return [{"role": message["role"], "content": content}]
    results = [b for b in content if b.get("type") == "tool_result"]
    if results:
        return [{"role": "tool", "tool_call_id": b["tool_use_id"], "content": _text(b["content"])}
                for b in results]  # fmt: skip
    calls = [
        {"id": b["id"], "type": "function",
         "function": {"name": b["name"], "arguments": json.dumps(b["input"], ensure_ascii=False)}}
        for b in content if b.get("type") == "tool_use"
    ]  # fmt: skip
    out: dict[str, Any] = {"role": message["role"], "content": _text(content) or None}
    if calls:
        out["tool_calls"] = calls
    return [out]


class FakeChat:
    """A Chat Completions client: ``chat.completions.create(**request)``."""

    def __init__(self, cache: OpenAICache, clock: SimClock, tokens: Tokens) -> None:
        self.cache, self.clock, self.tokens = cache, clock, tokens
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))
        self.calls: list[Call] = []
        self.turn = 0
        self._summaries = 0

    def _usage(self, request: Mapping[str, Any], kind: str, output: int) -> dict[str, Any]:
        sequence = render_chat(self.tokens, request)
        cached = self.cache(sequence)
        total = len(sequence) + REPLY_PRIMING
        self.calls.append(Call(kind, self.turn, total, total - cached, cached, 0, 0, output))
        return {"prompt_tokens": total, "completion_tokens": output,
                "prompt_tokens_details": {"cached_tokens": cached}}  # fmt: skip

    def create(self, **request: Any) -> dict[str, Any]:
        self._summaries += 1
        text = summary_text(self._summaries)
        output = self.tokens.count(text)
        usage = self._usage(request, "summary", output)
        self.clock.advance(5 + output / 60)
        message = {"role": "assistant", "content": text, "refusal": None}
        return {"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage}


def replay_chat(
    session: Any,
    make: Callable[[FakeChat, list[dict[str, Any]], SimClock], Any],
    tokens: Tokens,
    tools: list[dict[str, Any]],
) -> SessionRun:
    """Replay ``session`` through the compactor ``make`` returns, in Chat form."""
    clock = SimClock()
    client = FakeChat(OpenAICache(tokens, clock), clock, tokens)
    messages = [m for start in session.fresh_start() for m in to_chat(start)]
    compactor = make(client, [], clock)
    steps = list(session.fresh_steps())
    run = SessionRun()
    for turn, ((reply, nxt), pause) in enumerate(
        zip(steps, pauses(session.kind, session.seed, steps), strict=True)
    ):
        client.turn = turn
        result = compactor(messages)
        action = getattr(result.action, "value", result.action)
        run.fulls += action == "full"
        run.micro_clears += bool(result.truncated) and action != "full"
        body = {"model": "fake", "messages": copy.copy(messages), "tools": tools}
        output = sum(tokens.block(b) for b in reply["content"])
        usage = client._usage(body, "loop", output)
        clock.advance(3 + output / 60)
        compactor.record_usage(messages, usage)
        messages += to_chat(reply) + to_chat(nxt)
        clock.advance(pause)
        run.idle_gaps += pause > 300
    run.calls, run.seconds = client.calls, clock()
    return run
