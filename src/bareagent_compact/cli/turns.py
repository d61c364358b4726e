"""What compaction did at each turn (model call) of a session, as replay and demo record it,
and the prompt-cache model replay prices it with."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Final

from bareagent_compact.protocols import HasText, Message, SummaryProvider
from bareagent_compact.providers import SummaryText
from bareagent_compact.result import Action, CompactionResult
from bareagent_compact.tokens import estimate_tokens, quarters_to_tokens, text_quarters

__all__ = ["CacheUse", "CountingProvider", "PromptCache", "TurnRecord"]

CACHE_MIN_TOKENS: Final = 1024
"""Anthropic's smallest cacheable prompt (most models): a shorter request is not cached."""


@dataclass(frozen=True, slots=True)
class CacheUse:
    """How one request's input met the prompt cache, in estimated tokens."""

    read: int = 0
    """The cached prefix read back."""
    written: int = 0
    """The rest of the request, written to the cache."""
    uncached: int = 0
    """Input neither read nor written (a request under the cacheable minimum)."""


@dataclass(frozen=True, slots=True)
class TurnRecord:
    """What compaction did at one turn (one model call) of a replayed session."""

    turn: int
    """1 for the first model call."""
    index: int
    """How many messages of the recorded history the loop had appended by then."""
    tokens_in: int
    """The estimate when the turn started, before compaction."""
    tokens_before: int
    """The estimate after micro-compaction (compared with the threshold)."""
    tokens_after: int
    """The estimate sent to the model."""
    action: Action
    truncated: int
    messages: int
    """The length of the working history after compaction."""
    summary_calls: int
    """Calls of the summary provider during this turn."""
    reason: str | None = None
    summary_input_tokens: int = 0
    """The estimated input of this turn's summary requests."""
    summary_output_tokens: int = 0
    """The estimated output (the summaries) of this turn's summary requests."""
    summary_cache_read: int = 0
    """What of their input was read from the prompt cache, where the provider reported it."""
    summary_cache_written: int = 0
    """What of their input was written to the prompt cache, where the provider reported it."""
    cache: CacheUse = CacheUse()
    """How the request sent to the model met the prompt cache."""

    @classmethod
    def of(
        cls,
        result: CompactionResult,
        *,
        turn: int,
        index: int,
        tokens_in: int,
        messages: int,
        summary_calls: int,
    ) -> TurnRecord:
        """The record of ``result``, what the compactor returned at this turn."""
        return cls(
            turn=turn,
            index=index,
            tokens_in=tokens_in,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            action=result.action,
            truncated=result.truncated,
            messages=messages,
            summary_calls=summary_calls,
            reason=result.reason,
        )


class CountingProvider:
    """Counts the calls of a summary provider and estimates their input and output.

    A ``str`` answer that reports no usage is returned as a
    :class:`~bareagent_compact.providers.SummaryText` carrying those estimates,
    so ``CompactionResult.cost`` holds them."""

    def __init__(self, provider: SummaryProvider) -> None:
        self.provider = provider
        self.calls = 0
        self.input_tokens = 0
        self.output_tokens = 0

    def __call__(self, prompt: list[Message], /) -> str | HasText:
        self.calls += 1
        sent = estimate_tokens(prompt)
        self.input_tokens += sent
        answer = self.provider(prompt)
        text = answer if isinstance(answer, str) else getattr(answer, "text", "")
        if not isinstance(text, str):
            return answer
        got = quarters_to_tokens(text_quarters(text))
        self.output_tokens += got
        if isinstance(answer, str) and getattr(answer, "usage", None) is None:
            return SummaryText(answer, {"input_tokens": sent, "output_tokens": got})
        return answer


def _digest(message: Message) -> bytes:
    text = json.dumps(message, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


class PromptCache:
    """Anthropic-style prompt caching with one breakpoint on the last message of every request.

    Each request writes the prefix that ends at its last message; a later
    request reads back the longest prefix an earlier one wrote (every message in
    it unchanged) and writes the rest. A request under ``min_tokens`` is not
    cached at all. Time is not modelled: nothing expires.
    """

    def __init__(self, min_tokens: int = CACHE_MIN_TOKENS) -> None:
        self.min_tokens = min_tokens
        self._prefixes: set[bytes] = set()

    def request(self, messages: list[Message], tokens: int) -> CacheUse:
        """Send ``messages`` (``tokens`` estimated in all); how they met the cache."""
        chain = [b""]
        for message in messages:
            chain.append(hashlib.blake2b(chain[-1] + _digest(message), digest_size=16).digest())
        hit = next((k for k in range(len(messages), 0, -1) if chain[k] in self._prefixes), 0)
        read = min(tokens, estimate_tokens(messages[:hit])) if hit else 0
        if tokens < self.min_tokens:
            return CacheUse(read=read, uncached=tokens - read)
        self._prefixes.add(chain[-1])
        return CacheUse(read=read, written=tokens - read)
