"""A fake model API's prompt cache, modelled on the providers' documented rules.

Two models, both on a simulated clock (:class:`SimClock`), both counting with the
``encode`` they are given (a real tokenizer in the benchmark, one token per
character in the tests):

- :class:`AnthropicCache`: explicit ``cache_control`` breakpoints. The cached
  prefix is the request's content in the API's order (tools, then system, then
  messages), block by block, byte for byte (the JSON of every block without its
  ``cache_control``). An entry is written only at a breakpoint (at most 4 per
  request; more is refused), if its prefix holds at least ``min_tokens`` (1,024:
  Sonnet and Opus 4). A request reads the longest live entry found at one of its
  breakpoints or at a block boundary up to 20 blocks before one (the lookback).
  An entry lives 5 minutes (``"ttl": "1h"``: an hour) and every read refreshes it.
  A change of ``tool_choice`` (or of ``thinking``) invalidates the message blocks
  but not tools and system (the documentation's invalidation table); an absent
  ``tool_choice`` is ``auto``. Consecutive messages of the same role are one turn
  (the API merges them; a string content is one text block). Usage:
  ``input_tokens`` after the last breakpoint, ``cache_read_input_tokens``,
  ``cache_creation_input_tokens`` (and its split by lifetime in
  ``cache_creation``).
- :class:`OpenAICache`: automatic prefixes. The request rendered as one token
  sequence (tools, then the messages or input items in order, each behind a role
  marker); a hit is the longest cached prefix of 1,024 tokens and more, in steps
  of 128; every such prefix of a request is cached for ``ttl`` seconds (default
  300: the documented 5-10 idle minutes, taken at the low end), refreshed on use.
  ``tool_choice`` is not part of the prefix (nothing documents it). Usage reports
  the whole input with the cached part (``cached_tokens``); writes are free.

Token counts of the content follow the accuracy harness's overhead model: a text
block ``tok(text) + 1``, a ``tool_use`` block ``tok(name) + tok(id) +
tok(json(input)) + 8``, a ``tool_result`` ``tok(id) + tok(content) + 6`` (+2 when
``is_error``), 4 per message, Anthropic's tool-use system prompt (346) when tools
are given, and 3 for the reply's priming (never cached).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

Encode = Callable[[str], Sequence[int]]

TOOL_PREAMBLE: Final = 346
REPLY_PRIMING: Final = 3
PER_MESSAGE: Final = 4
LIFETIMES: Final = {"5m": 300.0, "1h": 3600.0}
MAX_BREAKPOINTS: Final = 4
LOOKBACK: Final = 20
OPENAI_FLOOR: Final = 1024
OPENAI_STEP: Final = 128
_ROLE_MARK: Final = 1 << 30  # token ids of the role markers in a rendered OpenAI prompt


class Refused(ValueError):
    """A request the real API would answer with a 400."""


class SimClock:
    """Seconds on a simulated clock: ``clock()`` reads it, ``advance`` moves it on."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("the clock only moves forward")
        self.now += seconds


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _bare(block: Mapping[str, Any]) -> dict[str, Any]:
    """The block as the cache compares it: without its ``cache_control``."""
    return {k: v for k, v in block.items() if k != "cache_control"}


class Tokens:
    """Token counts and ids of texts, remembered."""

    def __init__(self, encode: Encode) -> None:
        self._encode = encode
        self._ids: dict[str, tuple[int, ...]] = {}

    def ids(self, text: str) -> tuple[int, ...]:
        found = self._ids.get(text)
        if found is None:
            if len(self._ids) > 200_000:
                self._ids.clear()
            found = self._ids[text] = tuple(self._encode(text))
        return found

    def count(self, text: str) -> int:
        return len(self.ids(text))

    def content(self, content: object) -> int:
        """A tool result's content: a str, or text blocks."""
        if isinstance(content, str):
            return self.count(content)
        if isinstance(content, list):
            return sum(
                self.count(b["text"]) if isinstance(b, dict) and isinstance(b.get("text"), str)
                else self.count(_json(b))
                for b in content
            )  # fmt: skip
        return 0 if content is None else self.count(_json(content))

    def block(self, block: object) -> int:
        """One Anthropic content block (the harness's overhead model)."""
        if isinstance(block, str):
            return self.count(block)
        if not isinstance(block, Mapping):
            return self.count(_json(block))
        kind = block.get("type")
        if kind == "text":
            return self.count(str(block.get("text", ""))) + 1
        if kind == "tool_use":
            return (self.count(str(block.get("name", ""))) + self.count(str(block.get("id", "")))
                    + self.count(_json(block.get("input", {}))) + 8)  # fmt: skip
        if kind == "tool_result":
            result = self.count(str(block.get("tool_use_id", "")))
            result += self.content(block.get("content"))
            return result + 6 + (2 if block.get("is_error") else 0)
        return self.count(_json(_bare(block)))


@dataclass
class _Block:
    """One block of a request in cache order: its prefix hash, the tokens up to and
    including it, and its breakpoint's lifetime (``None``: no breakpoint)."""

    digest: bytes
    upto: int
    ttl: str | None


@dataclass
class AnthropicCache:
    """Anthropic's prompt cache (see the module docstring)."""

    tokens: Tokens
    clock: Callable[[], float]
    min_tokens: int = 1024
    entries: dict[bytes, float] = field(default_factory=dict)  # prefix hash -> expiry

    def blocks(self, request: Mapping[str, Any]) -> tuple[list[_Block], int]:
        """The request's blocks in cache order, and its whole input size."""
        out: list[_Block] = []
        digest, total = hashlib.sha1(b"anthropic").digest(), 0

        def add(part: object, tokens: int, marked: object) -> None:
            nonlocal digest, total
            digest = hashlib.sha1(digest + _json(part).encode()).digest()
            total += tokens
            ttl = None
            if isinstance(marked, Mapping):
                ttl = str(marked.get("ttl", "5m"))
                if ttl not in LIFETIMES:
                    raise Refused(f"unknown cache_control ttl {ttl!r}")
            out.append(_Block(digest, total, ttl))

        tools = list(request.get("tools") or [])
        for tool in tools:
            add(_bare(tool), self.tokens.count(_json(_bare(tool))), tool.get("cache_control"))
        system = request.get("system")
        blocks = [{"type": "text", "text": system}] if isinstance(system, str) else system or []
        for index, block in enumerate(blocks):
            extra = TOOL_PREAMBLE if tools and index == 0 else 0
            add(_bare(block), self.tokens.block(block) - 1 + extra, block.get("cache_control"))
        if tools and not blocks:
            total += TOOL_PREAMBLE
        choice = request.get("tool_choice") or {"type": "auto"}
        digest = hashlib.sha1(digest + _json([choice, request.get("thinking")]).encode()).digest()
        for role, content in _turns(request.get("messages") or []):
            first = True
            for block in content:
                tokens = self.tokens.block(block) + (PER_MESSAGE if first else 0)
                marked = block.get("cache_control") if isinstance(block, Mapping) else None
                bare = _bare(block) if isinstance(block, Mapping) else block
                part = [role if first else "", bare]
                add(part, tokens, marked)
                first = False
        return out, total + REPLY_PRIMING

    def __call__(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The usage of ``request``; reads, writes and refreshes the entries."""
        blocks, total = self.blocks(request)
        now = self.clock()
        marks = [i for i, b in enumerate(blocks) if b.ttl is not None]
        if len(marks) > MAX_BREAKPOINTS:
            raise Refused(f"{len(marks)} cache_control blocks; at most {MAX_BREAKPOINTS}")
        read, hit = 0, None
        for mark in marks:
            for j in range(mark, max(-1, mark - LOOKBACK - 1), -1):
                if self.entries.get(blocks[j].digest, -1.0) > now:
                    if blocks[j].upto > read:
                        read, hit = blocks[j].upto, j
                    break
        if hit is not None:
            self.entries[blocks[hit].digest] = now + self._life(blocks, hit)
        written = {"5m": 0, "1h": 0}
        start = read
        for mark in marks:
            block = blocks[mark]
            if block.upto < self.min_tokens or block.ttl is None:
                continue
            self.entries[block.digest] = now + LIFETIMES[block.ttl]
            if block.upto > start:
                written[block.ttl] += block.upto - start
                start = block.upto
        creation = written["5m"] + written["1h"]
        return {
            "input_tokens": total - read - creation,
            "cache_read_input_tokens": read,
            "cache_creation_input_tokens": creation,
            "cache_creation": {
                "ephemeral_5m_input_tokens": written["5m"],
                "ephemeral_1h_input_tokens": written["1h"],
            },
        }

    @staticmethod
    def _life(blocks: list[_Block], index: int) -> float:
        """The lifetime of the entry at ``index``: that of the next breakpoint's (an
        entry read through the lookback was written by a breakpoint there)."""
        for block in blocks[index:]:
            if block.ttl is not None:
                return LIFETIMES[block.ttl]
        return LIFETIMES["5m"]


def _turns(messages: Sequence[Mapping[str, Any]]) -> list[tuple[str, list[Any]]]:
    """The messages as the API reads them: consecutive same-role messages merged,
    string content one text block."""
    turns: list[tuple[str, list[Any]]] = []
    for message in messages:
        role = message.get("role")
        if role not in ("user", "assistant"):
            raise Refused(f"role {role!r} in messages (system goes in system=)")
        content = message.get("content")
        if isinstance(content, str):  # the API reads a string as one text block
            content = [{"type": "text", "text": content}]
        blocks = list(content or [])
        if not blocks:
            raise Refused("a message with empty content")
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((str(role), blocks))
    return turns


@dataclass
class OpenAICache:
    """OpenAI's automatic prompt cache (see the module docstring)."""

    tokens: Tokens
    clock: Callable[[], float]
    ttl: float = 300.0
    floor: int = OPENAI_FLOOR
    step: int = OPENAI_STEP
    entries: dict[bytes, float] = field(default_factory=dict)

    def __call__(self, sequence: Sequence[int]) -> int:
        """The cached tokens of a prompt rendered as ``sequence``; caches its prefixes."""
        now = self.clock()
        digests: list[tuple[int, bytes]] = []
        h = hashlib.sha1(b"openai")
        done = 0
        for length in range(self.floor, len(sequence) + 1, self.step):
            h.update(repr(tuple(sequence[done:length])).encode())
            done = length
            digests.append((length, h.copy().digest()))
        cached = 0
        for length, digest in digests:
            if self.entries.get(digest, -1.0) > now:
                cached = length
        for _length, digest in digests:
            self.entries[digest] = now + self.ttl
        return cached


def _role(name: str) -> tuple[int, ...]:
    return (_ROLE_MARK + sum(map(ord, name)),)


def render_chat(tokens: Tokens, request: Mapping[str, Any]) -> list[int]:
    """A Chat Completions request as one token sequence: tools, then each message
    behind its role marker (content, tool calls, the tool call id of a result)."""
    out: list[int] = []
    if request.get("tools"):
        out += _role("tools") + tokens.ids(_json(request["tools"]))
    for message in request.get("messages") or []:
        out += _role(str(message.get("role")))
        content = message.get("content")
        if isinstance(content, str):
            out += tokens.ids(content)
        elif content is not None:
            out += tokens.ids(_json(content))
        for name in ("tool_calls", "tool_call_id", "name"):
            if message.get(name) is not None:
                out += tokens.ids(_json(message[name]))
    return out


def render_responses(tokens: Tokens, request: Mapping[str, Any]) -> list[int]:
    """A Responses request as one token sequence: tools, instructions, each input item."""
    out: list[int] = []
    if request.get("tools"):
        out += _role("tools") + tokens.ids(_json(request["tools"]))
    if request.get("instructions"):
        out += _role("developer") + tokens.ids(str(request["instructions"]))
    items = request.get("input") or []
    if isinstance(items, str):
        items = [{"role": "user", "content": items}]
    for item in items:
        out += _role(str(item.get("role") or item.get("type")))
        content = item.get("content")
        if isinstance(content, str):
            out += tokens.ids(content)
        else:
            out += tokens.ids(_json({k: v for k, v in item.items() if k not in ("role", "id")}))
    return out
