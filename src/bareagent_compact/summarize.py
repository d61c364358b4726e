"""Summary requests that always fit the summarising model's input.

A summary source within the input budget is summarised in exactly the one call
of the specification. A larger one is split into parts at turn boundaries
(never between a tool call and its results), a part that alone is too large is
cut in its middle with a visible marker, and the parts are summarised in order:
each request carries the running summary of the parts before it, so the last
answer covers the whole source. When the provider still says the request was
too long for its context window (:func:`~bareagent_compact.is_context_overflow`),
the budget is halved and the summary started again, a bounded number of times.

Like the pipeline, this never calls the provider itself: it yields
``SummaryRequest`` objects and receives their ``Outcome``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from bareagent_compact import dialects
from bareagent_compact.overflow import is_context_overflow
from bareagent_compact.prompts import SUMMARY_PREFIX
from bareagent_compact.protocols import Message
from bareagent_compact.result import Reason
from bareagent_compact.serialize import _serialize

logger = logging.getLogger("bareagent_compact.compactor")

DEFAULT_SUMMARY_INPUT_TOKENS: Final = 64_000
"""The summariser's input budget, in the compactor's own count.

On the measured sessions the built-in estimate was at worst 1.39x below a real
tokenizer's count, so 64,000 estimated tokens is at most about 89,000 real
ones: with the summary prompt and room for a long answer, within any 128k-context
model's window."""

MAX_HALVINGS: Final = 6
"""How many times an overflowing summary is retried with half the budget."""

MAX_CUTS: Final = 8
"""A text over its room is cut at most this many times (a counter that ignores
its input could otherwise never be satisfied)."""

MIN_BUDGET: Final = 256
"""A budget is never halved below this."""


class SummaryRequest(NamedTuple):
    """Call the provider with ``prompt``; answer with an ``Outcome`` of its answer."""

    prompt: list[Message]


@dataclass(frozen=True, slots=True)
class Summarized:
    """What the summary requests came to: the text, or why there is none."""

    text: str | None
    reason: Reason | None
    calls: int
    parts: int


Counter = Callable[[list[Message]], int]
Reader = Callable[[Any], "tuple[str | None, Reason | None]"]


def segments(source: Sequence[Message]) -> list[list[Message]]:
    """``source`` cut where a split is allowed: before every turn that is not tool
    results, so a tool call always stays with the results answering it."""
    out: list[list[Message]] = []
    previous: Message | None = None
    for message in source:
        starts_turn = previous is None or not dialects.continues(previous, message)
        is_results = dialects.kind(message) in (dialects.Kind.RESULTS, dialects.Kind.RESULT)
        if not out or (starts_turn and not is_results):
            out.append([message])
        else:
            out[-1].append(message)
        previous = message
    return out


def cut_middle(text: str, tokens: int, budget: int) -> str:
    """``text`` (``tokens`` long) cut to about ``budget`` tokens: its head and its
    tail, with a marker saying how much was cut between them."""
    keep = max(0, int(len(text) * budget / max(tokens, 1)) - 80)
    head, tail = keep // 2, keep - keep // 2
    cut = len(text) - head - tail
    marker = f"\n[... {cut} characters cut here to fit the summariser's input ...]\n"
    return text[:head] + marker + (text[-tail:] if tail else "")


class _Budgeted:
    """Turns texts into prompts that fit a budget, counting with the compactor's counter."""

    def __init__(self, system_prompt: str, count: Counter, budget: int) -> None:
        self.system_prompt = system_prompt
        self.count = count
        self.budget = budget
        self.fixed = count([{"role": "system", "content": system_prompt}])

    def size(self, text: str) -> int:
        return self.count([{"role": "user", "content": text}])

    def prompt(self, text: str) -> list[Message]:
        return [
            {"role": "system", "content": self.system_prompt},
            {"role": "user", "content": text},
        ]

    def fit(self, text: str, room: int) -> str:
        size = self.size(text)
        target = room
        for _ in range(MAX_CUTS):
            if size <= room or len(text) <= 1:
                break
            text = cut_middle(text, size, target)
            size = self.size(text)
            target -= max(1, target // 20)  # the count of a cut text may still be over
        return text


def _parts(source: Sequence[Message], prompts: _Budgeted, room: int) -> Iterator[str]:
    """The transcripts of consecutive segments of ``source``, each part fitting
    ``room`` when it can (one segment at least). Built one part at a time, so a
    huge source is never held as one transcript."""
    current: list[str] = []
    used = 0
    for segment in segments(source):
        piece = _serialize(segment)
        size = prompts.size(piece)
        if current and used + size > room:
            yield "\n\n".join(current)
            current, used = [], 0
        current.append(piece)
        used += size + 1
    if current:
        yield "\n\n".join(current)


def summarize_source(
    source: Sequence[Message],
    spec_prompt: list[Message] | None,
    *,
    system_prompt: str,
    lead_in: str,
    rolling: bool = False,
    budget: int,
    count: Counter,
    read: Reader,
) -> Generator[SummaryRequest, Any, Summarized]:
    """Summarise ``source``: one request when ``spec_prompt`` fits ``budget``, else
    the parts in order; halve the budget on a context overflow and start again.
    ``spec_prompt`` is ``None`` when the source is known to be over the budget.
    ``rolling``: the source opens with a previous summary, so the first part is
    introduced by ``lead_in`` as the one request is."""
    calls = 0
    for _ in range(MAX_HALVINGS + 1):
        if spec_prompt is not None and count(spec_prompt) <= budget:
            answer = yield SummaryRequest(spec_prompt)
            calls += 1
            if _overflowed(answer) and budget // 2 >= MIN_BUDGET:
                budget //= 2
                logger.warning("the summary request was too long for the model; retrying "
                               "in parts of at most %d tokens", budget)
                continue
            text, reason = read(answer)
            return Summarized(text, reason, calls, 1)
        done = yield from _in_parts(
            source, _Budgeted(system_prompt, count, budget), lead_in, rolling, read
        )
        calls += done.calls
        if done.reason is Reason.CONTEXT_OVERFLOW and budget // 2 >= MIN_BUDGET:
            budget //= 2
            logger.warning("a summary part was too long for the model; retrying in parts "
                           "of at most %d tokens", budget)
            continue
        return Summarized(done.text, done.reason, calls, done.parts)
    return Summarized(None, Reason.CONTEXT_OVERFLOW, calls, 0)


def _overflowed(answer: Any) -> bool:
    error = getattr(answer, "error", None)
    return error is not None and is_context_overflow(error)


def _in_parts(
    source: Sequence[Message], prompts: _Budgeted, lead_in: str, rolling: bool, read: Reader
) -> Generator[SummaryRequest, Any, Summarized]:
    """The parts of ``source`` summarised in order, each request carrying the
    running summary so far after ``lead_in`` (also before the first part when
    ``rolling``: a previous summary opens it)."""
    budget = prompts.budget
    # The running summary takes at most a quarter of the room; the parts the rest.
    room = max(1, budget - prompts.fixed - prompts.size(lead_in))
    part_room = max(1, room - room // 4)
    running: str | None = None
    calls = 0
    for text in _parts(source, prompts, part_room):
        if running is None:
            body = (lead_in if rolling else "") + prompts.fit(text, room)
        else:
            previous = prompts.fit(f"[user]\n{SUMMARY_PREFIX}{running}", room // 4)
            body = lead_in + previous + "\n\n" + prompts.fit(text, part_room)
        del text
        calls += 1
        logger.info("summarising part %d", calls)
        answer = yield SummaryRequest(prompts.prompt(body))
        del body
        if _overflowed(answer):
            return Summarized(None, Reason.CONTEXT_OVERFLOW, calls, calls)
        running, reason = read(answer)
        if running is None:
            return Summarized(None, reason, calls, calls)
    return Summarized(running, None, calls, calls)
