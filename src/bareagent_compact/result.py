"""What one call of :class:`~bareagent_compact.Compactor` did."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Final, Literal

_UNSET: Final = -1


class Action(str, enum.Enum):
    """The outcome of one compaction call."""

    NONE = "none"
    """Nothing changed."""
    MICRO = "micro"
    """Micro-compaction truncated old tool results; no summary was made."""
    FULL = "full"
    """The history was summarised and rebuilt."""
    FAILED = "failed"
    """A full compaction was due but did not happen; history is as micro-compaction left it."""


class Reason(str, enum.Enum):
    """Why a full compaction failed or was skipped: stable values to branch on.

    Each member equals its text (``Reason.PROVIDER_RAISED == "provider raised"``).
    """

    PROVIDER_RAISED = "provider raised"
    """The provider raised (also: reading its answer's ``.text`` raised)."""
    UNUSABLE_SUMMARY = "unusable summary"
    """The answer was not a ``str`` (or an object with a ``str`` ``.text``, or an SDK
    response with text), or was blank."""
    PROVIDER_AWAITABLE = "provider returned an awaitable"
    """The sync ``Compactor``'s provider returned a coroutine: use ``AsyncCompactor``."""
    INFLATED_SUMMARY = "summary longer than its source"
    """The summary was longer than what it would replace (refused unless forced)."""
    CONTEXT_OVERFLOW = "summary input too long for the model"
    """The provider kept saying the request exceeded its context window."""
    SNAPSHOT_FAILED = "snapshot failed"
    """The transcript manager's ``save`` failed, and ``require_snapshot`` is on."""
    NOT_ENCODABLE = "history cannot be encoded"
    """The history could not be rendered (cyclic or absurdly deep content)."""
    HISTORY_CHANGED = "history changed during summary"
    """The list was changed, other than by appending, while the summary was made."""
    BACKING_OFF = "backing off after a failed summary"
    """A recent full compaction failed; the provider is left alone for a few turns."""
    NOTHING_TO_SUMMARISE = "nothing to summarise"
    """Only system messages, the pending turn and kept tool calls are left."""
    NOTHING_NEW = "nothing new to summarise"
    """Only the previous summary is left to summarise (not forced)."""
    SKIPPED_BY_HOOK = "skipped by before_compact"
    """The ``before_compact`` hook returned ``False``."""
    STILL_OVER_THRESHOLD = "still over the threshold"
    """The last full compaction left the history over the threshold (what it must
    keep is that large), and too little new history has come since to be worth
    another summary (not forced)."""
    SUMMARY_BUDGET_TOO_SMALL = "summary input budget too small for the history"
    """The summary system prompt left less than half of ``summary_input_tokens`` for
    the history (in the compactor's count), even with the instructions left out."""

    SERVER_COMPACTION_FAILED = "server compaction failed"
    """A server summariser (``anthropic_server_compaction``,
    ``openai_responses_compaction``) raised: an API error such as
    ``compaction_nothing_to_summarize`` or ``compaction_unavailable`` (529), or an
    answer without the compaction artefact. History left as it was."""

    BACKGROUND_LOST = "background summary lost"
    """A summary started in the background (``background_at``) ended without one
    to swap in: it was cancelled (``aclose()``, or its event loop shut down), it
    raised, or it belongs to another event loop. Nothing was summarised."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class CompactionEvent:
    """What a full compaction is about to do: what ``before_compact`` receives."""

    trigger: Literal["auto", "manual"]
    """``"manual"`` for ``force=True`` (``/compact``), ``"auto"`` past the threshold."""
    tokens: int
    """The history's count (the number compared with the threshold)."""
    threshold: int
    source_messages: int
    """How many messages are about to be summarised."""
    source_tokens: int
    """Their count."""
    session_id: str


@dataclass(frozen=True, slots=True)
class SummaryCost:
    """What the summary requests of one full compaction used, as the API reported it.

    ``requests`` is how many summary requests were sent (every part, and the
    requests the overflow retry sent again). The token counts are summed over
    the answers that reported them, and are ``None`` (unknown, not 0) when none
    did: a provider returning a plain ``str`` reports nothing. ``input_tokens``
    is the whole input, cache reads and writes included (Anthropic's
    ``input_tokens + cache_read_input_tokens + cache_creation_input_tokens``,
    OpenAI's ``prompt_tokens`` or ``input_tokens``); ``cache_read_tokens`` what
    of it was read from the prompt cache (Anthropic ``cache_read_input_tokens``,
    OpenAI ``cached_tokens``); ``cache_write_tokens`` what was written to it
    (Anthropic ``cache_creation_input_tokens``; OpenAI reports none);
    ``output_tokens`` the answers' tokens.
    """

    requests: int = 0
    input_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    output_tokens: int | None = None

    def plus(self, other: SummaryCost) -> SummaryCost:
        """The cost of both: requests added, each count summed where either knows it."""
        return SummaryCost(
            self.requests + other.requests,
            _sum(self.input_tokens, other.input_tokens),
            _sum(self.cache_read_tokens, other.cache_read_tokens),
            _sum(self.cache_write_tokens, other.cache_write_tokens),
            _sum(self.output_tokens, other.output_tokens),
        )


def _sum(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else a + b


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """An immutable report of one ``compactor(messages)`` call.

    ``tokens_before`` is the estimate after micro-compaction (the number compared
    with the threshold); ``tokens_after`` is the estimate when the call returned.
    ``tokens_before_micro`` is the size when the call began, before step 1:
    ``tokens_before`` plus the built-in estimate's weight of what step 1 removed
    (rounded down; equal to ``tokens_before`` when it changed nothing), so
    ``tokens_before_micro - tokens_before`` is what micro-compaction saved.
    ``reason`` says why a full compaction failed or was skipped, else ``None``.
    ``summary_calls`` is how many times the provider was called, and ``parts``
    how many parts the summary source was summarised in (1 when it fit the
    summariser's input budget; 0 when no summary was asked for).
    ``prefix_changed`` is true when the call changed a message before the newest
    one (a truncated older result, or a summary): a provider's prompt cache of the
    history breaks at that point, so the next request writes it again. It takes
    no part in ``==``, so results compare as they did before it existed.
    """

    action: Action
    tokens_before: int
    tokens_after: int
    truncated: int = 0
    snapshot_saved: bool = False
    reason: Reason | None = None
    summary_calls: int = 0
    parts: int = 0
    replaced: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    """A full compaction's whole history before the rebuild (the same message
    objects, not copies), for :meth:`Compactor.undo`; empty otherwise."""
    rebuilt: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    """The history the rebuild made, before any message that arrived during the
    summary (the same objects), for ``undo``."""
    truncations: tuple[tuple[Any, str, Any], ...] = field(default=(), compare=False, repr=False)
    """What micro-compaction replaced in this same call, ``(holder, key, original)``,
    so that ``undo`` also puts back the results truncated just before the summary."""
    prefix_changed: bool = field(default=False, compare=False)
    tokens_before_micro: int = field(default=_UNSET, compare=False)
    """The estimate before micro-compaction; ``tokens_before`` when not given. It
    takes no part in ``==``, like ``prefix_changed``."""
    thinking_cleared: int = field(default=0, compare=False)
    """Thinking blocks and reasoning items removed by ``clear_thinking_after_turns``."""
    pruned: int = field(default=0, compare=False)
    """Messages before a server compaction artefact dropped by
    ``prune_before_server_compaction``."""
    pinned_identifiers: int = field(default=0, compare=False)
    """Identifiers (paths, URLs, error lines, ids, numbers) that the steps taken
    while a background summary was made used, that only the summarised part held,
    and that the pinned block holds (see :mod:`bareagent_compact.facts`)."""
    cost: SummaryCost | None = field(default=None, compare=False)
    """What the summary requests of this call used (:class:`SummaryCost`);
    ``None`` when no summary was asked for. It takes no part in ``==``."""

    def __post_init__(self) -> None:
        if self.tokens_before_micro == _UNSET:
            object.__setattr__(self, "tokens_before_micro", self.tokens_before)

    @property
    def compacted(self) -> bool:
        """True when the history was summarised (``action is Action.FULL``)."""
        return self.action is Action.FULL
