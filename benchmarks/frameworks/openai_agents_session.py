"""The OpenAI Agents SDK session of 40 model calls, compacted by the library and by the SDK.

    python benchmarks/frameworks/openai_agents_session.py [--json]

Runs the scripted session (8 runs through ``Runner.run``, tool calls with large
results, reasoning items, one parallel pair) twice on an in-memory SQLite session:
wrapped in ``CompactingSession`` with ``compaction_input_filter`` on one compactor
(threshold 4,000), and wrapped in the SDK's own ``OpenAIResponsesCompactionSession``
(its default trigger, a fake ``responses.compact``). Prints the user's wiring lines,
fields lost, requests refused, summary calls of each and the peak request tokens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "src"))

from _agents_session import (
    CheckingModel,
    CountingSummarizer,
    FakeCompactClient,
    make_agent,
    run_session,
    summarised_twice,
)
from agents import RunConfig, set_tracing_disabled
from agents.memory import OpenAIResponsesCompactionSession, SQLiteSession

from bareagent_compact import Compactor
from bareagent_compact.integrations.openai_agents import (
    CompactingSession,
    compaction_input_filter,
)

THRESHOLD = 4_000
WIRING = """\
compactor = Compactor(provider=summarize, threshold=4_000)
session = CompactingSession(SQLiteSession("user-1"), compactor)
config = RunConfig(call_model_input_filter=compaction_input_filter(compactor))
await Runner.run(agent, task, session=session, run_config=config)
"""


def library_row() -> dict[str, Any]:
    summarizer = CountingSummarizer()
    compactor = Compactor(provider=summarizer, threshold=THRESHOLD)
    model = CheckingModel()
    session = CompactingSession(SQLiteSession("bench"), compactor)
    config = RunConfig(call_model_input_filter=compaction_input_filter(compactor))
    asyncio.run(run_session(make_agent(model), session, config))
    checks = model.checks
    return {"calls": checks.calls, "refused": checks.refused, "fields_lost": checks.fields_lost,
            "summary_calls": summarizer.calls,
            "summarised_twice": len(summarised_twice(summarizer)),
            "peak_request_tokens": checks.peak_tokens,
            "reasons": checks.reasons[:5]}


def builtin_row() -> dict[str, Any]:
    client = FakeCompactClient()
    model = CheckingModel()
    session = OpenAIResponsesCompactionSession(
        "bench", SQLiteSession("bench-builtin"), client=client,  # type: ignore[arg-type]
        compaction_mode="input",
    )
    asyncio.run(run_session(make_agent(model), session, None))
    return {"calls": model.checks.calls, "summary_calls": client.calls,
            "peak_request_tokens": model.checks.peak_tokens}


def measure() -> dict[str, Any]:
    set_tracing_disabled(True)
    ours = library_row()
    builtin = builtin_row()
    return {"framework": "openai-agents", "user_lines": len(WIRING.splitlines()),
            "library": ours, "builtin": builtin,
            "versions": {"openai-agents": version("openai-agents"),
                         "openai": version("openai"), "python": sys.version.split()[0]}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the row as JSON")
    row = measure()
    if parser.parse_args().json:
        print(json.dumps(row))
        return
    ours, builtin = row["library"], row["builtin"]
    print("framework      user lines  fields lost  refused  summary calls (built-in)  "
          "peak request tokens (built-in)")
    print(f"openai-agents  {row['user_lines']:>10}  {ours['fields_lost']:>11}  "
          f"{ours['refused']:>7}  {ours['summary_calls']:>5} ({builtin['summary_calls']})"
          f"{'':>13}{ours['peak_request_tokens']:>8} ({builtin['peak_request_tokens']})")
    print(f"model calls: {ours['calls']} (built-in {builtin['calls']}); versions: "
          + ", ".join(f"{k} {v}" for k, v in row["versions"].items()))


if __name__ == "__main__":
    main()
