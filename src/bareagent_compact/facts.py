"""Facts kept across a summary, found without a model: the things agents forget.

Before a rebuild, the summary source is read for the last user request, file
paths, URLs and error lines. Whatever of these the summary does not already
contain is appended to the summary message under a short heading, newest
first, within a token budget. Everything here is deterministic and linear in
the size of the source.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Final

from bareagent_compact import dialects
from bareagent_compact.prompts import SUMMARY_PREFIX
from bareagent_compact.protocols import Message
from bareagent_compact.serialize import render_content, render_message, tool_names

DEFAULT_PIN_FACTS_TOKENS: Final = 2000
"""The most the pinned facts may add to the summary message, in estimated tokens."""

REQUEST_CHARS: Final = 2000
"""The last user request is kept whole up to this many characters."""

LINE_CHARS: Final = 300
"""An error line is kept up to this many characters."""

PINNED_HEADING: Final = "[Pinned facts: kept verbatim from the summarised history]"

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


def _add(found: list[str], seen: set[str], value: str) -> None:
    if value not in seen:
        seen.add(value)
        found.append(value)


def extract(source: Sequence[Message]) -> Facts:
    """The facts of ``source``: the last user request (not a previous summary),
    and every distinct path, URL and error line, in order of appearance."""
    facts = Facts()
    names = tool_names(source)
    seen: set[str] = set()
    for message in source:
        text = render_message(message, names)
        kind = dialects.kind(message)
        if kind is dialects.Kind.USER:
            content = render_content(message.get("content"), names).strip()
            if content and not content.startswith(SUMMARY_PREFIX):
                facts.request = content
        for url in URL_RE.findall(text):
            _add(facts.urls, seen, url.rstrip(".,;:"))
        without_urls = URL_RE.sub(" ", text)
        for path in PATH_RE.findall(without_urls):
            if "/" in path or "." in path:
                _add(facts.paths, seen, path)
        for line in text.splitlines():
            if ERROR_RE.search(line) and not line.startswith("[truncated:"):
                stripped = line.strip()
                _add(facts.errors, seen, stripped[:LINE_CHARS])
    return facts


def pinned_block(
    facts: Facts, summary: str, budget: int, count: Callable[[str], int]
) -> str:
    """The text to append to the summary: the facts the summary lacks, newest first
    in each kind, within ``budget`` (as measured by ``count``). Empty if none."""
    lines: list[str] = []
    used = count(PINNED_HEADING) + 2

    def take(line: str) -> bool:
        nonlocal used
        size = count(line) + 1
        if used + size > budget:
            return False
        lines.append(line)
        used += size
        return True

    request = facts.request
    if request and request not in summary:
        if len(request) > REQUEST_CHARS:
            request = request[:REQUEST_CHARS] + " …"
        take("Last user request: " + request)
    kinds = (("Error", facts.errors), ("File", facts.paths), ("URL", facts.urls))
    queues = [[v for v in reversed(values) if v not in summary] for _, values in kinds]
    # Newest first, taking the kinds in turn, so one kind cannot crowd out the others.
    while any(queues):
        progressed = False
        for (label, _), queue in zip(kinds, queues, strict=True):
            if queue:
                value = queue.pop(0)
                progressed = take(f"{label}: {value}") or progressed
        if not progressed:
            break
    if not lines:
        return ""
    return "\n\n" + PINNED_HEADING + "\n" + "\n".join(lines)
