"""A Pydantic AI agent whose history stays inside its context window, offline.

The agent runs through ``Agent.run_sync`` as any Pydantic AI agent does; the one
addition is ``capabilities=[ProcessHistory(compaction_processor(compactor))]``,
which compacts the history before every model request. The summaries are written
by a second model through ``summary_provider`` (an ``AsyncCompactor``'s provider,
since a summary is asked for inside the run). The model is a
``FunctionModel`` playing Claude (signed thinking before each tool call, large
tool results), and it refuses any request Anthropic would refuse (a tool call
left unanswered, a result without its call, signed thinking lost or altered).

    python examples/pydantic_ai_agent.py [--runs 3] [--threshold 3000]

Needs ``pip install "bareagent-compact[pydantic-ai]"``.
"""

from __future__ import annotations

import argparse
import hashlib

from pydantic_ai import Agent
from pydantic_ai import messages as pm
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage

from bareagent_compact import AsyncCompactor, estimate_tokens
from bareagent_compact.integrations.pydantic_ai import (
    compaction_processor,
    is_summary,
    summary_provider,
    to_dicts,
)

STEPS = 8
"""Model calls per run: seven tool calls, then the answer."""


class FakeClaude:
    """Answers from a script, and counts the requests Anthropic would refuse."""

    def __init__(self) -> None:
        self.calls = 0
        self.refused = 0
        self.peak = 0

    def refuses(self, messages: list[pm.ModelMessage]) -> bool:
        last = next(m for m in reversed(messages) if isinstance(m, pm.ModelResponse)) \
            if any(isinstance(m, pm.ModelResponse) for m in messages) else None
        if last is None or not any(isinstance(p, pm.ToolCallPart) for p in last.parts):
            return False
        first = last.parts[0]
        signed = isinstance(first, pm.ThinkingPart) and first.provider_name == "anthropic"
        answered = {p.tool_call_id for p in messages[-1].parts if isinstance(p, pm.ToolReturnPart)}
        calls = {p.tool_call_id for p in last.parts if isinstance(p, pm.ToolCallPart)}
        return not signed or first.signature is None or not calls <= answered

    def __call__(self, messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        self.refused += self.refuses(messages)
        tokens = estimate_tokens(to_dicts(messages).dicts)
        self.peak = max(self.peak, tokens)
        run, step = divmod(self.calls, STEPS)
        self.calls += 1
        thought = f"Step {step} of run {run}: the logs point at the next file."
        parts: list[pm.ModelResponsePart] = [pm.ThinkingPart(
            thought, signature=hashlib.sha256(thought.encode()).hexdigest(),
            provider_name="anthropic")]
        if step == STEPS - 1:
            parts.append(pm.TextPart(f"Run {run}: the timeout comes from worker_{run}.py."))
        else:
            parts.append(pm.ToolCallPart("read_file", {"path": f"src/worker_{run}_{step}.py"},
                                         tool_call_id=f"toolu_{run}_{step}"))
        return pm.ModelResponse(parts, usage=RequestUsage(input_tokens=tokens, output_tokens=50),
                                provider_name="anthropic")


def main() -> None:
    parser = argparse.ArgumentParser(description="A compacted Pydantic AI agent, offline.")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--threshold", type=int, default=3000)
    args = parser.parse_args()
    summaries: list[str] = []

    def write_summary(messages: list[pm.ModelMessage], info: AgentInfo) -> pm.ModelResponse:
        summaries.append(str(messages[-1].parts[-1].content)[:40])  # your model writes it
        return pm.ModelResponse([pm.TextPart(
            "Read the worker files of the earlier runs; each timeout came from its worker.")])

    fake = FakeClaude()
    compactor = AsyncCompactor(provider=summary_provider(FunctionModel(write_summary)),
                               threshold=args.threshold, language="en")

    agent = Agent(FunctionModel(fake, model_name="claude-fake"),
                  system_prompt="You investigate timeouts with the tools.",
                  capabilities=[ProcessHistory(compaction_processor(compactor))])

    @agent.tool_plain
    def read_file(path: str) -> str:
        """Read a source file."""
        return "\n".join(f"{k:4d}  {path}: line {k}, retry=3 timeout=30" for k in range(60))

    history: list[pm.ModelMessage] = []
    for run in range(args.runs):
        result = agent.run_sync(f"Task {run}: why do the workers time out?",
                                message_history=history)
        history = result.all_messages()
        print(f"run {run}: {result.output}")
    kept = sum(1 for m in history if is_summary(m))
    print(f"model calls {fake.calls}, refused {fake.refused}, full compactions {len(summaries)}, "
          f"peak request {fake.peak} tokens (threshold {args.threshold}), "
          f"{len(history)} messages kept, {kept} summary")


if __name__ == "__main__":
    main()
