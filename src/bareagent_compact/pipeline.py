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
from collections.abc import Callable, Generator, Iterable, MutableSequence, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Generic, NamedTuple, TypeAlias, TypeVar

from bareagent_compact import dialects
from bareagent_compact._json import json_copy
from bareagent_compact.facts import DEFAULT_PIN_FACTS_TOKENS, extract, pinned_block
from bareagent_compact.ledger import UsageLedger
from bareagent_compact.micro import (
    MICRO_SPEC,
    Due,
    MicroOptions,
    Undo,
    apply_micro,
    changes_prefix,
    plan_micro,
    plan_plain_micro,
    resolve_micro,
    select_micro,
    undo_micro,
)
from bareagent_compact.pairs import find_orphans
from bareagent_compact.plain import plain_messages, plain_view
from bareagent_compact.prompts import (
    DEFAULT_THRESHOLD,
    LANGUAGES,
    SUMMARY_PREFIX,
)
from bareagent_compact.protocols import (
    AfterCompactHook,
    ArchiveHook,
    ArchiveRecord,
    BeforeCompactHook,
    Message,
    TokenCounter,
    TranscriptManager,
)
from bareagent_compact.result import Action, CompactionEvent, CompactionResult, Reason
from bareagent_compact.serialize import _serialize
from bareagent_compact.split import (
    paired_tail_start,
    pending_start,
    trailing_calls_start,
    verbatim_tail_start,
)
from bareagent_compact.summarize import (
    DEFAULT_SUMMARY_INPUT_TOKENS,
    MIN_BUDGET,
    SummaryRequest,
    summarise,
)
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.usage import input_tokens_of
from bareagent_compact.validate import check_int, validate_messages

logger = logging.getLogger("bareagent_compact.compactor")

_DICTS: Final = frozenset((dict,))


class ArchiveRequest(NamedTuple):
    """Give each record to the archive hook; answer with one ``bool`` per record."""

    records: list[ArchiveRecord]


class HookRequest(NamedTuple):
    """Call a ``before_compact`` or ``after_compact`` hook with ``args``; answer with
    an :class:`Outcome` of what it returned."""

    function: Callable[..., Any]
    args: tuple[Any, ...]


class SaveRequest(NamedTuple):
    """Save a snapshot; answer with an :class:`Outcome` (its value is ignored)."""

    messages: list[Message]
    session_id: str


Request: TypeAlias = ArchiveRequest | HookRequest | SaveRequest | SummaryRequest


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


def _check_callable(name: str, value: object, *, optional: bool) -> None:
    if (value is not None or not optional) and not callable(value):
        raise TypeError(f"{name} must be callable, got {type(value).__name__}")


ProviderT = TypeVar("ProviderT")
"""The provider type a driver accepts: sync only, or sync or async."""


class CompactorBase(Generic[ProviderT]):
    """The options, checks and compaction steps shared by both compactors.

    Subclasses are drivers: they run :meth:`_steps` and answer its requests.
    """

    def __init__(
        self,
        provider: ProviderT,
        transcript_mgr: TranscriptManager | None = None,
        threshold: int = DEFAULT_THRESHOLD,
        session_id: str = "default",
        *,
        keep_recent: int | None = None,
        system_prompt: str | None = None,
        acknowledgement: str | None = None,
        token_counter: TokenCounter | None = None,
        keep_tool_pairs: bool = True,
        archive: ArchiveHook | None = None,
        require_snapshot: bool = True,
        summary_input_tokens: int = DEFAULT_SUMMARY_INPUT_TOKENS,
        language: str = "zh",
        instructions: str | None = None,
        rolling_summaries: bool = True,
        pin_facts: bool = False,
        pin_facts_tokens: int = DEFAULT_PIN_FACTS_TOKENS,
        keep_tail_tokens: int = 0,
        before_compact: BeforeCompactHook | None = None,
        after_compact: AfterCompactHook | None = None,
        micro: str = MICRO_SPEC,
        micro_min_chars: int | None = None,
        exclude_tools: Iterable[str] | None = None,
        clear_at_least: int | None = None,
    ) -> None:
        _check_callable("provider", provider, optional=False)
        if transcript_mgr is not None and not callable(getattr(transcript_mgr, "save", None)):
            raise TypeError(
                "transcript_mgr must have a save(messages, session_id) method, got "
                f"{type(transcript_mgr).__name__}"
            )
        if not isinstance(language, str) or language not in LANGUAGES:
            raise ValueError(f"language must be one of {sorted(LANGUAGES)}, got {language!r}")
        preset = LANGUAGES[language]
        system_prompt = preset.summary_prompt if system_prompt is None else system_prompt
        acknowledgement = preset.acknowledgement if acknowledgement is None else acknowledgement
        for name, text in (
            ("system_prompt", system_prompt),
            ("acknowledgement", acknowledgement),
            ("instructions", "" if instructions is None else instructions),
        ):
            if not isinstance(text, str):
                raise TypeError(f"{name} must be a str, got {type(text).__name__}")
        for name, number, minimum in (
            ("threshold", threshold, 0),
            ("summary_input_tokens", summary_input_tokens, MIN_BUDGET),
            ("pin_facts_tokens", pin_facts_tokens, 0),
            ("keep_tail_tokens", keep_tail_tokens, 0),
        ):
            check_int(name, number, minimum)
        _check_callable("token_counter", token_counter, optional=True)
        for name, hook in (
            ("archive", archive),
            ("before_compact", before_compact),
            ("after_compact", after_compact),
        ):
            _check_callable(name, hook, optional=True)
        self.provider = provider
        self.transcript_mgr = transcript_mgr
        self.threshold = threshold
        # keep_recent, micro_min_chars and clear_at_least left as None take the
        # values of the ``micro`` preset (the specification's: 3, off, 0).
        self.keep_recent, self.micro_options = resolve_micro(
            micro,
            threshold,
            keep_recent=keep_recent,
            min_chars=micro_min_chars,
            exclude_tools=exclude_tools,
            clear_at_least=clear_at_least,
        )
        self.micro = micro
        self.system_prompt = system_prompt
        self.acknowledgement = acknowledgement
        self.token_counter = estimate_tokens if token_counter is None else token_counter
        # Without a counter of the caller's, the history's count is anchored on the
        # usage the API reports (record_usage); until then it is the estimate.
        self._ledger = UsageLedger() if token_counter is None else None
        self.keep_tool_pairs = bool(keep_tool_pairs)
        self.archive = archive
        self.require_snapshot = bool(require_snapshot)
        self.summary_input_tokens = summary_input_tokens
        self.language = language
        self.instructions = instructions
        self.rolling_summaries = bool(rolling_summaries)
        self.pin_facts = bool(pin_facts)
        self.pin_facts_tokens = pin_facts_tokens
        self.keep_tail_tokens = keep_tail_tokens
        self.before_compact = before_compact
        self.after_compact = after_compact
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

    def _count_history(self, messages: MutableSequence[Any]) -> int:
        """The count of the whole history, the one the trigger compares."""
        if self._ledger is None:
            return self._count(messages)
        return self._ledger.count(messages if isinstance(messages, list) else list(messages))

    def record_usage(self, messages: Sequence[Any], usage: object) -> None:
        """Anchor the count on what the API reported for a request carrying ``messages``.

        Call it right after each model call, with the list exactly as it was sent
        (before the reply is appended). ``usage`` is the response's usage object or
        dict (Anthropic, OpenAI Chat or Responses) or the full input size as an
        ``int`` (see :func:`~bareagent_compact.input_tokens_of`). Ignored when the
        compactor was given a ``token_counter``.
        """
        tokens = input_tokens_of(usage)
        if self._ledger is None:
            return
        view: Any = messages
        if not (isinstance(view, list) and _DICTS.issuperset(map(type, view))):
            view = plain_view(messages)  # SDK objects read as dicts, the list unchanged
        self._ledger.record(view if isinstance(view, list) else list(view), tokens)

    def _archive_records(self, planned: Sequence[Due]) -> list[ArchiveRecord]:
        session_id = self._session_id
        return [{**due.record, "session_id": session_id} for due in planned]

    @staticmethod
    def _check_instructions(instructions: object) -> str | None:
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError(f"instructions must be a str, got {type(instructions).__name__}")
        return instructions

    def _steps(
        self, messages: MutableSequence[Any], force: bool, instructions: str | None = None
    ) -> Steps:
        """One compaction step on ``messages`` in place (SPEC 11.2 steps 1-8)."""
        validate_messages(messages, objects=True)

        # Step 1: micro-compaction, always. Its scan also notices SDK objects,
        # which are converted once, in place, before anything else reads them.
        planned = plan_micro(messages, self.keep_recent)
        if planned is None:
            plain_messages(messages)
            validate_messages(messages)
            planned = plan_plain_micro(messages, self.keep_recent)
        options: MicroOptions = self.micro_options
        if planned and not options.is_spec:
            # Over the threshold (or forced) everything eligible is cleared before
            # the full compaction is decided on.
            planned = select_micro(
                planned, options, lambda: force or self._count(messages) > self.threshold
            )
        undo: Undo = []
        if planned:
            keep = None
            if self.archive is not None:
                keep = yield ArchiveRequest(self._archive_records(planned))
            undo = apply_micro(planned, keep)
        truncated = len(undo)
        prefix_changed = changes_prefix(messages, undo)
        try:
            result = yield from self._full(messages, force, truncated, instructions)
        except GeneratorExit:
            # The driver gave up (cancelled or interrupted) during a request: the
            # history goes back exactly as it was.
            undo_micro(undo)
            raise
        if result.action is Action.FULL:
            result = replace(result, prefix_changed=True, truncations=tuple(undo))
        elif prefix_changed:
            result = replace(result, prefix_changed=True)
        return result

    def _full(
        self,
        messages: MutableSequence[Any],
        force: bool,
        truncated: int,
        instructions: str | None,
    ) -> Steps:
        tokens = self._count_history(messages)
        self._calls += 1
        plan = self._plan(messages, force, tokens, truncated)
        if isinstance(plan, CompactionResult):
            return plan
        quiet = Action.MICRO if truncated else Action.NONE
        if not force and self._backing_off(tokens):
            return CompactionResult(quiet, tokens, tokens, truncated, reason=Reason.BACKING_OFF)
        texts = [t for t in (self.instructions, instructions) if t]
        if self.before_compact is not None:
            event = CompactionEvent(
                trigger="manual" if force else "auto",
                tokens=tokens,
                threshold=self.threshold,
                source_messages=len(plan.source),
                source_tokens=plan.source_tokens,
                session_id=self._session_id,
            )
            verdict: Outcome = yield HookRequest(self.before_compact, (event,))
            if verdict.error is not None:
                logger.warning("before_compact hook failed; ignored", exc_info=verdict.error)
            elif verdict.value is False:
                return CompactionResult(
                    quiet, tokens, tokens, truncated, reason=Reason.SKIPPED_BY_HOOK
                )
            elif isinstance(verdict.value, str) and verdict.value:
                texts.append(verdict.value)
        plan = self._with_instructions(plan, texts)

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
            system_prompt=plan.system_prompt,
            lead_in=LANGUAGES[self.language].rolling_lead_in,
            budget=self.summary_input_tokens,
            count=self._count_list,
            read=_read_summary,
        )
        extra = {"summary_calls": done.calls, "parts": done.parts}
        summary = done.text
        if summary is None:
            reason = done.reason or Reason.UNUSABLE_SUMMARY
            result = self._failure(tokens, truncated, snapshot_saved, reason, **extra)
        elif (summary := self._with_pins(plan, summary, force)) is None:
            result = self._failure(
                tokens, truncated, snapshot_saved, Reason.INFLATED_SUMMARY, **extra
            )
        else:
            # Step 8: rebuild in place.
            rebuilt = self._rebuild(messages, plan, summary)
            if rebuilt is None:
                result = self._failure(
                    tokens, truncated, snapshot_saved, Reason.HISTORY_CHANGED, **extra
                )
            else:
                self._failures = 0
                # Nothing below may raise: the summary is in hand and the history rebuilt.
                after = self._count_history(messages)
                try:
                    self._warn_about(messages, plan, tokens, after)
                except Exception:  # a malformed block must not turn success into an exception
                    logger.warning("could not check the rebuilt history", exc_info=True)
                result = CompactionResult(
                    Action.FULL,
                    tokens,
                    after,
                    truncated,
                    snapshot_saved,
                    None,
                    summary_calls=done.calls,
                    parts=done.parts,
                    replaced=tuple(plan.snapshot),
                    rebuilt=tuple(rebuilt),
                )
        if self.after_compact is not None:
            shown = summary if result.action is Action.FULL else None
            done_hook: Outcome = yield HookRequest(self.after_compact, (result, shown))
            if done_hook.error is not None:
                logger.warning("after_compact hook failed; ignored", exc_info=done_hook.error)
        return result

    def _with_instructions(self, plan: Plan, texts: list[str]) -> Plan:
        """The plan whose summary prompt carries the focus instructions, if any."""
        if not texts:
            return plan
        heading = LANGUAGES[self.language].instructions_heading
        system = plan.system_prompt + "\n\n" + heading + "\n".join(texts)
        prompt = None if plan.prompt is None else [
            {"role": "system", "content": system}, plan.prompt[1]
        ]
        return replace(plan, system_prompt=system, prompt=prompt)

    def _pinned(self, plan: Plan, summary: str) -> str:
        """The pinned-facts block to append to the summary (``pin_facts=True``)."""
        if not self.pin_facts or not self.pin_facts_tokens:
            return ""
        try:
            facts = extract(plan.source)
            return pinned_block(
                facts,
                summary,
                self.pin_facts_tokens,
                lambda text: self._count([{"role": "user", "content": text}]),
            )
        except Exception:  # the summary is in hand: facts are a bonus, never a failure
            logger.warning("pinning facts failed; the summary is kept without them", exc_info=True)
            return ""

    def undo(self, messages: MutableSequence[Any], result: CompactionResult) -> bool:
        """Put back the history a full compaction replaced, in place; ``True`` if done.

        ``result`` is the ``CompactionResult`` of that compaction. The messages
        appended since it (or while it ran) are kept after the restored history.
        A result that is not a full compaction replaced nothing: ``False``,
        nothing changes. Raises ``ValueError`` when the history has changed since
        other than by appending (for example by a later full compaction), and
        ``TypeError`` for arguments of the wrong type.
        """
        if not isinstance(result, CompactionResult):
            raise TypeError(f"result must be a CompactionResult, got {type(result).__name__}")
        if not isinstance(messages, MutableSequence):
            raise TypeError(f"messages must be a list, got {type(messages).__name__}")
        if result.action is not Action.FULL or not result.rebuilt:
            return False
        rebuilt = result.rebuilt
        current = list(messages)
        if len(current) < len(rebuilt) or any(
            now is not then for now, then in zip(current, rebuilt, strict=False)
        ):
            raise ValueError(
                "the history has changed since that compaction other than by appending; "
                "it cannot be undone"
            )
        undo_micro(list(result.truncations))  # the results truncated in that same call
        _replace_all(messages, [*result.replaced, *current[len(rebuilt) :]])
        return True

    def _count_list(self, messages: list[Message]) -> int:
        return self._count(messages)

    def _with_pins(self, plan: Plan, summary: str, force: bool) -> str | None:
        """The summary with its pinned facts, or ``None`` when even without them it
        would make the history bigger (not forced). Pinned facts that alone would
        make it bigger are left out."""
        pinned = summary + self._pinned(plan, summary)
        if pinned is not summary and not self._inflated(plan, pinned, force, quiet=True):
            return pinned
        if pinned is not summary:
            logger.info("pinned facts left out: they would make the history bigger")
        return None if self._inflated(plan, summary, force) else summary

    def _added(self, plan: Plan, summary: str) -> list[Message]:
        """What the rebuild puts in place of the source: the summary message, and the
        acknowledgement unless a kept assistant turn follows it."""
        added: list[Message] = [{"role": "user", "content": SUMMARY_PREFIX + summary}]
        kept = [
            m
            for m in plan.snapshot[plan.tail_start : plan.head_end]
            if not dialects.is_system(m)
        ]
        if not kept or dialects.kind(kept[0]) is not dialects.Kind.ASSISTANT:
            added.append({"role": "assistant", "content": self.acknowledgement})
        return added

    def _inflated(self, plan: Plan, summary: str, force: bool, quiet: bool = False) -> bool:
        """What replaces the source (the summary, and the acknowledgement) being
        longer than the source makes the history bigger: refused, unless the call
        was forced (then kept, with a warning)."""
        summary_size = self._count(self._added(plan, summary))
        source_size = plan.source_tokens
        if summary_size <= source_size:
            return False
        if force:
            if not quiet:
                logger.warning(
                    "the summary (%d tokens) is longer than what it replaces (%d tokens); "
                    "kept because the compaction was forced",
                    summary_size,
                    source_size,
                )
            return False
        if not quiet:
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
        self,
        tokens: int,
        truncated: int,
        saved: bool,
        reason: Reason,
        *,
        summary_calls: int = 0,
        parts: int = 0,
    ) -> CompactionResult:
        """A failed full compaction, which also starts (or extends) the back-off."""
        self._failures += 1
        self._failed_tokens = tokens
        self._retry_at = self._calls + min(2 ** (self._failures - 1), BACKOFF_CAP) + 1
        return CompactionResult(
            Action.FAILED, tokens, tokens, truncated, saved, reason, summary_calls, parts
        )

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
        if self.keep_tail_tokens:
            start = verbatim_tail_start(
                head, start, self.keep_tail_tokens, lambda m: self._count([m])
            )

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
        source_tokens = self._count(source)
        try:
            systems = [json_copy(m) for m in head if dialects.is_system(m)]
            prompt: list[Message] | None = None
            if source_tokens <= self.summary_input_tokens:
                # Only a source that may fit is rendered whole: a larger one is
                # rendered a part at a time, never as one transcript.
                transcript = _serialize(source)
                if self.rolling_summaries and _is_own_output(source[0], self.acknowledgement):
                    # A previous summary opens the source: say so (the lead-in line).
                    transcript = LANGUAGES[self.language].rolling_lead_in + transcript
                prompt = [
                    {"role": "system", "content": self.system_prompt},
                    {"role": "user", "content": transcript},
                ]
        except ValueError:
            logger.warning("compaction skipped: history cannot be encoded", exc_info=True)
            return self._failure(tokens, truncated, False, Reason.NOT_ENCODABLE)
        return Plan(
            snapshot, head_end, start, systems, source, source_tokens, self.system_prompt, prompt
        )

    def _rebuild(
        self, messages: MutableSequence[Any], plan: Plan, summary: str
    ) -> list[Message] | None:
        """Step 8, in place: systems, summary, acknowledgement (unless a kept assistant
        turn follows), kept tail, pending turn, and whatever arrived meanwhile.

        Messages appended while the summary was made (by another thread or task,
        or the provider itself) are kept after the pending turn, and system
        messages are copied as they are now. Returns the rebuilt messages (without
        those that arrived); ``None``, with nothing rebuilt, if the list was
        changed other than by appending.
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
            return None
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
        _replace_all(messages, [*rebuilt, *current[len(snapshot) :]])
        return rebuilt

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

