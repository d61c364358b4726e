"""A summary asked as a continuation of the conversation itself.

A continuation summariser (:func:`~bareagent_compact.protocols.is_continuation_summariser`)
is sent the history as the compactor call received it (the request the loop
last sent, plus what it appended since), then one instruction: the prompt
cache holds that prefix, so the summary request reads it instead of paying
for a new transcript. The messages kept verbatim after the summary are left
out of it when what comes before them answers every tool call: the request is
then the list the loop last sent (or an earlier one), nothing of it new to the
cache. Nothing step 1 clears or cuts in the same call reaches
it: the copy is taken before step 1 runs.

When the part sent is neither a list the loop's model accepted (the one its
last usage report was for, or the start of it) nor, with the instruction,
within what the request may carry (``summary_input_tokens``, or
``context_window`` when given), or the API says it is too long for its
window, the transcript request of :mod:`~bareagent_compact.summarize` is made
instead, in parts when needed. Like the other request builders, nothing here
calls the provider: it yields ``SummaryRequest`` objects.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Sequence
from typing import Any, Final

from bareagent_compact import dialects
from bareagent_compact._json import json_copy
from bareagent_compact.overflow import is_context_overflow
from bareagent_compact.plain import plain_view
from bareagent_compact.prompts import language_of
from bareagent_compact.protocols import ContinuationRequest, Message
from bareagent_compact.result import Reason
from bareagent_compact.summarize import Summarized, SummaryRequest, spent

logger = logging.getLogger("bareagent_compact.compactor")

LEADS: Final = {
    "en": "This is not a new task: compact the conversation above. ",
    "zh": "这不是新的任务：请压缩上面的对话。",
}
"""Opens the instruction: the conversation comes before it."""

KEPT_NOTES: Final = {
    "en": (
        "\n\nThe last {kept} messages above are kept verbatim after your summary: summarise "
        "what comes before them, and mention them only as far as continuity needs."
    ),
    "zh": (
        "\n\n上面最后 {kept} 条消息会原样保留在摘要之后："
        "请总结它们之前的内容，只在衔接需要时提及它们。"
    ),
}
"""Says how much of the conversation is kept verbatim (when some is)."""

TEXT_ONLY: Final = {
    "en": "\n\nAnswer with the summary as text; do not call any tool.",
    "zh": "\n\n请直接以文本回答摘要，不要调用任何工具。",
}
"""Closes the instruction: the request still offers the loop's tools."""


def received(messages: Sequence[Any]) -> list[Message]:
    """A copy of ``messages`` as the call received them (SDK objects as the plain
    dicts the list will hold). ``ValueError`` if one cannot be copied."""
    copy: list[Message] = json_copy(plain_view(messages))
    return copy


_ABOVE: Final = (
    ("the conversation below", "the conversation above"),
    ("The first message below", "The first message above"),
    ("下面的对话历史", "上面的对话历史"),
    ("下面的第一条消息", "上面的第一条消息"),
)
"""The built-in prompts' words for where the conversation is, read in a request
where it comes before the prompt, not after it."""


def _placed_above(summary_prompt: str) -> str:
    """``summary_prompt`` speaking of the conversation above it."""
    for below, above in _ABOVE:
        summary_prompt = summary_prompt.replace(below, above)
    return summary_prompt


def instruction(summary_prompt: str, kept: int) -> str:
    """The one user message after the conversation: the summary prompt (with its
    focus instructions), in its language, with how many messages are kept."""
    language = language_of(summary_prompt)
    note = KEPT_NOTES[language].format(kept=kept) if kept else ""
    return LEADS[language] + _placed_above(summary_prompt) + note + TEXT_ONLY[language]


def sent_part(conversation: list[Message], kept: int) -> tuple[list[Message], int]:
    """The messages the summary request carries, and how many of their last ones
    are kept verbatim after the summary.

    The kept messages are left out when what comes before them answers every tool
    call it holds: they follow the summary anyway, and without them the request
    is a prefix the loop already sent (the messages appended since the last
    request are among them), so the cache holds all of it instead of the new turn
    being written there at the write price. Otherwise, or when nothing would be
    left but system messages, the whole conversation is sent with ``kept``.
    """
    if kept <= 0 or kept >= len(conversation):
        return conversation, kept
    head = conversation[: len(conversation) - kept]
    unanswered: set[str] = set()
    for message in head:
        unanswered |= dialects.call_ids(message)
        unanswered -= dialects.result_ids(message)
    if unanswered or all(dialects.is_system(message) for message in head):
        return conversation, kept
    return head, 0


def kept_count(conversation: Sequence[Message], positions: dict[int, int], first: Any) -> int:
    """How many messages of ``conversation`` (the copy) are kept verbatim: from the
    copy of ``first`` (the first live message kept, ``None``: none) on.
    ``positions`` maps each live message's ``id`` to its place in the copy."""
    if first is None:
        return 0
    return len(conversation) - positions.get(id(first), len(conversation))


def summarize_continuing(
    request: ContinuationRequest,
    fits: bool,
    fallback: Callable[[], Generator[Any, Any, Summarized]],
    read: Callable[[Any], tuple[str | None, Reason | None]],
) -> Generator[Any, Any, Summarized]:
    """Ask for the summary as a continuation of ``request.messages``; the
    ``fallback`` (the transcript request) when they do not ``fit`` (see
    ``engine.full.continuing.fits``), or the API says they are too long."""
    if not fits:
        logger.info("the conversation the summary request would send is over what it may "
                    "carry; the transcript request is made instead of the continuation")
        return (yield from fallback())
    answer = yield SummaryRequest(request)
    cost = spent(answer)
    error = getattr(answer, "error", None)
    if error is not None and is_context_overflow(error):
        logger.warning("the continuation summary request was too long for the model; "
                       "the transcript request is made instead")
        done = yield from fallback()
        return Summarized(done.text, done.reason, done.calls + 1, done.parts, cost=cost.plus(
            done.cost))
    text, reason = read(answer)
    return Summarized(text, reason, 1, 1, cost=cost)
