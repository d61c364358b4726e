"""One agent session replayed through a compactor and a fake Anthropic client whose
prompt cache is modelled exactly (``_cache_model``), on a simulated clock.

The loop sends what an agent sends: ``system=`` (the framework prompt and the
session's system message, a breakpoint on the last block), ``tools=``, and the
history without its system message, with a breakpoint on the last block of the
last message (on a copy: the history is never edited by the loop). The summary
requests go through the same client (``client.messages.create``), so their cache
reads and writes are counted like the loop's.

The clock (seconds) moves on:

- per loop request: 3 s + 1 s per 60 output tokens (the model's answer);
- after a reply with tool calls: 1-8 s per call (the tools run);
- after a text-only report, before the next task: a user pause, 20-180 s, or with
  probability 0.35 an idle gap of 6-30 minutes (past Anthropic's 5-minute lifetime);
- per summary request: 5 s + 1 s per 60 output tokens.

The pauses are drawn per (kind, seed) from their own random stream, so every
configuration replays the same schedule; only the summary requests add time.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Final

from _cache_model import AnthropicCache, Refused, SimClock, Tokens

MARK: Final = {"type": "ephemeral"}
SUMMARY_WORDS: Final = 260  # the fake summary: a fixed length, numbered so no two are equal
IDLE_SHARE: Final = 0.35
WRITE_5M, WRITE_1H, READ, OUTPUT = 1.25, 2.0, 0.1, 5.0  # prices against normal input


@dataclass
class Call:
    """One request the fake API answered."""

    kind: str  # "loop" or "summary"
    turn: int
    total: int
    uncached: int
    read: int
    write_5m: int
    write_1h: int
    output: int

    @property
    def input_cost(self) -> float:
        """Uncached x1, cache writes x1.25 (x2 for an hour), cache reads x0.1."""
        writes = WRITE_5M * self.write_5m + WRITE_1H * self.write_1h
        return self.uncached + writes + READ * self.read


def summary_text(number: int) -> str:
    """The fake summary of the ``number``-th summary request: a fixed length, numbered
    so that no two are equal."""
    return f"Summary {number}: " + " ".join(
        f"step{i} done" if i % 7 else "state kept" for i in range(SUMMARY_WORDS)
    )


def _pairing(messages: Sequence[Mapping[str, Any]]) -> None:
    """Refuse what the API refuses: a tool_use not answered in the next user turn,
    or a tool_result whose tool_use is not in the assistant turn before it."""
    calls: set[str] = set()
    for message in messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        ids = {b.get("id") for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}
        answered = {
            b.get("tool_use_id") for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_result"
        }  # fmt: skip
        if message.get("role") == "user":
            if answered - calls or calls - answered:
                raise Refused("tool_use and tool_result blocks do not pair")
            calls = set()
        else:
            if calls:
                raise Refused("a tool_use is not followed by its tool_result")
            calls = {str(i) for i in ids}


class FakeAnthropic:
    """An Anthropic client: ``messages.create(**request)`` over the cache model."""

    def __init__(self, cache: AnthropicCache, clock: SimClock, tokens: Tokens) -> None:
        self.cache, self.clock, self.tokens = cache, clock, tokens
        self.messages = SimpleNamespace(create=self.create)
        self.calls: list[Call] = []
        self.refused: list[str] = []
        self.turn = 0
        self._summaries = 0

    def _usage(self, request: Mapping[str, Any], kind: str, output: int) -> dict[str, Any]:
        try:
            _pairing(request.get("messages") or [])
            usage = self.cache(request)
        except Refused as error:
            self.refused.append(f"{kind}: {error}")
            raise
        split = usage["cache_creation"]
        self.calls.append(Call(
            kind, self.turn, usage["input_tokens"] + usage["cache_read_input_tokens"]
            + usage["cache_creation_input_tokens"], usage["input_tokens"],
            usage["cache_read_input_tokens"], split["ephemeral_5m_input_tokens"],
            split["ephemeral_1h_input_tokens"], output,
        ))  # fmt: skip
        return {**usage, "output_tokens": output}

    def create(self, **request: Any) -> SimpleNamespace:
        """A summary request: answered with a fixed-length summary."""
        self._summaries += 1
        text = summary_text(self._summaries)
        output = self.tokens.count(text)
        usage = self._usage(request, "summary", output)
        self.clock.advance(5 + output / 60)
        return SimpleNamespace(
            content=[SimpleNamespace(type="text", text=text)], stop_reason="end_turn",
            usage=SimpleNamespace(**usage),
        )  # fmt: skip

    def send(self, request: Mapping[str, Any], reply: Mapping[str, Any]) -> dict[str, Any]:
        """A loop request answered with the session's ``reply``."""
        output = sum(self.tokens.block(b) for b in reply["content"])
        usage = self._usage(request, "loop", output)
        self.clock.advance(3 + output / 60)
        return usage


def loop_request(
    messages: Sequence[Mapping[str, Any]], system: list[dict[str, Any]], tools: list[Any]
) -> dict[str, Any]:
    """What the agent sends: its system and tools, the history without its system
    message, a breakpoint on the last block (of a copy)."""
    dialogue = [m for m in messages if m.get("role") != "system"]
    last = dict(dialogue[-1])
    content = last["content"]
    blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
    blocks[-1] = {**blocks[-1], "cache_control": MARK}
    last["content"] = blocks
    return {"model": "fake", "max_tokens": 4096, "system": system, "tools": tools,
            "messages": [*dialogue[:-1], last]}  # fmt: skip


def pauses(kind: str, seed: int, steps: Sequence[tuple[Any, Any]]) -> list[float]:
    """Seconds after each turn's reply: the tools' run time, or a user pause."""
    rng = random.Random(f"clock/{kind}/{seed}")
    out = []
    for reply, _next in steps:
        calls = sum(1 for b in reply["content"] if b.get("type") == "tool_use")
        if calls:
            out.append(sum(rng.uniform(1, 8) for _ in range(calls)))
        elif rng.random() < IDLE_SHARE:
            out.append(rng.uniform(360, 1800))
        else:
            out.append(rng.uniform(20, 180))
    return out


@dataclass
class SessionRun:
    """What one session cost: every request, the full compactions, the clock."""

    calls: list[Call] = field(default_factory=list)
    fulls: int = 0
    micro_clears: int = 0
    refused: list[str] = field(default_factory=list)
    seconds: float = 0.0
    idle_gaps: int = 0


def replay(
    session: Any,
    make: Callable[[FakeAnthropic, list[dict[str, Any]], SimClock], Any],
    tokens: Tokens,
    tools: list[Any],
    framework_system: str,
) -> SessionRun:
    """Replay ``session`` (the harness's) through the compactor ``make`` returns."""
    clock = SimClock()
    client = FakeAnthropic(AnthropicCache(tokens, clock), clock, tokens)
    messages = session.fresh_start()
    system = [{"type": "text", "text": framework_system},
              {"type": "text", "text": messages[0]["content"], "cache_control": MARK}]  # fmt: skip
    compactor = make(client, copy.deepcopy(system), clock)
    steps = list(session.fresh_steps())
    run = SessionRun()
    for turn, ((reply, nxt), pause) in enumerate(zip(steps, pauses(session.kind, session.seed,
                                                                   steps), strict=True)):
        client.turn = turn
        result = compactor(messages)
        action = getattr(result.action, "value", result.action)
        run.fulls += action == "full"
        run.micro_clears += bool(result.truncated) and action != "full"
        usage = client.send(loop_request(messages, system, tools), reply)
        compactor.record_usage(messages, usage)
        messages.append(reply)
        messages.append(nxt)
        clock.advance(pause)
        run.idle_gaps += pause > 300
    run.calls, run.refused, run.seconds = client.calls, client.refused, clock()
    return run
