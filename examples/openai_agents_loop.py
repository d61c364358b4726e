"""An OpenAI Agents SDK agent whose session and model calls stay compacted, offline.

``Runner.run`` drives the agent; a scripted fake model (no network, no key) answers
with reasoning items and tool calls whose results are large, and refuses (counts)
any request the Responses API would refuse: a tool call without its output, an
output without its call, a reasoning item parted from its item. The wiring is the
five lines marked below.

    python examples/openai_agents_loop.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import agents
from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.memory import SQLiteSession
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

from bareagent_compact import Compactor
from bareagent_compact.integrations.openai_agents import (
    CompactingSession,
    compaction_input_filter,
)


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return "\n".join(f"{path}:{n}: def f{n}(x): return x * {n}" for n in range(60))


class ScriptedModel(Model):
    """Four tool calls, then an answer, per run; counts the requests it would refuse."""

    def __init__(self) -> None:
        self.calls = 0
        self.refused = 0

    async def get_response(self, system_instructions: Any, input: Any, *args: Any,
                           **kwargs: Any) -> ModelResponse:
        self.calls += 1
        items = list(input)
        calls = {i["call_id"] for i in items if i.get("type") == "function_call"}
        outputs = {i["call_id"] for i in items if i.get("type") == "function_call_output"}
        reasoning_alone = any(item.get("type") == "reasoning" and (
            index + 1 == len(items) or items[index + 1].get("type") == "reasoning")
            for index, item in enumerate(items))
        self.refused += calls != outputs or reasoning_alone
        n = self.calls
        thought = ResponseReasoningItem(id=f"rs_{n}", type="reasoning", summary=[],
                                        encrypted_content=f"opaque-{n}")
        if n % 5:
            step: Any = ResponseFunctionToolCall(
                id=f"fc_{n}", call_id=f"call_{n}", type="function_call", name="read_file",
                arguments=json.dumps({"path": f"src/module_{n}.py"}), status="completed")
        else:
            step = ResponseOutputMessage(
                id=f"msg_{n}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text="Done.", annotations=[])])
        size = len(json.dumps(items)) // 4
        return ModelResponse(output=[thought, step], response_id=f"resp_{n}",
                             usage=Usage(requests=1, input_tokens=size, total_tokens=size))

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError


SUMMARIES: list[int] = []


def summarize(prompt: list[dict[str, Any]]) -> str:
    """The summariser: a real one calls a model (see docs/providers.md)."""
    SUMMARIES.append(len(prompt))
    return "Summary: the modules read so far define f0..f59, each multiplying by its index."


async def main() -> None:
    agents.set_tracing_disabled(True)
    model = ScriptedModel()
    agent = Agent(name="coder", instructions="Read files to answer.", model=model,
                  tools=[read_file])
    compactor = Compactor(provider=summarize, threshold=4_000)                   # 1
    session = CompactingSession(SQLiteSession("user-1"), compactor)             # 2
    config = RunConfig(call_model_input_filter=compaction_input_filter(compactor))  # 3
    for task in range(6):
        result = await Runner.run(agent, f"Task {task}: read the next modules.",  # 4
                                  session=session, run_config=config)
        stored = await session.get_items()
        print(f"task {task}: {result.final_output!r}, {len(stored)} items stored")
    print(f"model calls: {model.calls}, refused: {model.refused}, "
          f"full compactions: {len(SUMMARIES)}")


if __name__ == "__main__":
    asyncio.run(main())
