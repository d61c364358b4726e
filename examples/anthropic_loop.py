"""An agent loop on the Anthropic Messages API that keeps its history in the context window.

The loop is the one Anthropic's documentation shows: the reply is appended as
``{"role": "assistant", "content": response.content}`` (SDK objects) and tool
results follow in a user message. ``compactor(messages)`` runs at the start of
every turn; if the API still says the prompt is too long, the loop compacts with
``force=True`` and sends the request once more.

With ``--recall`` truncated tool results are archived in a transcript store, each
marker names a recall handle, and the model is offered the ``recall_truncated``
tool to read an original back (offline, the scripted model calls it once).

    python examples/anthropic_loop.py --offline            # fake local API, no key
    python examples/anthropic_loop.py --offline --recall   # ... and the recall tool
    ANTHROPIC_API_KEY=... python examples/anthropic_loop.py --turns 10
"""

from __future__ import annotations

import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import anthropic
from _common import ANTHROPIC_TOOLS, SYSTEM_PROMPT, TASKS, Report, parser, run_tool
from _fake_server import FakeServer, anthropic_client

from bareagent_compact import (
    RECALL_TOOL_NAME,
    Compactor,
    JsonlTranscriptManager,
    is_context_overflow,
    recall_tool,
)
from bareagent_compact.providers import anthropic_provider

MAX_TOKENS = 2048


def run(
    client: Any,
    model: str,
    turns: int,
    threshold: int,
    log: Callable[[str], object] = print,
    *,
    archive: JsonlTranscriptManager | None = None,
    **create_kwargs: Any,
) -> Report:
    """Make ``turns`` model requests, compacting before each; return what happened.

    ``archive``: a store that keeps truncated results; the model is then offered
    the recall tool. ``create_kwargs`` go to every request
    (``thinking={"type": "enabled", ...}``).
    """
    compactor = Compactor(
        provider=anthropic_provider(client, model, max_tokens=MAX_TOKENS),
        threshold=threshold,
        archive=archive.archive if archive is not None else None,
    )
    tools = [*ANTHROPIC_TOOLS, recall_tool("anthropic")] if archive else ANTHROPIC_TOOLS
    messages: list[Any] = [{"role": "user", "content": TASKS[0]}]
    report = Report(recall=archive is not None)
    tasks = iter(TASKS[1:] * (turns // len(TASKS) + 1))
    outputs: set[str] = set()  # every tool output, to check what a recall brings back

    def answer(block: Any) -> dict[str, Any]:
        if block.name == RECALL_TOOL_NAME:  # recall: one line in a loop
            result = compactor.handle_recall(block)
            report.recalls += 1
            report.recalled_exact += result["content"] in outputs
            log(f"recalled {block.input.get('handle')}: {len(result['content'])} characters")
            return result
        output = run_tool(block.name, block.input)
        outputs.add(output)
        return {"type": "tool_result", "tool_use_id": block.id, "content": output}

    def ask() -> Any:
        return client.messages.create(
            model=model,
            max_tokens=MAX_TOKENS,
            system=SYSTEM_PROMPT,
            tools=tools,
            messages=messages,
            **create_kwargs,
        )

    while report.turns < turns:
        result = compactor(messages)
        report.record(result)
        try:
            response = ask()
        except Exception as error:
            if not is_context_overflow(error):
                raise
            report.overflow_retries += 1
            report.record(compactor(messages, force=True))
            response = ask()  # once: a second overflow is the caller's to handle
        report.turns += 1
        log(
            f"turn {report.turns:2d}: {result.action.value:5s} "
            f"{result.tokens_before:6d} -> {result.tokens_after:6d} tokens, "
            f"{len(messages):3d} messages, stop_reason={response.stop_reason}"
        )
        messages.append({"role": "assistant", "content": response.content})
        if response.stop_reason == "tool_use":
            results = [answer(block) for block in response.content if block.type == "tool_use"]
            messages.append({"role": "user", "content": results})
        else:
            messages.append({"role": "user", "content": next(tasks)})
    return report


def main() -> int:
    cli = parser(__doc__.splitlines()[0], "claude-sonnet-5-5")
    cli.add_argument(
        "--recall", action="store_true", help="archive truncated results, offer the recall tool"
    )
    args = cli.parse_args()
    server = None
    if args.offline:
        server = FakeServer()
        client = anthropic_client(server)
    else:
        client = anthropic.Anthropic()
    # Offline, --recall raises the threshold a little so micro-compaction truncates
    # results (and shows handles) before a full compaction summarises them.
    threshold = args.threshold or ((4000 if args.recall else 3000) if args.offline else 50000)
    log = (lambda _line: None) if args.quiet else print
    with tempfile.TemporaryDirectory() as directory:
        archive = JsonlTranscriptManager(directory) if args.recall else None
        report = run(client, args.model, args.turns, threshold, log, archive=archive)
    print(report.line(server.stats.rejected if server else None))
    missed = args.recall and server is not None and report.recalled_exact != report.recalls
    return 1 if (server and server.stats.rejected) or missed else 0


if __name__ == "__main__":
    sys.exit(main())
