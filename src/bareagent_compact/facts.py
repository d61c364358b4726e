"""Facts kept across a summary, found without a model: the things agents forget.

Before a rebuild, the summary source is read for the last user request, the
user's standing instructions (see :mod:`bareagent_compact.instructions`), file
paths, URLs and error lines. Error lines are read only where errors are
reported (tool results and the assistant's text), never in a tool call's input
or the user's words; a long line is clipped around the error it holds. Whatever
of these the summary does not already contain is appended to the summary
message under a short heading, newest first, within a token budget.
Everything here is deterministic and linear in the size of the source.

A previous summary's pinned block is never searched again: its lines are
carried over as the facts they already are, so rolling compactions neither
add a prefix to them nor pin them twice.

A summary swapped in after steps taken meanwhile is checked against them: see
:mod:`bareagent_compact.identifiers`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

from bareagent_compact import dialects, instructions
from bareagent_compact._defaults import RuleDefault
from bareagent_compact.instructions import Instruction
from bareagent_compact.prompts import SUMMARY_PREFIX, framing_for, own_text
from bareagent_compact.protocols import Message
from bareagent_compact.serialize import render_content, render_message, tool_names


class _DefaultBudget(RuleDefault):
    """The default ``pin_facts_tokens``: equal to 2000, but known not to be chosen, so
    the budget may follow the threshold instead (see :func:`pin_budget`)."""

    __slots__ = ()


DEFAULT_PIN_FACTS_TOKENS: Final = _DefaultBudget(2000)
"""The most the pinned facts may add to the summary message, in estimated tokens
(left at this default: a tenth of the threshold when that is less)."""


def pin_budget(chosen: int, threshold: int) -> int:
    """The pinned block's budget: ``chosen``, or, when ``pin_facts_tokens`` was left at
    its default, ``min(2000, threshold // 10)`` so that it stays a small share."""
    if type(chosen) is _DefaultBudget:
        return min(int(chosen), threshold // 10)
    return int(chosen)

REQUEST_CHARS: Final = 2000
"""The last user request is kept whole up to this many characters."""

LINE_CHARS: Final = 300
"""An error line is kept up to this many characters (a longer one is clipped around
its error, a ``…`` marking each cut end)."""

_CONTEXT_CHARS: Final = LINE_CHARS // 4
"""How much of a clipped line is kept before its error."""

PINNED_HEADING: Final = "[Pinned facts: kept verbatim from the summarised history]"
_PINNED_START: Final = "\n\n" + PINNED_HEADING + "\n"
_REQUEST_LABEL: Final = "Last user request: "
_REQUEST_RE: Final = re.compile(
    r"Last user request(?: \((?:user turn (\d+))?(?:, )?(?:(\d+) lines)?\))?: "
)
"""A request's pinned label: the user turn it is, and, for a request of several
lines, how many (so that a carried over request is read back whole)."""
_ERROR_LABEL: Final = "Error: "
_RESULT_HEAD_RE: Final = re.compile(r"^\[tool_result:[^\]\n]*\] ?", re.MULTILINE)

URL_RE: Final = re.compile(r"https?://[^\s<>\"'`\])}]+")
PATH_RE: Final = re.compile(
    r"(?<![\w/.:-])((?:~|\.{1,2})?/?(?:[\w.-]+/)+[\w.-]+|[\w-]+\.(?:py|toml|json|jsonl|md|txt|"
    r"yaml|yml|cfg|ini|sh|js|ts|tsx|rs|go|c|h|cpp|java|rb|html|css|log|lock|sql|csv))(?![\w/])"
)
ERROR_RE: Final = re.compile(
    r"(Traceback|\b\w*(?:Error|Exception)\b|\bFAILED\b|\bfatal:|\berror:|\bERROR\b|panic:|"
    r"错误|失败|异常)"
)


@dataclass(slots=True)
class Facts:
    """What a summary source holds that must survive it, oldest first."""

    request: str | None = None
    paths: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)
    """Ids and numbers of a previous pinned block (pinned as used meanwhile), as lines."""
    instructions: list[Instruction] = field(default_factory=list)
    """The standing instructions of the user's turns, oldest first."""
    turns: int = 0
    """The user turns counted so far (those of a previous pinned block included)."""
    request_turn: int = 0
    """The user turn of :attr:`request`."""


def _key(value: str) -> str:
    """What two spellings of one fact share: whitespace collapsed, case folded."""
    return " ".join(value.split()).casefold()


def _add(found: list[str], seen: set[str], value: str) -> None:
    key = _key(value)
    if key not in seen:
        seen.add(key)
        found.append(value)


def _clipped(line: str) -> str:
    """``line`` stripped, and clipped to :data:`LINE_CHARS` around its first error
    (some context before it), a ``…`` marking each end that was cut."""
    line = line.strip()
    if len(line) <= LINE_CHARS:
        return line
    found = ERROR_RE.search(line)
    at = 0 if found is None else found.start()
    start = max(0, min(at - _CONTEXT_CHARS, len(line) - LINE_CHARS))
    end = start + LINE_CHARS
    return ("…" if start else "") + line[start:end] + ("…" if end < len(line) else "")


def _error_value(line: str) -> str:
    """An error line without the ``Error:`` labels a pinned block put before it
    (a label is only taken off when what follows is itself an error line)."""
    value = line.strip()
    while value[: len(_ERROR_LABEL)].casefold() == _ERROR_LABEL.casefold():
        rest = value[len(_ERROR_LABEL) :].strip()
        if not ERROR_RE.search(rest):
            break
        value = rest
    return value


def _error_line(value: str) -> str:
    """The pinned line of an error: labelled, unless it already starts with the label."""
    if value[: len(_ERROR_LABEL)].casefold() == _ERROR_LABEL.casefold():
        return value
    return _ERROR_LABEL + value


def _split_pinned(message: Message) -> tuple[Message, list[str]]:
    """A previous summary message without its pinned block, and that block's lines."""
    content = own_text(message.get("content"))
    if dialects.kind(message) is not dialects.Kind.USER or content is None:
        return message, []
    if not content.startswith(SUMMARY_PREFIX) or _PINNED_START not in content:
        return message, []
    head, _, block = content.partition(_PINNED_START)
    return {**message, "content": head}, block.split("\n")


def extract(source: Sequence[Message]) -> Facts:
    """The facts of ``source``: the last user request (not a previous summary),
    and every distinct path, URL and error line, in order of appearance. A
    previous summary's pinned lines are taken as they are, never searched;
    error lines are read in tool results and assistant text only, and the last
    request's own lines are not error lines."""
    facts = Facts()
    names = tool_names(source)
    seen: set[str] = set()
    for original in source:
        message, pinned = _split_pinned(original)
        _carry_over(facts, seen, pinned)
        _read_user_turn(facts, message, names)
        _add_urls_and_paths(facts, seen, render_message(message, names))
        _add_errors(facts, seen, _reported(message, names))
    if facts.request:
        own = {_key(_error_value(line)) for line in facts.request.splitlines()}
        facts.errors = [error for error in facts.errors if _key(error) not in own]
    return facts


def _read_user_turn(facts: Facts, message: Message, names: dict[str, str]) -> None:
    """A user turn's request and standing instructions (the text blocks beside tool
    results are user turns too); nothing for a previous summary."""
    message_kind = dialects.kind(message)
    if message_kind is dialects.Kind.USER:
        text = _request(message, names)
    elif message_kind is dialects.Kind.RESULTS and isinstance(message.get("content"), list):
        blocks = [b for b in message["content"] if _is_block(b, "text")]
        text = render_content(blocks, names).strip() or None
    else:
        return
    if text is None:
        return
    facts.turns += 1
    if message_kind is dialects.Kind.USER:
        facts.request, facts.request_turn = text, facts.turns
    instructions.merge(facts.instructions, instructions.instructions_in(text, facts.turns))


def _reported(message: Message, names: dict[str, str]) -> str:
    """Where ``message`` may report an error: the content of its tool results, or an
    assistant's text; never a tool call's input, a user's or a system's words."""
    message_kind = dialects.kind(message)
    content = message.get("content")
    if message_kind is dialects.Kind.RESULTS and isinstance(content, list):
        message = {**message, "content": [b for b in content if _is_result_block(b)]}
    elif message_kind is dialects.Kind.ASSISTANT:
        message = _without_calls(message)
    elif message_kind is not dialects.Kind.RESULT:
        return ""
    return _RESULT_HEAD_RE.sub("", render_message(message, names))


def _without_calls(message: Message) -> Message:
    """An assistant message without its tool calls (a Responses call item: empty)."""
    if not dialects.calls(message):
        return message
    if dialects.typed_item(message) is not None:
        return {"role": "assistant", "content": ""}  # nothing but its call
    content = message.get("content")
    if isinstance(content, list):
        content = [b for b in content if not _is_block(b, dialects.TOOL_USE)]
    return {**{k: v for k, v in message.items() if k != "tool_calls"}, "content": content}


def _is_block(block: object, block_type: str) -> bool:
    return isinstance(block, dict) and block.get("type") == block_type


def _is_result_block(block: object) -> bool:
    return _is_block(block, dialects.TOOL_RESULT)


def _pinned_entries(lines: list[str]) -> Iterator[tuple[str, str]]:
    """The ``(label, value)`` of each entry of a pinned block, in its order; a
    request's value holds all of its lines."""
    index = 0
    while index < len(lines):
        line = lines[index]
        request = _REQUEST_RE.match(line)
        if request is not None:
            count = int(request.group(2) or 1)
            value = "\n".join([line[request.end() :], *lines[index + 1 : index + count]])
            yield f"{_REQUEST_LABEL}{request.group(1) or 0}", value
            index += count
            continue
        if line[: len(_ERROR_LABEL)].casefold() == _ERROR_LABEL.casefold():
            yield _ERROR_LABEL, line  # kept as it is ("ERROR: ..." too)
        else:
            yield line[: line.find(": ") + 2], line
        index += 1


def _carry_over(facts: Facts, seen: set[str], lines: list[str]) -> None:
    """The facts of a previous pinned block (newest first), oldest first, by label."""
    kinds = {"File: ": facts.paths, "URL: ": facts.urls}
    carried = [parsed for line in lines if (parsed := instructions.parse(line)) is not None]
    for label, value in reversed(list(_pinned_entries(lines))):
        if label.startswith(_REQUEST_LABEL):
            turn = int(label[len(_REQUEST_LABEL) :])
            facts.request, facts.request_turn = value, turn
            carried += instructions.instructions_in(value, turn)
        elif label == _ERROR_LABEL:
            _add(facts.errors, seen, _error_value(value))
        elif label in _VALUE_LABELS:
            _add(facts.ids, seen, value)  # the whole line: its label tells id from number
        elif label in kinds:
            _add(kinds[label], seen, value[len(label) :])
    carried.sort(key=lambda found: found.turn)  # stable: a line's own order stays
    instructions.merge(facts.instructions, carried)
    facts.turns = max([facts.turns, facts.request_turn, *(found.turn for found in carried)])


def _request(message: Message, names: dict[str, str]) -> str | None:
    """The text of a user message, unless it is empty or a previous summary."""
    content = render_content(message.get("content"), names).strip()
    if content and not content.startswith(SUMMARY_PREFIX):
        return content
    return None


def _add_urls_and_paths(facts: Facts, seen: set[str], text: str) -> None:
    """The URLs of ``text``, then the paths outside them."""
    for url in URL_RE.findall(text):
        _add(facts.urls, seen, url.rstrip(".,;:"))
    for path in PATH_RE.findall(URL_RE.sub(" ", text)):
        if "/" in path or "." in path:
            _add(facts.paths, seen, path)


def _add_errors(facts: Facts, seen: set[str], text: str) -> None:
    """The error lines of ``text`` (not a truncation marker), stripped and clipped."""
    for line in text.splitlines():
        if ERROR_RE.search(line) and not line.startswith("[truncated:"):
            _add(facts.errors, seen, _error_value(_clipped(line)))


class _Lines:
    """Lines taken while they fit a token budget (the heading counted first)."""

    __slots__ = ("budget", "count", "lines", "used")

    def __init__(self, budget: int, count: Callable[[str], int], framing: str) -> None:
        self.lines: list[str] = []
        self.budget = budget
        self.count = count
        self.used = count(PINNED_HEADING) + count(framing) + 3

    def holds(self, value: str) -> bool:
        """Whether a line taken holds ``value``."""
        return any(value in line for line in self.lines)

    def take(self, line: str) -> bool:
        """Take ``line`` if it fits; whether it did."""
        size = self.count(line) + 1
        if self.used + size > self.budget:
            return False
        self.lines.append(line)
        self.used += size
        return True


def _request_line(facts: Facts, summary: str) -> str | None:
    """The last user request's line, unless the summary already holds it."""
    request = facts.request
    if not request or request in summary:
        return None
    if len(request) > REQUEST_CHARS:
        request = request[:REQUEST_CHARS] + " …"
    where = [f"user turn {facts.request_turn}"] if facts.request_turn else []
    count = len(request.split("\n"))
    if count > 1:
        where.append(f"{count} lines")
    if not where:
        return _REQUEST_LABEL + request
    return f"Last user request ({', '.join(where)}): {request}"


def _take_instructions(taken: _Lines, facts: Facts, request: str | None) -> None:
    """The standing instructions not already in the pinned ``request``, newest first
    while they fit, set down oldest first."""
    start = len(taken.lines)
    for instruction in reversed(facts.instructions):
        if request is None or instruction.text not in request:
            taken.take(instructions.line(instruction))
    taken.lines[start:] = reversed(taken.lines[start:])


def _rounds(facts: Facts, summary: str) -> Iterator[list[str]]:
    """The lines of the facts the summary lacks, newest first, one of each kind a
    round, so that one kind cannot crowd out the others."""
    errors = list(map(_error_line, facts.errors))
    files, urls = [f"File: {p}" for p in facts.paths], [f"URL: {u}" for u in facts.urls]
    kinds = (errors, files, urls, facts.ids)
    values = (facts.errors, facts.paths, facts.urls, [i.partition(": ")[2] for i in facts.ids])
    queues = [
        [line for line, value in zip(reversed(lines), reversed(found), strict=True)
         if value not in summary]
        for lines, found in zip(kinds, values, strict=True)
    ]
    while any(queues):
        yield [queue.pop(0) for queue in queues if queue]


def pinned_block(facts: Facts, summary: str, budget: int, count: Callable[[str], int]) -> str:
    """The text to append to the summary: the last request, the standing
    instructions (always: the block is what carries them from one summary to the
    next), then the facts the summary lacks, newest first in each kind, and last
    the continuation framing in the summary's language (the summary is history:
    go on without redoing finished work), within ``budget`` (as measured by
    ``count``). Empty if none."""
    return pinned_with(facts, summary, budget, count, ())[0]


def pinned_with(
    facts: Facts, summary: str, budget: int, count: Callable[[str], int], used: Sequence[Identifier]
) -> tuple[str, int]:
    """:func:`pinned_block`, with the identifiers ``used`` meanwhile (see
    :mod:`bareagent_compact.identifiers`) pinned after the instructions and before
    the other facts, in their order, each unless a line taken already holds it;
    the block, and how many of ``used`` it pins."""
    framing = framing_for(summary)
    taken = _Lines(budget, count, framing)
    request = _request_line(facts, summary)
    if request is not None and not taken.take(request):
        request = None
    _take_instructions(taken, facts, request)
    pinned = sum(taken.take(i.line) for i in used if not taken.holds(i.value))  # lazily
    for lines in _rounds(facts, summary):
        fitted = [line in taken.lines or taken.take(line) for line in lines]  # each is tried
        if not any(fitted):
            break
    if not taken.lines:
        return "", 0
    return "\n\n" + PINNED_HEADING + "\n" + "\n".join([*taken.lines, framing]), pinned


@dataclass(frozen=True, slots=True)
class Identifier:
    """An identifier a message uses: the label it is pinned with, and its text."""

    label: str
    value: str

    @property
    def line(self) -> str:
        """Its pinned line."""
        return _error_line(self.value) if self.label == _ERROR_LABEL else self.label + self.value


_VALUE_LABELS: Final = ("Id: ", "Number: ")
