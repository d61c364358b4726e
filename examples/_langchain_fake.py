"""A 40-model-call LangChain agent session driven by a fake chat model that checks
every request against the Anthropic Messages rules (shared by langchain_agent.py,
tests/frameworks/test_langchain.py and benchmarks/frameworks/langchain_session.py)."""

from __future__ import annotations

import hashlib
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import ToolException, tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

CALLS = 40
PARALLEL_AT = 7


def sign(thinking: str) -> str:
    return hashlib.sha256(thinking.encode()).hexdigest()[:32]


def reply(call: int, tokens: int) -> AIMessage:
    """The scripted answer to model call ``call`` (1-based), whatever the request held."""
    usage = {"input_tokens": tokens, "output_tokens": 60, "total_tokens": tokens + 60}
    meta = {"model_provider": "anthropic", "model_name": "fake-claude", "stop_reason": "tool_use"}
    thinking = f"Step {call}: I should look at module {call} next. " * 12
    blocks: list[Any] = [{"type": "thinking", "thinking": thinking, "signature": sign(thinking)},
                         {"type": "text", "text": f"Reading module {call}."}]
    if call == CALLS:
        meta["stop_reason"] = "end_turn"
        return AIMessage(content=[blocks[0], {"type": "text", "text": "All modules read."}],
                         id=f"run-{call}", usage_metadata=usage, response_metadata=meta)
    names = ["read_file", "grep_code"] if call == PARALLEL_AT else [
        "flaky" if call % 9 == 0 else "grep_code" if call % 5 == 0 else "read_file"]
    calls = [{"name": name, "args": {"path": f"src/module_{call}_{k}.py"}, "id": f"call-{call}-{k}",
              "type": "tool_call"} for k, name in enumerate(names)]
    uses = [{"type": "tool_use", "id": c["id"], "name": c["name"], "input": c["args"]}
            for c in calls]
    return AIMessage(content=[*blocks, *uses], tool_calls=calls, id=f"run-{call}",
                     usage_metadata=usage, response_metadata=meta)


def _turns(messages: list[BaseMessage]) -> list[tuple[str, list[BaseMessage]]]:
    """Consecutive messages of one API role merged, as the Anthropic API merges them."""
    turns: list[tuple[str, list[BaseMessage]]] = []
    for message in messages:
        role = "assistant" if isinstance(message, AIMessage) else "user"
        if turns and turns[-1][0] == role:
            turns[-1][1].append(message)
        else:
            turns.append((role, [message]))
    return turns


def problems(messages: list[BaseMessage]) -> list[str]:
    """Why the Anthropic API would refuse this request (empty when it would not)."""
    found: list[str] = []
    if not messages or isinstance(messages[0], AIMessage):
        found.append("the first message is not a user message")
    for i, message in enumerate(messages):
        if isinstance(message, AIMessage):
            for block in message.content if isinstance(message.content, list) else []:
                if isinstance(block, dict) and block.get("type") == "thinking" and (
                    block.get("signature") != sign(block.get("thinking", ""))
                ):
                    found.append(f"messages[{i}]: a thinking block without its signature")
            answered = []
            for follower in messages[i + 1:]:
                if not isinstance(follower, ToolMessage):
                    break
                answered.append(follower.tool_call_id)
            wanted = [c["id"] for c in message.tool_calls]
            if sorted(answered) != sorted(wanted):
                found.append(f"messages[{i}]: calls {wanted} answered by {answered}")
        elif isinstance(message, ToolMessage):
            j = i - 1
            while j >= 0 and isinstance(messages[j], ToolMessage):
                j -= 1
            calls = messages[j].tool_calls if j >= 0 and isinstance(messages[j], AIMessage) else []
            if message.tool_call_id not in {c["id"] for c in calls}:
                found.append(f"messages[{i}]: an orphan tool result {message.tool_call_id}")
    turns = _turns(messages)
    if turns and len(turns) > 1 and isinstance(messages[-1], ToolMessage):
        _, loop = turns[-2]
        first = loop[0].content
        if not (isinstance(first, list) and first and first[0].get("type") == "thinking"):
            found.append("the assistant turn of the tool loop does not open with its thinking")
    return found


class FakeAnthropic(BaseChatModel):
    """The agent's model: scripted answers, every request checked and measured."""

    calls: int = 0
    refused: list[str] = Field(default_factory=list)
    peak: int = 0
    lost: list[str] = Field(default_factory=list)
    seen: dict[str, dict[str, Any]] = Field(default_factory=dict)

    @property
    def _llm_type(self) -> str:
        return "fake-anthropic"

    def bind_tools(self, tools: Any, **kwargs: Any) -> FakeAnthropic:
        return self

    def _fields_kept(self, messages: list[BaseMessage]) -> None:
        for message in messages:
            if isinstance(message, ToolMessage):
                key = f"tool:{message.tool_call_id}"
            elif isinstance(message, AIMessage) and (message.id or "").startswith("run-"):
                key = str(message.id)
            else:
                continue
            dump = message.model_dump()
            before = self.seen.setdefault(key, dump)
            if before["content"] == dump["content"]:
                self.lost += [f"{key}.{k}" for k in before if before[k] != dump.get(k)]

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.calls += 1
        tokens = count_tokens_approximately(messages)
        self.peak = max(self.peak, tokens)
        found = problems(messages)
        self.refused += [f"call {self.calls}: {p}" for p in found]
        self._fields_kept(messages)
        return ChatResult(generations=[ChatGeneration(message=reply(self.calls, tokens))])


class FakeSummariser(BaseChatModel):
    """The summarising model: a short summary, its calls counted."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "fake-summariser"

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.calls += 1
        text = f"Summary {self.calls}: modules were read one by one; the reading goes on."
        usage = {"input_tokens": 900, "output_tokens": 20, "total_tokens": 920}
        message = AIMessage(content=text, usage_metadata=usage)
        return ChatResult(generations=[ChatGeneration(message=message)])


BODY = "def handler(request):\n    return process(request.payload)  # line {n}\n"


@tool
def read_file(path: str) -> str:
    """Read a source file."""
    return f"# {path}\n" + "".join(BODY.format(n=n) for n in range(90))


@tool(response_format="content_and_artifact")
def grep_code(path: str) -> tuple[str, dict[str, Any]]:
    """Search a source file."""
    return f"{path}: " + "match: process(request)\n" * 60, {"path": path, "hits": 60}


@tool
def flaky(path: str) -> str:
    """A tool that fails."""
    raise ToolException(f"cannot open {path}: permission denied")


flaky.handle_tool_error = True
TOOLS = [read_file, grep_code, flaky]
TASK = "Read every module of the project and tell me what each handler does."


def run(middleware: list[Any], thread: str = "session-1") -> tuple[FakeAnthropic, dict[str, Any]]:
    """The session through ``create_agent``; the model and the final state."""
    model = FakeAnthropic()
    agent = create_agent(model=model, tools=TOOLS, middleware=middleware,
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
    state = agent.invoke({"messages": [HumanMessage(TASK)]}, config)
    return model, state


async def arun(middleware: list[Any], thread: str = "session-1") -> tuple[FakeAnthropic, Any]:
    """:func:`run` through ``agent.ainvoke``."""
    model = FakeAnthropic()
    agent = create_agent(model=model, tools=TOOLS, middleware=middleware,
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
    state = await agent.ainvoke({"messages": [HumanMessage(TASK)]}, config)
    return model, state
