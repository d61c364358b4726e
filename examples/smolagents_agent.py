"""A smolagents ToolCallingAgent whose memory stays compacted, offline.

The model is a scripted fake (``ScriptedModel``): it calls ``read_file`` for one
file after another (once two files in parallel), answers with ``final_answer``
every ``per_run`` calls, and checks every request it receives the way an API
would: each message a ``ChatMessage`` of text blocks with a role smolagents
sends, every "Calling tools:" message answered by its observation, no
observation without its call, and smolagents' own request preparation
(``_prepare_completion_kwargs``) raising nothing. A request that fails a check
is counted as refused.

    python examples/smolagents_agent.py
"""

from __future__ import annotations

import ast
from typing import Any

from smolagents import ToolCallingAgent, tool
from smolagents.models import (
    ChatMessage,
    ChatMessageToolCall,
    ChatMessageToolCallFunction,
    MessageRole,
    Model,
)
from smolagents.monitoring import LogLevel, TokenUsage

from bareagent_compact import Compactor
from bareagent_compact.integrations.smolagents import CompactingMemory


@tool
def read_file(path: str) -> str:
    """Read a text file of the project.

    Args:
        path: the file's path.
    """
    seed = sum(map(ord, path))
    lines = [f"{path}:{n}: value_{(seed * n) % 9973} = compute({n}, '{path}')" for n in range(60)]
    return "\n".join(lines)


def _call(index: int, path: str, name: str = "read_file") -> ChatMessageToolCall:
    arguments = {"answer": path} if name == "final_answer" else {"path": path}
    function = ChatMessageToolCallFunction(name=name, arguments=arguments)
    return ChatMessageToolCall(function=function, id=f"call_{index:03d}", type="function")


class ScriptedModel(Model):
    """A fake model: scripted tool calls, every request checked (see the module)."""

    def __init__(self, per_run: int = 10, parallel_at: int = 13) -> None:
        super().__init__(model_id="scripted")
        self.per_run = per_run
        self.parallel_at = parallel_at
        self.calls = 0
        self.refused: list[str] = []
        self.peak_tokens = 0

    def generate(
        self, messages: list[ChatMessage], stop_sequences: list[str] | None = None,
        response_format: dict[str, str] | None = None, tools_to_call_from: list[Any] | None = None,
        **kwargs: Any,
    ) -> ChatMessage:  # fmt: skip
        self.calls += 1
        tokens = self._check(messages, tools_to_call_from)
        self.peak_tokens = max(self.peak_tokens, tokens)
        n = self.calls
        if n % self.per_run == 0:
            calls = [_call(n, f"done after {n} calls", "final_answer")]
        elif n == self.parallel_at:
            calls = [_call(n, f"src/m{n}.py"), _call(n + 1000, f"src/n{n}.py")]
        else:
            calls = [_call(n, f"src/m{n}.py")]
        usage = TokenUsage(input_tokens=tokens, output_tokens=20)
        return ChatMessage(role=MessageRole.ASSISTANT, content="", tool_calls=calls,
                           token_usage=usage)  # fmt: skip

    def _check(self, messages: list[ChatMessage], tools: list[Any] | None) -> int:
        """The request's size in tokens (4 characters each); a failed check is noted."""
        problem = _problem(messages)
        try:
            prepared = self._prepare_completion_kwargs(messages=messages, tools_to_call_from=tools)
        except (TypeError, AssertionError, ValueError, KeyError) as error:
            problem = problem or f"{type(error).__name__}: {error}"
            prepared = {"messages": []}
        if problem:
            self.refused.append(f"request {self.calls}: {problem}")
        return len(str(prepared["messages"])) // 4 + len(str(prepared.get("tools", ""))) // 4


def _problem(messages: list[ChatMessage]) -> str | None:
    """What an API would refuse in a request smolagents built, else ``None``."""
    open_ids: set[str] = set()
    for index, message in enumerate(messages):
        if not isinstance(message, ChatMessage) or message.role not in list(MessageRole):
            return f"message {index} is not a ChatMessage with a smolagents role"
        content = message.content
        if not isinstance(content, list) or not all(
            isinstance(b, dict) and b.get("type") in ("text", "image") for b in content
        ):
            return f"message {index} has content {type(content).__name__}, not text blocks"
        text = "".join(b.get("text", "") for b in content)
        if message.role == MessageRole.TOOL_CALL:
            if open_ids:
                return f"message {index}: calls {sorted(open_ids)} have no observation"
            open_ids = {c["id"] for c in ast.literal_eval(text.removeprefix("Calling tools:\n"))}
        elif message.role == MessageRole.TOOL_RESPONSE and text.startswith("Observation:"):
            if not open_ids:
                return f"message {index} is an observation without its call"
            open_ids = set()
    return f"calls {sorted(open_ids)} have no observation" if open_ids else None


def summarise(prompt: list[dict[str, Any]]) -> str:
    """The offline summariser: a real one would call a model with ``prompt``."""
    return "Goal: read the project's files. Done: the files read so far. Next: go on."


def make_agent(model: Model, threshold: int = 5000) -> tuple[ToolCallingAgent, Compactor]:
    """The agent, wired to a compactor (the two lines marked are all the wiring)."""
    agent = ToolCallingAgent(tools=[read_file], model=model, verbosity_level=LogLevel.OFF)
    compactor = Compactor(summarise, threshold=threshold, language="en")  # wiring
    CompactingMemory(agent, compactor)  # wiring
    return agent, compactor


def main() -> None:
    model = ScriptedModel()
    agent, _ = make_agent(model)
    for run in range(4):
        task = f"Read the project's files, part {run + 1}."
        print(agent.run(task, max_steps=12, reset=run == 0))
    print(f"{model.calls} model calls, {len(model.refused)} refused, "
          f"{len(agent.memory.steps)} steps in memory, "
          f"peak request {model.peak_tokens} tokens")  # fmt: skip


if __name__ == "__main__":
    main()
