"""An agent loop on OpenAI Chat Completions that keeps its history in the context window.

The loop is the one OpenAI's documentation shows: ``completion.choices[0].message``
(an SDK object) is appended as it is, then one ``tool`` message per tool call.
``compactor(messages)`` runs at the start of every turn; if the API still says
the context is too long, the loop compacts with ``force=True`` and sends the
request once more. Any OpenAI-compatible server works (set ``OPENAI_BASE_URL``).

    python examples/openai_chat_loop.py --offline            # fake local API, no key
    OPENAI_API_KEY=... python examples/openai_chat_loop.py --turns 10
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import openai
from _common import CHAT_TOOLS, SYSTEM_PROMPT, TASKS, Report, parser, run_tool
from _fake_server import FakeServer, openai_client

from bareagent_compact import Compactor, is_context_overflow
from bareagent_compact.providers import openai_chat_provider


def run(
    client: Any, model: str, turns: int, threshold: int, log: Callable[[str], object] = print
) -> Report:
    """Make ``turns`` model requests, compacting before each; return what happened."""
    compactor = Compactor(provider=openai_chat_provider(client, model), threshold=threshold)
    messages: list[Any] = [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": TASKS[0]},
    ]
    report = Report()
    tasks = iter(TASKS[1:] * (turns // len(TASKS) + 1))

    def ask() -> Any:
        return client.chat.completions.create(model=model, messages=messages, tools=CHAT_TOOLS)

    while report.turns < turns:
        result = compactor(messages)
        report.record(result)
        try:
            completion = ask()
        except Exception as error:
            if not is_context_overflow(error):
                raise
            report.overflow_retries += 1
            report.record(compactor(messages, force=True))
            completion = ask()  # once: a second overflow is the caller's to handle
        report.turns += 1
        message = completion.choices[0].message
        log(
            f"turn {report.turns:2d}: {result.action.value:5s} "
            f"{result.tokens_before:6d} -> {result.tokens_after:6d} tokens, "
            f"{len(messages):3d} messages, tool calls: {len(message.tool_calls or [])}"
        )
        messages.append(message)
        if message.tool_calls:
            for call in message.tool_calls:
                output = run_tool(call.function.name, json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": output})
        else:
            messages.append({"role": "user", "content": next(tasks)})
    return report


def main() -> int:
    args = parser(__doc__.splitlines()[0], "gpt-5.5").parse_args()
    server = None
    if args.offline:
        server = FakeServer()
        client = openai_client(server)
    else:
        client = openai.OpenAI()
    threshold = args.threshold or (3000 if args.offline else 50000)
    log = (lambda _line: None) if args.quiet else print
    report = run(client, args.model, args.turns, threshold, log)
    print(report.line(server.stats.rejected if server else None))
    return 1 if server and server.stats.rejected else 0


if __name__ == "__main__":
    sys.exit(main())
