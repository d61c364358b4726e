"""Message shapes and the two plug-in points of :class:`~bareagent_compact.Compactor`.

Both plug-in points are structural (``typing.Protocol``): any callable is a
summary provider, and any object with ``save(messages, session_id)`` is a
transcript manager, so existing objects fit without subclassing. A transcript
manager that also has ``check_session_id`` (:class:`SessionIdChecker`) has ids
checked up front.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, TypeAlias, runtime_checkable

Message: TypeAlias = dict[str, Any]
"""One chat message: ``{"role": ..., "content": str | list[block]}`` (Anthropic style)."""

TokenCounter: TypeAlias = Callable[[list[Message]], int]
"""A function estimating the tokens of a message list (``estimate_tokens`` by default)."""


@runtime_checkable
class HasText(Protocol):
    """A provider response object carrying the summary as ``.text`` (e.g. an ``LLMResponse``)."""

    @property
    def text(self) -> str: ...


class SummaryProvider(Protocol):
    """The summarising model: called with the two-message prompt, returns the summary.

    A plain function or lambda fits. It may return the text itself or an object
    with a ``str`` attribute ``text``; anything else counts as a failed summary.
    """

    def __call__(self, prompt: list[Message], /) -> str | HasText: ...


class AsyncSummaryProvider(Protocol):
    """An ``async def`` summarising model, for :class:`~bareagent_compact.AsyncCompactor`."""

    def __call__(self, prompt: list[Message], /) -> Awaitable[str | HasText]: ...


SERVER_COMPACTION_ATTRIBUTE: Final = "server_compaction"
"""A provider with this attribute set to ``True`` is a server summariser: it is
called with a :class:`ServerCompactionRequest` and returns a :class:`ServerSummary`."""


@dataclass(frozen=True, slots=True)
class ServerCompactionRequest:
    """What a server summariser is asked to compact.

    ``messages`` are the conversation's own messages (or Responses items), as they
    are: its system messages first, then the part to be replaced, from the
    message holding the newest server compaction artefact when there is one.
    ``instructions`` are the focus instructions (the compactor's
    ``instructions``, the call's, the ``before_compact`` hook's), or ``None``.
    """

    messages: list[Message]
    instructions: str | None = None


@dataclass(frozen=True, slots=True)
class ServerSummary:
    """A summary the API made on its own server: an opaque artefact with its own
    placement rule.

    ``messages`` go, exactly as returned, in place of the messages the request
    carried after its system messages (Anthropic: one assistant message whose
    content is the ``compaction`` block alone; Responses: the output window of
    ``responses.compact``, the user messages then one ``compaction`` item).
    ``text`` is the summary's readable text when the API gives one (Anthropic's
    block ``content``), else ``""``; it is what ``after_compact`` receives.
    """

    messages: tuple[Message, ...]
    text: str = ""
    usage: Any = field(default=None, compare=False, repr=False)
    """The usage the API reported for the request (the built-in server
    summarisers set it), read into ``CompactionResult.cost``; ``None`` if none."""


class ServerSummaryProvider(Protocol):
    """A summariser that asks the API itself to compact (see
    :func:`~bareagent_compact.providers.anthropic_server_compaction` and
    :func:`~bareagent_compact.providers.openai_responses_compaction`)."""

    server_compaction: bool

    def __call__(self, request: ServerCompactionRequest, /) -> ServerSummary: ...


def is_server_summariser(provider: object) -> bool:
    """True for a provider marked as a server summariser."""
    return getattr(provider, SERVER_COMPACTION_ATTRIBUTE, False) is True


CONTINUATION_ATTRIBUTE: Final = "continuation"
"""A provider with this attribute set to ``True`` is a continuation summariser:
for a full compaction it is called with a :class:`ContinuationRequest`; called
with the two-message prompt (a list), it makes the transcript request as any
provider does (the fallback)."""


@dataclass(frozen=True, slots=True)
class ContinuationRequest:
    """What a continuation summariser is asked: the summary of the conversation
    itself, sent as the loop last sent it.

    ``messages`` are the history as the compactor call received it, in its own
    dialect (SDK objects as the plain dicts the list holds), nothing cleared or
    cut; without the messages kept verbatim after the summary when what comes
    before them answers every tool call (then it is a prefix the loop already
    sent, all of it in the prompt cache); a copy, the provider's to send.
    ``instruction`` is the text of the one user message to send after them (the
    summary prompt, the focus instructions, what is kept verbatim). ``kept`` is
    how many of the last ``messages`` are kept verbatim after the summary.
    """

    messages: list[Message]
    instruction: str
    kept: int = 0


class ContinuationProvider(Protocol):
    """A summariser that sends the live history as the conversation itself, then
    one instruction (see
    :func:`~bareagent_compact.providers.anthropic_continuation_provider`)."""

    continuation: bool

    def __call__(self, request: ContinuationRequest | list[Message], /) -> str | HasText: ...


def is_continuation_summariser(provider: object) -> bool:
    """True for a provider marked as a continuation summariser."""
    return getattr(provider, CONTINUATION_ATTRIBUTE, False) is True


@runtime_checkable
class TranscriptManager(Protocol):
    """Saves a snapshot of the history before it is summarised away.

    The signature is the one of BareAgent's own ``TranscriptManager.save``; the
    return value is ignored.
    """

    def save(self, messages: list[Message], session_id: str) -> object: ...


@runtime_checkable
class SessionIdChecker(Protocol):
    """Optional: a transcript manager (or the object an archive hook is a bound
    method of) that can say whether it accepts a session id.

    The compactor calls ``check_session_id`` when it is built, on
    ``set_session_id`` and when its ``transcript_mgr`` or ``archive`` changes, so
    an id the store cannot use fails at once (``TypeError`` / ``ValueError``)
    rather than at every snapshot. It returns the id, unchanged.
    """

    def check_session_id(self, session_id: str) -> str: ...


ArchiveRecord: TypeAlias = dict[str, Any]
"""What an archive hook receives for one truncated tool result.

Keys: ``tool_use_id`` (``str | None``), ``tool_name`` (``str``), ``content``
(the original result content, before truncation), and, when the archive can
be read back (:class:`ArchiveReader`), ``handle``: the recall handle the
truncation marker shows.
"""

ArchiveHook: TypeAlias = Callable[[ArchiveRecord], object]
"""Called with each tool result micro-compaction is about to truncate."""


@runtime_checkable
class ArchiveBatcher(Protocol):
    """Optional: the object an archive hook is the ``archive`` method of, when it can
    take every record of one compactor call at once (group commit).

    The compactor then calls ``archive_many(records)`` once per call instead of
    ``archive(record)`` per record. It must archive all of them or raise: when it
    raises, none counts as archived and every original is kept. The stores write
    one batch with one ``fsync`` (JSONL) or in one transaction (SQL).
    """

    def archive_many(self, records: list[ArchiveRecord], /) -> object: ...


@runtime_checkable
class ArchiveReader(Protocol):
    """Optional: the object an archive hook is a bound method of, when it can read a
    record back by its handle (``JsonlTranscriptManager``, ``SqlTranscriptManager``).

    With such an archive, truncation markers carry a recall handle and the
    compactor's ``recall`` reads the original back. ``read_archived`` returns the
    record of ``session_id`` whose ``handle`` key is ``handle``, or ``None``; it
    never returns a record of another session.
    """

    def read_archived(self, session_id: str, handle: str, /) -> ArchiveRecord | None: ...

BeforeCompactHook: TypeAlias = Callable[[Any], object]
"""Called with a :class:`~bareagent_compact.CompactionEvent` before a full compaction;
``False`` skips it, a ``str`` is added to the summary instructions."""

AfterCompactHook: TypeAlias = Callable[[Any, "str | None"], object]
"""Called with the :class:`~bareagent_compact.CompactionResult` and the summary
(``None`` when it failed) after every full compaction attempt."""
