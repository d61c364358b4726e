"""What the example loops share: the agent's tools, tasks, command line and report.

The tool outputs are deliberately large (a few thousand characters), like real
log searches and file reads: they are what pushes a history over its threshold.
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass, field
from typing import Any

from bareagent_compact import Action, CompactionResult

SYSTEM_PROMPT = (
    "You are an operations agent. Investigate the user's incident with the tools, "
    "then answer briefly."
)

TASKS = [
    "Workers time out at night. Find out why.",
    "Which module retries too aggressively?",
    "Check the cache layer for stale reads.",
    "Summarise the incidents of this week.",
    "Is the scheduler dropping jobs?",
    "Look for memory growth in the ingest service.",
    "Why did the deploy at 03:00 roll back?",
]

_DESCRIPTIONS = {
    "search_logs": ("Search the service logs.", "query", "What to search for."),
    "read_file": ("Read a source file of the service.", "path", "Path of the file."),
}


def _schema(argument: str, description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {argument: {"type": "string", "description": description}},
        "required": [argument],
    }


ANTHROPIC_TOOLS = [
    {"name": name, "description": text, "input_schema": _schema(arg, arg_text)}
    for name, (text, arg, arg_text) in _DESCRIPTIONS.items()
]

CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": name, "description": text, "parameters": _schema(arg, arg_text)},
    }
    for name, (text, arg, arg_text) in _DESCRIPTIONS.items()
]

RESPONSES_TOOLS = [
    {"type": "function", "name": name, "description": text, "parameters": _schema(arg, arg_text)}
    for name, (text, arg, arg_text) in _DESCRIPTIONS.items()
]


def run_tool(name: str, arguments: dict[str, Any], size: int = 4000) -> str:
    """Run a tool locally: deterministic output of about ``size`` characters."""
    seed = f"{name}:{sorted(arguments.items())}"
    lines: list[str] = []
    total = 0
    for n in range(10_000):
        digest = hashlib.sha256(f"{seed}:{n}".encode()).hexdigest()[:12]
        if name == "search_logs":
            line = f"2026-11-30T03:{n % 60:02d}:00Z worker-{n % 7} WARN request {digest} slow"
        else:
            line = (
                f"{n + 1:4d}  def handler_{digest}(event): return process(event, retries={n % 5})"
            )
        lines.append(line)
        total += len(line) + 1
        if total >= size:
            break
    return "\n".join(lines)


@dataclass
class Report:
    """What one loop did: requests made and what compaction did on each turn."""

    turns: int = 0
    full: int = 0
    micro: int = 0
    failed: int = 0
    overflow_retries: int = 0
    reasons: list[str] = field(default_factory=list)
    recall: bool = False
    """Whether the loop offered the recall tool: the report then counts recalls."""
    recalls: int = 0
    recalled_exact: int = 0

    def record(self, result: CompactionResult) -> None:
        if result.action is Action.FULL:
            self.full += 1
        elif result.action is Action.MICRO:
            self.micro += 1
        elif result.action is Action.FAILED:
            self.failed += 1
            self.reasons.append(result.reason or "")

    def line(self, rejected: int | None = None) -> str:
        text = (
            f"turns={self.turns} full_compactions={self.full} micro_compactions={self.micro} "
            f"failed_compactions={self.failed} overflow_retries={self.overflow_retries}"
        )
        if self.recall:
            text += f" recalls={self.recalls} recalled_exact={self.recalled_exact}"
        return text if rejected is None else f"{text} rejected_requests={rejected}"


def parser(description: str, default_model: str) -> argparse.ArgumentParser:
    """The command line every example loop takes."""
    cli = argparse.ArgumentParser(description=description)
    cli.add_argument("--offline", action="store_true", help="talk to a local fake API, no key")
    cli.add_argument("--model", default=default_model, help=f"model name (default {default_model})")
    cli.add_argument("--turns", type=int, default=30, help="model requests to make (default 30)")
    cli.add_argument(
        "--threshold",
        type=int,
        default=None,
        help="compaction threshold in estimated tokens (default 3000 offline, 50000 online)",
    )
    cli.add_argument("--quiet", action="store_true", help="print only the final report")
    return cli
