"""A LangChain agent (``create_agent``) kept inside its context window by
``CompactionMiddleware``, offline: a fake chat model answers and writes the summaries.

    python examples/langchain_agent.py

Needs ``pip install "bareagent-compact[langchain]"``. With a real model, pass it (for
example ``ChatAnthropic(model=...)``) where the fakes are.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "frameworks"))

from _langchain_session import TASK, TOOLS, FakeAnthropic, FakeSummariser  # noqa: E402
from langchain.agents import create_agent  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402


def main() -> int:
    model, summariser = FakeAnthropic(), FakeSummariser()
    # -- wiring: start
    from bareagent_compact import Compactor
    from bareagent_compact.integrations.langchain import CompactionMiddleware, langchain_chat_provider
    compactor = Compactor(provider=langchain_chat_provider(summariser), threshold=6000)
    middleware = [CompactionMiddleware(compactor)]
    # -- wiring: end
    agent = create_agent(model=model, tools=TOOLS, middleware=middleware,
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "demo"}, "recursion_limit": 1000}
    state = agent.invoke({"messages": [("user", TASK)]}, config)
    print(f"{model.calls} model calls, {summariser.calls} summaries, "
          f"{len(model.refused)} requests refused, peak request {model.peak} tokens")
    print(f"{len(state['messages'])} messages in the state; last: {state['messages'][-1].text}")
    return 0 if not model.refused else 1


def wiring_lines() -> int:
    """The lines a user adds to wire the compactor in (between the wiring markers)."""
    source = inspect.getsource(main).splitlines()
    start = next(i for i, line in enumerate(source) if "wiring: start" in line)
    end = next(i for i, line in enumerate(source) if "wiring: end" in line)
    return sum(1 for line in source[start + 1 : end] if line.strip())


if __name__ == "__main__":
    raise SystemExit(main())
