"""The smolagents session: 40 model calls of a ToolCallingAgent (four runs on one
memory, one parallel pair of tool calls) with its memory compacted by
``CompactingMemory``, driven by the example's checking fake model.

    python benchmarks/frameworks/smolagents_session.py

Prints one row: user wiring lines, fields lost on steps the library did not
change, refused requests, summary calls (smolagents has no compaction of its own
to compare with), micro truncations, peak request tokens, and the versions.
smolagents has no thinking or reasoning blocks, so the session has none.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "examples")]

import smolagents  # noqa: E402
import smolagents_agent  # noqa: E402
from smolagents.memory import ActionStep  # noqa: E402

import bareagent_compact  # noqa: E402
from bareagent_compact.micro import is_truncated  # noqa: E402


class Fields:
    """A step callback (run before the compaction's) keeping each step's fields as
    the agent made them."""

    def __init__(self) -> None:
        self.seen: dict[int, tuple[Any, dict[str, Any]]] = {}

    def __call__(self, step: Any) -> None:
        values = {f.name: getattr(step, f.name) for f in dataclasses.fields(step)}
        self.seen[id(step)] = (step, values)

    def lost(self, steps: list[Any]) -> int:
        """Fields of the steps still in memory that differ from what the agent made,
        an observation the library truncated apart."""
        lost = 0
        for step in steps:
            _, values = self.seen.get(id(step), (None, None))
            if values is None:
                continue
            for name, value in values.items():
                now = getattr(step, name)
                if name == "observations" and now != value and is_truncated(now):
                    continue
                lost += now is not value and now != value
        return lost


def wiring_lines() -> int:
    """The lines of user code that wire the compaction in, in the example."""
    text = (ROOT / "examples" / "smolagents_agent.py").read_text(encoding="utf-8")
    return sum(line.rstrip().endswith("# wiring") for line in text.splitlines())


def run_session(threshold: int = 5000, keep_recent: int | None = None) -> dict[str, Any]:
    """The session, measured (``keep_recent``: the compactor's, to compare)."""
    model = smolagents_agent.ScriptedModel(per_run=10, parallel_at=13)
    summaries = []
    fields = Fields()
    agent, compactor = smolagents_agent.make_agent(model, threshold=threshold)
    provider = compactor.provider

    def counting(prompt: Any) -> Any:
        summaries.append(1)
        return provider(prompt)

    compactor.provider = counting
    if keep_recent is not None:
        compactor.keep_recent = keep_recent
    agent.step_callbacks._callbacks[ActionStep].insert(0, fields)
    for run in range(4):
        agent.run(f"Read the project's files, part {run + 1}.", max_steps=12, reset=run == 0)
    steps = agent.memory.steps
    truncated = sum(
        isinstance(s, ActionStep) and s.observations is not None and is_truncated(s.observations)
        for s in steps
    )
    return {
        "model_calls": model.calls,
        "user_lines": wiring_lines(),
        "fields_lost": fields.lost(steps),
        "refused": len(model.refused),
        "refusals": model.refused,
        "summary_calls": len(summaries),
        "truncated_in_memory": truncated,
        "peak_request_tokens": model.peak_tokens,
        "versions": f"smolagents {smolagents.__version__}, "
        f"bareagent-compact {bareagent_compact.__version__}",
    }


def main() -> None:
    row = run_session()
    print("framework  | calls | user lines | fields lost | refused | summary calls "
          "(built-in: none) | truncated obs. | peak request tokens | versions")
    print(f"smolagents | {row['model_calls']} | {row['user_lines']} | {row['fields_lost']} | "
          f"{row['refused']} | {row['summary_calls']} | {row['truncated_in_memory']} | "
          f"{row['peak_request_tokens']} | {row['versions']}")


if __name__ == "__main__":
    main()
