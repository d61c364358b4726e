"""A scripted Agents SDK session: a fake Responses model that checks every request.

The model answers a fixed script of 40 calls over 8 runs (reasoning items with
``encrypted_content`` before every answer, tool calls with large results, one
parallel pair) and checks each request as the Responses API would: every
``function_call`` answered by a ``function_call_output`` with its ``call_id`` and
no orphan output; a reasoning item followed by the item it came with, and an
item that came with one preceded by it. It counts the requests it would refuse
and the fields lost on the items it made (or the tool results it saw first),
except the output of a tool result the library truncated.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, ModelResponse, RunConfig, Runner, Usage, function_tool
from agents.models.interface import Model
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_reasoning_item import Summary
from openai.types.responses.response_usage import (
    InputTokensDetails,
    OutputTokensDetails,
    ResponseUsage,
)

RUNS = 8
CALLS_PER_RUN = 5
PARALLEL_CALL = 7
"""The model call (1-based) that asks for two tools at once."""


def tool_text(path: str) -> str:
    """A large, varied tool result (about 600 tokens)."""
    lines = [f"{path}:{n}: value_{n} = compute({n}, '{path}') # line {n}" for n in range(50)]
    return "\n".join(lines)


@function_tool
def read_file(path: str) -> str:
    """Read a file of the project."""
    return tool_text(path)


def estimate(items: Any) -> int:
    """A request's size in tokens, estimated as JSON characters / 4."""
    return len(json.dumps(items, default=repr)) // 4


@dataclass
class Checks:
    """What the fake model saw."""

    calls: int = 0
    refused: int = 0
    fields_lost: int = 0
    peak_tokens: int = 0
    reasons: list[str] = field(default_factory=list)


class CheckingModel(Model):
    """A fake Responses model answering from the script and checking every request."""

    def __init__(self, calls_per_run: int = CALLS_PER_RUN) -> None:
        self.calls_per_run = calls_per_run
        self.sizes: list[int] = []
        self.checks = Checks()
        self.made: dict[str, dict[str, Any]] = {}
        self.follower: dict[str, str] = {}
        self.leader: dict[str, str] = {}
        self.outputs: dict[str, dict[str, Any]] = {}

    async def get_response(  # noqa: PLR0917 - the Model interface
        self, system_instructions: Any, input: Any, model_settings: Any, tools: Any,
        output_schema: Any, handoffs: Any, tracing: Any, *, previous_response_id: Any,
        conversation_id: Any, prompt: Any,
    ) -> ModelResponse:
        items = [input] if isinstance(input, str) else list(input)
        self.checks.calls += 1
        self.sizes.append(estimate(items))
        self.checks.peak_tokens = max(self.checks.peak_tokens, self.sizes[-1])
        problems = self.problems(items)
        if problems:
            self.checks.refused += 1
            self.checks.reasons.extend(problems)
        output = self.answer(self.checks.calls)
        size = estimate(items)
        return ModelResponse(
            output=output,
            usage=Usage(requests=1, input_tokens=size, output_tokens=20, total_tokens=size + 20),
            response_id=f"resp_{self.checks.calls}",
        )

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        """The same answer, streamed as one ``response.completed`` event."""
        answer = await self.get_response(*args, **kwargs)
        usage = ResponseUsage(
            input_tokens=answer.usage.input_tokens, output_tokens=answer.usage.output_tokens,
            total_tokens=answer.usage.total_tokens,
            input_tokens_details=InputTokensDetails(cached_tokens=0, cache_write_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        )
        response = Response(
            id=str(answer.response_id), created_at=0, model="scripted", object="response",
            output=answer.output, tool_choice="auto", tools=[], top_p=None,
            parallel_tool_calls=True, status="completed", usage=usage,
        )
        yield ResponseCompletedEvent(type="response.completed", response=response,
                                     sequence_number=0)

    def answer(self, n: int) -> list[Any]:
        """Call ``n``'s output: reasoning, then tool calls or the run's final message."""
        reasoning = ResponseReasoningItem(
            id=f"rs_{n}", type="reasoning", encrypted_content=f"enc-{n}-" + "x" * 40,
            summary=[Summary(type="summary_text", text=f"thinking about step {n}")],
        )
        if n % self.calls_per_run == 0:
            first: Any = ResponseOutputMessage(
                id=f"msg_{n}", type="message", role="assistant", status="completed",
                content=[ResponseOutputText(type="output_text", text=f"done {n}",
                                            annotations=[])],
            )
            rest: list[Any] = []
        else:
            names = [f"src/m{n}.py"] + ([f"src/m{n}b.py"] if n == PARALLEL_CALL else [])
            calls = [
                ResponseFunctionToolCall(
                    id=f"fc_{n}_{k}", call_id=f"call_{n}_{k}", type="function_call",
                    name="read_file", arguments=json.dumps({"path": path}), status="completed",
                )
                for k, path in enumerate(names)
            ]
            first, rest = calls[0], calls[1:]
        output = [reasoning, first, *rest]
        self.follower[reasoning.id] = first.id
        self.leader[first.id] = reasoning.id
        for item in output:
            self.made[item.id] = item.model_dump(exclude_unset=True)
        return output

    def problems(self, items: list[Any]) -> list[str]:
        """The Responses API's reasons to refuse this request (and count fields lost)."""
        found: list[str] = []
        calls = [i.get("call_id") for i in items if i.get("type") == "function_call"]
        answered = [i.get("call_id") for i in items if i.get("type") == "function_call_output"]
        found += [f"no output for call {c}" for c in calls if c not in answered]
        found += [f"output without call {c}" for c in answered if c not in calls]
        for index, item in enumerate(items):
            found += self.pairing(items, index, item)
            self.checks.fields_lost += self.lost(item)
        return found

    def pairing(self, items: list[Any], index: int, item: dict[str, Any]) -> list[str]:
        item_id = item.get("id")
        if item.get("type") == "reasoning":
            after = items[index + 1].get("id") if index + 1 < len(items) else None
            if after != self.follower.get(str(item_id)):
                return [f"reasoning {item_id} not followed by its item"]
        if item_id in self.leader:
            before = items[index - 1].get("id") if index else None
            if before != self.leader[str(item_id)]:
                return [f"item {item_id} without its reasoning"]
        return []

    def lost(self, item: dict[str, Any]) -> int:
        """Fields of the original item missing or changed (a truncated output excepted)."""
        if item.get("type") == "function_call_output":
            original = self.outputs.setdefault(str(item.get("call_id")), dict(item))
            keys = [k for k in original if k != "output"]
        else:
            original = self.made.get(str(item.get("id")), item)
            keys = list(original)
        return sum(1 for key in keys if item.get(key) != original[key])


def make_agent(model: CheckingModel) -> Agent[Any]:
    return Agent(name="coder", instructions="Read files to answer.", model=model,
                 tools=[read_file])


async def run_session(agent: Agent[Any], session: Any, run_config: RunConfig | None) -> None:
    """The 8 runs of the script (40 model calls) on one session."""
    for run in range(RUNS):
        await Runner.run(agent, f"Task {run}: read the next modules and report.",
                         session=session, run_config=run_config, max_turns=CALLS_PER_RUN + 2)


async def run_session_streamed(
    agent: Agent[Any], session: Any, run_config: RunConfig | None
) -> None:
    """The same runs through ``Runner.run_streamed``, every event read."""
    for run in range(RUNS):
        result = Runner.run_streamed(agent, f"Task {run}: read the next modules and report.",
                                     session=session, run_config=run_config,
                                     max_turns=CALLS_PER_RUN + 2)
        async for _event in result.stream_events():
            pass


def run_session_sync(agent: Agent[Any], session: Any, run_config: RunConfig | None) -> None:
    """The same runs through ``Runner.run_sync``."""
    for run in range(RUNS):
        Runner.run_sync(agent, f"Task {run}: read the next modules and report.",
                        session=session, run_config=run_config, max_turns=CALLS_PER_RUN + 2)


class CountingSummarizer:
    """A summary provider that counts its calls and the files whose reads each prompt held."""

    def __init__(self) -> None:
        self.calls = 0
        self.seen: list[set[str]] = []

    def __call__(self, prompt: list[dict[str, Any]], /) -> str:
        self.calls += 1
        self.seen.append(set(re.findall(r"src/m\d+b?\.py", json.dumps(prompt, default=repr))))
        return f"Summary {self.calls}: the modules read so far and what they define."


class FakeCompactClient:
    """Stands in for ``AsyncOpenAI`` in the SDK's own compaction session: counts compactions."""

    def __init__(self) -> None:
        self.calls = 0
        self.responses = self

    async def compact(self, **kwargs: Any) -> Any:
        self.calls += 1
        summary = {"type": "message", "role": "user",
                   "content": [{"type": "input_text", "text": f"compacted {self.calls}"}]}
        return _Compacted([summary])


@dataclass
class _Compacted:
    output: list[Any]
    usage: Any = None


def summarised_twice(summarizer: CountingSummarizer) -> set[str]:
    """The files whose reads more than one summary request was sent."""
    twice: set[str] = set()
    for index, ids in enumerate(summarizer.seen):
        for later in summarizer.seen[index + 1 :]:
            twice |= ids & later
    return twice
