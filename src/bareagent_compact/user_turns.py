"""The user's own messages kept word for word beside the summary (``keep_user_turns``).

A summary paraphrases; the agent then works from a paraphrase of its task. With
``keep_user_turns=True`` the newest user turns of the summarised part are put,
verbatim, in a labelled section of the summary message itself, after the
summary text and before any pinned facts::

    [Context Compressed]
    <summary>

    [The user's own messages, verbatim, oldest first: 2]
    [message 1 of 2, 32 characters]
    Fix the failing test in parse.py
    [message 2 of 2, 19 characters]
    Now add a docstring

Inside the summary message, the kept turns need no message of their own, so
roles keep alternating and tool calls stay paired in every dialect without a
fabricated assistant turn. Each entry names its length in characters, so the
section is read back exactly at the next compaction whatever the text holds:
the turns of earlier rounds are carried over, newest first within the budget.

What counts as a user turn: a message of kind ``USER`` (a ``user`` message
without tool results; a Responses user message item), not a previous summary,
and the text blocks beside the tool results of an Anthropic user message (the
text of a tool result itself never is). Its text parts are kept (``text`` and
``input_text`` blocks, joined by new lines); images and files are not. Spans
the agent framework injects as user text, ``<system-reminder>...</system-reminder>``
and ``<environment_context>...</environment_context>``, are taken out; a message
with nothing else is not a turn. Everything here is pure and deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from bareagent_compact import dialects, instructions
from bareagent_compact._defaults import RuleDefault
from bareagent_compact.prompts import SUMMARY_PREFIX, own_text
from bareagent_compact.protocols import Message

__all__ = [
    "DEFAULT_USER_TURNS_TOKENS",
    "TURNS_CAP",
    "TURNS_HEADING",
    "fit",
    "read_back",
    "section",
    "turns_budget",
    "unrepeated",
    "user_text",
    "user_turns",
]

TURNS_CAP: Final = 20_000
"""The default budget's ceiling, in tokens (a tenth of the threshold when that is less)."""


class _DefaultTurnsBudget(RuleDefault):
    """The default ``user_turns_tokens``: known not to be chosen, so it follows the
    threshold (see :func:`turns_budget`)."""

    __slots__ = ()
    RULE = "min({}, threshold // 10)"


DEFAULT_USER_TURNS_TOKENS: Final = _DefaultTurnsBudget(TURNS_CAP)
"""The ``user_turns_tokens`` default: a tenth of the threshold, at most 20,000 tokens."""


def turns_budget(chosen: int, threshold: int) -> int:
    """The kept turns' budget: ``chosen``, or, left at its default,
    ``min(20000, threshold // 10)``."""
    if type(chosen) is _DefaultTurnsBudget:
        return min(int(chosen), threshold // 10)
    return int(chosen)


TURNS_HEADING: Final = "[The user's own messages, verbatim, oldest first: "
_START: Final = "\n\n" + TURNS_HEADING
_COUNT: Final = re.compile(r"(\d+)\]\n")
_ENTRY: Final = re.compile(r"\[message (\d+) of (\d+), (\d+) characters\]\n")
_INJECTED: Final = re.compile(r"<(system-reminder|environment_context)>.*?</\1>", re.DOTALL)
_TEXT_TYPES: Final = frozenset({"text", "input_text"})
_CUT: Final = "\n[... {} characters of this message left out ...]\n"


def _texts(content: Any) -> Iterable[str]:
    """The text parts of a message's content: the string itself, or the ``text``
    of its text blocks."""
    if isinstance(content, str):
        yield content
    elif isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and block.get("type") in _TEXT_TYPES:
                text = block.get("text")
                if isinstance(text, str):
                    yield text


def _is_result(block: Any) -> bool:
    return isinstance(block, dict) and block.get("type") == "tool_result"


def user_text(message: Message) -> str | None:
    """The text of a real user turn, injected spans taken out and stripped; ``None``
    for anything else (tool results, assistant or system messages, a previous
    summary, a message with no text of the user's). The text blocks beside the
    tool results of an Anthropic user message are a user turn too."""
    kind = dialects.kind(message)
    content = message.get("content")
    if kind is dialects.Kind.RESULTS and isinstance(content, list):
        content = [block for block in content if not _is_result(block)]
    elif kind is not dialects.Kind.USER:
        return None
    own = own_text(content)
    if own is not None and own.startswith(SUMMARY_PREFIX):
        return None
    text = "\n".join(_texts(content))
    text = _INJECTED.sub("", text).strip()
    return text or None


def read_back(message: Message) -> list[str]:
    """The turns a previous summary message kept, oldest first (``[]`` for any other
    message, or one without a section that reads back whole)."""
    content = own_text(message.get("content"))
    if dialects.kind(message) is not dialects.Kind.USER or content is None:
        return []
    if not content.startswith(SUMMARY_PREFIX):
        return []
    at = content.find(_START)
    while at >= 0:
        turns = _entries(content, at + len(_START))
        if turns is not None:
            return turns
        at = content.find(_START, at + 1)
    return []


def _entries(content: str, at: int) -> list[str] | None:
    """The entries of a section whose heading's count starts at ``at``; ``None``
    unless they read back whole (the count, the numbering, the lengths, and then
    the end of the message or another block after a blank line)."""
    head = _COUNT.match(content, at)
    if head is None:
        return None
    total, at = int(head.group(1)), head.end()
    turns: list[str] = []
    for number in range(1, total + 1):
        if number > 1:
            if not content.startswith("\n", at):
                return None
            at += 1
        entry = _entry(content, at, (number, total))
        if entry is None:
            return None
        turns.append(content[entry[0] : entry[1]])
        at = entry[1]
    rest = content[at:]
    # What may follow: nothing, or another block (pinned facts), never a second
    # section (a summariser that copied the previous one into its summary).
    ends = not rest or (rest.startswith("\n\n[") and not rest.startswith(_START))
    return turns if total and ends else None


def _entry(content: str, at: int, place: tuple[int, int]) -> tuple[int, int] | None:
    """Where the text of the entry at ``at``, numbered ``place``, starts and ends;
    ``None`` unless it is whole."""
    label = _ENTRY.match(content, at)
    if label is None or (int(label.group(1)), int(label.group(2))) != place:
        return None
    end = label.end() + int(label.group(3))
    return (label.end(), end) if end <= len(content) else None


def user_turns(source: Sequence[Message], kept: Sequence[Message] = ()) -> list[str]:
    """The user turns of ``source``, oldest first: those a previous summary
    message kept, then the real user turns, each text once (its newest place), and
    none whose text is also a user turn of ``kept`` (already in the history)."""
    found: list[str] = []
    for message in source:
        found.extend(read_back(message))
        text = user_text(message)
        if text is not None:
            found.append(text)
    present = {text for text in map(user_text, kept) if text is not None}
    newest: list[str] = []
    for text in reversed(found):
        if text not in present:
            present.add(text)
            newest.append(text)
    return newest[::-1]


def section(turns: Sequence[str]) -> str:
    """The labelled section that holds ``turns`` (oldest first); empty for none."""
    if not turns:
        return ""
    total = len(turns)
    entries = [
        f"[message {number} of {total}, {len(text)} characters]\n{text}"
        for number, text in enumerate(turns, start=1)
    ]
    return f"{_START}{total}]\n" + "\n".join(entries)


def fit(turns: Sequence[str], budget: int, count: Callable[[str], int]) -> list[str]:
    """The newest of ``turns`` (oldest first) whose section weighs at most
    ``budget`` by ``count``; older turns are dropped first, and a turn that does not
    fit ends the section. Only the newest turn, when it alone is over the budget,
    is kept in part: its beginning and end around a marker (see :func:`clip`)."""
    kept: list[str] = []
    used = count(section(["?"]))  # the heading and one entry's label
    for text in reversed(turns):
        used += count(text) + 4
        if used > budget:  # near the budget: the section itself is counted
            used = count(section([text, *kept]))
            if used > budget:
                break
        kept.insert(0, text)
    while kept and count(section(kept)) > budget:  # each part counted alone may differ
        kept.pop(0)
    if not kept and turns:
        clipped = clip(turns[-1], budget, count)
        return [] if clipped is None else [clipped]
    return kept


def clip(text: str, budget: int, count: Callable[[str], int]) -> str | None:
    """``text`` as its beginning and end around a marker naming how many characters
    were left out, its section within ``budget``; ``None`` when even a short clip
    does not fit."""
    size = count(section([text]))
    if size <= budget:
        return text
    keep = len(text) * budget // max(size, 1)
    for _ in range(12):
        if keep < 40:
            return None
        head, tail = keep // 2, keep - keep // 2
        clipped = text[:head] + _CUT.format(len(text) - keep) + text[-tail:]
        if count(section([clipped])) <= budget:
            return clipped
        keep = keep * 4 // 5
    return None


def expanded(source: Sequence[Message]) -> list[Message]:
    """``source`` with each previous summary message followed by the turns it kept,
    as user messages: what the pinned facts read, so that a request or standing
    instruction a kept turn holds is pinned once that turn is no longer kept."""
    found: list[Message] = []
    for message in source:
        found.append(message)
        found.extend({"role": "user", "content": text} for text in read_back(message))
    return found


def unrepeated(pinned: str, kept: str) -> str:
    """The pinned block without the standing instructions the ``kept`` section holds
    word for word (they are there already)."""
    if not pinned or not kept:
        return pinned
    lines = pinned.split("\n")
    return "\n".join(
        line
        for line in lines
        if (rule := instructions.parse(line)) is None or rule.text not in kept
    )
