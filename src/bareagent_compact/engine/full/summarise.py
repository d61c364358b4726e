"""Steps 5-7: the snapshot, the summary requests, and the checks of the summary
(pinned facts, never a bigger history)."""

from __future__ import annotations

import logging
from collections.abc import Generator, Sequence
from functools import partial
from typing import Any

from bareagent_compact.continuation import instruction, summarize_continuing
from bareagent_compact.engine.full.answer import read_summary
from bareagent_compact.engine.full.attempt import Attempt, left_as
from bareagent_compact.engine.full.continuing import fits
from bareagent_compact.engine.full.plan import text_count, texts_of
from bareagent_compact.engine.parts import Parts
from bareagent_compact.facts import Facts, Identifier, extract, pinned_with
from bareagent_compact.identifiers import used_meanwhile
from bareagent_compact.protocols import (
    ContinuationRequest,
    Message,
    ServerSummary,
    is_continuation_summariser,
    is_server_summariser,
)
from bareagent_compact.rebuild import Plan, is_own_output, replacement, summary_block
from bareagent_compact.requests import Outcome, Request, SaveRequest
from bareagent_compact.server_summary import live_prefix, summarize_on_server
from bareagent_compact.summarize import Summarized, summarize_source
from bareagent_compact.user_turns import expanded, unrepeated

logger = logging.getLogger("bareagent_compact.compactor")


def snapshot(
    parts: Parts,
    made: Plan,
    attempt: Attempt,
    copy: list[Message] | None = None,
    session_id: str | None = None,
) -> Generator[Request, Any, bool]:
    """Step 5: save the snapshot (or its ``copy``) before anything is sent or
    changed, under ``session_id`` (the session's now, by default: a background
    summary passes the one its history belongs to); ``False`` when it failed and
    a snapshot is required."""
    options = parts.options
    if options.transcript_mgr is None:
        return True
    messages = list(made.snapshot) if copy is None else copy
    session = parts.session_id if session_id is None else session_id
    saved: Outcome = yield SaveRequest(messages, session)
    attempt.saved = not saved.failed
    if attempt.saved:
        return True
    logger.warning(
        "transcript snapshot failed for session %r%s",
        session,
        saved.because(),
        exc_info=saved.error,
    )
    return not options.require_snapshot


def summarise(parts: Parts, made: Plan, truncated: int = 0) -> Generator[Request, Any, Summarized]:
    """Steps 6 and 7: ask for the summary, in parts if the source is over the
    summariser's input budget; any failure leaves history intact. A server
    summariser is sent the conversation's own messages instead, a continuation
    summariser the history as the call received it, then the instruction."""
    if made.conversation is not None and is_continuation_summariser(parts.provider):
        text = instruction(made.system_prompt, made.conversation_kept)
        request = ContinuationRequest(made.conversation, text, made.conversation_kept)
        return (
            yield from summarize_continuing(
                request,
                fits(parts, made, text),
                lambda: _transcript(parts, made, truncated),
                partial(read_summary, truncated=truncated),
            )
        )
    if is_server_summariser(parts.provider):
        systems, prefix = live_prefix(made.snapshot, made.fixed_end)
        return (
            yield from summarize_on_server(
                [*systems, *made.systems], prefix, made.source, made.focus
            )
        )
    return (yield from _transcript(parts, made, truncated))


def _transcript(parts: Parts, made: Plan, truncated: int) -> Generator[Request, Any, Summarized]:
    """The specification's transcript request, in parts when the source is over
    the summariser's input budget."""
    options = parts.options
    texts = texts_of(parts, made)
    return (
        yield from summarize_source(
            made.source,
            made.prompt,
            system_prompt=made.system_prompt,
            base_prompt=texts.summary_prompt,
            lead_in=texts.rolling_lead_in,
            rolling=options.rolling_summaries
            and is_own_output(made.source[0], texts.acknowledgement),
            budget=options.summary_input_tokens,
            count=parts.counter.count_live,
            read=partial(read_summary, truncated=truncated),
        )
    )


def _pinned(
    parts: Parts, made: Plan, summary: str, turns: str, meanwhile: Sequence[Message]
) -> tuple[str, int]:
    """The pinned block to append to the summary: the facts (``pin_facts=True``),
    none of what the kept user ``turns`` (after the summary) hold word for word,
    after the identifiers the steps taken ``meanwhile`` use that only the
    summarised part held; and how many of those it pins."""
    options = parts.options
    derived = options.derived
    budget = derived.pin_facts_tokens
    if not budget or not (derived.pin_facts or meanwhile):
        return "", 0
    try:
        used = _used(made, meanwhile, summary + turns)
        if not derived.pin_facts and not used:
            return "", 0
        facts = Facts()
        if derived.pin_facts:
            facts = extract(expanded(made.source) if derived.keep_user_turns else made.source)
        block, pinned = pinned_with(facts, summary + turns, budget, text_count(parts), used)
        return unrepeated(block, turns), pinned
    except Exception:  # the summary is in hand: facts are a bonus, never a failure
        logger.warning("pinning facts failed; the summary is kept without them", exc_info=True)
        return "", 0


def _used(made: Plan, meanwhile: Sequence[Message], summary: str) -> list[Identifier]:
    """The identifiers the steps taken ``meanwhile`` use that the summarised part
    holds and neither the ``summary`` nor the kept part (all but the summarised
    messages of the snapshot: systems, kept tail, pending turn) does."""
    if not meanwhile:
        return []
    summarised = set(made.sources)
    kept = [m for i, m in enumerate(made.snapshot) if i not in summarised]
    return used_meanwhile(made.source, meanwhile, kept, summary)


def steps_meanwhile(messages: Sequence[Message], made: Plan) -> list[Message]:
    """The messages of the history now that the snapshot the summary was planned
    on does not hold (the same objects): the steps taken while it was made."""
    if len(messages) == len(made.snapshot) and all(
        now is then for now, then in zip(messages, made.snapshot, strict=True)
    ):
        return []
    held = {id(m) for m in made.snapshot}
    return [m for m in messages if id(m) not in held]


def with_pins(
    parts: Parts,
    made: Plan,
    summary: str,
    attempt: Attempt,
    turns: str = "",
    *,
    meanwhile: Sequence[Message] = (),
) -> str | None:
    """The summary with the kept user ``turns`` and its pinned block, or ``None``
    when even without them it would make the history bigger (not forced). The
    pins are found against the summary and the turns (a request the turns hold
    is not pinned again); pins, then turns, that alone would make it bigger are
    left out. The identifiers of the steps taken ``meanwhile`` it pins are
    counted in ``attempt.pinned_identifiers``."""
    body = summary + turns
    block, used = _pinned(parts, made, summary, turns, meanwhile)
    pinned = body + block
    for candidate in dict.fromkeys((pinned, body)):
        if candidate != summary and not inflated(parts, made, candidate, attempt, quiet=True):
            if candidate != pinned:
                logger.info("pinned facts left out: they would make the history bigger")
            attempt.pinned_identifiers = used if candidate == pinned else 0
            return candidate
    if pinned != summary:
        logger.info("what was added to the summary is left out: it would make the history bigger")
    return None if inflated(parts, made, summary, attempt) else summary


def inflated(
    parts: Parts,
    made: Plan,
    summary: str | ServerSummary,
    attempt: Attempt,
    *,
    quiet: bool = False,
    covered: int | None = None,
) -> bool:
    """What replaces the source (the summary, and the acknowledgement; or a
    server's artefact and what it does not cover, counted as the server reads
    it) being longer than the source makes the history bigger: refused, unless
    the call was forced (then kept, with a warning)."""
    force = attempt.force
    acknowledgement = texts_of(parts, made).acknowledgement
    if isinstance(summary, ServerSummary):
        block = replacement(made, summary, acknowledgement, covered)[: -len(made.kept) or None]
    else:
        block = summary_block(summary, made.kept, acknowledgement, made.shape)
    summary_size = parts.counter.count_live(block)
    source_size = made.source_tokens
    if summary_size <= source_size:
        return False
    if not quiet and force:
        logger.warning(
            "the summary (%d tokens) is longer than what it replaces (%d tokens); "
            "kept because the compaction was forced",
            summary_size,
            source_size,
        )
    elif not quiet:
        logger.warning(
            "the summary (%d tokens) is longer than what it would replace (%d tokens); %s",
            summary_size,
            source_size,
            left_as(attempt.truncated),
        )
    return not force
