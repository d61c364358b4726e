"""The LangChain row: a 40-model-call create_agent session with CompactionMiddleware
against LangChain's own SummarizationMiddleware at the same trigger.

    python benchmarks/frameworks/langchain_session.py [--threshold 6000]

Prints user lines, fields lost, refused requests, summary calls against the built-in,
peak request tokens (LangChain's approximate count) and the versions.
"""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "examples")]

import _langchain_fake as session  # noqa: E402
import langchain_agent  # noqa: E402
from langchain.agents.middleware import SummarizationMiddleware  # noqa: E402

from bareagent_compact import Compactor  # noqa: E402
from bareagent_compact.integrations.langchain import (  # noqa: E402
    CompactionMiddleware,
    langchain_chat_provider,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=int, default=6000)
    threshold = parser.parse_args().threshold
    ours = session.FakeSummariser()
    compactor = Compactor(provider=langchain_chat_provider(ours), threshold=threshold,
                          language="en", transcript_mgr=None)
    model, _ = session.run([CompactionMiddleware(compactor)])
    theirs = session.FakeSummariser()
    builtin = SummarizationMiddleware(model=theirs, trigger=("tokens", threshold),
                                      keep=("messages", 20))
    their_model, _ = session.run([builtin])
    print("framework | user lines | fields lost | refused | summary calls (built-in) | "
          "peak request tokens (built-in)")
    print(f"LangChain | {langchain_agent.wiring_lines()} | {len(model.lost)} | "
          f"{len(model.refused)} | {ours.calls} ({theirs.calls}) | "
          f"{model.peak} ({their_model.peak})")
    print(f"{model.calls} model calls, threshold {threshold}; langchain {version('langchain')}, "
          f"langchain-core {version('langchain-core')}, langgraph {version('langgraph')}")
    return 0 if not model.refused and not model.lost else 1


if __name__ == "__main__":
    raise SystemExit(main())
