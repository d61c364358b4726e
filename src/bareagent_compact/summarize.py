"""Summary requests that always fit the summarising model's input.

A summary source within the input budget is summarised in exactly the one call
of the specification. A larger one is split into parts at turn boundaries
(never between a tool call and its results; a turn over the history's share is
split into its messages), a message that alone is over a request's room is cut
in its middle with a visible marker, and the parts are summarised in order:
each request carries the running summary of the parts before it, so the last
answer covers the whole source. Every request leaves the history at least
:data:`HISTORY_SHARE` of the budget: the lead-in, the instructions and the
running summary give way first, else the step fails. When the provider still says the request was
too long for its context window (:func:`~bareagent_compact.is_context_overflow`),
the budget is halved and the summary started again, a bounded number of times.

Like the pipeline, this never calls the provider itself: it yields
``SummaryRequest`` objects and receives their ``Outcome``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from bareagent_compact import dialects
from bareagent_compact.overflow import is_context_overflow
from bareagent_compact.plain import plain_view
from bareagent_compact.prompts import SUMMARY_PREFIX
from bareagent_compact.protocols import (
    ContinuationRequest,
    Message,
    ServerCompactionRequest,
    ServerSummary,
)
from bareagent_compact.result import Reason, SummaryCost
from bareagent_compact.serialize import _escape_role_lines, _serialize, render_message, tool_names
from bareagent_compact.usage import answer_cost

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

MARKER_TOKENS: Final = 24
"""What the marker of a cut text weighs, about (its room is kept in tokens, so a
cut Chinese text keeps as much of its head as an English one)."""

MIN_BUDGET: Final = 256
"""The least ``summary_input_tokens``; a budget is never halved below it either."""

HISTORY_SHARE: Final = 0.5
"""The least share of every summary request left for the history itself: the
system prompt, the instructions, the lead-in line and the running summary of
the parts before share the rest. When they would take more, the lead-in is left
out, then the instructions are cut, then the running summary is cut; when even
the system prompt alone takes more, the step fails with
``Reason.SUMMARY_BUDGET_TOO_SMALL``."""

CARRY_HEAD: Final = f"[user]\n{SUMMARY_PREFIX}"
"""What opens the running summary carried into the request of each later part."""

CARRY_SHARE: Final = 0.125
"""The least share of a request kept for the running summary of the parts
before, when it has to be cut to leave the history its share."""


def history_room(budget: int) -> int:
    """The tokens of a request of ``budget`` always left for the history."""
    return math.ceil(budget * HISTORY_SHARE)


def carry_room(budget: int) -> int:
    """The tokens of a request of ``budget`` kept for the running summary at least."""
    return int(budget * CARRY_SHARE)


def prompt_room(budget: int) -> int:
    """The most the system prompt may take of a request of ``budget``."""
    return budget - history_room(budget) - carry_room(budget)


def least_budget(prompt_tokens: int) -> int:
    """The smallest budget whose :func:`prompt_room` holds ``prompt_tokens``."""
    budget = max(MIN_BUDGET, int(prompt_tokens / (1 - HISTORY_SHARE - CARRY_SHARE)) - 2)
    while prompt_room(budget) < prompt_tokens:
        budget += 1
    return budget


def check_budget(budget: int, prompt_tokens: int) -> None:
    """``ValueError`` when a system prompt of ``prompt_tokens`` leaves a request of
    ``budget`` too little room for the history and the running summary."""
    if prompt_tokens > prompt_room(budget):
        raise ValueError(
            f"summary_input_tokens={budget} is too small for the summary system prompt of "
            f"{prompt_tokens} tokens: at least {history_room(budget)} tokens of every summary "
            f"request are kept for the history and {carry_room(budget)} for the running "
            f"summary; use summary_input_tokens >= {least_budget(prompt_tokens)} or a "
            "shorter system_prompt"
        )


class SummaryRequest(NamedTuple):
    """Call the provider with ``prompt``; answer with an ``Outcome`` of its answer.

    A server summariser's prompt is a :class:`ServerCompactionRequest`, a
    continuation summariser's a :class:`ContinuationRequest`."""

    prompt: list[Message] | ServerCompactionRequest | ContinuationRequest


NO_COST: Final = SummaryCost()
"""The cost of no request."""


@dataclass(frozen=True, slots=True)
class Summarized:
    """What the summary requests came to: the text, or why there is none.

    A server summariser's answer is ``server``, standing for the first
    ``covered`` messages of the source (the rest is kept as it is after it).
    ``cost``: what the requests used, as their answers reported it."""

    text: str | None
    reason: Reason | None
    calls: int
    parts: int
    server: ServerSummary | None = None
    covered: int = 0
    cost: SummaryCost = NO_COST

    @property
    def sent_cost(self) -> SummaryCost | None:
        """``cost``, or ``None`` when no request was sent."""
        return self.cost if self.cost.requests else None


def spent(answer: Any) -> SummaryCost:
    """What the request that gave the ``Outcome`` ``answer`` used: its answer's
    usage, or one request of unknown tokens (a failed one reports none)."""
    if getattr(answer, "failed", True):
        return SummaryCost(1)
    return answer_cost(getattr(answer, "value", None))


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


def message_texts(segment: list[Message]) -> list[str]:
    """Each message of ``segment`` rendered on its own, after its role line."""
    plain = plain_view(segment)
    names = tool_names(plain)
    return [
        f"[{dialects.role_label(m)}]\n" + _escape_role_lines(render_message(m, names))
        for m in plain
    ]


def cut_middle(text: str, tokens: int, budget: int) -> str:
    """``text`` (``tokens`` long) cut to about ``budget`` tokens: its head and its
    tail, with a marker saying how much was cut between them."""
    keep = max(0, int(len(text) * (budget - MARKER_TOKENS) / max(tokens, 1)))
    head, tail = keep // 2, keep - keep // 2
    cut = len(text) - head - tail
    marker = f"\n[... {cut} characters cut here to fit the summariser's input ...]\n"
    return text[:head] + marker + (text[-tail:] if tail else "")


@dataclass(frozen=True, slots=True)
class _Frame:
    """The fixed parts of one request: its system prompt, the text before the
    history (lead-in line, running summary) and their count together."""

    system: str
    opening: str
    used: int


def _opening(lead_in: str, carry: str) -> str:
    return lead_in + (carry + "\n\n" if carry else "")


class _Units:
    """The source as transcript pieces, in order, with their sizes: a turn whole
    when it is within the history's share, else each of its messages on its own
    (so each gets its head into a request). Rendered one turn at a time."""

    def __init__(self, source: Sequence[Message], size: Callable[[str], int], whole: int):
        self._size = size
        self._pieces = self._render(source, whole)
        self._back: list[tuple[str, int]] = []

    def _render(self, source: Sequence[Message], whole: int) -> Iterator[tuple[str, int]]:
        for segment in segments(source):
            text = _serialize(segment)
            size = self._size(text)
            if size <= whole or len(segment) == 1:
                yield text, size
                continue
            del text
            for piece in message_texts(segment):
                yield piece, self._size(piece)

    def peek(self) -> tuple[str, int] | None:
        if not self._back:
            self._back.append(next(self._pieces, ("", -1)))
        return None if self._back[-1][1] < 0 else self._back[-1]

    def pop(self) -> None:
        self._back.pop()

    def push_back(self, text: str) -> None:
        self._back.append((text, self._size(text)))


class _Budgeted:
    """Turns texts into prompts that fit a budget, counting with the compactor's counter."""

    def __init__(
        self, system_prompt: str, count: Counter, budget: int, base_prompt: str | None = None
    ) -> None:
        self.system_prompt = system_prompt
        # What follows base_prompt in system_prompt (the instructions) may be cut.
        known = base_prompt is not None and system_prompt.startswith(base_prompt)
        self.base_prompt = base_prompt if known and base_prompt is not None else system_prompt
        self.count = count
        self.budget = budget
        self._trims: set[str] = set()

    def size(self, text: str) -> int:
        return self.count([{"role": "user", "content": text}])

    def total(self, system: str, body: str) -> int:
        return self.count(self.prompt_of(system, body))

    def prompt_of(self, system: str, body: str) -> list[Message]:
        return [{"role": "system", "content": system}, {"role": "user", "content": body}]

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

    def frame(self, lead_in: str, carry: str) -> _Frame | None:
        """The fixed parts of a request, trimmed until the history has its share:
        the lead-in is left out first, then the instructions are cut, then the
        running summary (never below its own share); ``None`` (logged) when even
        the system prompt alone leaves the history less than its share."""
        limit = self.budget - history_room(self.budget)
        for system, opening, trimmed in self._framings(lead_in, carry, limit):
            used = self.total(system, opening)
            if used <= limit:
                if trimmed:  # a warning the first time, for each part after
                    level = logging.INFO if trimmed in self._trims else logging.WARNING
                    self._trims.add(trimmed)
                    logger.log(level, "%s to leave the history %d of the summary request's %d "
                               "tokens", trimmed, self.budget - used, self.budget)
                return _Frame(system, opening, used)
        logger.warning(
            "the summary request has no room for the history: the summary system prompt "
            "takes %d of summary_input_tokens=%d, and at least %d are kept for the history; "
            "history left as it was", self.total(self.base_prompt, ""), self.budget,
            history_room(self.budget))
        return None

    def _framings(self, lead_in: str, carry: str, limit: int) -> Iterator[tuple[str, str, str]]:
        """The candidate fixed parts, from the whole to the least."""
        base, extra = self.base_prompt, self.system_prompt[len(self.base_prompt):]
        yield self.system_prompt, _opening(lead_in, carry), ""
        if lead_in:
            yield self.system_prompt, _opening("", carry), "the lead-in line was left out"
        if extra:
            room = limit - self.total(base, _opening("", carry))
            if room > 0:
                cut = base + self.fit(extra, room)
                yield cut, _opening("", carry), "the summary instructions were cut"
            yield base, _opening("", carry), "the summary instructions were left out"
        if carry:
            room = limit - self.total(base, "")
            if room >= carry_room(self.budget):
                yield base, _opening("", self._cut_carry(carry, room, limit)), (
                    "the running summary was cut (lead-in and instructions left out)")

    def _cut_carry(self, carry: str, room: int, limit: int) -> str:
        """``carry`` cut to about ``room`` tokens (its role line and summary prefix
        kept whole, the running summary cut in its middle), then further while the
        base prompt and the cut carry together (its separator and the count's
        rounding included) are over ``limit``: so the running summary fits at every
        budget whose prompt room holds the base prompt, the least advised one too."""
        head = CARRY_HEAD if carry.startswith(CARRY_HEAD) else ""
        summary = carry[len(head) :]
        room = max(1, room - self.size(head))
        cut = head + self.fit(summary, room)
        for _ in range(MAX_CUTS):
            excess = self.total(self.base_prompt, _opening("", cut)) - limit
            if excess <= 0 or room <= 1:
                break
            room = max(1, room - excess)
            cut = head + self.fit(summary, room)
        return cut

    def fill(self, frame: _Frame, units: _Units) -> str | None:
        """The body of one request: its opening, then as many pieces as fit the room
        the fixed parts leave; a piece over the whole room is cut to its head and
        tail. ``None`` when the counter never lets the request fit."""
        room = self.budget - frame.used
        taken: list[str] = []
        used = 0
        while (unit := units.peek()) is not None:
            text, size = unit
            if taken and used + size + 1 > room:
                break
            units.pop()
            if size + 1 > room:
                text = self.fit(text, room - 1)
                size = self.size(text)
            taken.append(text)
            used += size + 1
        return self._within(frame, taken, units)

    def _within(self, frame: _Frame, taken: list[str], units: _Units) -> str | None:
        """The body of ``taken``, checked against the budget in the counter's own
        count of the whole request: the last pieces go back for the next request,
        and a lone piece is cut further, while it is over."""
        for _ in range(MAX_CUTS):
            body = frame.opening + "\n\n".join(taken)
            excess = self.total(frame.system, body) - self.budget
            if excess <= 0:
                return body
            while len(taken) > 1 and excess > 0:
                piece = taken.pop()
                units.push_back(piece)
                excess -= self.size(piece) + 1
            if excess > 0:
                taken[0] = self.fit(taken[0], max(1, self.size(taken[0]) - excess))
        logger.warning("the summary request could not be brought within summary_input_tokens="
                       "%d; history left as it was", self.budget)
        return None


def summarize_source(
    source: Sequence[Message],
    spec_prompt: list[Message] | None,
    *,
    system_prompt: str,
    base_prompt: str | None = None,
    lead_in: str,
    rolling: bool = False,
    budget: int,
    count: Counter,
    read: Reader,
) -> Generator[SummaryRequest, Any, Summarized]:
    """Summarise ``source``: one request when ``spec_prompt`` (``None`` for a source
    over the budget) fits, else the parts in order; halve the budget on a context
    overflow and start again. What follows ``base_prompt`` in ``system_prompt``
    (instructions) may be cut. ``rolling``: a previous summary opens the source,
    so ``lead_in`` opens the first part as it does the one request."""
    calls = 0
    cost = SummaryCost()
    base_tokens = count([{"role": "system", "content": base_prompt or system_prompt}])
    for _ in range(MAX_HALVINGS + 1):
        if spec_prompt is not None and count(spec_prompt) <= budget:
            answer = yield SummaryRequest(spec_prompt)
            calls += 1
            cost = cost.plus(spent(answer))
            if _overflowed(answer) and _halvable(budget, base_tokens):
                budget //= 2
                logger.warning("the summary request was too long for the model; retrying "
                               "in parts of at most %d tokens", budget)
                continue
            text, reason = read(answer)
            return Summarized(text, reason, calls, 1, cost=cost)
        prompts = _Budgeted(system_prompt, count, budget, base_prompt)
        done = yield from _in_parts(source, prompts, lead_in, rolling, read)
        calls += done.calls
        cost = cost.plus(done.cost)
        if done.reason is Reason.CONTEXT_OVERFLOW and _halvable(budget, base_tokens):
            budget //= 2
            logger.warning("a summary part was too long for the model; retrying in parts "
                           "of at most %d tokens", budget)
            continue
        return Summarized(done.text, done.reason, calls, done.parts, cost=cost)
    return Summarized(None, Reason.CONTEXT_OVERFLOW, calls, 0, cost=cost)


def _halvable(budget: int, base_tokens: int) -> bool:
    """Whether half of ``budget`` is still a budget, with room for the history."""
    half = budget // 2
    return half >= MIN_BUDGET and base_tokens <= prompt_room(half)


def _overflowed(answer: Any) -> bool:
    error = getattr(answer, "error", None)
    return error is not None and is_context_overflow(error)


def _tell_part(number: int, more: bool) -> None:
    """Log the part about to be summarised, when there are two or more (``more``:
    some of the source is left after it)."""
    if number > 1 or more:
        logger.info("summarising part %d", number)


def _in_parts(
    source: Sequence[Message], prompts: _Budgeted, lead_in: str, rolling: bool, read: Reader
) -> Generator[SummaryRequest, Any, Summarized]:
    """The parts of ``source`` summarised in order, each request carrying the
    running summary so far after ``lead_in`` (also before the first part when
    ``rolling``: a previous summary opens it). Each part takes as much of the
    source as the room the fixed parts leave, at least the history's share."""
    units = _Units(source, prompts.size, history_room(prompts.budget))
    running: str | None = None
    calls = 0
    cost = SummaryCost()
    while units.peek() is not None:
        carry = "" if running is None else CARRY_HEAD + running
        frame = prompts.frame(lead_in if rolling or running is not None else "", carry)
        body = None if frame is None else prompts.fill(frame, units)
        if frame is None or body is None:
            return Summarized(None, Reason.SUMMARY_BUDGET_TOO_SMALL, calls, calls, cost=cost)
        calls += 1
        _tell_part(calls, units.peek() is not None)
        answer = yield SummaryRequest(prompts.prompt_of(frame.system, body))
        del body
        cost = cost.plus(spent(answer))
        if _overflowed(answer):
            return Summarized(None, Reason.CONTEXT_OVERFLOW, calls, calls, cost=cost)
        running, reason = read(answer)
        if running is None:
            return Summarized(None, reason, calls, calls, cost=cost)
    return Summarized(running, None, calls, calls, cost=cost)
