"""The identifiers a summary is checked against when it is swapped in after steps
taken meanwhile (background compaction): the URLs, file paths, error lines, ids
and numbers those steps use that only the summarised part held. Found without a
model, linear in the size of the history; pinned by
:func:`bareagent_compact.facts.pinned_with`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Final

from bareagent_compact.facts import (
    _ERROR_LABEL,
    ERROR_RE,
    PATH_RE,
    URL_RE,
    Identifier,
    _clipped,
    _error_value,
    _key,
    _reported,
)
from bareagent_compact.protocols import Message
from bareagent_compact.serialize import render_message, tool_names

ID_RE: Final = re.compile(r"(?<![\w./-])[A-Za-z0-9][\w-]{4,}[A-Za-z0-9](?![\w/-]|\.\w)", re.ASCII)
"""A word of 6+ ASCII letters, digits, ``_`` and ``-``: an id if it holds a letter and 2 digits."""
NUMBER_RE: Final = re.compile(
    r"(?<![\w.,])[$€£¥]?\d+(?:[.,]\d+)*(?:(?:%|[KMGT]i?B|kB|B|ms|us|ns|s|h|k|K|M|px)(?!\w)|"
    r" (?:[KMGT]i?B|kB|bytes|ms|sec|min|tokens)(?!\w))?(?!\w)",
    re.ASCII,
)
"""A number, with a currency sign before it or a unit after it (``$500``, ``250ms``,
``3.5 GB``, ``80%``): one counts with a sign or a unit, or with 3 or more digits."""
_HEAD_RE: Final = re.compile(r"\[tool_(?:use|result)(?::[^\]\n]*)?\]")


def _is_id(word: str) -> bool:
    """A word of :data:`ID_RE` holding a letter and at least 2 digits."""
    return sum(c.isdigit() for c in word) >= 2 and any(c.isalpha() for c in word)


def _counts(number: str) -> bool:
    """A number of :data:`NUMBER_RE` that counts: a sign, a unit, or 3+ digits."""
    return not (number[0] + number[-1]).isdigit() or sum(c.isdigit() for c in number) >= 3


def _values_in(text: str) -> Iterator[Identifier]:
    """The URLs, paths, ids and numbers of ``text``, each kind outside the ones before."""
    for url in URL_RE.findall(text):
        yield Identifier("URL: ", url.rstrip(".,;:"))
    text = URL_RE.sub(" ", text)
    for path in PATH_RE.findall(text):
        if "/" in path or "." in path:
            yield Identifier("File: ", path)
    text = PATH_RE.sub(" ", text)
    for word in ID_RE.findall(text):
        if _is_id(word):
            yield Identifier("Id: ", word)
    text = ID_RE.sub(lambda found: " " if _is_id(found[0]) else found[0], text)
    for number in NUMBER_RE.finditer(text):
        if _counts(number[0]):
            yield Identifier("Number: ", number[0])


def identifiers(messages: Sequence[Message]) -> list[Identifier]:
    """The distinct identifiers ``messages`` use, in order of appearance: URLs, file
    paths, ids (:data:`ID_RE`: a letter and 2+ digits), numbers (:data:`NUMBER_RE`:
    3+ digits, or a currency sign or a unit), read in all of a message but the tool
    names, and error lines, read where errors are reported, as :func:`extract` does."""
    names = tool_names(messages)
    found: dict[tuple[str, str], Identifier] = {}
    for message in messages:
        text = _HEAD_RE.sub(" ", render_message(message, names))
        errors = [
            Identifier(_ERROR_LABEL, _error_value(_clipped(line)))
            for line in _reported(message, names).splitlines()
            if ERROR_RE.search(line) and not line.startswith("[truncated:")
        ]
        for identifier in [*_values_in(text), *errors]:
            found.setdefault(_id_key(identifier), identifier)
    return list(found.values())


def _text(messages: Sequence[Message]) -> str:
    """What is read of ``messages``: their text, the tool names left out."""
    names = tool_names(messages)
    return _HEAD_RE.sub(" ", "\n".join(render_message(m, names) for m in messages))


def _held(messages: Sequence[Message], used: list[Identifier]) -> list[Identifier]:
    """Those of ``used`` that ``messages`` hold, whitespace collapsed and case
    ignored: an error line anywhere in their text; an identifier of another kind
    found there by the same recognisers (only the lines that hold its text are read)."""
    lines = _text(messages).split("\n")
    folded = list(map(_key, lines))
    whole = "\n".join(folded)
    within = [i for i in used if _key(i.value) in whole]
    read = _holding(lines, folded, {_key(i.value) for i in within if i.label != _ERROR_LABEL})
    held = set(map(_id_key, _values_in(read)))
    return [i for i in within if i.label == _ERROR_LABEL or _id_key(i) in held]


def _id_key(identifier: Identifier) -> tuple[str, str]:
    """What two spellings of one identifier share: its label, and its text's key."""
    return identifier.label, _key(identifier.value)


def _holding(lines: list[str], folded: list[str], keys: set[str]) -> str:
    """The ``lines`` whose ``folded`` form holds one of ``keys``."""
    if not keys:
        return ""
    wanted = re.compile("|".join(map(re.escape, sorted(keys, key=len, reverse=True))))
    return "\n".join(line for line, key in zip(lines, folded, strict=True) if wanted.search(key))


def used_meanwhile(
    summarised: Sequence[Message],
    meanwhile: Sequence[Message],
    kept: Sequence[Message],
    summary: str,
) -> list[Identifier]:
    """The identifiers the steps taken ``meanwhile`` use that the ``summarised``
    messages hold (the same label and text, whitespace collapsed, case ignored; an
    error line anywhere in their text) and that neither the ``summary`` nor the
    ``kept`` messages contain (a plain substring test), the newest use first."""
    used = identifiers(meanwhile)
    if not used:
        return []
    candidates = _held(summarised, used[::-1])
    if not candidates:
        return []
    names = tool_names(kept)
    present = "\n".join([summary, *(render_message(m, names) for m in kept)])
    return [i for i in candidates if i.value not in present]
