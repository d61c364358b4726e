"""Steps 2-4: fire or not, and if so what is summarised, kept and sent; the
back-off and the wait while still over the threshold; the ``before_compact`` hook."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Generator
from dataclasses import replace
from typing import Any

from bareagent_compact import dialects
from bareagent_compact.engine.full.attempt import Attempt
from bareagent_compact.engine.parts import Parts
from bareagent_compact.prompts import LanguagePreset
from bareagent_compact.rebuild import (
    Plan,
    content_shape,
    is_own_output,
    spec_prompt,
    split_history,
    summary_block,
    system_copies,
)
from bareagent_compact.requests import HookRequest, Outcome, Request
from bareagent_compact.result import CompactionEvent, CompactionResult, Reason
from bareagent_compact.trigger import STILL_OVER_GROWTH
from bareagent_compact.user_turns import fit, section, user_turns

logger = logging.getLogger("bareagent_compact.compactor")


def plan(parts: Parts, messages: Any, attempt: Attempt, limit: int) -> Plan | CompactionResult:
    """Fire or not, and if so the plan; ``limit`` is the threshold (or the
    background watermark)."""
    options = parts.options
    count = parts.counter.count_live
    # Step 2: the trigger; strictly greater than the threshold.
    if not attempt.force and attempt.tokens <= limit:
        return attempt.quiet()
    # Step 3: the pending turn (user input, or tool results) is kept out.
    snapshot, head_end, start = split_history(messages, options, count)
    head = snapshot[:head_end]
    # A server compaction artefact and all before it stay in place: only the
    # live part after it is summarised.
    fixed = min(dialects.fixed_end(snapshot), start)
    # Step 4: the summary source excludes system messages.
    sources = _dialogue_at(head, fixed, start)
    source = [head[i] for i in sources]
    if not source:
        return attempt.quiet(Reason.NOTHING_TO_SUMMARISE)
    if not attempt.force and _only_own_output(parts, source):
        return attempt.quiet(Reason.NOTHING_NEW)
    # The prompt and the system messages' copies are made before anything is
    # sent, so that an unencodable history fails before any side effect.
    source_tokens = count(source)
    try:
        systems = system_copies(head[fixed:])
        texts = options.derived.texts_for(source)
        prompt = spec_prompt(source, source_tokens, options, texts)
    except ValueError:
        logger.warning("compaction skipped: history cannot be encoded", exc_info=True)
        return attempt.failure(parts.trigger, Reason.NOT_ENCODABLE)
    system_prompt = texts.summary_prompt
    made = Plan(
        snapshot,
        head_end,
        start,
        systems,
        source,
        source_tokens,
        system_prompt,
        prompt,
        fixed,
        sources=sources,
        texts=texts,
        shape=content_shape(options.summary_content, snapshot),
    )
    return _worth_a_call(parts, made, attempt)


def _only_own_output(parts: Parts, source: list[Any]) -> bool:
    """Whether only the previous summary is left to summarise (said once as a
    warning): summarising it again every turn would cost a model call and shrink
    nothing that matters."""
    acknowledgement = parts.options.derived.acknowledgement
    if not all(is_own_output(m, acknowledgement) for m in source):
        return False
    parts.trigger.tell(
        logging.WARNING,
        "history is over the threshold but holds nothing new to summarise "
        "(the pending message itself is large)",
    )
    return True


def texts_of(parts: Parts, made: Plan) -> LanguagePreset:
    """The texts of the compaction ``made`` plans (its language's)."""
    return parts.options.derived.texts if made.texts is None else made.texts


def text_count(parts: Parts) -> Callable[[str], int]:
    """The compactor's count of a text, as a user message."""
    return lambda text: parts.counter.count_live([{"role": "user", "content": text}])


def kept_turns(parts: Parts, made: Plan) -> str:
    """The section of the user's own turns to put after the summary
    (``keep_user_turns=True``): the newest of the source within their budget, none
    of those the kept part holds. Empty when off, or when none is left."""
    options = parts.options
    budget = options.derived.user_turns_tokens
    if not options.derived.keep_user_turns or not budget:
        return ""
    try:
        turns = user_turns(made.source, made.snapshot[made.tail_start :])
        return section(fit(turns, budget, text_count(parts)))
    except Exception:  # the summary is in hand: the turns are a bonus, never a failure
        logger.warning(
            "keeping the user turns failed; the summary is kept without them", exc_info=True
        )
        return ""


def _dialogue_at(head: list[Any], start: int, end: int) -> tuple[int, ...]:
    """The positions of the messages of ``head[start:end]`` that are not system messages."""
    return tuple(i for i in range(start, end) if not dialects.is_system(head[i]))


def _worth_a_call(parts: Parts, made: Plan, attempt: Attempt) -> Plan | CompactionResult:
    """``made``, unless (not forced) its source weighs less than the summary prefix
    and the acknowledgement together (and the user turns kept, ``keep_user_turns``): a
    summary could save at most that little (or lose the user's turns),
    never worth a provider call (told once, then at ``DEBUG``)."""
    if attempt.force:
        return made
    # With keep_user_turns, the user's turns go into the summary message too: a
    # source no larger than them could only lose them.
    fixed = summary_block(
        kept_turns(parts, made), (), texts_of(parts, made).acknowledgement, made.shape
    )
    floor = parts.counter.count_live(fixed)
    if made.source_tokens >= floor:
        return made
    parts.trigger.tell(
        logging.INFO,
        "history is over the threshold but what can be summarised (%d tokens) is "
        "smaller than the summary prefix and acknowledgement (%d tokens); nothing "
        "summarised",
        made.source_tokens,
        floor,
    )
    return attempt.quiet(Reason.NOTHING_TO_SUMMARISE)


def held(parts: Parts, made: Plan, tokens: int) -> Reason | None:
    """Why an automatic full compaction, due by the threshold, waits: a recent
    failure (the back-off), or a last compaction that left the history over
    the threshold with less than ``STILL_OVER_GROWTH`` of the threshold of new
    history to summarise since; ``None`` to fire."""
    trigger = parts.trigger
    if trigger.backing_off(tokens):
        return Reason.BACKING_OFF
    if not trigger.still_over:
        return None
    threshold = parts.options.derived.threshold
    acknowledgement = parts.options.derived.acknowledgement
    own = [m for m in made.source if is_own_output(m, acknowledgement)]
    new = made.source_tokens - (parts.counter.count_live(own) if own else 0)
    step = math.ceil(STILL_OVER_GROWTH * threshold)
    if new >= step:
        return None
    trigger.tell(
        logging.INFO,
        "history is still over the threshold (%d > %d estimated tokens) after the "
        "last compaction: what it must keep is that large; the next automatic "
        "compaction waits until %d tokens of new history can be summarised (%d now)",
        tokens,
        threshold,
        step,
        new,
    )
    return Reason.STILL_OVER_THRESHOLD


def consult(
    parts: Parts, made: Plan, attempt: Attempt, instructions: str | None
) -> Generator[Request, Any, Plan | CompactionResult]:
    """Ask ``before_compact``: skip, or add its instructions to the constructor's
    and the call's."""
    options = parts.options
    texts = [t for t in (options.instructions, instructions) if t]
    if options.before_compact is not None:
        event = CompactionEvent(
            trigger="manual" if attempt.force else "auto",
            tokens=attempt.tokens,
            threshold=options.derived.threshold,
            source_messages=len(made.source),
            source_tokens=made.source_tokens,
            session_id=parts.session_id,
        )
        verdict: Outcome = yield HookRequest(options.before_compact, (event,))
        if verdict.error is not None:
            logger.warning("before_compact hook failed; ignored", exc_info=verdict.error)
        elif verdict.value is False:
            return attempt.quiet(Reason.SKIPPED_BY_HOOK)
        elif isinstance(verdict.value, str) and verdict.value:
            texts.append(verdict.value)
    return _with_instructions(parts, made, texts)


def _with_instructions(parts: Parts, made: Plan, texts: list[str]) -> Plan:
    """The plan whose summary prompt carries the focus instructions, if any."""
    if not texts:
        return made
    heading = texts_of(parts, made).instructions_heading
    system = made.system_prompt + "\n\n" + heading + "\n".join(texts)
    prompt = (
        None if made.prompt is None else [{"role": "system", "content": system}, made.prompt[1]]
    )
    return replace(made, system_prompt=system, prompt=prompt, focus="\n".join(texts))
