"""A deterministic, offline summary provider: no model, standard library only.

It reads the serialised history in the prompt and extracts what a model summary
would keep first: the user's goals, the tools used and how often, file paths,
errors seen and the last assistant statement, within a length bound. Use it for
demos, tests and as a fallback when no model is reachable.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Final

from bareagent_compact.facts import PATH_RE
from bareagent_compact.protocols import Message
from bareagent_compact.validate import check_int

DEFAULT_MAX_CHARS: Final = 1500

_HEADER_RE: Final = re.compile(r"\[(user|assistant|system)\]")
_TOOL_USE_RE: Final = re.compile(r"\[tool_use:([^\[\]\s]+)\]")
_PATH_RE: Final = PATH_RE
_ERROR_RE: Final = re.compile(
    r"(Traceback|\b\w+(?:Error|Exception):|\bFAILED\b|^E\s|fatal:|错误|失败|异常)"
)
_TRUNCATED_RE: Final = re.compile(r"\[truncated: ")
_PREVIOUS: Final = "[Context Compressed]"


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _turns(transcript: str) -> list[tuple[str, str]]:
    """Split a serialised transcript back into (role, body) pairs.

    Only real headers count: the first ``[role]`` line, then only one after a
    blank line, with lines split at ``\n`` alone, exactly as ``_serialize``
    writes them. ``_serialize`` escapes content lines that would read as a
    header, so tool output cannot start a turn of its own.
    """
    turns: list[tuple[str, list[str]]] = []
    after_blank = True
    for line in transcript.split("\n"):
        header = _HEADER_RE.fullmatch(line) if after_blank or not turns else None
        if header:
            turns.append((header.group(1), []))
        elif turns:
            turns[-1][1].append(line)
        after_blank = not line
    return [(role, "\n".join(lines).strip()) for role, lines in turns]


def _tool_counts(line: str) -> list[tuple[str, int]]:
    """The ``name×count`` items of an earlier summary's tool line (joined by ``、``).

    Parsed with splits rather than a regular expression, so that a long run of
    text without a separator costs linear time; absurd counts are ignored.
    """
    counts: list[tuple[str, int]] = []
    for item in line.replace("、", " ").split():
        name, sep, count = item.rpartition("×")
        if sep and name and count.isdecimal() and len(count) <= 9:
            counts.append((name, int(count)))
    return counts


def _first_and_last(goals: list[str], last: int = 5) -> list[str]:
    """The first goal (the session's purpose) and the ``last`` most recent ones."""
    return goals if len(goals) <= last + 1 else [goals[0], *goals[-last:]]


def _section(summary: str, title: str) -> str:
    """The body of one section of an earlier offline summary ('' when absent)."""
    start = summary.find(f"\n{title} (")
    if start < 0:
        return ""
    body_start = summary.find(":\n", start) + 2
    end = summary.find("\n\n", body_start)
    return summary[body_start : end if end >= 0 else len(summary)].strip()


class _Digest:
    """What an offline summary keeps, gathered turn by turn."""

    __slots__ = ("errors", "goals", "last_assistant", "paths", "tools", "truncated")

    def __init__(self) -> None:
        self.goals: list[str] = []
        self.tools: Counter[str] = Counter()
        self.paths: dict[str, None] = {}
        self.errors: dict[str, None] = {}
        self.last_assistant = ""
        self.truncated = 0

    def add(self, role: str, body: str) -> None:
        """Take one turn of the transcript."""
        for match in _PATH_RE.finditer(body):
            self.paths.setdefault(match.group(1), None)
        if role == "user" and body.startswith(_PREVIOUS):
            self._carry(body)
            return
        self.tools.update(_TOOL_USE_RE.findall(body))
        self.truncated += len(_TRUNCATED_RE.findall(body))
        if role == "user":
            self._add_user(body)
        elif role == "assistant":
            self._add_assistant(body)

    def _carry(self, summary: str) -> None:
        """An earlier summary: carry its goals, errors and tool counts forward."""
        self.goals.extend(_section(summary, "目标").removeprefix("- ").split("\n- "))
        for line in _section(summary, "错误").split("\n"):
            if line.startswith("- ") and line != "- (none)":
                self.errors.setdefault(line[2:], None)
        for name, count in _tool_counts(_section(summary, "工具")):
            self.tools[name] += count

    def _add_user(self, body: str) -> None:
        """A tool result gives its error lines; any other user turn is a goal."""
        if not body.startswith("[tool_result:"):
            self.goals.append(_clip(body, 160))
            return
        for line in body.splitlines():
            if _ERROR_RE.search(line):
                self.errors.setdefault(_clip(line, 120), None)

    def _add_assistant(self, body: str) -> None:
        """The assistant's text without its tool calls, if any, is the latest statement."""
        text = "\n".join(
            line for line in body.splitlines() if not line.startswith("[tool_use:")
        ).strip()
        if text:
            self.last_assistant = text

    def sections(self) -> list[tuple[str, str]]:
        """The titled sections of the summary, each ``(none)`` when empty."""
        tool_line = "、".join(f"{name}×{count}" for name, count in self.tools.most_common(8))
        goals = "\n".join(f"- {g}" for g in _first_and_last(self.goals) if g != "(none)")
        errors = "\n".join(f"- {e}" for e in list(self.errors)[-4:])
        return [
            ("目标 (goals)", goals or "- (none)"),
            ("工具 (tools used)", tool_line or "(none)"),
            ("路径 (paths)", ", ".join(list(self.paths)[:12]) or "(none)"),
            ("错误 (errors)", errors or "- (none)"),
            ("最近进展 (last assistant statement)", _clip(self.last_assistant, 300) or "(none)"),
        ]


class OfflineSummarizer:
    """A summary provider that needs no model (it satisfies ``SummaryProvider``).

    ``max_chars`` bounds the summary's length; each section is clipped to fit.
    """

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS) -> None:
        self.max_chars = check_int("max_chars", max_chars, 200)

    def __call__(self, prompt: list[Message], /) -> str:
        transcript = "\n".join(
            m["content"]
            for m in prompt
            if m.get("role") == "user" and isinstance(m.get("content"), str)
        )
        return self.summarize(transcript)

    def summarize(self, transcript: str) -> str:
        """Summarise a transcript in the ``_serialize`` format."""
        turns = _turns(transcript)
        digest = _Digest()
        for role, body in turns:
            digest.add(role, body)
        header = f"离线摘要：{len(turns)} 条消息，{digest.truncated} 个结果已截断。"
        return self._bounded(header, digest.sections())

    def _bounded(self, header: str, sections: list[tuple[str, str]]) -> str:
        text = "\n\n".join([header, *(f"{title}:\n{body}" for title, body in sections)])
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars - 1] + "…"
