"""An asyncio agent loop on the Anthropic Messages API with ``AsyncCompactor``.

The same loop as ``anthropic_loop.py`` on ``AsyncAnthropic``: the summary
provider made from the async client is an ``async def``, so a summary request
never blocks the event loop, and ``await compactor(messages)`` runs at the
start of every turn. With ``--background`` the summary starts at 80% of the
threshold in a task while the loop goes on, and a later turn swaps it in.

    python examples/async_anthropic_loop.py --offline            # fake local API, no key
    python examples/async_anthropic_loop.py --offline --background
    ANTHROPIC_API_KEY=... python examples/async_anthropic_loop.py --turns 10
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anthropic
from _common import ANTHROPIC_TOOLS, SYSTEM_PROMPT, TASKS, Report, parser, run_tool
from _fake_server import FakeServer, anthropic_client

from bareagent_compact import AsyncCompactor, is_context_overflow
from bareagent_compact.providers import anthropic_provider

MAX_TOKENS = 2048


async def run(
    client: Any,
    model: str,
    turns: int,
    threshold: int,
    log: Callable[[str], object] = print,
    *,
    background_at: float | None = None,
    **create_kwargs: Any,
) -> Report:
    """Make ``turns`` model requests, compacting before each; return what happened.

    ``background_at``: start the summary in the background at that share of the
    threshold. ``create_kwargs`` go to every request (``thinking={"type": "enabled", ...}``).
    """
    compactor = AsyncCompactor(
        provider=anthropic_provider(client, model, max_tokens=MAX_TOKENS),
        threshold=threshold,
        background_at=background_at,
    )
    async with compactor:  # closing cancels a summary still running in the background
        return await loop(client, model, turns, compactor, log, **create_kwargs)


async def loop(
    client: Any,
    model: str,
    turns: int,
    compactor: AsyncCompactor,
    log: Callable[[str], object],
    **create_kwargs: Any,
) -> Report:
    """The agent loop itself."""
    messages: list[Any] = [{"role": "user", "content": TASKS[0]}]
    report = Report()
    tasks = iter(TASKS[1:] * (turns // len(TASKS) + 1))

    async def ask() -> Any:
        await asyncio.sleep(0)  # a real request waits on the network (the fake API does not)
        return await client.messages.create(
            model=model,
            max_tokens=MAX_TOKENS,
            system=SYSTEM_PROMPT,
            tools=ANTHROPIC_TOOLS,
            messages=messages,
            **create_kwargs,
        )

    while report.turns < turns:
        result = await compactor(messages)
        report.record(result)
        try:
            response = await ask()
        except Exception as error:
            if not is_context_overflow(error):
                raise
            report.overflow_retries += 1
            report.record(await compactor(messages, force=True))
            response = await ask()  # once: a second overflow is the caller's to handle
        report.turns += 1
        log(
            f"turn {report.turns:2d}: {result.action.value:5s} "
            f"{result.tokens_before:6d} -> {result.tokens_after:6d} tokens, "
            f"{len(messages):3d} messages, stop_reason={response.stop_reason}"
            + (" (summary running in the background)" if compactor.background_pending else "")
        )
        messages.append({"role": "assistant", "content": response.content})
        if response.stop_reason == "tool_use":
            results = [
                {
                    "type": "tool_result",
                    "tool_use_id": block.id,
                    "content": run_tool(block.name, block.input),
                }
                for block in response.content
                if block.type == "tool_use"
            ]
            messages.append({"role": "user", "content": results})
        else:
            messages.append({"role": "user", "content": next(tasks)})
    return report


async def main() -> int:
    cli = parser(__doc__.splitlines()[0], "claude-sonnet-5-5")
    cli.add_argument(
        "--background",
        action="store_true",
        help="summarise in the background from 80%% of the threshold (background_at=0.8)",
    )
    args = cli.parse_args()
    server = None
    if args.offline:
        server = FakeServer()
        client = anthropic_client(server, asynchronous=True)
    else:
        client = anthropic.AsyncAnthropic()
    offline_threshold = 5000 if args.background else 3000  # room for a summary to run
    threshold = args.threshold or (offline_threshold if args.offline else 50000)
    log = (lambda _line: None) if args.quiet else print
    async with client:
        background_at = 0.8 if args.background else None
        report = await run(
            client, args.model, args.turns, threshold, log, background_at=background_at
        )
    print(report.line(server.stats.rejected if server else None))
    return 1 if server and server.stats.rejected else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
