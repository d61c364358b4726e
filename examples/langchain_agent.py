"""A LangChain agent (``create_agent``) kept inside its context window by
``CompactionMiddleware``, offline: a fake chat model answers and writes the summaries.

    python examples/langchain_agent.py

Needs ``pip install "bareagent-compact[langchain]"``. With a real model, pass it (for
example ``ChatAnthropic(model=...)``) where the fakes are.
"""

from __future__ import annotations

from pathlib import Path

from _langchain_fake import TASK, TOOLS, FakeAnthropic, FakeSummariser
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

# -- wiring: start
from bareagent_compact import Compactor
from bareagent_compact.integrations import langchain as lc

# -- wiring: end


def main() -> int:
    model, summariser = FakeAnthropic(), FakeSummariser()
    # -- wiring: start
    compactor = Compactor(provider=lc.langchain_chat_provider(summariser), threshold=6000)
    middleware = [lc.CompactionMiddleware(compactor)]
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
    count, inside = 0, False
    for line in Path(__file__).read_text(encoding="utf-8").splitlines():
        if "# -- wiring:" in line:
            inside = "start" in line
        elif inside and line.strip():
            count += 1
    return count


if __name__ == "__main__":
    raise SystemExit(main())
