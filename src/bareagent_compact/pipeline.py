"""The compaction steps of SPEC 11.2, written once for the sync and async compactors.

The steps never call the provider, the transcript manager or the archive hook
themselves: they *yield* what they need done (an :class:`ArchiveRequest`, a
:class:`SaveRequest`, a :class:`SummaryRequest`) and receive the outcome, so
:class:`~bareagent_compact.Compactor` runs them with plain calls and
:class:`~bareagent_compact.AsyncCompactor` with ``await``. Every decision (what
to truncate, when to fire, what to summarise, what to keep, how to rebuild) is
made here.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Generator, MutableSequence, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple, TypeAlias

from bareagent_compact import dialects
from bareagent_compact._json import json_copy
from bareagent_compact.micro import (
    DEFAULT_KEEP_RECENT,
    Due,
    Undo,
    apply_micro,
    check_keep_recent,
    plan_micro,
    plan_plain_micro,
    undo_micro,
)
from bareagent_compact.pairs import find_orphans
from bareagent_compact.plain import plain_messages
from bareagent_compact.prompts import (
    DEFAULT_ACKNOWLEDGEMENT,
    DEFAULT_SUMMARY_PROMPT,
    DEFAULT_THRESHOLD,
    SUMMARY_PREFIX,
)
from bareagent_compact.protocols import (
    ArchiveHook,
    ArchiveRecord,
    Message,
    SummaryProvider,
    TokenCounter,
    TranscriptManager,
)
from bareagent_compact.result import Action, CompactionResult, Reason
from bareagent_compact.serialize import _serialize
from bareagent_compact.summarize import (
    DEFAULT_SUMMARY_INPUT_TOKENS,
    MIN_BUDGET,
    SummaryRequest,
    summarise,
)
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.validate import validate_messages

logger = logging.getLogger("bareagent_compact.compactor")


class ArchiveRequest(NamedTuple):
    """Give each record to the archive hook; answer with one ``bool`` per record."""

    records: list[ArchiveRecord]


class SaveRequest(NamedTuple):
    """Save a snapshot; answer with an :class:`Outcome` (its value is ignored)."""

    messages: list[Message]
    session_id: str


Request: TypeAlias = ArchiveRequest | SaveRequest | SummaryRequest


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a driver reports back: the value returned, or the exception raised."""

    value: Any = None
    error: Exception | None = None
    reason: str | None = None


Steps: TypeAlias = Generator[Request, Any, CompactionResult]


def summary_text(response: object) -> str | None:
    """Normalise a provider's answer to the summary text, or ``None`` when unusable.

    Usable: a ``str``, or an object whose ``text`` attribute is a ``str``, holding
    something other than whitespace.
    """
    text = response if isinstance(response, str) else getattr(response, "text", None)
    if not isinstance(text, str) or not text.strip():
        return None
    return text


def is_async_callable(value: object) -> bool:
    """True for an ``async def`` function, method, partial or object with one as ``__call__``."""
    if inspect.iscoroutinefunction(value):
        return True
    call = getattr(type(value), "__call__", None)  # noqa: B004 (the class attribute, not callable())
    return call is not None and inspect.iscoroutinefunction(call)


def close_awaitable(value: object) -> None:
    """Close a coroutine nobody will await, so no "never awaited" warning is raised."""
    close = getattr(value, "close", None)
    if inspect.iscoroutine(value) and callable(close):
        close()


def _check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
    if not session_id:
        raise ValueError("session_id must not be empty")
    return session_id


def _is_own_output(message: Message, acknowledgement: str) -> bool:
    """True for the summary and acknowledgement messages a previous compaction wrote."""
    content = message.get("content")
    if message.get("role") == "assistant":
        return content == acknowledgement
    return (
        message.get("role") == "user"
        and isinstance(content, str)
        and content.startswith(SUMMARY_PREFIX)
    )


def pending_start(messages: Sequence[Message]) -> int:
    """Where the pending turn begins: the last turn when the last message is user input
    or a tool result (SPEC 11.2 step 3); ``len(messages)`` when nothing is pending.

    A trailing run of Chat ``tool`` messages or Responses results is pending as a
    whole, so fresh results reach the model before they are ever summarised.
    """
    if not messages:
        return 0
    last = len(messages) - 1
    if dialects.kind(messages[last]) not in (
        dialects.Kind.USER,
        dialects.Kind.RESULTS,
        dialects.Kind.RESULT,
    ):
        return len(messages)
    return dialects.turn_start(messages, last)


def paired_tail_start(head: Sequence[Message], pending: Sequence[Message]) -> int:
    """Index in ``head`` from which messages stay verbatim so that every tool result
    in the kept tail (pending turn included) keeps its tool call.

    For each needed id the nearest earlier call counts (ids reused across turns
    must not pull in the whole history); the tail grows back to the start of the
    turn holding it, and on until nothing more is needed or can be found. Each
    message is read a bounded number of times: linear in the history.
    """
    needed: set[str] = set()
    for message in pending:
        needed -= dialects.call_ids(message)
        needed |= dialects.result_ids(message)
    start = len(head)
    index = start
    while needed and index > 0:
        index -= 1
        message = head[index]
        if dialects.is_system(message) or not (dialects.call_ids(message) & needed):
            continue
        new_start = dialects.turn_start(head, index)
        for absorbed in range(start - 1, new_start - 1, -1):
            message = head[absorbed]
            if dialects.is_system(message):
                continue
            needed -= dialects.call_ids(message)
            needed |= dialects.result_ids(message)
        start = index = new_start
    return start


def _last_dialogue_index(messages: Sequence[Message]) -> int | None:
    """Index of the last message that is not a system message, if any."""
    for index in range(len(messages) - 1, -1, -1):
        if not dialects.is_system(messages[index]):
            return index
    return None


def trailing_calls_start(head: Sequence[Message]) -> int | None:
    """Start of the last dialogue turn when it is an assistant turn making tool calls
    whose results are still to come; ``None`` otherwise."""
    last = _last_dialogue_index(head)
    if last is None or dialects.kind(head[last]) is not dialects.Kind.ASSISTANT:
        return None
    start = dialects.turn_start(head, last)
    if any(dialects.calls(head[index]) for index in range(start, last + 1)):
        return start
    return None


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
    prompt: list[Message]


def _read_summary(answer: Outcome) -> tuple[str | None, Reason | None]:
    """The summary text of a provider's answer, or ``None`` and why not (logged)."""
    if answer.error is not None or answer.reason is not None:
        logger.warning(
            "summary provider failed%s; history left as it was",
            f" ({answer.reason})" if answer.reason else "",
            exc_info=answer.error,
        )
        return None, Reason.PROVIDER_RAISED if answer.reason is None else Reason.PROVIDER_AWAITABLE
    try:
        summary = summary_text(answer.value)
    except Exception:
        logger.warning("reading the summary failed; history left as it was", exc_info=True)
        return None, Reason.PROVIDER_RAISED
    if summary is None:
        logger.warning(
            "summary provider returned an unusable summary (%s); history left as it was",
            type(answer.value).__name__,
        )
        return None, Reason.UNUSABLE_SUMMARY
    return summary, None


BACKOFF_CAP: Final = 32
"""At most this many calls are skipped between two attempts after failures."""

GROWTH_RETRY: Final = 2
"""A history this many times larger than at the last failure is tried again at once."""


class CompactorBase:
    """The options, checks and compaction steps shared by both compactors.

    Subclasses are drivers: they run :meth:`_steps` and answer its requests.
    """

    def __init__(
        self,
        provider: SummaryProvider,
        transcript_mgr: TranscriptManager | None = None,
        threshold: int = DEFAULT_THRESHOLD,
        session_id: str = "default",
        *,
        keep_recent: int = DEFAULT_KEEP_RECENT,
        system_prompt: str = DEFAULT_SUMMARY_PROMPT,
        acknowledgement: str = DEFAULT_ACKNOWLEDGEMENT,
        token_counter: TokenCounter = estimate_tokens,
        keep_tool_pairs: bool = True,
        archive: ArchiveHook | None = None,
        require_snapshot: bool = True,
        summary_input_tokens: int = DEFAULT_SUMMARY_INPUT_TOKENS,
    ) -> None:
        if not callable(provider):
            raise TypeError(f"provider must be callable, got {type(provider).__name__}")
        if transcript_mgr is not None and not callable(getattr(transcript_mgr, "save", None)):
            raise TypeError(
                "transcript_mgr must have a save(messages, session_id) method, got "
                f"{type(transcript_mgr).__name__}"
            )
        if isinstance(threshold, bool) or not isinstance(threshold, int):
            raise TypeError(f"threshold must be an int, got {type(threshold).__name__}")
        if threshold < 0:
            raise ValueError(f"threshold must be >= 0, got {threshold}")
        for name, text in (("system_prompt", system_prompt), ("acknowledgement", acknowledgement)):
            if not isinstance(text, str):
                raise TypeError(f"{name} must be a str, got {type(text).__name__}")
        if not callable(token_counter):
            raise TypeError(f"token_counter must be callable, got {type(token_counter).__name__}")
        if archive is not None and not callable(archive):
            raise TypeError(f"archive must be callable, got {type(archive).__name__}")
        if isinstance(summary_input_tokens, bool) or not isinstance(summary_input_tokens, int):
            raise TypeError(
                f"summary_input_tokens must be an int, got {type(summary_input_tokens).__name__}"
            )
        if summary_input_tokens < MIN_BUDGET:
            raise ValueError(
                f"summary_input_tokens must be >= {MIN_BUDGET}, got {summary_input_tokens}"
            )
        self.provider = provider
        self.transcript_mgr = transcript_mgr
        self.threshold = threshold
        self.keep_recent = check_keep_recent(keep_recent)
        self.system_prompt = system_prompt
        self.acknowledgement = acknowledgement
        self.token_counter = token_counter
        self.keep_tool_pairs = bool(keep_tool_pairs)
        self.archive = archive
        self.require_snapshot = bool(require_snapshot)
        self.summary_input_tokens = summary_input_tokens
        self._calls = 0  # calls of the compactor, for the failure back-off
        self._failures = 0  # full compactions failed in a row
        self._failed_tokens = 0
        self._retry_at = 0
        self._session_id = self._checked_session_id(session_id)
        self._setup()

    def _setup(self) -> None:
        """What a driver checks and prepares once its options are set."""

    def _checked_session_id(self, session_id: object) -> str:
        """A non-empty ``str``, also acceptable to the transcript manager (and to the
        archive hook's owner) when they can say (``check_session_id``), so a bad id
        fails now rather than every turn."""
        checked = _check_session_id(session_id)
        for owner in (self.transcript_mgr, getattr(self.archive, "__self__", None)):
            check = getattr(owner, "check_session_id", None)
            if callable(check):
                check(checked)
        return checked

    def get_session_id(self) -> str:
        """The session id under which snapshots are saved."""
        return self._session_id

    @staticmethod
    def _check_force(force: object) -> bool:
        if not isinstance(force, bool):
            raise TypeError(f"force must be a bool, got {type(force).__name__}")
        return force

    def _count(self, messages: MutableSequence[Any]) -> int:
        """The token count of ``messages``; a failing or malformed counter falls back
        to the built-in estimate, with a warning."""
        try:
            tokens = self.token_counter(messages)  # type: ignore[arg-type]
        except Exception:
            logger.warning("token_counter failed; using the built-in estimate", exc_info=True)
            return estimate_tokens(list(messages))
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            logger.warning(
                "token_counter returned %s, not an int >= 0; using the built-in estimate",
                type(tokens).__name__ if not isinstance(tokens, int) else tokens,
            )
            return estimate_tokens(list(messages))
        return tokens

    def _archive_records(self, planned: Sequence[Due]) -> list[ArchiveRecord]:
        session_id = self._session_id
        return [{**due.record, "session_id": session_id} for due in planned]

    def _steps(self, messages: MutableSequence[Any], force: bool) -> Steps:
        """One compaction step on ``messages`` in place (SPEC 11.2 steps 1-8)."""
        validate_messages(messages, objects=True)

        # Step 1: micro-compaction, always. Its scan also notices SDK objects,
        # which are converted once, in place, before anything else reads them.
        planned = plan_micro(messages, self.keep_recent)
        if planned is None:
            plain_messages(messages)
            validate_messages(messages)
            planned = plan_plain_micro(messages, self.keep_recent)
        undo: Undo = []
        if planned:
            keep = None
            if self.archive is not None:
                keep = yield ArchiveRequest(self._archive_records(planned))
            undo = apply_micro(planned, keep)
        truncated = len(undo)
        try:
            return (yield from self._full(messages, force, truncated))
        except GeneratorExit:
            # The driver gave up (cancelled or interrupted) during a request: the
            # history goes back exactly as it was.
            undo_micro(undo)
            raise

    def _full(self, messages: MutableSequence[Any], force: bool, truncated: int) -> Steps:
        tokens = self._count(messages)
        self._calls += 1
        plan = self._plan(messages, force, tokens, truncated)
        if isinstance(plan, CompactionResult):
            return plan
        if not force and self._backing_off(tokens):
            quiet = Action.MICRO if truncated else Action.NONE
            return CompactionResult(quiet, tokens, tokens, truncated, reason=Reason.BACKING_OFF)

        # Step 5: snapshot before anything is sent or changed.
        snapshot_saved = False
        if self.transcript_mgr is not None:
            saved: Outcome = yield SaveRequest(list(plan.snapshot), self._session_id)
            snapshot_saved = saved.error is None and saved.reason is None
            if not snapshot_saved:
                logger.warning(
                    "transcript snapshot failed for session %r%s",
                    self._session_id,
                    f" ({saved.reason})" if saved.reason else "",
                    exc_info=saved.error,
                )
                if self.require_snapshot:
                    return self._failure(tokens, truncated, False, Reason.SNAPSHOT_FAILED)

        # Steps 6 and 7: ask for the summary, in parts if the source is over the
        # summariser's input budget; any failure leaves history intact.
        done = yield from summarise(
            plan.source,
            plan.prompt,
            system_prompt=self.system_prompt,
            budget=self.summary_input_tokens,
            count=self._count_list,
            read=_read_summary,
        )
        extra = {"summary_calls": done.calls, "parts": done.parts}
        summary = done.text
        if summary is None:
            reason = done.reason or Reason.UNUSABLE_SUMMARY
            return self._failure(tokens, truncated, snapshot_saved, reason, **extra)
        if self._inflated(plan, summary, force):
            return self._failure(
                tokens, truncated, snapshot_saved, Reason.INFLATED_SUMMARY, **extra
            )

        # Step 8: rebuild in place.
        if not self._rebuild(messages, plan, summary):
            return self._failure(
                tokens, truncated, snapshot_saved, Reason.HISTORY_CHANGED, **extra
            )
        self._failures = 0
        # Nothing below may raise: the summary is in hand and the history rebuilt.
        after = self._count(messages)
        try:
            self._warn_about(messages, plan, tokens, after)
        except Exception:  # a malformed block must not turn success into an exception
            logger.warning("could not check the rebuilt history", exc_info=True)
        return CompactionResult(
            Action.FULL, tokens, after, truncated, snapshot_saved, None, **extra
        )

    def _count_list(self, messages: list[Message]) -> int:
        return self._count(messages)

    def _inflated(self, plan: Plan, summary: str, force: bool) -> bool:
        """A summary longer than the source it replaces makes the history bigger:
        refused, unless the call was forced (then kept, with a warning)."""
        summary_size = self._count([{"role": "user", "content": SUMMARY_PREFIX + summary}])
        source_size = self._count(plan.source)
        if summary_size <= source_size:
            return False
        if force:
            logger.warning(
                "the summary (%d tokens) is longer than what it replaces (%d tokens); kept "
                "because the compaction was forced",
                summary_size,
                source_size,
            )
            return False
        logger.warning(
            "the summary (%d tokens) is longer than what it would replace (%d tokens); "
            "history left as it was",
            summary_size,
            source_size,
        )
        return True

    def _backing_off(self, tokens: int) -> bool:
        """True while a recent failure asks to leave the provider alone: the
        ``k``-th failure in a row skips ``min(2 ** (k - 1), BACKOFF_CAP)`` calls,
        unless the history has since grown ``GROWTH_RETRY`` times larger."""
        if not self._failures or self._calls >= self._retry_at:
            return False
        return tokens < GROWTH_RETRY * self._failed_tokens

    def _failure(
        self, tokens: int, truncated: int, saved: bool, reason: Reason, **extra: int
    ) -> CompactionResult:
        """A failed full compaction, which also starts (or extends) the back-off."""
        self._failures += 1
        self._failed_tokens = tokens
        self._retry_at = self._calls + min(2 ** (self._failures - 1), BACKOFF_CAP) + 1
        return CompactionResult(Action.FAILED, tokens, tokens, truncated, saved, reason, **extra)

    def _plan(
        self, messages: MutableSequence[Any], force: bool, tokens: int, truncated: int
    ) -> Plan | CompactionResult:
        """Steps 2-4: fire or not, and if so what is summarised, kept and sent."""
        quiet = Action.MICRO if truncated else Action.NONE
        # Step 2: the trigger; strictly greater than the threshold.
        if not force and tokens <= self.threshold:
            return CompactionResult(quiet, tokens, tokens, truncated)

        # Step 3: the pending turn (user input, or tool results) is kept out.
        snapshot: list[Message] = list(messages)
        head_end = pending_start(snapshot)
        head = snapshot[:head_end]
        start = self._kept_tail_start(head, snapshot[head_end:])

        # Step 4: the summary source excludes system messages.
        source = [m for m in head[:start] if not dialects.is_system(m)]
        if not source:
            return CompactionResult(
                quiet, tokens, tokens, truncated, reason=Reason.NOTHING_TO_SUMMARISE
            )
        if not force and all(_is_own_output(m, self.acknowledgement) for m in source):
            # Only the previous summary is left: summarising it again every turn
            # would cost a model call and shrink nothing that matters.
            logger.warning(
                "history is over the threshold but holds nothing new to summarise "
                "(the pending message itself is large)"
            )
            return CompactionResult(
                quiet, tokens, tokens, truncated, reason=Reason.NOTHING_NEW
            )
        # The prompt and the system messages' copies are made before anything is
        # sent, so that an unencodable history fails before any side effect.
        try:
            systems = [json_copy(m) for m in head if dialects.is_system(m)]
            prompt: list[Message] = [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": _serialize(source)},
            ]
        except ValueError:
            logger.warning("compaction skipped: history cannot be encoded", exc_info=True)
            return self._failure(tokens, truncated, False, Reason.NOT_ENCODABLE)
        return Plan(snapshot, head_end, start, systems, source, prompt)

    def _rebuild(self, messages: MutableSequence[Any], plan: Plan, summary: str) -> bool:
        """Step 8, in place: systems, summary, acknowledgement (unless a kept assistant
        turn follows), kept tail, pending turn, and whatever arrived meanwhile.

        Messages appended while the summary was made (by another thread or task,
        or the provider itself) are kept after the pending turn, and system
        messages are copied as they are now. If the list was changed other than
        by appending, nothing is rebuilt (``False``).
        """
        snapshot = plan.snapshot
        current = list(messages)
        if len(current) < len(snapshot) or any(
            now is not then for now, then in zip(current, snapshot, strict=False)
        ):
            logger.warning(
                "the history was changed other than by appending while the summary was "
                "made; history left as it is"
            )
            return False
        head = snapshot[: plan.head_end]
        systems = plan.systems
        try:
            systems = [json_copy(m) for m in head if dialects.is_system(m)]
        except ValueError:
            logger.warning(
                "a system message can no longer be copied; using its copy from before "
                "the summary",
                exc_info=True,
            )
        kept = [m for m in head[plan.tail_start :] if not dialects.is_system(m)]
        rebuilt: list[Message] = [*systems, {"role": "user", "content": SUMMARY_PREFIX + summary}]
        if not kept or dialects.kind(kept[0]) is not dialects.Kind.ASSISTANT:
            rebuilt.append({"role": "assistant", "content": self.acknowledgement})
        rebuilt += kept
        rebuilt += snapshot[plan.head_end :]
        rebuilt += current[len(snapshot) :]
        _replace_all(messages, rebuilt)
        return True

    def _kept_tail_start(self, head: list[Message], pending: list[Message]) -> int:
        """Where the messages kept verbatim besides the pending turn begin in ``head``.

        Only ``keep_tool_pairs=True`` keeps any: the calls a pending tool result
        answers, or tool calls ending the history whose results are still to come.
        """
        if not self.keep_tool_pairs:
            return len(head)
        if pending:
            return paired_tail_start(head, pending)
        trailing = trailing_calls_start(head)
        return len(head) if trailing is None else trailing

    def _warn_about(
        self, messages: MutableSequence[Any], plan: Plan, before: int, after: int
    ) -> None:
        """Log what a caller must know about a rebuilt history."""
        # Tool calls ending the history, summarised away: their results will be orphans.
        dropped_calls = 0
        head = plan.snapshot[: plan.head_end]
        if plan.head_end == len(plan.snapshot) and plan.tail_start == len(head):
            trailing = trailing_calls_start(head)
            if trailing is not None:
                dropped_calls = sum(len(dialects.calls(m)) for m in head[trailing:])
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
        if after > self.threshold:
            logger.warning(
                "history is still over the threshold after compaction (%d > %d estimated "
                "tokens): the kept messages alone are that large",
                after,
                self.threshold,
            )


def _replace_all(messages: MutableSequence[Any], rebuilt: list[Message]) -> None:
    """``messages[:] = rebuilt``, also for a mutable sequence without slice assignment."""
    if isinstance(messages, list):
        messages[:] = rebuilt
    else:
        messages.clear()
        messages.extend(rebuilt)


Runner: TypeAlias = Callable[[Request], Any]
