"""The :class:`Compactor`: both compaction layers, run in the order of SPEC 11.2."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from bareagent_compact._json import json_copy
from bareagent_compact.micro import DEFAULT_KEEP_RECENT, check_keep_recent, micro_compact
from bareagent_compact.pairs import find_orphans, tool_ids
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
from bareagent_compact.result import Action, CompactionResult
from bareagent_compact.serialize import _serialize
from bareagent_compact.tokens import estimate_tokens
from bareagent_compact.validate import validate_messages

logger = logging.getLogger(__name__)


def summary_text(response: object) -> str | None:
    """Normalise a provider's answer to the summary text, or ``None`` when unusable.

    Usable: a ``str``, or an object whose ``text`` attribute is a ``str``, holding
    something other than whitespace.
    """
    text = response if isinstance(response, str) else getattr(response, "text", None)
    if not isinstance(text, str) or not text.strip():
        return None
    return text


def _check_session_id(session_id: object) -> str:
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, got {type(session_id).__name__}")
    if not session_id:
        raise ValueError("session_id must not be empty")
    return session_id


def _paired_tail_start(head: list[Message], pending: Message) -> int:
    """Index in ``head`` from which messages stay verbatim so that every tool result
    in the kept tail (pending message included) keeps its tool call.

    For each needed id the nearest earlier ``tool_use`` counts (ids reused across
    turns must not pull in the whole history); the tail grows back to the earliest
    of those, and again until nothing more is needed or can be found.
    """
    start = len(head)
    while True:
        needed: set[str] = set()
        for message in [*head[start:], pending]:
            needed |= tool_ids(message, "tool_result", "tool_use_id")
        for message in head[start:]:
            needed -= tool_ids(message, "tool_use", "id")
        earliest = start
        for index in range(start - 1, -1, -1):
            if not needed:
                break
            found = tool_ids(head[index], "tool_use", "id") & needed
            if found:
                earliest = index
                needed -= found
        if earliest == start:
            return start
        start = earliest


def _last_dialogue_index(messages: list[Message]) -> int | None:
    """Index of the last message that is not a system message, if any."""
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].get("role") != "system":
            return index
    return None


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


class Compactor:
    """Keeps an agent's history inside its context window; call it every turn.

    ``compactor(messages)`` first truncates old tool results (micro-compaction),
    then, when the estimate is strictly greater than ``threshold`` or ``force`` is
    true, replaces everything but the system messages and the pending user
    message with a summary from ``provider``. The list is changed in place and a
    :class:`CompactionResult` is returned. A failed summary never breaks the
    loop: a warning is logged and the history stays as micro-compaction left it.

    Calls on one instance are serialised by a lock, so it may be shared by threads.
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
        keep_tool_pairs: bool = False,
        archive: ArchiveHook | None = None,
        require_snapshot: bool = True,
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
        self._session_id = self._checked_session_id(session_id)
        self._lock = threading.RLock()

    def _checked_session_id(self, session_id: object) -> str:
        """A non-empty ``str``, also acceptable to the transcript manager when it can
        say (``check_session_id``), so a bad id fails now rather than every turn."""
        checked = _check_session_id(session_id)
        check = getattr(self.transcript_mgr, "check_session_id", None)
        if callable(check):
            check(checked)
        return checked

    def get_session_id(self) -> str:
        """The session id under which snapshots are saved."""
        return self._session_id

    def set_session_id(self, session_id: str) -> None:
        """Rebind the session id (call it on ``/new`` and ``/resume``)."""
        checked = self._checked_session_id(session_id)
        with self._lock:
            self._session_id = checked

    def __call__(self, messages: list[Message], force: bool = False) -> CompactionResult:
        """Run one compaction step on ``messages`` in place (SPEC 11.2 steps 1-8)."""
        validate_messages(messages)
        with self._lock:
            return self._compact(messages, force)

    def _archive_hook(self) -> Callable[[ArchiveRecord], object] | None:
        archive = self.archive
        if archive is None:
            return None
        session_id = self._session_id

        def hook(record: ArchiveRecord) -> object:
            return archive({**record, "session_id": session_id})

        return hook

    def _kept_tail_start(self, head: list[Message], pending: Message | None) -> int:
        """Where the messages kept verbatim besides the pending one begin in ``head``.

        Only ``keep_tool_pairs=True`` keeps any: the calls a pending tool result
        answers, or tool calls ending the history whose results are still to come.
        """
        if not self.keep_tool_pairs:
            return len(head)
        if pending is not None:
            return _paired_tail_start(head, pending)
        last = _last_dialogue_index(head)
        if last is not None and tool_ids(head[last], "tool_use", "id"):
            return last
        return len(head)

    def _compact(self, messages: list[Message], force: bool) -> CompactionResult:
        # Step 1: micro-compaction, always.
        truncated = micro_compact(messages, self.keep_recent, self._archive_hook())
        tokens = self.token_counter(messages)
        quiet = Action.MICRO if truncated else Action.NONE

        # Step 2: the trigger; strictly greater than the threshold.
        if not force and tokens <= self.threshold:
            return CompactionResult(quiet, tokens, tokens, truncated)

        # Step 3: the pending user turn (plain input or tool results) is kept out.
        pending = messages[-1] if messages and messages[-1].get("role") == "user" else None
        head = messages[:-1] if pending is not None else messages
        start = self._kept_tail_start(head, pending)
        kept = [m for m in head[start:] if m.get("role") != "system"]

        # Step 4: the summary source excludes system messages.
        source = [m for m in head[:start] if m.get("role") != "system"]
        if not source:
            return CompactionResult(quiet, tokens, tokens, truncated, reason="nothing to summarise")
        if not force and all(_is_own_output(m, self.acknowledgement) for m in source):
            # Only the previous summary is left: summarising it again every turn
            # would cost a model call and shrink nothing that matters.
            logger.warning(
                "history is over the threshold but holds nothing new to summarise "
                "(the pending message itself is large)"
            )
            return CompactionResult(
                quiet, tokens, tokens, truncated, reason="nothing new to summarise"
            )

        # Step 5: snapshot before anything is sent or changed.
        snapshot_saved = False
        if self.transcript_mgr is not None:
            try:
                self.transcript_mgr.save(list(messages), self._session_id)
                snapshot_saved = True
            except Exception:
                logger.warning(
                    "transcript snapshot failed for session %r", self._session_id, exc_info=True
                )
                if self.require_snapshot:
                    return self._failed(tokens, truncated, False, "snapshot failed")

        # The system messages are copied before the provider call, so that nothing
        # can fail after the summary is in hand.
        try:
            systems = [json_copy(m) for m in head if m.get("role") == "system"]
            prompt: list[Message] = [
                {"role": "system", "content": self.system_prompt},
                {"role": "user", "content": _serialize(source)},
            ]
        except ValueError:
            logger.warning("compaction skipped: history cannot be encoded", exc_info=True)
            return self._failed(tokens, truncated, snapshot_saved, "history cannot be encoded")

        # Steps 6 and 7: ask for the summary; any failure leaves history intact.
        try:
            response = self.provider(prompt)
            summary = summary_text(response)
        except Exception:
            logger.warning("summary provider failed; history left as it was", exc_info=True)
            return self._failed(tokens, truncated, snapshot_saved, "provider raised")
        if summary is None:
            logger.warning(
                "summary provider returned an unusable summary (%s); history left as it was",
                type(response).__name__,
            )
            return self._failed(tokens, truncated, snapshot_saved, "unusable summary")

        # Step 8: rebuild in place.
        rebuilt: list[Message] = [
            *systems,
            {"role": "user", "content": SUMMARY_PREFIX + summary},
            {"role": "assistant", "content": self.acknowledgement},
            *kept,
        ]
        if pending is not None:
            rebuilt.append(pending)
        # Tool calls ending the history, summarised away: their results will be orphans.
        dropped_calls = 0
        last = _last_dialogue_index(head)
        if pending is None and last is not None and start > last:
            dropped_calls = len(tool_ids(head[last], "tool_use", "id"))
        messages[:] = rebuilt
        # Nothing below may raise: the summary is in hand and the history rebuilt.
        try:
            after = self.token_counter(messages)
        except Exception:
            logger.warning("token_counter failed on the rebuilt history", exc_info=True)
            after = estimate_tokens(messages)
        try:
            self._warn_about(messages, dropped_calls, tokens, after)
        except Exception:  # a malformed block must not turn success into an exception
            logger.warning("could not check the rebuilt history", exc_info=True)
        return CompactionResult(Action.FULL, tokens, after, truncated, snapshot_saved)

    def _warn_about(
        self, messages: list[Message], dropped_calls: int, before: int, after: int
    ) -> None:
        """Log what a caller must know about a rebuilt history."""
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
                "compaction left %d unpaired tool block(s); pass keep_tool_pairs=True "
                "to keep tool calls with their results",
                unpaired,
            )
        if after > self.threshold:
            logger.warning(
                "history is still over the threshold after compaction (%d > %d estimated "
                "tokens): the kept messages alone are that large",
                after,
                self.threshold,
            )

    @staticmethod
    def _failed(tokens: int, truncated: int, saved: bool, reason: str) -> CompactionResult:
        return CompactionResult(Action.FAILED, tokens, tokens, truncated, saved, reason)
