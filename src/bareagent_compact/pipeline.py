"""The compaction steps of SPEC 11.2, written once for the sync and async compactors.

The steps never call the provider, the transcript manager or the archive hook
themselves: they *yield* what they need done (an :class:`ArchiveRequest`, a
:class:`HookRequest`, a :class:`SaveRequest`, a :class:`SummaryRequest`) and
receive an :class:`Outcome`, so :class:`~bareagent_compact.Compactor` runs them
with plain calls and :class:`~bareagent_compact.AsyncCompactor` with ``await``.
Every decision (what to truncate, what a failed archive means, when to fire,
what to summarise, what to keep, how to rebuild) is made here, in named steps:
micro, plan, consult, snapshot, summarize, check, rebuild (in
:mod:`bareagent_compact.rebuild`), commit.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Generator, Iterable, Iterator, MutableSequence, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Final, Generic, TypeVar, cast, overload

from bareagent_compact import dialects
from bareagent_compact.anchor import ReportedCount
from bareagent_compact.background import Pending, frozen, starts_early
from bareagent_compact.facts import DEFAULT_PIN_FACTS_TOKENS, extract, pinned_block
from bareagent_compact.history import HistoryCache
from bareagent_compact.ledger import UsageLedger
from bareagent_compact.micro import (
    MICRO_SPEC,
    Due,
    MicroOptions,
    MicroScan,
    Undo,
    apply_micro,
    changes_prefix,
    freed_tokens,
    plan_micro,
    plan_plain_micro,
    select_micro,
    undo_micro,
)
from bareagent_compact.options import DEFAULT_LANGUAGE, Options
from bareagent_compact.oversize import DEFAULT_MAX_MESSAGE_TOKENS, OversizeScan, cut_handles
from bareagent_compact.plain import plain_messages, plain_view
from bareagent_compact.prompts import DEFAULT_THRESHOLD
from bareagent_compact.protocols import (
    AfterCompactHook,
    ArchiveHook,
    ArchiveRecord,
    BeforeCompactHook,
    Message,
    ServerSummary,
    SessionIdChecker,
    TokenCounter,
    TranscriptManager,
    is_server_summariser,
)
from bareagent_compact.providers import adapter_hint, response_text
from bareagent_compact.rebuild import (
    Plan,
    appended_only,
    is_own_output,
    rebuild,
    replace_all,
    replacement,
    spec_prompt,
    split_history,
    summary_block,
    system_copies,
    warn_about,
)
from bareagent_compact.recall import (
    DEFAULT_RECALL_LIMIT,
    HANDLE_KEY,
    Handles,
    answer_recall,
    archive_reader,
    check_span,
    read_original,
    with_handles,
)
from bareagent_compact.requests import (
    ArchiveRequest,
    CollectRequest,
    HookRequest,
    Outcome,
    Queued,
    Request,
    SaveRequest,
    StartRequest,
    Steps,
    WaitRequest,
    archive_behind,
    close_awaitable,
    is_async_callable,
)
from bareagent_compact.result import Action, CompactionEvent, CompactionResult, Reason
from bareagent_compact.server_summary import live_prefix, summarize_on_server
from bareagent_compact.summarize import (
    DEFAULT_SUMMARY_INPUT_TOKENS,
    Summarized,
    SummaryRequest,
    summarize_source,
)
from bareagent_compact.thinking import clear_thinking
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.trigger import BACKOFF_CAP, GROWTH_RETRY, STILL_OVER_GROWTH, Trigger
from bareagent_compact.usage import input_tokens_of
from bareagent_compact.validate import check_name, validate_messages

__all__ = [
    "BACKOFF_CAP",
    "GROWTH_RETRY",
    "STILL_OVER_GROWTH",
    "ArchiveRequest",
    "CollectRequest",
    "CompactorBase",
    "HookRequest",
    "Outcome",
    "Plan",
    "Request",
    "SaveRequest",
    "StartRequest",
    "Steps",
    "SummaryRequest",
    "close_awaitable",
    "is_async_callable",
    "summary_text",
]

logger = logging.getLogger("bareagent_compact.compactor")

_DICTS: Final = frozenset((dict,))


def summary_text(response: object) -> str | None:
    """Normalise a provider's answer to the summary text, or ``None`` when unusable.

    Usable: a ``str``, an object whose ``text`` attribute is a ``str``, or an SDK
    response returned as it is (an Anthropic ``Message``, an OpenAI
    ``ChatCompletion`` or ``Response``, or their dicts; read as the provider
    adapters read them), holding something other than whitespace.
    """
    text = response if isinstance(response, str) else getattr(response, "text", None)
    if not isinstance(text, str):
        text = response_text(response)
    if not isinstance(text, str) or not text.strip():
        return None
    return text


def _check_session_id(session_id: object) -> str:
    return check_name("session_id", session_id)


def _session_id_checkers(options: Options) -> Iterator[SessionIdChecker]:
    """The transcript manager and the archive hook's owner, when they check ids."""
    for owner in (options.transcript_mgr, getattr(options.archive, "__self__", None)):
        if callable(getattr(owner, "check_session_id", None)):
            yield cast(SessionIdChecker, owner)


_LEFT_AS_IT_WAS: Final = "history left as it was"
_LEFT_AS_MICRO_LEFT_IT: Final = "history left as micro-compaction left it"


def _left_as(truncated: int) -> str:
    """How a failed full compaction leaves the history, for a log line: unchanged,
    unless micro-compaction truncated results in the same call."""
    return _LEFT_AS_MICRO_LEFT_IT if truncated else _LEFT_AS_IT_WAS


def _read_summary(answer: Outcome, truncated: int = 0) -> tuple[str | None, Reason | None]:
    """The summary text of a provider's answer, or ``None`` and why not (logged);
    ``truncated``: results micro-compaction truncated in the same call."""
    left = _left_as(truncated)
    if answer.failed:
        logger.warning(
            "summary provider failed%s; %s",
            answer.because(),
            left,
            exc_info=answer.error,
        )
        return None, Reason.PROVIDER_RAISED if answer.reason is None else Reason.PROVIDER_AWAITABLE
    try:
        summary = summary_text(answer.value)
    except Exception:
        logger.warning("reading the summary failed; %s", left, exc_info=True)
        return None, Reason.PROVIDER_RAISED
    if summary is None:
        logger.warning(
            "summary provider returned an unusable summary (%s%s); %s",
            type(answer.value).__name__,
            adapter_hint(answer.value),
            left,
        )
        return None, Reason.UNUSABLE_SUMMARY
    return summary, None


def _archived(outcome: Outcome, kept: str = "tool result kept untruncated") -> bool:
    """Whether the archive hook took a record; a failure keeps the result whole."""
    if outcome.failed:
        logger.warning(
            "archive hook failed%s; %s",
            outcome.because(),
            kept,
            exc_info=outcome.error,
        )
        return False
    return True


def _waits(records: list[ArchiveRecord], force: bool, behind: bool) -> bool:
    """Whether to archive ``records`` and wait for them: a forced call, an archive
    that does not write behind (any more), or a record without a handle (its
    content cannot be encoded; it could not be found again by a later call)."""
    return force or not behind or any(HANDLE_KEY not in record for record in records)


def _not_undoable(current: list[Any], result: CompactionResult) -> str:
    """Why ``result`` cannot be undone on the history ``current``."""
    if appended_only(current, result.replaced):
        return "that compaction was already undone"
    return (
        "the history is not the one that compaction made (another list, or changed "
        "since other than by appending, e.g. by a later compaction); it cannot be undone"
    )


@dataclass(slots=True)
class _Attempt:
    """The running facts of one full-compaction attempt."""

    force: bool
    tokens: int
    truncated: int
    saved: bool = False
    calls: int = 0
    parts: int = 0
    summary: str | None = None

    def quiet(self, reason: Reason | None = None) -> CompactionResult:
        """No full compaction: what micro-compaction did, and why not."""
        action = Action.MICRO if self.truncated else Action.NONE
        return CompactionResult(action, self.tokens, self.tokens, self.truncated, reason=reason)


ProviderT = TypeVar("ProviderT")
"""The provider type a driver accepts: sync only, or sync or async."""

ReadT = TypeVar("ReadT")
WriteT = TypeVar("WriteT")


class _Option(Generic[ReadT, WriteT]):
    """A compactor attribute backed by its :class:`Options`: reading gives the
    option (or, ``derived``, its resolved value); assigning re-validates and
    re-derives everything, as the constructor does."""

    __slots__ = ("derived", "name")

    def __init__(self, *, derived: bool = False) -> None:
        self.derived = derived
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> _Option[ReadT, WriteT]: ...

    @overload
    def __get__(self, obj: CompactorBase[Any], owner: type) -> ReadT: ...

    def __get__(self, obj: CompactorBase[Any] | None, owner: type) -> Any:
        if obj is None:
            return self
        options = obj._options
        return getattr(options.derived if self.derived else options, self.name)

    def __set__(self, obj: CompactorBase[Any], value: WriteT) -> None:
        obj._configure(**{self.name: value})


class CompactorBase(Generic[ProviderT]):
    """The options, checks and compaction steps shared by both compactors.

    Subclasses are drivers: they run :meth:`_steps` and answer its requests.
    """

    transcript_mgr = _Option[TranscriptManager | None, TranscriptManager | None]()
    threshold = _Option[int, int]()
    keep_recent = _Option[int, int | None](derived=True)
    system_prompt = _Option[str, str | None](derived=True)
    acknowledgement = _Option[str, str | None](derived=True)
    token_counter = _Option[TokenCounter, TokenCounter | None](derived=True)
    keep_tool_pairs = _Option[bool, bool]()
    archive = _Option[ArchiveHook | None, ArchiveHook | None]()
    require_snapshot = _Option[bool, bool]()
    summary_input_tokens = _Option[int, int]()
    language = _Option[str, str]()
    instructions = _Option[str | None, str | None]()
    rolling_summaries = _Option[bool, bool]()
    pin_facts = _Option[bool, bool]()
    pin_facts_tokens = _Option[int, int](derived=True)
    keep_tail_tokens = _Option[int, int]()
    before_compact = _Option[BeforeCompactHook | None, BeforeCompactHook | None]()
    after_compact = _Option[AfterCompactHook | None, AfterCompactHook | None]()
    micro = _Option[str, str]()
    micro_min_chars = _Option[int | None, int | None]()
    exclude_tools = _Option[frozenset[str] | None, Any]()
    clear_at_least = _Option[int | None, int | None]()
    max_message_tokens = _Option[int | None, int | None](derived=True)
    background_at = _Option[float | None, float | None]()
    prune_before_server_compaction = _Option[bool, bool]()
    clear_thinking_after_turns = _Option[int | None, int | None]()

    last_result: CompactionResult | None = None
    """The result of the latest call, whatever it did (``None`` before the first).
    It is set before ``after_compact`` runs, so a full compaction interrupted or
    cancelled in that hook can still be undone: ``undo(messages, last_result)``."""

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
        language: str = DEFAULT_LANGUAGE,
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
        max_message_tokens: int | None = DEFAULT_MAX_MESSAGE_TOKENS,
        background_at: float | None = None,
        prune_before_server_compaction: bool = False,
        clear_thinking_after_turns: int | None = None,
    ) -> None:
        # Every option is checked and everything derived from them computed by
        # Options; keep_recent, micro_min_chars and clear_at_least left as None
        # take the values of the ``micro`` preset (the specification's: 3, off, 0).
        self._options = Options(  # the same order as the signature, session_id aside
            provider, transcript_mgr, threshold, keep_recent, system_prompt,
            acknowledgement, token_counter, keep_tool_pairs, archive, require_snapshot,
            summary_input_tokens, language, instructions, rolling_summaries, pin_facts,
            pin_facts_tokens, keep_tail_tokens, before_compact, after_compact, micro,
            micro_min_chars, exclude_tools, clear_at_least, max_message_tokens,
            background_at, prune_before_server_compaction, clear_thinking_after_turns,
        )  # fmt: skip
        self._ledger: UsageLedger | None = None
        self._anchor = ReportedCount()
        self._reset_counting()
        self._trigger = Trigger()  # the failure back-off and the wait when still over
        self._pending: Pending[_Attempt] | None = None  # a summary made in the background
        self._oversize = OversizeScan()  # how far the history is checked for oversize texts
        self._server_scan = dialects.ServerScan()  # where the part the server reads begins
        self._history = HistoryCache()  # copies of the last history seen, and weights
        self._micro_scan = MicroScan()  # how far no result is due for truncation
        self._handles: Handles = {}  # the recall handles of the last plan
        self._behind: dict[str, Queued] = {}  # records with the archive's writer, by handle
        self._kept_whole: list[tuple[Due, Queued]] = []  # this call's, for the writer
        self._idle = False  # a call on the history as the cache holds it would change nothing
        self._touched = False  # whether this call planned a change of the history
        self._synced = False  # whether the cache holds the history as it is now
        self._edited_from = 0  # this call changed nothing before this index
        self._changes: list[int] | None = None  # what this call found new or edited
        self._session_id = self._checked_session_id(session_id)
        self._check_plugins(self._options)
        self._setup()

    def _setup(self) -> None:
        """What a driver prepares once its options are set."""

    def _check_plugins(self, options: Options) -> None:
        """What a driver refuses in ``options`` beyond the common checks."""

    def _configure(self, **changes: Any) -> None:
        """Change options: build, check and derive a new :class:`Options`."""
        options = replace(self._options, **changes)
        for checker in _session_id_checkers(options):
            checker.check_session_id(self._session_id)
        self._check_plugins(options)
        custom = self._options.derived.custom_counter
        if options.archive != self._options.archive:
            self._behind.clear()  # another archive: what the old one writes is not read
        self._options = options
        self._idle = False
        self._rescan()  # read every message again under the new options
        if options.derived.custom_counter != custom:
            self._reset_counting()

    def _reset_counting(self) -> None:
        """Without a counter of the caller's, the history's count is anchored on the
        usage the API reports (the ledger); with one, on the last report only."""
        custom = self._options.derived.custom_counter
        self._ledger = None if custom else UsageLedger()
        self._anchor.forget()

    @property
    def provider(self) -> ProviderT:
        """The summarising model."""
        return cast(ProviderT, self._options.provider)

    @provider.setter
    def provider(self, value: ProviderT) -> None:
        self._configure(provider=value)

    @property
    def micro_options(self) -> MicroOptions:
        """The micro-compaction policy resolved from ``micro`` and its options."""
        return self._options.derived.micro_options

    @property
    def options(self) -> Options:
        """The compactor's options as one frozen value."""
        return self._options

    def _checked_session_id(self, session_id: object) -> str:
        """A non-empty ``str``, also acceptable to the transcript manager (and to the
        archive hook's owner) when they can say (:class:`SessionIdChecker`), so a
        bad id fails now rather than every turn."""
        checked = _check_session_id(session_id)
        for checker in _session_id_checkers(self._options):
            checker.check_session_id(checked)
        return checked

    def get_session_id(self) -> str:
        """The session id under which snapshots are saved."""
        return self._session_id

    @staticmethod
    def _check_force(force: object) -> bool:
        if not isinstance(force, bool):
            raise TypeError(f"force must be a bool, got {type(force).__name__}")
        return force

    @staticmethod
    def _check_instructions(instructions: object) -> str | None:
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError(f"instructions must be a str, got {type(instructions).__name__}")
        return instructions

    # ----------------------------------------------------------------- counting

    def _count(self, messages: MutableSequence[Any]) -> int:
        """The token count of what the server reads of ``messages`` (past its own
        compaction, see :func:`~bareagent_compact.dialects.live_view`)."""
        return self._count_read(dialects.live_view(messages))

    def _count_read(self, read: Sequence[Any]) -> int:
        """The token count of ``read`` as it is; a failing or malformed counter falls
        back to the built-in estimate, with a warning."""
        try:
            tokens = self._options.derived.token_counter(read)  # type: ignore[arg-type]
        except Exception:
            logger.warning("token_counter failed; using the built-in estimate", exc_info=True)
            return estimate_tokens(list(read))
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            logger.warning(
                "token_counter returned %s, not an int >= 0; using the built-in estimate",
                type(tokens).__name__ if not isinstance(tokens, int) else tokens,
            )
            return estimate_tokens(list(read))
        return tokens

    def _count_list(self, messages: list[Message]) -> int:
        return self._count(messages)

    def _in_sync(self, messages: MutableSequence[Any]) -> bool:
        """Whether the history cache holds ``messages`` as they are now (brought up
        to date if this call changed them, comparing only from where it did)."""
        if not self._synced:
            self._synced = self._history.sync(messages, self._edited_from) is not None
        return self._synced

    def _edited(self, index: int, messages: MutableSequence[Any]) -> None:
        """This call changed ``messages`` from ``index`` on: the cache must look again."""
        self._synced = False
        self._edited_from = min(self._edited_from, index)

    def _reread(self, messages: MutableSequence[Any]) -> None:
        """A plug-in has just run (or, while it was awaited, another task): if it
        changed the history, what this call learnt of the history no longer holds,
        and the scans and the cache read it all again."""
        if self._synced and self._history.sync(messages) == []:
            return
        self._edited(0, messages)
        self._changes = None
        self._rescan()

    def _rescan(self) -> None:
        """The micro-compaction and oversize scans read the whole history next time."""
        self._micro_scan.reset()
        self._oversize = OversizeScan()

    def _live(self, messages: MutableSequence[Any]) -> Sequence[Any]:
        """What the server reads of the history, found reading only appended messages."""
        return dialects.live_view(messages, self._server_scan.index(messages))

    def _count_history(self, messages: MutableSequence[Any], cached: bool = True) -> int:
        """The count of the whole history, the one the trigger compares (``cached``:
        with the history cache's weights, brought up to date if needed)."""
        live = self._live(messages)
        ledger = self._ledger
        if ledger is None:
            return self._anchor.count(live, self._count_read)
        synced = live is messages and cached and self._in_sync(messages)
        if not ledger.reported and synced:
            return self._history.tokens(messages)  # the estimate, weighing what is new
        return ledger.count(list(live), self._history.copies if synced else None)

    def record_usage(self, messages: Sequence[Any], usage: object) -> None:
        """Anchor the count on what the API reported for a request carrying ``messages``.

        Call it right after each model call, with the list exactly as it was sent
        (before the reply is appended). ``usage`` is the response's usage object or
        dict (Anthropic, OpenAI Chat or Responses) or the full input size as an
        ``int`` (see :func:`~bareagent_compact.input_tokens_of`). With a
        ``token_counter`` of the caller's, the count is the reported size plus the
        counter's count of the messages appended since, while those messages still
        open the history unedited; otherwise the counter counts the whole history.
        """
        tokens = input_tokens_of(usage)
        if self._ledger is None:
            self._anchor.record(dialects.live_view(messages), tokens)
            return
        view: Any = messages
        index = self._server_scan.index(messages) if isinstance(messages, list) else None
        if not (isinstance(view, list) and _DICTS.issuperset(map(type, view))):
            view = plain_view(messages)  # SDK objects read as dicts, the list unchanged
        live = list(dialects.live_view(view, index))
        copies = self._history.copies
        # The history as the last call left it: the ledger shares the cache's copies.
        shared = copies if index is not None and index <= 0 and live == copies else None
        self._ledger.record(live, tokens, shared)
        if not self._options.derived.micro_options.is_spec:
            self._idle = False  # what is cleared depends on the count

    # -------------------------------------------------------------------- steps

    def _steps(
        self, messages: MutableSequence[Any], force: bool, instructions: str | None = None
    ) -> Steps:
        """One compaction step on ``messages`` in place (SPEC 11.2 steps 1-8)."""
        changed = self._changed(messages)
        repeat = not force and instructions is None and self._pending is None
        quiet = self._idle_result(messages) if repeat and changed == [] else None
        if quiet is not None:
            return quiet
        self._idle = False
        self._touched = False
        pruned, cleared = yield from self._prune_and_clear(messages)
        self._trust_scan(messages, changed if self._synced else None)
        undo = yield from self._micro(messages, force)
        try:
            yield from self._cut(messages, undo)
            tokens = yield from self._catch_up(messages, undo)
            prefix_changed = changes_prefix(messages, undo)
            result = yield from self._full(messages, force, len(undo), instructions, tokens)
        except GeneratorExit:
            # The driver gave up (cancelled or interrupted) during a request: the
            # history goes back exactly as it was, and what was cut is looked at again.
            undo_micro(undo)
            self._rescan()
            raise
        result = _reported(result, undo, prefix_changed, pruned, cleared)
        self._finish(messages, result, repeat and not (pruned or cleared))
        return result

    def _prune_and_clear(
        self, messages: MutableSequence[Any]
    ) -> Generator[Request, Any, tuple[int, int]]:
        """Drop the part before the server's compaction and clear old thinking, as
        configured; not while a background summary is pending (its swap needs the
        history as it was, only appended to)."""
        if self._pending is not None:
            return 0, 0
        pruned = yield from self._prune(messages)
        cleared = self._clear_thinking(messages)
        if pruned or cleared:
            self._edited(0, messages)
        return pruned, cleared

    def _finish(
        self, messages: MutableSequence[Any], result: CompactionResult, repeat: bool
    ) -> None:
        """Leave the history cache holding the history as this call leaves it (what
        the micro scan and the tool names learnt hold for that history, not the one
        the call began with), and note whether a call on it would change nothing."""
        if result.action is Action.FULL:
            self._edited(0, messages)
        in_sync = self._in_sync(messages)
        if repeat:
            self._idle = in_sync and self._leaves_nothing(result)

    def _changed(self, messages: MutableSequence[Any]) -> list[int] | None:
        """Validate ``messages`` and compare them with the history cache: the indices
        of the messages new or edited since the last call, ``None`` if unknown.

        Only those are validated. SDK objects are converted here (as step 1 would)
        so that the cache can compare them; nothing held yet: the history is copied
        once, after this call's edits.
        """
        history = self._history
        changed = None if history.empty else history.sync(messages)
        try:
            validate_messages(messages, objects=True, only=changed)
        except TypeError:
            history.forget()
            raise
        if changed is None and not history.empty and isinstance(messages, list):
            plain_messages(messages)
            changed = history.sync(messages)
        self._synced = changed is not None
        self._edited_from = len(messages) if self._synced else 0
        return changed

    def _trust_scan(self, messages: MutableSequence[Any], changed: list[int] | None) -> None:
        """Let micro-compaction and the oversize scan read only past what they know,
        when the history before that is unchanged (``changed``: what the cache saw
        change, ``None``: unknown)."""
        self._changes = changed
        scan = self._micro_scan
        scan.trusted = changed is not None and (not changed or changed[0] >= scan.clean)
        scan.names = partial(self._history.tool_names, messages) if changed is not None else None

    def _leaves_nothing(self, result: CompactionResult) -> bool:
        """Whether this call left nothing to do on its history: below every limit,
        and nothing planned, or (the specification's policy) every planned
        truncation made."""
        options = self._options
        return (
            not self._touched
            and self._micro_scan.whole
            and result.action in (Action.NONE, Action.MICRO)
            and result.reason is None
            and self._pending is None
            and not options.derived.custom_counter
        )

    def _idle_result(self, messages: MutableSequence[Any]) -> CompactionResult | None:
        """The result of a call on a history left as the last call left it, when that
        call left nothing to do: only the count can differ (a usage report). ``None``
        unless so, and the count is below every limit."""
        if not self._idle:
            return None
        tokens = self._count_history(messages)
        if self._may_fire(tokens):
            return None
        self._trigger.calls += 1
        return CompactionResult(Action.NONE, tokens, tokens, 0)

    def _prune(self, messages: MutableSequence[Any]) -> Generator[Request, Any, int]:
        """Drop what comes before the newest server compaction artefact (system
        messages aside), after saving the whole list when there is a transcript
        manager (``prune_before_server_compaction``); how many were dropped."""
        options = self._options
        if not options.prune_before_server_compaction:
            return 0
        plain_messages(messages)
        dead = dialects.dead_indices(messages)
        if not dead:
            return 0
        if options.transcript_mgr is not None:
            saved: Outcome = yield SaveRequest(list(messages), self._session_id)
            self._reread(messages)
            if saved.failed and options.require_snapshot:
                logger.warning(
                    "messages before the server's compaction kept: snapshot failed for "
                    "session %r%s",
                    self._session_id,
                    saved.because(),
                    exc_info=saved.error,
                )
                self._touched = True  # the next call tries again
                return 0
        for index in reversed(dead):
            del messages[index]
        self._anchor.forget()
        return len(dead)

    def _clear_thinking(self, messages: MutableSequence[Any]) -> int:
        """Clear old thinking blocks and reasoning items (``clear_thinking_after_turns``)."""
        keep_turns = self._options.clear_thinking_after_turns
        if keep_turns is None:
            return 0
        plain_messages(messages)
        cleared = clear_thinking(messages, keep_turns)
        if cleared:
            self._anchor.forget()
        return cleared

    def _micro(self, messages: MutableSequence[Any], force: bool) -> Generator[Request, Any, Undo]:
        """Step 1: micro-compaction, always. Its scan also notices SDK objects, which
        are converted once, in place, before anything else reads them."""
        options = self._options
        keep_recent = options.derived.keep_recent
        scan = self._micro_scan
        cached = not self._history.empty  # else copied once, at the end of the call
        self._kept_whole = []
        planned = plan_micro(messages, keep_recent, scan)
        if planned is None:
            scan.reset()
            plain_messages(messages)
            validate_messages(messages)
            planned = plan_plain_micro(messages, keep_recent)
        planned = with_handles(planned, self._session_id, options.archive, self._handles)
        due = len(planned)
        policy = options.derived.micro_options
        if planned and not policy.is_spec:
            # Over the threshold (or forced) everything eligible is cleared before
            # the full compaction is decided on.
            planned = select_micro(
                planned,
                policy,
                lambda: force or self._count_history(messages, cached) > self.threshold,
            )
        if not planned:
            scan.settle(not due)
            return []
        keep = None
        if options.archive is not None:
            keep = yield from self._archive_due(planned, force)
            self._reread(messages)
        undo = apply_micro(planned, keep)
        if undo:
            self._anchor.forget()  # the reported size no longer fits the edited messages
            # Only results past where the scan began: the messages before it hold
            # none that is due (so no block shared with one truncated here either).
            self._edited(scan.read_from, messages)
        scan.settle(len(undo) == due)
        if len(undo) < due:
            self._touched = True  # a call again might truncate more
        return undo

    def _archive_due(self, planned: list[Due], force: bool) -> Generator[Request, Any, list[bool]]:
        """Which planned results may be truncated now: those whose record is durably
        archived. An archive that writes behind (a store opened with
        ``write_behind=True``) gets the records handed to its writer, and their
        results stay whole until the writer has written them (see
        :meth:`_write_behind`)."""
        behind = archive_behind(self._options.archive) is not None
        if behind or self._behind:
            return (yield from self._write_behind(planned, force, behind))
        outcomes = yield ArchiveRequest(self._archive_records(planned))
        return [_archived(outcome) for outcome in outcomes]

    def _write_behind(
        self, planned: list[Due], force: bool, behind: bool
    ) -> Generator[Request, Any, list[bool]]:
        """Truncate what the writer made durable since an earlier call, and hand it
        the new records; their results stay whole (held for :meth:`_catch_up`). A
        forced call waits for the writer. A record the writer failed on is warned
        about and handed over again; one without a handle (its content cannot be
        encoded) is archived and waited for, as without write-behind (and so is
        every record once the archive no longer writes behind: not ``behind``)."""
        queued = [self._behind.get(due.record.get(HANDLE_KEY, "")) for due in planned]
        waiting = [held.ticket for held in queued if held is not None]
        if force and waiting:
            yield WaitRequest(waiting)
        keep, fresh = self._written(planned, queued)
        if fresh:
            records = self._archive_records([planned[position] for position in fresh])
            outcomes = yield ArchiveRequest(records, _waits(records, force, behind))
            for position, outcome in zip(fresh, outcomes, strict=True):
                keep[position] = self._durable(planned[position], outcome)
        self._forget_written(planned)
        return keep

    def _written(
        self, planned: list[Due], queued: list[Queued | None]
    ) -> tuple[list[bool], list[int]]:
        """Which planned results the writer made durable, and the positions of those
        to hand over (new, or failed: warned about and handed over again)."""
        keep = [False] * len(planned)
        fresh: list[int] = []
        for position, held in enumerate(queued):
            settled = None if held is None else held.settled()
            if held is not None and settled is None:
                self._kept_whole.append((planned[position], held))
            if settled is not None:
                self._behind.pop(planned[position].record[HANDLE_KEY], None)
                keep[position] = _archived(settled)
            if held is None or (settled is not None and not keep[position]):
                fresh.append(position)
        return keep, fresh

    def _durable(self, due: Due, outcome: Outcome) -> bool:
        """Whether the record of ``due`` is durable now; one just handed to the writer
        is not yet (not even asked: the writer is starting on it), and is
        remembered by its handle until a later look finds it written."""
        value = outcome.value
        if not outcome.failed and isinstance(value, Queued):
            self._behind[due.record[HANDLE_KEY]] = value
            self._kept_whole.append((due, value))
            return False
        return _archived(outcome)

    def _forget_written(self, planned: list[Due]) -> None:
        """Drop the writer's records done with and no longer planned (their results
        were replaced or removed meanwhile)."""
        behind = self._behind
        if not behind:
            return
        current = {due.record.get(HANDLE_KEY) for due in planned}
        for handle in [h for h, q in behind.items() if h not in current and q.ticket.done()]:
            del behind[handle]

    def _catch_up(self, messages: MutableSequence[Any], undo: Undo) -> Generator[Request, Any, int]:
        """Step 1, last, then the count of the history for the trigger: when this
        call left results whole for the writer and may fire a full compaction (over
        the threshold, or the background watermark), wait for the writer and
        truncate those now durable (adding to ``undo``), so that the compaction
        sees the history it would see without write-behind."""
        held, self._kept_whole = self._kept_whole, []
        tokens = self._count_history(messages)
        if not held or not self._may_fire(tokens):
            return tokens
        yield WaitRequest([queued.ticket for _, queued in held])
        keep = []
        for due, queued in held:
            self._behind.pop(due.record[HANDLE_KEY], None)
            keep.append(_archived(queued.settled() or Outcome(reason="not written")))
        done = apply_micro([due for due, _ in held], keep)
        if not done:
            return tokens
        undo += done
        self._anchor.forget()
        self._edited(0, messages)
        return self._count_history(messages)

    def _may_fire(self, tokens: int) -> bool:
        """Whether a call at ``tokens`` may start a full compaction (or a background
        summary)."""
        options = self._options
        watermark = None if self._pending is not None else options.derived.background_tokens
        return tokens > options.threshold or starts_early(
            tokens, options.threshold, watermark, False
        )

    def _cut(self, messages: MutableSequence[Any], undo: Undo) -> Generator[Request, Any, None]:
        """Step 1, continued: cut each text over ``max_message_tokens`` to its head and
        tail (see :mod:`~bareagent_compact.oversize`), adding to ``undo``."""
        options = self._options
        handles = cut_handles(self._session_id, options.archive)  # recall handles
        if self._changes is None:
            self._oversize = OversizeScan()  # what changed is not known: read it all
        planned = self._oversize.plan(
            messages, options.derived.max_message_tokens, handles, self._changes
        )
        if not planned:
            return
        self._touched = True
        keep = yield from self._may_cut(messages, planned)
        self._oversize.settle(messages, keep)
        if options.archive is not None or options.transcript_mgr is not None:
            self._reread(messages)  # _may_cut asked one of them
        if keep is not None and not any(keep):
            return
        cut = apply_micro(planned, keep)
        self._edited(0, messages)
        logger.info("cut %d oversize text(s) to their head and tail", len(cut))
        undo += cut
        self._anchor.forget()

    def _may_cut(
        self, messages: MutableSequence[Any], planned: Sequence[Due]
    ) -> Generator[Request, Any, list[bool] | None]:
        """Which planned texts may be cut: those the archive hook took; without one,
        all once a snapshot is saved (or not required); with neither, all (``None``)."""
        options = self._options
        if options.archive is not None:
            outcomes = yield ArchiveRequest(self._archive_records(planned))
            return [_archived(outcome, "oversize text kept whole") for outcome in outcomes]
        if options.transcript_mgr is None:
            return None
        saved: Outcome = yield SaveRequest(list(messages), self._session_id)
        if saved.failed:
            logger.warning(
                "transcript snapshot before cutting an oversize text failed%s",
                saved.because(),
                exc_info=saved.error,
            )
        return [not saved.failed or not options.require_snapshot] * len(planned)

    def _archive_records(self, planned: Sequence[Due]) -> list[ArchiveRecord]:
        session_id = self._session_id
        return [{**due.record, "session_id": session_id} for due in planned]

    def _full(
        self,
        messages: MutableSequence[Any],
        force: bool,
        truncated: int,
        instructions: str | None,
        tokens: int,
    ) -> Steps:
        """Steps 2-8: plan, consult the hook, snapshot, summarize, check, rebuild, commit;
        ``tokens``: the history's count."""
        attempt = _Attempt(force, tokens, truncated)
        self._trigger.calls += 1
        if self._pending is not None:
            swapped = yield from self._swap(messages, attempt)
            if swapped is not None:
                return swapped
        elif self._starts_early(attempt):
            return (yield from self._start(messages, attempt, instructions))
        plan = self._plan(messages, attempt, self._options.threshold)
        if isinstance(plan, CompactionResult):
            return plan
        held = None if force else self._held(plan, attempt.tokens)
        if held is not None:
            return attempt.quiet(held)
        plan = yield from self._consult(plan, attempt, instructions)
        if isinstance(plan, CompactionResult):
            return plan
        if not (yield from self._snapshot(plan, attempt)):
            return self._failure(attempt, Reason.SNAPSHOT_FAILED)
        done = yield from self._summarize(plan, truncated)
        attempt.calls, attempt.parts = done.calls, done.parts
        result = self._conclude(messages, plan, attempt, done)
        yield from self._after(result, attempt.summary if result.action is Action.FULL else None)
        return result

    def _plan(
        self, messages: MutableSequence[Any], attempt: _Attempt, limit: int
    ) -> Plan | CompactionResult:
        """Steps 2-4: fire or not, and if so what is summarised, kept and sent;
        ``limit`` is the threshold (or the background watermark)."""
        options = self._options
        # Step 2: the trigger; strictly greater than the threshold.
        if not attempt.force and attempt.tokens <= limit:
            return attempt.quiet()
        # Step 3: the pending turn (user input, or tool results) is kept out.
        snapshot, head_end, start = split_history(messages, options, self._count_list)
        head = snapshot[:head_end]
        # A server compaction artefact and all before it stay in place: only the
        # live part after it is summarised.
        fixed = min(dialects.fixed_end(snapshot), start)
        # Step 4: the summary source excludes system messages.
        source = [m for m in head[fixed:start] if not dialects.is_system(m)]
        if not source:
            return attempt.quiet(Reason.NOTHING_TO_SUMMARISE)
        acknowledgement = options.derived.acknowledgement
        if not attempt.force and all(is_own_output(m, acknowledgement) for m in source):
            # Only the previous summary is left: summarising it again every turn
            # would cost a model call and shrink nothing that matters.
            self._trigger.tell(
                logging.WARNING,
                "history is over the threshold but holds nothing new to summarise "
                "(the pending message itself is large)",
            )
            return attempt.quiet(Reason.NOTHING_NEW)
        # The prompt and the system messages' copies are made before anything is
        # sent, so that an unencodable history fails before any side effect.
        source_tokens = self._count(source)
        try:
            systems = system_copies(head[fixed:])
            prompt = spec_prompt(source, source_tokens, options)
        except ValueError:
            logger.warning("compaction skipped: history cannot be encoded", exc_info=True)
            return self._failure(attempt, Reason.NOT_ENCODABLE)
        system_prompt = options.derived.system_prompt
        plan = Plan(
            snapshot, head_end, start, systems, source, source_tokens, system_prompt, prompt, fixed
        )
        return self._worth_a_call(plan, attempt)

    def _worth_a_call(self, plan: Plan, attempt: _Attempt) -> Plan | CompactionResult:
        """``plan``, unless (not forced) its source weighs less than the summary prefix
        and the acknowledgement together: a summary could save at most that little,
        never worth a provider call (told once, then at ``DEBUG``)."""
        if attempt.force:
            return plan
        fixed = summary_block("", (), self._options.derived.acknowledgement)
        floor = self._count(fixed)
        if plan.source_tokens >= floor:
            return plan
        self._trigger.tell(
            logging.INFO,
            "history is over the threshold but what can be summarised (%d tokens) is "
            "smaller than the summary prefix and acknowledgement (%d tokens); nothing "
            "summarised",
            plan.source_tokens,
            floor,
        )
        return attempt.quiet(Reason.NOTHING_TO_SUMMARISE)

    def _consult(
        self, plan: Plan, attempt: _Attempt, instructions: str | None
    ) -> Generator[Request, Any, Plan | CompactionResult]:
        """Ask ``before_compact``: skip, or add its instructions to the constructor's
        and the call's."""
        options = self._options
        texts = [t for t in (options.instructions, instructions) if t]
        if options.before_compact is not None:
            event = CompactionEvent(
                trigger="manual" if attempt.force else "auto",
                tokens=attempt.tokens,
                threshold=options.threshold,
                source_messages=len(plan.source),
                source_tokens=plan.source_tokens,
                session_id=self._session_id,
            )
            verdict: Outcome = yield HookRequest(options.before_compact, (event,))
            if verdict.error is not None:
                logger.warning("before_compact hook failed; ignored", exc_info=verdict.error)
            elif verdict.value is False:
                return attempt.quiet(Reason.SKIPPED_BY_HOOK)
            elif isinstance(verdict.value, str) and verdict.value:
                texts.append(verdict.value)
        return self._with_instructions(plan, texts)

    def _with_instructions(self, plan: Plan, texts: list[str]) -> Plan:
        """The plan whose summary prompt carries the focus instructions, if any."""
        if not texts:
            return plan
        heading = self._options.derived.instructions_heading
        system = plan.system_prompt + "\n\n" + heading + "\n".join(texts)
        prompt = (
            None if plan.prompt is None else [{"role": "system", "content": system}, plan.prompt[1]]
        )
        return replace(plan, system_prompt=system, prompt=prompt, focus="\n".join(texts))

    def _snapshot(
        self, plan: Plan, attempt: _Attempt, copy: list[Message] | None = None
    ) -> Generator[Request, Any, bool]:
        """Step 5: save the snapshot (or its ``copy``) before anything is sent or
        changed; ``False`` when it failed and a snapshot is required."""
        options = self._options
        if options.transcript_mgr is None:
            return True
        messages = list(plan.snapshot) if copy is None else copy
        saved: Outcome = yield SaveRequest(messages, self._session_id)
        attempt.saved = not saved.failed
        if attempt.saved:
            return True
        logger.warning(
            "transcript snapshot failed for session %r%s",
            self._session_id,
            saved.because(),
            exc_info=saved.error,
        )
        return not options.require_snapshot

    def _summarize(self, plan: Plan, truncated: int = 0) -> Generator[Request, Any, Summarized]:
        """Steps 6 and 7: ask for the summary, in parts if the source is over the
        summariser's input budget; any failure leaves history intact. A server
        summariser is sent the conversation's own messages instead."""
        options = self._options
        derived = options.derived
        if is_server_summariser(options.provider):
            systems, prefix = live_prefix(plan.snapshot, plan.fixed_end)
            return (
                yield from summarize_on_server(
                    [*systems, *plan.systems], prefix, plan.source, plan.focus
                )
            )
        return (
            yield from summarize_source(
                plan.source,
                plan.prompt,
                system_prompt=plan.system_prompt,
                base_prompt=derived.system_prompt,
                lead_in=derived.rolling_lead_in,
                rolling=options.rolling_summaries
                and is_own_output(plan.source[0], derived.acknowledgement),
                budget=options.summary_input_tokens,
                count=self._count_list,
                read=partial(_read_summary, truncated=truncated),
            )
        )

    def _conclude(
        self, messages: MutableSequence[Any], plan: Plan, attempt: _Attempt, done: Summarized
    ) -> CompactionResult:
        """Check the summary (pinned facts, never a bigger history), rebuild, commit."""
        if done.server is not None:
            return self._conclude_server(messages, plan, attempt, done)
        if done.text is None:
            return self._failure(attempt, done.reason or Reason.UNUSABLE_SUMMARY)
        summary = self._with_pins(plan, done.text, attempt)
        if summary is None:
            return self._failure(attempt, Reason.INFLATED_SUMMARY)
        attempt.summary = summary
        # Step 8: rebuild in place.
        rebuilt = rebuild(messages, plan, summary, self._options.derived.acknowledgement)
        if rebuilt is None:
            return self._failure(attempt, Reason.HISTORY_CHANGED)
        return self._commit(messages, plan, attempt, rebuilt)

    def _conclude_server(
        self, messages: MutableSequence[Any], plan: Plan, attempt: _Attempt, done: Summarized
    ) -> CompactionResult:
        """A server's artefact: never a bigger history (counted as the server reads
        it), then placed exactly as returned; no pinned facts (it is opaque)."""
        server = done.server
        assert server is not None
        if self._inflated(plan, server, attempt, covered=done.covered):
            return self._failure(attempt, Reason.INFLATED_SUMMARY)
        attempt.summary = server.text
        acknowledgement = self._options.derived.acknowledgement
        rebuilt = rebuild(messages, plan, server, acknowledgement, done.covered)
        if rebuilt is None:
            return self._failure(attempt, Reason.HISTORY_CHANGED)
        return self._commit(messages, plan, attempt, rebuilt)

    def _commit(
        self,
        messages: MutableSequence[Any],
        plan: Plan,
        attempt: _Attempt,
        rebuilt: list[Message],
    ) -> CompactionResult:
        """The rebuilt history's result; nothing here may raise, the summary is in
        hand and the history rebuilt."""
        self._anchor.forget()
        self._edited(0, messages)
        self._micro_scan.reset()  # the positions it knew are gone
        after = self._count_history(messages)
        threshold = self._options.threshold
        self._trigger.succeeded(after > threshold)
        try:
            arrived = self._arrived(messages, rebuilt, after > threshold)
            warn_about(messages, plan, attempt.tokens, after, threshold, arrived=arrived)
        except Exception:  # a malformed block must not turn success into an exception
            logger.warning("could not check the rebuilt history", exc_info=True)
        return CompactionResult(
            Action.FULL,
            attempt.tokens,
            after,
            attempt.truncated,
            attempt.saved,
            None,
            summary_calls=attempt.calls,
            parts=attempt.parts,
            replaced=tuple(plan.snapshot),
            rebuilt=tuple(rebuilt),
        )

    def _arrived(
        self, messages: MutableSequence[Any], rebuilt: list[Message], over: bool
    ) -> tuple[int, int] | None:
        """When the rebuilt history is ``over`` the threshold and messages were
        appended while the summary was made: how many, and the count without them."""
        arrived = len(messages) - len(rebuilt)
        return (arrived, self._count_list(rebuilt)) if over and arrived else None

    def _after(
        self, result: CompactionResult, summary: str | None
    ) -> Generator[Request, Any, None]:
        """Tell ``after_compact`` how the attempt ended; a failing hook is ignored."""
        self.last_result = result  # undoable even if the hook is interrupted
        hook = self._options.after_compact
        if hook is None:
            return
        done: Outcome = yield HookRequest(hook, (result, summary))
        if done.error is not None:
            logger.warning("after_compact hook failed; ignored", exc_info=done.error)

    # ------------------------------------------------------------------ checks

    def _pinned(self, plan: Plan, summary: str) -> str:
        """The pinned-facts block to append to the summary (``pin_facts=True``)."""
        options = self._options
        if not options.pin_facts or not options.derived.pin_facts_tokens:
            return ""
        try:
            facts = extract(plan.source)
            return pinned_block(
                facts,
                summary,
                options.derived.pin_facts_tokens,
                lambda text: self._count([{"role": "user", "content": text}]),
            )
        except Exception:  # the summary is in hand: facts are a bonus, never a failure
            logger.warning("pinning facts failed; the summary is kept without them", exc_info=True)
            return ""

    def _with_pins(self, plan: Plan, summary: str, attempt: _Attempt) -> str | None:
        """The summary with its pinned facts, or ``None`` when even without them it
        would make the history bigger (not forced). Pinned facts that alone would
        make it bigger are left out."""
        pinned = summary + self._pinned(plan, summary)
        if pinned is not summary and not self._inflated(plan, pinned, attempt, quiet=True):
            return pinned
        if pinned is not summary:
            logger.info("pinned facts left out: they would make the history bigger")
        return None if self._inflated(plan, summary, attempt) else summary

    def _inflated(
        self,
        plan: Plan,
        summary: str | ServerSummary,
        attempt: _Attempt,
        quiet: bool = False,
        covered: int | None = None,
    ) -> bool:
        """What replaces the source (the summary, and the acknowledgement; or a
        server's artefact and what it does not cover, counted as the server reads
        it) being longer than the source makes the history bigger: refused, unless
        the call was forced (then kept, with a warning)."""
        force = attempt.force
        acknowledgement = self._options.derived.acknowledgement
        if isinstance(summary, ServerSummary):
            block = replacement(plan, summary, acknowledgement, covered)[: -len(plan.kept) or None]
        else:
            block = summary_block(summary, plan.kept, acknowledgement)
        summary_size = self._count(block)
        source_size = plan.source_tokens
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
                _left_as(attempt.truncated),
            )
        return not force

    # --------------------------------------------------------------- background

    def _starts_early(self, attempt: _Attempt) -> bool:
        options = self._options
        watermark = options.derived.background_tokens
        return starts_early(attempt.tokens, options.threshold, watermark, attempt.force)

    def _start(
        self, messages: MutableSequence[Any], attempt: _Attempt, instructions: str | None
    ) -> Steps:
        """Past ``background_at``: plan as for a full compaction, ask the hook, then
        have the snapshot and the summary made in the background, on a frozen copy;
        the call itself returns at once."""
        watermark = self._options.derived.background_tokens
        assert watermark is not None
        plan = self._plan(messages, attempt, watermark)
        if isinstance(plan, CompactionResult):
            return plan
        if self._held(plan, attempt.tokens) is not None:
            return attempt.quiet()
        plan = yield from self._consult(plan, attempt, instructions)
        if isinstance(plan, CompactionResult):
            return plan
        try:
            plan, copy = frozen(plan)
        except ValueError:
            logger.warning("compaction skipped: history cannot be encoded", exc_info=True)
            return self._failure(attempt, Reason.NOT_ENCODABLE)
        started: Outcome = yield StartRequest(self._prepare(plan, attempt, copy))
        self._pending = Pending(plan, attempt, started.value)
        logger.info(
            "summary of %d messages started in the background at %d of %d tokens",
            len(plan.source),
            attempt.tokens,
            self._options.threshold,
        )
        return attempt.quiet()

    def _prepare(
        self, plan: Plan, attempt: _Attempt, copy: list[Message]
    ) -> Generator[Request, Any, Summarized]:
        """The background part: save the snapshot, then summarise (steps 5-7)."""
        if not (yield from self._snapshot(plan, attempt, copy)):
            return Summarized(None, Reason.SNAPSHOT_FAILED, 0, 0)
        return (yield from self._summarize(plan))

    def _swap(
        self, messages: MutableSequence[Any], attempt: _Attempt
    ) -> Generator[Request, Any, CompactionResult | None]:
        """Swap in the background summary when it is done, waiting for it when the
        history is over the threshold (or the call is forced); ``None`` while it
        runs, or when it was lost and a compaction is due now."""
        pending = self._pending
        assert pending is not None
        due = attempt.force or attempt.tokens > self._options.threshold
        answer: Outcome | None = yield CollectRequest(pending.handle, due)
        if answer is None:
            return None
        if self._pending is pending:
            self._pending = None
        if answer.failed:
            return self._lost(attempt, answer, due)
        done: Summarized = answer.value
        joined = replace(
            pending.attempt, force=attempt.force, tokens=attempt.tokens, truncated=attempt.truncated
        )
        joined.calls, joined.parts = done.calls, done.parts
        result = self._conclude(messages, pending.plan, joined, done)
        yield from self._after(result, joined.summary if result.action is Action.FULL else None)
        return result

    def _lost(self, attempt: _Attempt, answer: Outcome, due: bool) -> CompactionResult | None:
        """A background summary that ended without an answer: logged; a compaction
        due now is made at once (``None``), else the call says the summary was lost."""
        if answer.error is not None:
            self._trigger.failed(attempt.tokens)
        logger.warning(
            "background summary lost%s; history left as it is%s",
            answer.because() if answer.error is None else " (it raised)",
            ", compacting now" if due else "",
            exc_info=answer.error,
        )
        return None if due else attempt.quiet(Reason.BACKGROUND_LOST)

    def _drop_background(self, why: str) -> object | None:
        """Forget the summary running in the background (logged); its handle."""
        pending, self._pending = self._pending, None
        if pending is None:
            return None
        logger.info("background summary %s; history left as it is", why)
        return pending.handle

    @property
    def background_pending(self) -> bool:
        """True while a summary started in the background is running or waiting
        to be swapped in by the next call."""
        return self._pending is not None

    # ----------------------------------------------------------------- back-off

    def _held(self, plan: Plan, tokens: int) -> Reason | None:
        """Why an automatic full compaction, due by the threshold, waits: a recent
        failure (the back-off), or a last compaction that left the history over
        the threshold with less than ``STILL_OVER_GROWTH`` of the threshold of new
        history to summarise since; ``None`` to fire."""
        trigger = self._trigger
        if trigger.backing_off(tokens):
            return Reason.BACKING_OFF
        if not trigger.still_over:
            return None
        acknowledgement = self._options.derived.acknowledgement
        own = [m for m in plan.source if is_own_output(m, acknowledgement)]
        new = plan.source_tokens - (self._count(own) if own else 0)
        step = math.ceil(STILL_OVER_GROWTH * self._options.threshold)
        if new >= step:
            return None
        trigger.tell(
            logging.INFO,
            "history is still over the threshold (%d > %d estimated tokens) after the "
            "last compaction: what it must keep is that large; the next automatic "
            "compaction waits until %d tokens of new history can be summarised (%d now)",
            tokens,
            self._options.threshold,
            step,
            new,
        )
        return Reason.STILL_OVER_THRESHOLD

    def _failure(self, attempt: _Attempt, reason: Reason) -> CompactionResult:
        """A failed full compaction, which also starts (or extends) the back-off."""
        self._trigger.failed(attempt.tokens)
        return CompactionResult(
            Action.FAILED,
            attempt.tokens,
            attempt.tokens,
            attempt.truncated,
            attempt.saved,
            reason,
            attempt.calls,
            attempt.parts,
        )

    def forget(self) -> None:
        """Drop what the compactor remembers of the history between calls, so that
        the next call reads every message again.

        Calls compare the history with copies of the containers seen last time
        (one ``==``), and read again only what differs. ``==`` cannot see a change
        of type between equal values (``1`` to ``True`` or ``1.0``, a list to an
        equal ``UserList``) or an edit inside an object it does not copy; after
        such an edit, call this. What ``record_usage`` reported is kept: the next
        count is anchored as before.
        """
        self._history.forget()
        self._idle = False
        self._oversize = OversizeScan()
        self._server_scan = dialects.ServerScan()

    # --------------------------------------------------------------------- undo

    def undo(self, messages: MutableSequence[Any], result: CompactionResult) -> bool:
        """Put back the history a full compaction replaced, in place; ``True`` if done.

        ``result`` is the ``CompactionResult`` of that compaction (or
        :attr:`last_result`, also set when ``after_compact`` was interrupted).
        The messages appended since it (or while it ran) are kept after the
        restored history. A result that is not a full compaction replaced
        nothing: ``False``, nothing changes. A result already undone, or one
        whose history is not ``messages`` (another list, or a history changed
        since other than by appending, for example by a later full compaction)
        is not undone either: ``False``, with a warning saying why. Arguments
        of the wrong type are a ``TypeError``.
        """
        if not isinstance(result, CompactionResult):
            raise TypeError(f"result must be a CompactionResult, got {type(result).__name__}")
        if not isinstance(messages, MutableSequence):
            raise TypeError(f"messages must be a list, got {type(messages).__name__}")
        if result.action is not Action.FULL or not result.rebuilt:
            return False
        current = list(messages)
        if not appended_only(current, result.rebuilt):
            logger.warning("undo: %s; nothing changed", _not_undoable(current, result))
            return False
        undo_micro(list(result.truncations))  # the results truncated in that same call
        replace_all(messages, [*result.replaced, *current[len(result.rebuilt) :]])
        self._oversize = OversizeScan()  # texts put back whole are cut again next time
        self._idle = False
        return True

    # ------------------------------------------------------------------- recall

    def recall(self, handle: str, offset: int = 0, limit: int | None = None) -> str:
        """The original of a truncated result, by the handle its marker shows.

        Read from the archive (``archive=store.archive`` of a
        ``JsonlTranscriptManager`` or ``SqlTranscriptManager``), in this
        compactor's session only: a str result as it was, a list of blocks as
        the JSON the archive holds. ``offset`` and ``limit`` (characters) give a
        part of it. ``LookupError`` for a handle that names nothing in this
        session, or when the archive cannot be read back; ``TypeError`` /
        ``ValueError`` for arguments of the wrong type or range.
        """
        offset, limit = check_span(offset, limit)
        text = self._original(handle)
        return text[offset:] if limit is None else text[offset : offset + limit]

    def handle_recall(self, tool_call: object, *, limit: int = DEFAULT_RECALL_LIMIT) -> Message:
        """Answer a ``recall_truncated`` tool call of any dialect (an Anthropic
        ``tool_use`` block, a Chat ``tool_calls`` entry, a Responses
        ``function_call`` item, as dicts or SDK objects) with its tool result:
        one page of at most ``limit`` characters. Unknown or foreign handles and
        bad arguments give an error result, never an exception (see
        :func:`~bareagent_compact.recall.answer_recall`)."""
        return answer_recall(self._original, tool_call, limit=limit)

    def _original(self, handle: object) -> str:
        reader = archive_reader(self._options.archive)
        if reader is None:
            raise LookupError(
                "nothing can be recalled: archive= is not the archive method of a store "
                "that reads records back (JsonlTranscriptManager, SqlTranscriptManager)"
            )
        return read_original(reader, self._session_id, handle)


def _reported(
    result: CompactionResult, undo: Undo, prefix_changed: bool, pruned: int, cleared: int
) -> CompactionResult:
    """``result`` with what step 1 and the pruning did to the history."""
    if undo:
        # The size before step 1: the count after it, plus what it removed.
        result = replace(result, tokens_before_micro=result.tokens_before + freed_tokens(undo))
    if result.action is Action.FULL:
        result = replace(result, prefix_changed=True, truncations=tuple(undo))
    elif prefix_changed:
        result = replace(result, prefix_changed=True)
    if pruned or cleared:
        result = replace(result, prefix_changed=True, pruned=pruned, thinking_cleared=cleared)
    return result
