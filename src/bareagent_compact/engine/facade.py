"""The class both drivers wrap: options in; undo, recall, record_usage, forget.

It holds the lasting :class:`~bareagent_compact.engine.parts.Parts` and hands
each call to :func:`~bareagent_compact.engine.step.steps`, a generator of
requests the driver answers (plain calls, or ``await``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Iterable, MutableSequence, Sequence
from contextlib import AbstractContextManager
from datetime import timedelta
from functools import partial
from typing import Any, Generic, TypeVar, cast

from bareagent_compact.engine import new_list, step
from bareagent_compact.engine.attributes import Option as _Option
from bareagent_compact.engine.attributes import given_options as _options
from bareagent_compact.engine.attributes import same_options as _same
from bareagent_compact.engine.conversations import Conversations
from bareagent_compact.engine.counter import Counter
from bareagent_compact.engine.full.background import drop
from bareagent_compact.engine.parts import Parts
from bareagent_compact.engine.ports import Ports
from bareagent_compact.facts import DEFAULT_PIN_FACTS_TOKENS
from bareagent_compact.micro import undo_micro
from bareagent_compact.micro_policy import DEFAULT_CACHE_TTL, MICRO_SPEC, MicroOptions, MicroPolicy
from bareagent_compact.options import (
    DEFAULT_LANGUAGE,
    OPTION_NAMES,
    Options,
    Profile,
    check_provider,
)
from bareagent_compact.oversize import DEFAULT_MAX_MESSAGE_TOKENS
from bareagent_compact.prompts import DEFAULT_THRESHOLD
from bareagent_compact.protocols import (
    AfterCompactHook,
    ArchiveHook,
    BeforeCompactHook,
    Message,
    TokenCounter,
    TranscriptManager,
)
from bareagent_compact.rebuild import appended_only, replace_all
from bareagent_compact.recall import (
    DEFAULT_RECALL_LIMIT,
    answer_recall,
    as_text,
    check_span,
    read_content,
)
from bareagent_compact.requests import Request, Steps
from bareagent_compact.result import Action, CompactionResult
from bareagent_compact.summarize import DEFAULT_SUMMARY_INPUT_TOKENS
from bareagent_compact.usage import input_tokens_of
from bareagent_compact.user_turns import DEFAULT_USER_TURNS_TOKENS

logger = logging.getLogger("bareagent_compact.compactor")

ProviderT = TypeVar("ProviderT")
"""The provider type a driver accepts: sync only, or sync or async."""

def check_call(force: object, instructions: object) -> tuple[bool, str | None]:
    """A call's ``force`` (a ``bool``) and ``instructions`` (``None`` or a ``str``)."""
    if not isinstance(force, bool):
        raise TypeError(f"force must be a bool, got {type(force).__name__}")
    if instructions is not None and not isinstance(instructions, str):
        raise TypeError(f"instructions must be a str, got {type(instructions).__name__}")
    return force, instructions


def _not_undoable(current: list[Any], result: CompactionResult) -> str:
    """Why ``result`` cannot be undone on the history ``current``."""
    if appended_only(current, result.replaced):
        return "that compaction was already undone"
    return (
        "the history is not the one that compaction made (another list, or changed "
        "since other than by appending, e.g. by a later compaction); it cannot be undone"
    )


class Engine(Generic[ProviderT]):
    """The options, checks and lasting state shared by both compactors.

    Subclasses are drivers: they run :meth:`_steps` and answer its requests.
    """

    transcript_mgr = _Option[TranscriptManager | None, TranscriptManager | None]()
    threshold = _Option[int, int | float](derived=True)
    keep_recent = _Option[int, int | None](derived=True)
    system_prompt = _Option[str, str | None](derived=True)
    acknowledgement = _Option[str, str | None](derived=True)
    token_counter = _Option[TokenCounter, TokenCounter | None](derived=True)
    keep_tool_pairs = _Option[bool, bool]()
    archive = _Option[ArchiveHook | None, ArchiveHook | None]()
    require_snapshot = _Option[bool, bool]()
    summary_input_tokens = _Option[int, int]()
    language = _Option[str, str](derived=True)
    instructions = _Option[str | None, str | None]()
    rolling_summaries = _Option[bool, bool]()
    pin_facts = _Option[bool, bool | None](derived=True)
    pin_facts_tokens = _Option[int, int](derived=True)
    keep_tail_tokens = _Option[int, int]()
    before_compact = _Option[BeforeCompactHook | None, BeforeCompactHook | None]()
    after_compact = _Option[AfterCompactHook | None, AfterCompactHook | None]()
    micro = _Option[str | MicroPolicy, str | MicroPolicy]()
    micro_min_chars = _Option[int | None, int | None]()
    exclude_tools = _Option[frozenset[str] | None, Any]()
    clear_at_least = _Option[int | None, int | None]()
    max_message_tokens = _Option[int | None, int | None](derived=True)
    background_at = _Option[float | None, float | None]()
    prune_before_server_compaction = _Option[bool, bool]()
    clear_thinking_after_turns = _Option[int | None, int | None](derived=True)
    keep_user_turns = _Option[bool, bool | None](derived=True)
    user_turns_tokens = _Option[int, int](derived=True)
    profile = _Option[str | Profile | None, str | Profile | None]()
    cache_ttl = _Option[float | timedelta, float | timedelta]()
    clock = _Option[Callable[[], float], Callable[[], float]]()
    context_window = _Option[int | None, int | None]()
    summary_content = _Option[str, str]()

    def __init__(
        self,
        provider: ProviderT,
        transcript_mgr: TranscriptManager | None = None,
        threshold: int | float = DEFAULT_THRESHOLD,
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
        pin_facts: bool | None = None,
        pin_facts_tokens: int = DEFAULT_PIN_FACTS_TOKENS,
        keep_tail_tokens: int = 0,
        before_compact: BeforeCompactHook | None = None,
        after_compact: AfterCompactHook | None = None,
        micro: str | MicroPolicy = MICRO_SPEC,
        micro_min_chars: int | None = None,
        exclude_tools: Iterable[str] | None = None,
        clear_at_least: int | None = None,
        max_message_tokens: int | None = DEFAULT_MAX_MESSAGE_TOKENS,
        background_at: float | None = None,
        prune_before_server_compaction: bool = False,
        clear_thinking_after_turns: int | None = None,
        keep_user_turns: bool | None = None,
        user_turns_tokens: int = DEFAULT_USER_TURNS_TOKENS,
        profile: str | Profile | None = None,
        cache_ttl: float | timedelta = DEFAULT_CACHE_TTL,
        clock: Callable[[], float] = time.monotonic,
        context_window: int | None = None,
        summary_content: str = "str",
        options: Options | None = None,
    ) -> None:
        check_provider(provider)
        given = {name: value for name, value in locals().items() if name in OPTION_NAMES}
        options = _options(options, given)
        ports = Ports(options.archive, options.transcript_mgr)
        checked = ports.check_session_id(session_id)
        self._parts = Parts(provider, options, ports, checked, Counter(options))
        self._conversations = Conversations()
        self._check_plugins(provider, options, ports)
        self._setup()

    def _setup(self) -> None:
        """What a driver prepares once its options are set."""

    def _check_plugins(self, provider: object, options: Options, ports: Ports) -> None:
        """What a driver refuses in ``options`` beyond the common checks."""

    def _configure(self, **changes: Any) -> None:
        """Change options: build, check and derive a new :class:`Options`."""
        parts = self._parts
        provider = changes.pop("provider", parts.provider)
        check_provider(provider)
        options = parts.options.replace(**changes) if changes else parts.options
        if provider is parts.provider and _same(options, parts.options):
            return  # c.x = c.x
        ports = parts.ports
        old = parts.options
        if options.archive is not old.archive or options.transcript_mgr is not old.transcript_mgr:
            ports = Ports(options.archive, options.transcript_mgr)
        ports.check_session_id(parts.session_id)
        self._check_plugins(provider, options, ports)
        parts.provider = provider
        if ports.archive != parts.ports.archive:
            parts.behind.clear()  # another archive: what the old one writes is not read
        parts.options, parts.ports = options, ports
        parts.view.idle = False
        parts.view.rescan()  # read every message again under the new options
        parts.counter.configure(options)

    @property
    def provider(self) -> ProviderT:
        """The summarising model."""
        return cast(ProviderT, self._parts.provider)

    @provider.setter
    def provider(self, value: ProviderT) -> None:
        self._configure(provider=value)

    @property
    def micro_options(self) -> MicroOptions:
        """The micro-compaction policy resolved from ``micro`` and its options."""
        return self._parts.options.derived.micro_options

    @property
    def options(self) -> Options:
        """The compactor's options as one frozen value: ``Compactor(provider,
        options=c.options)`` makes a compactor configured as ``c``."""
        return self._parts.options

    @options.setter
    def options(self, options: Options) -> None:
        if not isinstance(options, Options):
            raise TypeError(f"options must be an Options, got {type(options).__name__}")
        self._configure(**{name: getattr(options, name) for name in OPTION_NAMES})

    @property
    def last_result(self) -> CompactionResult | None:
        """The result of the latest call, whatever it did (``None`` before the first).
        It is set before ``after_compact`` runs, so a full compaction interrupted or
        cancelled in that hook can still be undone: ``undo(messages, last_result)``."""
        return self._parts.last_result

    @last_result.setter
    def last_result(self, result: CompactionResult | None) -> None:
        self._parts.last_result = result

    def _checked_session_id(self, session_id: object) -> str:
        """A non-empty ``str``, also acceptable to the transcript manager (and to the
        archive's store) when they can say (:class:`SessionIdChecker`), so a bad id
        fails now rather than every turn."""
        return self._parts.ports.check_session_id(session_id)

    def get_session_id(self) -> str:
        """The session id under which snapshots are saved."""
        return self._conversations.own_id(self._parts)

    def _steps(
        self, messages: MutableSequence[Any], force: bool, instructions: str | None = None
    ) -> Steps:
        """One compaction step on ``messages`` in place (SPEC 11.2 steps 1-8)."""
        return step.steps(self._parts, messages, force, instructions)

    def _new_list_steps(
        self, messages: Sequence[Any], force: bool, instructions: str | None
    ) -> Generator[Request, Any, new_list.NewList]:
        """One compaction step on a copy of ``messages``: the new list and the result
        (see :mod:`bareagent_compact.engine.new_list`)."""
        return new_list.steps(self._parts, messages, force, instructions)

    def _in_session(self, session_id: str | None) -> AbstractContextManager[None]:
        """Run a call in ``session_id``'s conversation (``None``: the compactor's own;
        see :mod:`bareagent_compact.engine.conversations`)."""
        return self._conversations.entered(self._parts, session_id)

    def _session_arg(self, session_id: object) -> str | None:
        """A call's ``session_id``: ``None``, or a checked session id."""
        return None if session_id is None else self._checked_session_id(session_id)

    def record_usage(
        self, messages: Sequence[Any], usage: object, *, session_id: str | None = None
    ) -> None:
        """Anchor the count on what the API reported for a request carrying ``messages``.

        Call it right after each model call, with the list exactly as it was sent
        (before the reply is appended). ``usage`` is the response's usage object or
        dict (Anthropic, OpenAI Chat or Responses) or the full input size as an
        ``int`` (see :func:`~bareagent_compact.input_tokens_of`). With a
        ``token_counter`` of the caller's, the count is the reported size plus the
        counter's count of the messages appended since, while those messages still
        open the history unedited; otherwise the counter counts the whole history.
        ``session_id``: the conversation the request was for (default: the
        compactor's own session).
        """
        tokens = input_tokens_of(usage)
        with self._in_session(self._session_arg(session_id)):
            parts = self._parts
            parts.counter.record(parts.view, messages, tokens)
            if not parts.options.derived.custom_counter and not self.micro_options.is_spec:
                parts.view.idle = False  # what is cleared depends on the count

    def forget(self, *, session_id: str | None = None) -> None:
        """Drop what the compactor remembers of the history between calls, so that
        the next call reads every message again.

        Calls compare the history with copies of the containers seen last time
        (one ``==``), and read again only what differs. ``==`` cannot see a change
        of type between equal values (``1`` to ``True`` or ``1.0``, a list to an
        equal ``UserList``) or an edit inside an object it does not copy; after
        such an edit, call this. What ``record_usage`` reported is kept: the next
        count is anchored as before. ``session_id``: that conversation's history
        (default: the compactor's own session's).
        """
        with self._in_session(self._session_arg(session_id)):
            self._parts.view.forget()

    @property
    def background_pending(self) -> bool:
        """True while a summary started in the background is running or waiting
        to be swapped in by the next call."""
        return self._parts.pending is not None or bool(self._conversations.pending())

    def _drop_background(self, why: str) -> object | None:
        """Forget the summary running in the background (logged); its handle."""
        return drop(self._parts, why)

    def undo(
        self,
        messages: MutableSequence[Any],
        result: CompactionResult,
        *,
        session_id: str | None = None,
    ) -> bool:
        """Put back the history a full compaction replaced, in place; ``True`` if done.

        ``result`` is the ``CompactionResult`` of that compaction (or
        :attr:`last_result`, also set when ``after_compact`` was interrupted).
        The messages appended since it (or while it ran) are kept after the
        restored history. A result that is not a full compaction replaced
        nothing: ``False``, nothing changes. A result already undone, or one
        whose history is not ``messages`` (another list, or a history changed
        since other than by appending, for example by a later full compaction)
        is not undone either: ``False``, with a warning saying why. Arguments
        of the wrong type are a ``TypeError``. ``session_id``: the conversation
        ``messages`` is (default: the compactor's own session).
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
        with self._in_session(self._session_arg(session_id)):
            view = self._parts.view
            view.rescan(moved=True)  # texts put back whole are cut again next time
            view.idle = False
        return True

    def recall(
        self,
        handle: str,
        offset: int = 0,
        limit: int | None = None,
        *,
        session_id: str | None = None,
    ) -> str:
        """The original of a truncated result, by the handle its marker shows.

        Read from the archive (``archive=store`` or ``archive=store.archive`` of a
        ``JsonlTranscriptManager`` or ``SqlTranscriptManager``), in this
        compactor's session only: a str result as it was, a list of blocks as
        the JSON the archive holds. ``offset`` and ``limit`` (characters) give a
        part of it. ``LookupError`` for a handle that names nothing in this
        session, or when the archive cannot be read back; ``TypeError`` /
        ``ValueError`` for arguments of the wrong type or range. ``session_id``:
        read that session's handles instead (default: the compactor's own).
        """
        offset, limit = check_span(offset, limit)
        session = self._session_arg(session_id)
        text = as_text(self._original(handle, session))
        return text[offset:] if limit is None else text[offset : offset + limit]

    def handle_recall(
        self,
        tool_call: object,
        *,
        limit: int = DEFAULT_RECALL_LIMIT,
        session_id: str | None = None,
    ) -> Message:
        """Answer a ``recall_truncated`` tool call of any dialect (an Anthropic
        ``tool_use`` block, a Chat ``tool_calls`` entry, a Responses
        ``function_call`` item, as dicts or SDK objects) with its tool result:
        one page of at most ``limit`` characters. Unknown or foreign handles and
        bad arguments give an error result, never an exception (see
        :func:`~bareagent_compact.recall.answer_recall`). ``session_id``: answer
        from that session's handles (default: the compactor's own)."""
        session = self._session_arg(session_id)
        return answer_recall(partial(self._original, session=session), tool_call, limit=limit)

    def _original(self, handle: object, session: str | None = None) -> object:
        reader = self._parts.ports.reader
        if reader is None:
            raise LookupError(
                "nothing can be recalled: archive= is not a store that reads records "
                "back (JsonlTranscriptManager, SqlTranscriptManager) or its archive method"
            )
        own = self._conversations.own_id(self._parts)
        return read_content(reader, session or own, handle)
