"""The pure list work of a full compaction: where the history splits, what the
summary request says, and how the history is rebuilt around the summary.

Nothing here keeps state or calls a plug-in; :mod:`bareagent_compact.pipeline`
runs these functions between its requests.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from bareagent_compact import dialects
from bareagent_compact._json import json_copy
from bareagent_compact.options import Options
from bareagent_compact.pairs import find_orphans
from bareagent_compact.prompts import (
    OWN_ACKNOWLEDGEMENTS,
    SUMMARY_PREFIX,
    LanguagePreset,
    own_text,
)
from bareagent_compact.protocols import Message, ServerSummary
from bareagent_compact.serialize import _serialize
from bareagent_compact.split import (
    paired_tail_start,
    pending_start,
    trailing_calls_start,
    verbatim_tail_start,
)

logger = logging.getLogger("bareagent_compact.compactor")

Count = Callable[[list[Message]], int]


@dataclass(frozen=True, slots=True)
class Plan:
    """What a full compaction will do, decided before anything is sent.

    ``snapshot`` is the list as it was; ``snapshot[:head_end]`` is everything but
    the pending turn, and ``snapshot[tail_start:head_end]`` the messages kept
    verbatim before it (tool calls the pending results answer).
    """

    snapshot: list[Message]
    head_end: int
    tail_start: int
    systems: list[Message]
    source: list[Message]
    source_tokens: int
    system_prompt: str
    prompt: list[Message] | None
    """The specification's one-request prompt; ``None`` when the source alone is
    over the summariser's input budget (it is summarised in parts)."""
    fixed_end: int = 0
    """``snapshot[:fixed_end]`` stays as it is, in place: a server compaction
    artefact, what comes before it, and the results of its message's calls."""
    focus: str | None = None
    """The focus instructions (constructor, call, ``before_compact``), or ``None``."""
    sources: tuple[int, ...] = ()
    """Where the messages of ``source`` are in ``snapshot``."""
    texts: LanguagePreset | None = None
    """The texts of this compaction (its language's, see ``Derived.texts_for``)."""
    shape: str = "str"
    """The content shape of the summary and acknowledgement (:func:`content_shape`)."""
    conversation: list[Message] | None = None
    """With a continuation summariser: the summary request's conversation, a copy
    of the history as the call received it (the kept messages left out when
    :func:`~bareagent_compact.continuation.sent_part` leaves them); ``None`` otherwise."""
    conversation_kept: int = 0
    """How many of the last messages of ``conversation`` are kept verbatim."""
    conversation_tokens: int = 0
    """The count of ``conversation`` as a request carries it (the instruction aside)."""
    conversation_accepted: bool = False
    """Whether ``conversation`` opens the list the last usage report was for."""

    @property
    def kept(self) -> list[Message]:
        """The messages kept verbatim before the pending turn, systems left out."""
        return [
            m for m in self.snapshot[self.tail_start : self.head_end] if not dialects.is_system(m)
        ]


def is_own_output(message: Message, acknowledgement: str) -> bool:
    """True for the summary and acknowledgement messages a previous compaction wrote
    (as a ``str`` or as one text block, see ``summary_content``)."""
    text = own_text(message.get("content"))
    if text is None:
        return False
    if message.get("role") == "assistant":
        return text == acknowledgement or text in OWN_ACKNOWLEDGEMENTS
    return message.get("role") == "user" and text.startswith(SUMMARY_PREFIX)


_RESPONSES_PARTS: Final = frozenset({"input_text", "output_text", "input_image", "input_file"})
"""Content part types only Responses input uses."""


def _has_parts(content: list[Any]) -> bool:
    """Whether a content list holds a part only Responses input uses."""
    return any(isinstance(b, dict) and b.get("type") in _RESPONSES_PARTS for b in content)


def _read_shape(message: Any) -> tuple[bool, bool]:
    """Whether ``message`` has a list of blocks as its content, and whether it is
    Responses input (an item of its own, a ``message`` item, or its parts)."""
    if not isinstance(message, dict) or dialects.is_system(message):
        return False, False
    if dialects.typed_item(message) is not None:
        return False, dialects.dialect_of(message).name == "openai_responses"
    content = message.get("content")
    if not isinstance(content, list):
        return False, message.get("type") == dialects.MESSAGE_TYPE
    return True, message.get("type") == dialects.MESSAGE_TYPE or _has_parts(content)


def content_shape(setting: str, messages: Sequence[Any]) -> str:
    """The shape of the summary and acknowledgement in a history of ``messages``:
    ``"str"``; ``"text"`` blocks (Anthropic, Chat); or ``"responses"`` parts
    (``input_text`` / ``output_text``, when the history holds Responses items or
    parts). ``setting`` is ``summary_content``: with ``"auto"``, blocks only when
    a message other than a system message has a list of blocks as its content."""
    if setting == "str":
        return "str"
    shapes = [_read_shape(message) for message in messages]
    if setting == "auto" and not any(blocks for blocks, _ in shapes):
        return "str"
    return "responses" if any(responses for _, responses in shapes) else "text"


def _shaped(role: str, text: str, shape: str) -> Message:
    """A message the library writes, its ``text`` in ``shape``."""
    if shape == "str":
        return {"role": role, "content": text}
    if shape == "text":
        return {"role": role, "content": [{"type": "text", "text": text}]}
    if role == "user":
        return {"role": role, "content": [{"type": "input_text", "text": text}]}
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": dialects.MESSAGE_TYPE, "role": role, "content": [part]}


def kept_tail_start(head: list[Message], pending: list[Message], keep_tool_pairs: bool) -> int:
    """Where the messages kept verbatim besides the pending turn begin in ``head``.

    Only ``keep_tool_pairs=True`` keeps any: the calls a pending tool result
    answers, or tool calls ending the history whose results are still to come.
    """
    if not keep_tool_pairs:
        return len(head)
    if pending:
        return paired_tail_start(head, pending)
    trailing = trailing_calls_start(head)
    return len(head) if trailing is None else trailing


def split_history(
    messages: MutableSequence[Any], options: Options, count: Count
) -> tuple[list[Message], int, int]:
    """Step 3: the snapshot, where its pending turn starts, and where the kept tail starts."""
    snapshot: list[Message] = list(messages)
    head_end = pending_start(snapshot)
    head = snapshot[:head_end]
    start = kept_tail_start(head, snapshot[head_end:], options.keep_tool_pairs)
    if options.keep_tail_tokens:
        start = verbatim_tail_start(head, start, options.keep_tail_tokens, lambda m: count([m]))
    return snapshot, head_end, start


def spec_prompt(
    source: list[Message],
    source_tokens: int,
    options: Options,
    texts: LanguagePreset | None = None,
) -> list[Message] | None:
    """The specification's one-request prompt, or ``None`` for a source over the
    summariser's budget (rendered a part at a time, never as one transcript).
    ``texts``: the compaction's (default: the options'). Raises ``ValueError`` for
    a source that cannot be encoded."""
    if source_tokens > options.summary_input_tokens:
        return None
    texts = options.derived.texts if texts is None else texts
    transcript = _serialize(source)
    if options.rolling_summaries and is_own_output(source[0], texts.acknowledgement):
        # A previous summary opens the source: say so (the lead-in line).
        transcript = texts.rolling_lead_in + transcript
    return [
        {"role": "system", "content": texts.summary_prompt},
        {"role": "user", "content": transcript},
    ]


def system_copies(head: Sequence[Message]) -> list[Message]:
    """Copies of the system messages of ``head``; ``ValueError`` if one cannot be copied."""
    return [json_copy(m) for m in head if dialects.is_system(m)]


def summary_block(
    summary: str, kept: Sequence[Message], acknowledgement: str, shape: str = "str"
) -> list[Message]:
    """What replaces the source: the summary message, and the acknowledgement
    unless a kept assistant turn follows it (roles keep alternating); their
    content in ``shape`` (:func:`content_shape`)."""
    block: list[Message] = [_shaped("user", SUMMARY_PREFIX + summary, shape)]
    if not kept or dialects.kind(kept[0]) is not dialects.Kind.ASSISTANT:
        block.append(_shaped("assistant", acknowledgement, shape))
    return block


def replacement(
    plan: Plan, summary: str | ServerSummary, acknowledgement: str, covered: int | None = None
) -> list[Message]:
    """What replaces the source, kept tail included: the summary block (a text
    summary), or the server's artefact exactly as returned followed by the
    ``plan.source[covered:]`` it does not stand for (a :class:`ServerSummary`)."""
    kept = plan.kept
    if isinstance(summary, ServerSummary):
        rest = plan.source[len(plan.source) if covered is None else covered :]
        return [*summary.messages, *rest, *kept]
    return [*summary_block(summary, kept, acknowledgement, plan.shape), *kept]


def appended_only(current: Sequence[Any], before: Sequence[Any]) -> bool:
    """True when ``current`` is ``before`` (the same objects) with messages appended."""
    return len(current) >= len(before) and all(
        now is then for now, then in zip(current, before, strict=False)
    )


def replace_all(messages: MutableSequence[Any], rebuilt: list[Message]) -> None:
    """``messages[:] = rebuilt``, also for a mutable sequence without slice assignment."""
    if isinstance(messages, list):
        messages[:] = rebuilt
    else:
        messages.clear()
        messages.extend(rebuilt)


class Rebuilt(NamedTuple):
    """What a rebuild put in place of what."""

    messages: list[Message]
    """The rebuilt messages, at the start of the list (those appended meanwhile follow)."""
    replaced: list[Message]
    """The messages they stand for (what an undo puts back)."""


def _current_systems(plan: Plan) -> list[Message]:
    """The system messages as they are now, or their copies from before the summary."""
    try:
        return system_copies(plan.snapshot[plan.fixed_end : plan.head_end])
    except ValueError:
        logger.warning(
            "a system message can no longer be copied; using its copy from before "
            "the summary",
            exc_info=True,
        )
        return plan.systems


def _window_length(summary: str | ServerSummary) -> int:
    """How many messages of the replacement come before the system messages: the
    whole window of a Responses compaction (ending with its compaction item, from
    which on the server reads), else none (an Anthropic block follows the system
    messages, which become ``system=``)."""
    if not isinstance(summary, ServerSummary) or not summary.messages:
        return 0
    last = summary.messages[-1]
    return len(summary.messages) if dialects.typed_item(last) == dialects.COMPACTION_TYPE else 0


def rebuild(
    messages: MutableSequence[Any],
    plan: Plan,
    summary: str | ServerSummary,
    acknowledgement: str,
    covered: int | None = None,
    *,
    unedited: Callable[[], bool] | None = None,
) -> Rebuilt | None:
    """Step 8, in place: systems, summary, acknowledgement (unless a kept assistant
    turn follows), kept tail, pending turn, and whatever arrived meanwhile. A
    :class:`ServerSummary` takes the place of the summary and acknowledgement
    (see :func:`replacement`).

    Messages appended while the summary was made (by another thread or task,
    or the provider itself) are kept after the pending turn, and system
    messages are copied as they are now. When messages after the summarised
    part were replaced or removed meanwhile (a trailing reminder an agent swaps
    every turn), the summary replaces the same messages and everything after
    them stays as it is now (see :func:`_around`). Returns what was rebuilt;
    ``None``, with nothing rebuilt, if the list was changed otherwise, or
    ``unedited`` (asked last; it logs why) says a summarised message was edited
    in place.
    """
    current = list(messages)
    appended = appended_only(current, plan.snapshot)
    if not appended and not _summarised_intact(current, plan):
        logger.warning(
            "the history was changed other than by appending while the summary was "
            "made; history left as it is"
        )
        return None
    if unedited is not None and not unedited():
        return None
    if not appended:
        return _around(messages, current, plan, summary, acknowledgement, covered=covered)
    systems = _current_systems(plan)
    body = replacement(plan, summary, acknowledgement, covered)
    opening = _window_length(summary)
    rebuilt = [
        *plan.snapshot[: plan.fixed_end],
        *body[:opening],
        *systems,
        *body[opening:],
    ]
    rebuilt += plan.snapshot[plan.head_end :]
    replace_all(messages, [*rebuilt, *current[len(plan.snapshot) :]])
    return Rebuilt(rebuilt, plan.snapshot)


def _summarised_intact(current: list[Any], plan: Plan) -> bool:
    """Whether ``current`` still opens with the snapshot up to its last summarised
    message (the same objects)."""
    if not plan.sources:
        return False
    end = plan.sources[-1] + 1
    return len(current) >= end and all(
        now is then for now, then in zip(current[:end], plan.snapshot[:end], strict=True)
    )


def _around(
    messages: MutableSequence[Any],
    current: list[Any],
    plan: Plan,
    summary: str | ServerSummary,
    acknowledgement: str,
    *,
    covered: int | None,
) -> Rebuilt | None:
    """The rebuild of a history whose messages after the summarised part were
    replaced or removed meanwhile: the fixed part, the system messages among the
    summarised ones (copied as they are now), what replaces the source, then
    every message after the source as it is now. ``None`` (logged) when that
    would leave more unpaired tool calls or results than ``current`` has."""
    end = plan.sources[-1] + 1
    after = current[end:]
    try:
        systems = system_copies(current[plan.fixed_end : end])
    except ValueError:
        logger.warning("a system message can no longer be copied; kept as it is", exc_info=True)
        systems = [m for m in current[plan.fixed_end : end] if dialects.is_system(m)]
    if isinstance(summary, ServerSummary):
        rest = plan.source[len(plan.source) if covered is None else covered :]
        block = [*summary.messages, *rest]
    else:
        follows = next((m for m in after if not dialects.is_system(m)), None)
        kept = [] if follows is None else [follows]
        block = summary_block(summary, kept, acknowledgement, plan.shape)
    opening = _window_length(summary)
    rebuilt = [*current[: plan.fixed_end], *block[:opening], *systems, *block[opening:], *after]
    if len(find_orphans(rebuilt)) > len(find_orphans(current)):
        logger.warning(
            "the messages after the summarised part were replaced while the summary "
            "was made, and the summary would unpair their tool calls; history left as it is"
        )
        return None
    replace_all(messages, rebuilt)
    return Rebuilt(rebuilt, current)


def _dropped_calls(plan: Plan) -> int:
    """Tool calls ending the history that were summarised away (their results,
    still to come, will be orphans)."""
    head = plan.snapshot[: plan.head_end]
    if plan.head_end != len(plan.snapshot) or plan.tail_start != len(head):
        return 0
    trailing = trailing_calls_start(head)
    return 0 if trailing is None else sum(len(dialects.calls(m)) for m in head[trailing:])


def warn_about(
    messages: MutableSequence[Any],
    plan: Plan,
    before: int,
    after: int,
    threshold: int,
    *,
    arrived: tuple[int, int] | None = None,
) -> None:
    """Log what a caller must know about a rebuilt history; ``arrived`` is, when
    messages were appended while the summary was made, how many, and the count of
    the rebuilt part without them."""
    dropped_calls = _dropped_calls(plan)
    if after >= before:
        logger.warning(
            "compaction did not shrink the history (%d -> %d tokens): the summary is "
            "longer than what it replaced",
            before,
            after,
        )
    unpaired = len(find_orphans(messages)) + dropped_calls
    if unpaired:
        logger.warning(
            "compaction left %d unpaired tool call(s) or result(s); keep_tool_pairs=True "
            "(the default) keeps tool calls with their results",
            unpaired,
        )
    if after > threshold:
        _still_over(after, threshold, arrived)


def _still_over(after: int, threshold: int, arrived: tuple[int, int] | None) -> None:
    """Say why a rebuilt history is still over the threshold: what it keeps, or the
    messages appended while the summary was made (``arrived``: how many, and the
    count of the rebuilt part without them, within the threshold)."""
    if arrived is None or arrived[1] > threshold:
        logger.warning(
            "history is still over the threshold after compaction (%d > %d estimated "
            "tokens): the kept messages alone are that large",
            after,
            threshold,
        )
        return
    logger.warning(
        "history is still over the threshold after compaction (%d > %d estimated "
        "tokens) because of the %d message(s) appended while the summary was made; "
        "the rebuilt part is %d tokens, and the next call can summarise them",
        after,
        threshold,
        *arrived,
    )
