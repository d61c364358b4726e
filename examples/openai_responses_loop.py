"""An agent loop on the OpenAI Responses API that keeps its input items in the context window.

The loop is the one OpenAI's documentation shows: ``input += response.output``
(SDK objects: reasoning items, function calls, messages), then one
``function_call_output`` item per call. ``compactor(items)`` runs at the start
of every turn; if the API still says the input is too long, the loop compacts
with ``force=True`` and sends the request once more.

    python examples/openai_responses_loop.py --offline            # fake local API, no key
    OPENAI_API_KEY=... python examples/openai_responses_loop.py --turns 10
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import openai
from _common import RESPONSES_TOOLS, SYSTEM_PROMPT, TASKS, Report, parser, run_tool
from _fake_server import FakeServer, openai_client

from bareagent_compact import Compactor, is_context_overflow
from bareagent_compact.providers import openai_responses_provider


def run(
    client: Any, model: str, turns: int, threshold: int, log: Callable[[str], object] = print
) -> Report:
    """Make ``turns`` model requests, compacting before each; return what happened."""
    compactor = Compactor(provider=openai_responses_provider(client, model), threshold=threshold)
    items: list[Any] = [
        {"role": "developer", "content": SYSTEM_PROMPT},
        {"role": "user", "content": TASKS[0]},
    ]
    report = Report()
    tasks = iter(TASKS[1:] * (turns // len(TASKS) + 1))

    def ask() -> Any:
        return client.responses.create(model=model, input=items, tools=RESPONSES_TOOLS)

    while report.turns < turns:
        result = compactor(items)
        report.record(result)
        try:
            response = ask()
        except Exception as error:
            if not is_context_overflow(error):
                raise
            report.overflow_retries += 1
            report.record(compactor(items, force=True))
            response = ask()  # once: a second overflow is the caller's to handle
        report.turns += 1
        calls = [item for item in response.output if item.type == "function_call"]
        log(
            f"turn {report.turns:2d}: {result.action.value:5s} "
            f"{result.tokens_before:6d} -> {result.tokens_after:6d} tokens, "
            f"{len(items):3d} items, function calls: {len(calls)}"
        )
        items += response.output
        for call in calls:
            output = run_tool(call.name, json.loads(call.arguments))
            items.append(
                {"type": "function_call_output", "call_id": call.call_id, "output": output}
            )
        if not calls:
            items.append({"role": "user", "content": next(tasks)})
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
