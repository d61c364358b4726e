"""Standing instructions found in the user's words, without a model.

A rule the user gave once ("never push to main", "the budget cap is $500",
"不要修改测试文件") must outlive every summary. The user's turns are read
sentence by sentence; a sentence holding a rule word (never, must, always, do
not, only, at most, budget, limit, allow and deny lists ..., and the Chinese
不要, 必须, 禁止, 始终, 只能, 不得, 最多 ...) is a standing instruction, kept
verbatim with the user turn it came from.

Two instructions are one when their text is the same (whitespace and case
aside): the first is kept. A newer instruction replaces an older one with the
same subject (see :func:`same_subject`): both state a quantity, in the same
unit, and the first subject word of one is a subject word of the other ("the
budget is now $800" replaces "the budget cap is $500"). Everything is
deterministic and linear in the text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

INSTRUCTION_CHARS: Final = 400
"""A longer sentence is not taken as an instruction (pasted text, logs or code)."""

_ENGLISH_RULE: Final = (
    r"never|must(?:n't| not)?|always|do not|don't|dont|does not|doesn't|shall not|"
    r"only|at most|at least|no more than|not more than|budget|limits?|limited|"
    r"cap|capped|max|maximum|minimum|allow(?:ed|list)?|disallow(?:ed)?|"
    r"deny(?:list)?|denied|block ?list|white ?list|black ?list|forbid(?:den)?|"
    r"prohibit(?:ed)?|required?|avoid|under no circumstances"
)
_CHINESE_RULE: Final = (
    "不要|必须|禁止|始终|总是|永远|只能|只允许|仅限|不得|不能|不可|不准|最多|至多|"
    "最少|至少|不超过|不允许|允许|务必|一律|严禁|切勿|千万|预算|上限|限制|白名单|黑名单"
)
RULE_RE: Final = re.compile(rf"\b(?:{_ENGLISH_RULE})\b|{_CHINESE_RULE}", re.IGNORECASE)
"""A word that makes a sentence a rule or a constraint."""

_SENTENCE_END_RE: Final = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；])")
_LIST_MARK_RE: Final = re.compile(r"^\s*(?:[-*+•]|\d{1,3}[.)]|[（(]?\d{1,3}[)）])\s+")
_FENCE: Final = "```"

_NUMBER_RE: Final = re.compile(
    r"([$€£¥￥])?\s?\d[\d,.]*\s?(%|[A-Za-z]+|[\u3400-\u9fff])?"
)
_WORD_RE: Final = re.compile(r"[A-Za-z][A-Za-z_-]+|[\u3400-\u9fff]+")
_STOP_TEXT: Final = (
    "a an the is are be was were been now this that these those it its our my your "
    "their we you i he she they to of for on in at by and or but so as with please "
    "should will would shall must mustn't never always only do does don't dont not no "
    "most least more less than max maximum minimum limit limits set keep stay under over "
    "below above per each every all any use make sure also still new from up down "
    "there here then"
)
_STOP_WORDS: Final = frozenset(_STOP_TEXT.split())
_CHINESE_LEAD: Final = re.compile(
    r"^(?:请|你|您|我们|我|现在|以后|今后|务必|必须|始终|总是|一律|永远|不要|禁止|"
    r"最多|至多|只能|不得|严禁|切勿|把|将|的)+"
)


@dataclass(frozen=True, slots=True)
class Instruction:
    """One standing instruction: its sentence, as written, and the user turn it came
    from (counted from the start of the conversation, as far as the pins tell)."""

    text: str
    turn: int


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def sentences(text: str) -> Iterator[str]:
    """The sentences of ``text`` outside code fences, each stripped of a list mark."""
    fenced = False
    for line in text.split("\n"):
        if line.lstrip().startswith(_FENCE):
            fenced = not fenced
            continue
        if fenced:
            continue
        for piece in _SENTENCE_END_RE.split(_LIST_MARK_RE.sub("", line)):
            sentence = piece.strip()
            if sentence:
                yield sentence


def is_instruction(sentence: str) -> bool:
    """Whether ``sentence`` states a rule or a constraint: it holds a rule word, is
    not a question and is not longer than :data:`INSTRUCTION_CHARS`."""
    return (
        len(sentence) <= INSTRUCTION_CHARS
        and not sentence.endswith(("?", "？"))
        and RULE_RE.search(sentence) is not None
    )


def subject(sentence: str) -> tuple[str, tuple[str, ...]] | None:
    """What a sentence constrains, when it states a quantity: the unit of its first
    number (a currency sign, ``%``, or the word right after it), and its subject
    words: the words before that number that are not stop, modal or quantity
    words (the words after it when there are none before; for Chinese, the first
    two characters of each run, after a leading 请, 必须, 最多 ...), then the unit
    word itself ("max 5 retries"). ``None`` without a number or a subject:
    such a sentence is only de-duplicated."""
    number = _NUMBER_RE.search(sentence)
    if number is None:
        return None
    unit = _singular((number.group(1) or number.group(2) or "").casefold())
    words = _subject_words(sentence[: number.start()]) or _subject_words(
        sentence[number.end() :]
    )
    if unit.isalpha() and len(unit) > 1 and unit.isascii():
        words += (unit,)
    return (unit, words) if words else None


def _subject_words(text: str) -> tuple[str, ...]:
    words = []
    for word in _WORD_RE.findall(text):
        if word[0] >= "\u3400":
            rest = _CHINESE_LEAD.sub("", word)
            if len(rest) >= 2:
                words.append(rest[:2])
        elif word.casefold() not in _STOP_WORDS:
            words.append(_singular(word.casefold()))
    return tuple(words)


def same_subject(older: str, newer: str) -> bool:
    """Whether ``newer`` restates the quantity ``older`` sets: both state one in the
    same unit, and the first subject word of one is a subject word of the other
    ("the budget cap is $500" and "change of plan: the budget is now $800")."""
    first, second = subject(older), subject(newer)
    if first is None or second is None or first[0] != second[0]:
        return False
    return first[1][0] in second[1] or second[1][0] in first[1]


def _singular(word: str) -> str:
    return word[:-1] if len(word) > 3 and word.endswith("s") else word


def instructions_in(text: str, turn: int) -> list[Instruction]:
    """The standing instructions of one user turn's ``text``, in order."""
    return [Instruction(s, turn) for s in sentences(text) if is_instruction(s)]


def merge(standing: list[Instruction], new: list[Instruction]) -> None:
    """Add ``new`` (a later turn's) to ``standing`` in place: a repeated instruction
    is kept once (the first), and one on the same subject replaces the older."""
    for instruction in new:
        key = _key(instruction.text)
        if any(_key(old.text) == key for old in standing):
            continue
        standing[:] = [old for old in standing if not same_subject(old.text, instruction.text)]
        standing.append(instruction)


_LINE_RE: Final = re.compile(r"Instruction \(user turn (\d+)\): ")


def line(instruction: Instruction) -> str:
    """The pinned line of an instruction."""
    return f"Instruction (user turn {instruction.turn}): {instruction.text}"


def parse(pinned: str) -> Instruction | None:
    """The instruction of a pinned line (``None`` for any other line)."""
    found = _LINE_RE.match(pinned)
    if found is None:
        return None
    return Instruction(pinned[found.end() :], int(found.group(1)))
