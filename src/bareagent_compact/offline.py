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
        goals: list[str] = []
        tools: Counter[str] = Counter()
        paths: dict[str, None] = {}
        errors: dict[str, None] = {}
        last_assistant = ""
        truncated = 0
        for role, body in turns:
            for match in _PATH_RE.finditer(body):
                paths.setdefault(match.group(1), None)
            if role == "user" and body.startswith(_PREVIOUS):
                # An earlier summary: carry its goals and tool counts forward.
                goals.extend(_section(body, "目标").removeprefix("- ").split("\n- "))
                for line in _section(body, "错误").split("\n"):
                    if line.startswith("- ") and line != "- (none)":
                        errors.setdefault(line[2:], None)
                for name, count in _tool_counts(_section(body, "工具")):
                    tools[name] += count
                continue
            tools.update(_TOOL_USE_RE.findall(body))
            truncated += len(_TRUNCATED_RE.findall(body))
            if role == "user" and body.startswith("[tool_result:"):
                for line in body.splitlines():
                    if _ERROR_RE.search(line):
                        errors.setdefault(_clip(line, 120), None)
            elif role == "user":
                goals.append(_clip(body, 160))
            elif role == "assistant":
                text = "\n".join(
                    line for line in body.splitlines() if not line.startswith("[tool_use:")
                ).strip()
                if text:
                    last_assistant = text
        tool_line = "、".join(f"{name}×{count}" for name, count in tools.most_common(8))
        sections = [
            (
                "目标 (goals)",
                "\n".join(f"- {g}" for g in _first_and_last(goals) if g != "(none)") or "- (none)",
            ),
            ("工具 (tools used)", tool_line or "(none)"),
            ("路径 (paths)", ", ".join(list(paths)[:12]) or "(none)"),
            ("错误 (errors)", "\n".join(f"- {e}" for e in list(errors)[-4:]) or "- (none)"),
            ("最近进展 (last assistant statement)", _clip(last_assistant, 300) or "(none)"),
        ]
        header = f"离线摘要：{len(turns)} 条消息，{truncated} 个结果已截断。"
        return self._bounded(header, sections)

    def _bounded(self, header: str, sections: list[tuple[str, str]]) -> str:
        text = "\n\n".join([header, *(f"{title}:\n{body}" for title, body in sections)])
        if len(text) <= self.max_chars:
            return text
        return text[: self.max_chars - 1] + "…"
