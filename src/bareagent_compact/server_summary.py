"""A summary made by the API's own compaction (a server summariser).

The pipeline plans a full compaction the same way for every summariser; with a
server summariser (:func:`~bareagent_compact.protocols.is_server_summariser`)
the summary request carries the conversation's own messages instead of a
transcript, and the answer is a :class:`~bareagent_compact.protocols.ServerSummary`:
the block or window the API returned, placed by the rebuild in place of
exactly the messages it summarises.

When the API says the request is too long for its context window, the request
is made again over the older half of the source (cut between turns, never
between a tool call and its results); what the artefact does not cover is kept
after it as it is. Like :mod:`~bareagent_compact.summarize`, nothing here calls
the provider: it yields ``SummaryRequest`` objects and receives their ``Outcome``.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from typing import Any

from bareagent_compact import dialects
from bareagent_compact.overflow import is_context_overflow
from bareagent_compact.pairs import find_orphans
from bareagent_compact.protocols import Message, ServerCompactionRequest, ServerSummary
from bareagent_compact.result import Reason, SummaryCost
from bareagent_compact.summarize import MAX_HALVINGS, Summarized, SummaryRequest, segments, spent
from bareagent_compact.validate import validate_messages

logger = logging.getLogger("bareagent_compact.compactor")


def live_prefix(snapshot: Sequence[Message], fixed_end: int) -> tuple[list[Message], list[Message]]:
    """What the server reads of ``snapshot[:fixed_end]`` (the part kept in place):
    its system messages, wherever they are, and the rest from the message holding
    the newest artefact on. A server compaction must see both, or the agent's
    instructions, or what that artefact stands for, are lost."""
    fixed = snapshot[:fixed_end]
    systems = [m for m in fixed if dialects.is_system(m)]
    newest = dialects.server_compaction_index(fixed)
    if newest < 0:
        return systems, []
    return systems, [m for m in fixed[newest:] if not dialects.is_system(m)]


def _half(source: Sequence[Message], covered: int) -> int:
    """The largest turn boundary of ``source`` at or below half of ``covered``
    (0: none left)."""
    ends, end = [], 0
    for segment in segments(source[:covered]):
        end += len(segment)
        ends.append(end)
    return max((e for e in ends if e <= covered // 2), default=0)


def read_server_summary(answer: Any) -> tuple[ServerSummary | None, Reason | None]:
    """The artefact of a server summariser's answer, or why there is none (logged)."""
    if answer.failed:
        logger.warning(
            "server compaction failed%s; history left as it was",
            answer.because(),
            exc_info=answer.error,
        )
        return None, Reason.SERVER_COMPACTION_FAILED
    value = answer.value
    if not isinstance(value, ServerSummary) or not value.messages:
        logger.warning(
            "server summariser returned %s, not a ServerSummary with messages; history "
            "left as it was",
            type(value).__name__,
        )
        return None, Reason.UNUSABLE_SUMMARY
    return value, None


def unfit(
    summary: ServerSummary, rebuilt: Sequence[Message], before: Sequence[Message]
) -> str | None:
    """Why ``summary`` cannot be placed (logged), or ``None``: each of its messages
    must be a message, and ``rebuilt`` (the history with it in place) must have
    no more unpaired tool calls or results than ``before`` (a call the artefact
    holds with no result after it, a result whose call it summarised away)."""
    try:
        validate_messages(list(summary.messages))
        unpaired = len(find_orphans(rebuilt)) - len(find_orphans(before))
    except (TypeError, ValueError) as exc:
        why = f"holds something that is not a message ({exc})"
    else:
        if unpaired <= 0:
            return None
        why = f"would leave {unpaired} unpaired tool call(s) or result(s)"
    logger.warning("server summariser returned an artefact that %s; history left as it was", why)
    return why


def summarize_on_server(
    systems: Sequence[Message],
    prefix: Sequence[Message],
    source: Sequence[Message],
    instructions: str | None,
) -> Generator[SummaryRequest, Any, Summarized]:
    """Ask the server summariser to compact ``prefix`` and ``source`` (after the
    conversation's ``systems``); on a context overflow, the older half of the
    source, again, up to ``MAX_HALVINGS`` times."""
    covered = len(source)
    calls = 0
    cost = SummaryCost()
    for _ in range(MAX_HALVINGS + 1):
        request = ServerCompactionRequest(
            [*systems, *prefix, *source[:covered]], instructions or None
        )
        answer = yield SummaryRequest(request)
        calls += 1
        cost = cost.plus(spent(answer))
        error = getattr(answer, "error", None)
        if error is not None and is_context_overflow(error):
            covered = _half(source, covered)
            if covered:
                logger.warning(
                    "the server compaction request was too long for the model; retrying "
                    "over the %d oldest messages",
                    covered,
                )
                continue
            return Summarized(None, Reason.CONTEXT_OVERFLOW, calls, 0, cost=cost)
        server, reason = read_server_summary(answer)
        if server is None:
            return Summarized(None, reason, calls, 0, cost=cost)
        return Summarized(server.text, None, calls, 1, server, covered, cost)
    return Summarized(None, Reason.CONTEXT_OVERFLOW, calls, 0, cost=cost)
