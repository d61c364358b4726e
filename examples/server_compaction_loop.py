"""An agent loop whose compactor asks the API itself to write the summary (server compaction).

The compactor decides when and what (the threshold, the kept tail, snapshots,
undo); the API writes the summary: Anthropic's on-demand compaction
(``compaction={"type": "summarize"}``) returns a compaction block, the
Responses API's ``responses.compact`` an output window, and the compactor puts
it, exactly as returned, in place of the messages it summarises. With
``--server-too`` the API also compacts on its own past a trigger (mode c).

    python examples/server_compaction_loop.py --offline                    # Anthropic, fake API
    python examples/server_compaction_loop.py --offline --api responses --server-too
    ANTHROPIC_API_KEY=... python examples/server_compaction_loop.py --turns 10
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    ANTHROPIC_TOOLS,
    RESPONSES_TOOLS,
    SYSTEM_PROMPT,
    TASKS,
    Report,
    parser,
    run_tool,
)
from _fake_server import FakeServer, anthropic_client, openai_client

from bareagent_compact import Compactor, check_request
from bareagent_compact.providers import anthropic_server_compaction, openai_responses_compaction

BETAS = ["compact-2026-01-12"]
TRIGGER = 4000
"""The server's own trigger with ``--server-too``, in input tokens."""


def anthropic_step(client: Any, model: str, messages: list[Any], server_too: bool) -> list[Any]:
    """One request; what to append (the reply, then the tool results or a new task)."""
    extra: dict[str, Any] = {}
    if server_too:
        trigger = {"type": "input_tokens", "value": TRIGGER}
        extra["context_management"] = {"edits": [{"type": "compact_20260112", "trigger": trigger}]}
    response = client.beta.messages.create(
        model=model, max_tokens=1024, system=SYSTEM_PROMPT, tools=ANTHROPIC_TOOLS,
        messages=messages, betas=BETAS, **extra,
    )  # fmt: skip
    calls = [block for block in response.content if block.type == "tool_use"]
    results = [
        {"type": "tool_result", "tool_use_id": call.id, "content": run_tool(call.name, call.input)}
        for call in calls
    ]
    reply = {"role": "assistant", "content": response.content}
    return [reply, {"role": "user", "content": results}] if results else [reply]


def responses_step(client: Any, model: str, items: list[Any], server_too: bool) -> list[Any]:
    extra: dict[str, Any] = {}
    if server_too:
        extra["context_management"] = [{"type": "compaction", "compact_threshold": TRIGGER}]
    response = client.responses.create(model=model, input=items, tools=RESPONSES_TOOLS, **extra)
    calls = [item for item in response.output if item.type == "function_call"]
    outputs = [
        {
            "type": "function_call_output",
            "call_id": call.call_id,
            "output": run_tool(call.name, json.loads(call.arguments)),
        }
        for call in calls
    ]
    return [*response.output, *outputs]


def run(client: Any, api: str, model: str, args: Any, log: Any = print) -> Report:
    """Make ``args.turns`` requests, the compactor running before each."""
    if api == "anthropic":
        summariser = anthropic_server_compaction(
            client, model, system=SYSTEM_PROMPT, tools=ANTHROPIC_TOOLS, betas=BETAS
        )
        step, history = anthropic_step, [{"role": "user", "content": TASKS[0]}]
    else:
        summariser = openai_responses_compaction(client, model)
        step = responses_step
        history = [
            {"role": "developer", "content": SYSTEM_PROMPT},
            {"role": "user", "content": TASKS[0]},
        ]
    threshold = args.threshold or (3000 if args.offline else 50000)
    compactor = Compactor(summariser, threshold=threshold)
    report, tasks = Report(), iter(TASKS[1:] * (args.turns // len(TASKS) + 1))
    while report.turns < args.turns:
        result = compactor(history)
        report.record(result)
        problems = check_request(history)  # the pre-send check: nothing the API would refuse
        if problems:
            raise RuntimeError(f"check_request: {problems}")
        appended = step(client, model, history, args.server_too)
        report.turns += 1
        log(f"turn {report.turns:2d}: {result.action.value:5s} {result.tokens_after:6d} tokens")
        history += appended
        if len(appended) == 1 or getattr(appended[-1], "type", None) == "message":
            history.append({"role": "user", "content": next(tasks)})
    return report


def main() -> int:
    cli = parser(__doc__.splitlines()[0], "claude-sonnet-5-5")
    cli.add_argument("--api", choices=("anthropic", "responses"), default="anthropic")
    cli.add_argument("--server-too", action="store_true", help="the API also compacts on its own")
    args = cli.parse_args()
    server = FakeServer() if args.offline else None
    if server is not None:
        client = anthropic_client(server) if args.api == "anthropic" else openai_client(server)
    elif args.api == "anthropic":
        import anthropic  # noqa: PLC0415 (only the chosen SDK is needed)

        client = anthropic.Anthropic()
    else:
        import openai  # noqa: PLC0415

        client = openai.OpenAI()
    default = args.api == "responses" and args.model == "claude-sonnet-5-5"
    model = "gpt-5.5" if default else args.model
    report = run(client, args.api, model, args, (lambda _line: None) if args.quiet else print)
    print(report.line(server.stats.rejected if server else None))
    return 1 if server and server.stats.rejected else 0


if __name__ == "__main__":
    sys.exit(main())
